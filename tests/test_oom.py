from __future__ import annotations

from pathlib import Path

import pytest

from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.analysis.oom import fragmentation_suspected, parse_oom
from offloaddoctor.analysis.units import format_bytes, parse_quantity

GIB, MIB = 1024**3, 1024**2
TORCH_211_FRAGMENTATION = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 GiB "
    "of which 680.19 MiB is free. Including non-PyTorch memory, this process has 78.51 GiB memory in use. Of the "
    "allocated memory 35.10 GiB is allocated by PyTorch, and 42.90 GiB is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html)"
)
TORCH_20 = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB "
    "already allocated; 3.44 MiB free; 14.68 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
    "memory try setting max_split_size_mb to avoid fragmentation."
)
# torch 2.1 printed "capacty" (sic) and named other processes.
TORCH_21 = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 3 has a total capacty of "
    "79.15 GiB of which 1.13 GiB is free. Process 2313 has 78.01 GiB memory in use. Of the allocated memory 75.50 GiB "
    "is allocated by PyTorch, and 1.71 GiB is reserved by PyTorch but unallocated."
)


def test_torch_211_fragmentation_figures():
    facts = parse_oom(TORCH_211_FRAGMENTATION)
    assert facts["requested_bytes"] == 4 * GIB
    assert facts["total_capacity_bytes"] == round(79.18 * GIB)
    assert facts["free_bytes"] == round(680.19 * MIB)
    assert facts["in_use_bytes"] == round(78.51 * GIB)
    assert facts["allocated_bytes"] == round(35.10 * GIB)
    assert facts["reserved_unallocated_bytes"] == round(42.90 * GIB)
    assert facts["fragmentation_suspected"] is True
    assert facts["gpu"] == 0


def test_zero_bytes_reserved_is_capacity():
    facts = parse_oom(
        TORCH_211_FRAGMENTATION.replace("35.10 GiB is allocated", "76.00 GiB is allocated").replace(
            "42.90 GiB is reserved", "0 bytes is reserved"
        )
    )
    assert facts["reserved_unallocated_bytes"] == 0
    assert facts["fragmentation_suspected"] is False


def test_old_wording_derives_reserved_unallocated():
    facts = parse_oom(TORCH_20)
    assert facts["requested_bytes"] == 20 * MIB
    assert facts["total_capacity_bytes"] == round(15.78 * GIB)
    assert facts["reserved_unallocated_bytes"] == round(14.68 * GIB) - round(14.56 * GIB)
    assert facts["fragmentation_suspected"] is False  # 120 MiB of slack is < 5 % of the GPU


def test_torch_21_typo_and_other_process_wording():
    facts = parse_oom(TORCH_21)
    assert facts["total_capacity_bytes"] == round(79.15 * GIB)
    assert facts["gpu"] == 3
    assert facts["fragmentation_suspected"] is False  # 1.71 GiB < 5 % of 79 GiB


def test_truncated_message_gives_what_it_has():
    facts = parse_oom("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB.")
    assert facts == {"requested_bytes": 512 * MIB}


@given(st.floats(0, 1e6, allow_nan=False), st.sampled_from(["bytes", "KiB", "MiB", "GiB"]))
def test_quantities_round_trip(amount, unit):
    text = f"{amount:.2f} {unit}"
    factor = {"bytes": 1, "KiB": 1024, "MiB": MIB, "GiB": GIB}[unit]
    assert parse_quantity(text) == round(float(f"{amount:.2f}") * factor)


@given(st.floats(1, 1e4, allow_nan=False), st.sampled_from(["GiB", "MiB"]), st.floats(1, 1e4, allow_nan=False))
def test_any_figures_parse_in_the_modern_message(requested, unit, slack):
    message = (
        f"CUDA out of memory. Tried to allocate {requested:.2f} {unit}. GPU 1 has a total capacity of 79.18 GiB "
        f"of which 1.00 MiB is free. Of the allocated memory 1.00 GiB is allocated by PyTorch, and "
        f"{slack:.2f} {unit} is reserved by PyTorch but unallocated."
    )
    facts = parse_oom(message)
    assert facts["requested_bytes"] == parse_quantity(f"{requested:.2f} {unit}")
    assert facts["reserved_unallocated_bytes"] == parse_quantity(f"{slack:.2f} {unit}")
    assert isinstance(facts["fragmentation_suspected"], bool)


def test_scientific_notation_and_decimal_units():
    assert parse_quantity("1.5e3 MB") == 1_500_000_000
    assert format_bytes(3 * GIB) == "3.00 GiB"
    assert format_bytes(None) == "?"


SMALL_GPU = Path(__file__).resolve().parents[1] / "fixtures" / "oom-small-gpu-recorded"


@pytest.mark.parametrize(
    "name,fragmentation", [("job.log", True), ("more/frag-16g-close.log", True), ("more/capacity-16g.log", False)]
)
def test_a_process_limited_by_a_memory_fraction_is_judged_against_its_limit(name, fragmentation):
    message = next(line for line in (SMALL_GPU / name).read_text().splitlines() if "OutOfMemoryError" in line)
    facts = parse_oom(message)
    assert facts["allowed_bytes"] == 16 * 2**30 and facts["total_capacity_bytes"] > 79 * 2**30
    assert facts["fragmentation_suspected"] is fragmentation
    # Against the card alone, the two fragmented cases (2-3 % of 79 GiB) would not be called fragmentation.
    card_only = {k: v for k, v in facts.items() if k != "allowed_bytes"}
    assert fragmentation_suspected(card_only) is False


def test_expandable_segments_served_the_same_requests():
    for name in ("frag-16g-wide-expandable.log", "frag-16g-close-expandable.log"):
        text = (SMALL_GPU / "more" / name).read_text()
        assert text.startswith("# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") and "request served" in text
