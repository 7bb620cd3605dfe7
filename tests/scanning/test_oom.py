from __future__ import annotations

from pathlib import Path

import pytest

from hypothesis import example, given
from hypothesis import strategies as st

from offloaddoctor.scanning.oom import fragmentation_verdict, parse_oom, usable_free
from offloaddoctor.scanning.units import format_bytes, parse_quantity
from tests.conftest import FIXTURES

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
    # 3.44 MiB free + 122.88 MiB reserved-unallocated covers 20 MiB, however small a share of the card
    assert facts["fragmentation_suspected"] is True
    assert facts["fragmentation_arithmetic"].startswith("free 3.44 MiB + reserved-unallocated 122.88 MiB = ")


def test_torch_21_typo_and_other_process_wording():
    facts = parse_oom(TORCH_21)
    assert facts["total_capacity_bytes"] == round(79.15 * GIB)
    assert facts["gpu"] == 3
    assert facts["fragmentation_suspected"] is True  # 1.13 GiB free + 1.71 GiB = 2.84 GiB >= 1.96 GiB


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


SMALL_GPU = Path(__file__).resolve().parents[2] / "fixtures" / "oom-small-gpu-recorded"


@pytest.mark.parametrize(
    "name,fragmentation", [("job.log", True), ("more/frag-16g-close.log", True), ("more/capacity-16g.log", False)]
)
def test_a_process_limited_by_a_memory_fraction_is_judged_against_its_limit(name, fragmentation):
    message = next(line for line in (SMALL_GPU / name).read_text().splitlines() if "OutOfMemoryError" in line)
    facts = parse_oom(message)
    assert facts["allowed_bytes"] == 16 * 2**30 and facts["total_capacity_bytes"] > 79 * 2**30
    assert facts["fragmentation_suspected"] is fragmentation
    # The card's 63.66 GiB free is not the capped process's: only what the limit leaves above its reservation.
    assert usable_free(facts) == 16 * 2**30 - facts["reserved_bytes"]
    assert "free within the per-process limit 1.00 GiB" in facts["fragmentation_arithmetic"]


def test_expandable_segments_served_the_same_requests():
    for name in ("frag-16g-wide-expandable.log", "frag-16g-close-expandable.log"):
        text = (SMALL_GPU / "more" / name).read_text()
        assert text.startswith("# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") and "request served" in text


# ---- issue 27: one rule, by arithmetic, on every GPU size and wording ------------------------------------------


def modern(requested: str, capacity: str, free: str, allocated: str, slack: str) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {requested}. GPU 0 has a total capacity of "
        f"{capacity} of which {free} is free. Including non-PyTorch memory, this process has 1.00 GiB memory in "
        f"use. Of the allocated memory {allocated} is allocated by PyTorch, and {slack} is reserved by PyTorch but "
        "unallocated."
    )


@pytest.mark.parametrize(
    "message,fragmentation",
    [
        # 32 GB V100, old wording: 1.15 GiB reserved-unallocated is ~1.5x the 786 MiB request (3.6 % of the card)
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 786.00 MiB (GPU 0; 31.75 GiB total capacity; "
            "29.87 GiB already allocated; 438.19 MiB free; 31.02 GiB reserved in total by PyTorch)",
            True,
        ),
        # H100: 2.30 GiB reserved-unallocated, 2.9 % of the card but several times the 512 MiB request
        (modern("512.00 MiB", "79.18 GiB", "120.00 MiB", "75.90 GiB", "2.30 GiB"), True),
        # the brief's example: free 0.12 GiB + 2.30 GiB = 2.42 GiB >= 1.50 GiB, though 2.30 GiB alone is short
        (modern("1.50 GiB", "79.18 GiB", "122.88 MiB", "75.90 GiB", "2.30 GiB"), True),
        (modern("2.50 GiB", "79.18 GiB", "122.88 MiB", "75.90 GiB", "2.30 GiB"), False),
        (modern("4.00 GiB", "79.18 GiB", "680.19 MiB", "76.00 GiB", "0 bytes"), False),
        # torch <= 1.3 `cached` is reserved-unallocated itself (amount_cached - amount_allocated): 4.68 MiB; the
        # sum covers the request, but 9.28 GiB free alone is over twice it: the driver had a new block for it
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
            "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)",
            False,
        ),
        # the same wording where the free memory alone would not have served it
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.92 GiB total capacity; "
            "10.55 GiB already allocated; 12.19 MiB free; 62.00 MiB cached)",
            True,
        ),
    ],
)
def test_fragmentation_is_decided_by_the_sum_on_any_card(message, fragmentation):
    facts = parse_oom(message)
    assert facts["fragmentation_suspected"] is fragmentation
    assert ("→ fragmentation" in facts["fragmentation_arithmetic"]) is fragmentation


def test_the_arithmetic_reads_as_the_report_shows_it():
    facts = parse_oom(modern("1.50 GiB", "79.18 GiB", "122.88 MiB", "75.90 GiB", "2.30 GiB"))
    assert facts["fragmentation_arithmetic"] == (
        "free 122.88 MiB + reserved-unallocated 2.30 GiB = 2.42 GiB ≥ request 1.50 GiB: "
        "the allocator had the bytes but not in one block → fragmentation"
    )


_SIZES = st.integers(0, 200 * GIB)


@given(requested=st.integers(1, 200 * GIB), free=_SIZES, slack=_SIZES, allowed=st.none() | _SIZES, held=_SIZES)
@example(requested=1, free=1, slack=0, allowed=0, held=0)  # a limit of 0 bytes is a limit (hypothesis found it)
def test_the_rule_is_the_sum_of_usable_free_and_slack(requested, free, slack, allowed, held):
    facts = {"requested_bytes": requested, "free_bytes": free, "reserved_unallocated_bytes": slack}
    if allowed is not None:
        facts |= {"allowed_bytes": allowed, "reserved_bytes": held}
    fragmentation, arithmetic = fragmentation_verdict(facts)
    usable = free if allowed is None else min(free, max(0, allowed - held))
    assert usable_free(facts) == usable
    # free memory alone of twice the request or more: the allocator takes a new block from the driver when its cache
    # has none, so the cache's pieces are not why it failed (held-out DeepSpeed#115, 587 MiB free for 24 MiB)
    assert fragmentation == (slack > 0 and usable + slack >= requested and usable < 2 * requested)
    # more slack never turns fragmentation into capacity
    if fragmentation:
        assert fragmentation_verdict({**facts, "reserved_unallocated_bytes": slack + 1})[0] is True
    assert ("→ fragmentation" in arithmetic) is fragmentation
    # what the run's config says only ever turns fragmentation into capacity (docs/oom.md, conditions 3 and 4)
    assert fragmentation_verdict(facts, expandable_segments_on=True)[0] is False
    assert fragmentation_verdict(facts, whole_step_short=1.0)[0] is False
    assert fragmentation_verdict(facts, whole_step_short=0.0) == (fragmentation, arithmetic)


def test_a_covered_request_with_expandable_segments_on_is_capacity_in_the_numbers_as_in_the_finding():
    """fixtures/oom-capacity-expandable: 42.90 GiB reserved-unallocated covered the 4 GiB asked, and the launcher's
    environment had expandable segments on. The finding was capacity (condition 3) while its Numbers said
    "fragmentation suspected: yes ... → fragmentation"; they now say what the finding says."""
    from offloaddoctor.api import diagnose

    (finding,) = diagnose([str(FIXTURES / "oom-capacity-expandable" / "job.log")]).findings
    assert finding.id == "oom-capacity" and finding.facts["fragmentation_suspected"] is False
    assert finding.facts["fragmentation_arithmetic"].endswith(
        "≥ request 4.00 GiB, but expandable segments were on (the allocator maps its memory where a request needs "
        "it, no contiguous block to miss) → capacity"
    )


def test_missing_figures_decide_nothing():
    assert fragmentation_verdict({"requested_bytes": GIB}) is None
    assert fragmentation_verdict({"reserved_unallocated_bytes": GIB}) is None


# ---- hostile figures: linear time, no int() limit -----------------------------------------------------------------

_HOSTILE = """
import sys, time
from offloaddoctor.scanning.oom import parse_oom
line = sys.stdin.read()
facts = parse_oom(line)
print(sorted(facts))
"""


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + "1" * 20_000,
        "torch.OutOfMemoryError: CUDA out of memory. GPU " + "7" * 20_000 + " has a total capacity of 79.18 GiB",
        "CUDA out of memory. Tried to allocate 1.00 GiB" + " 9" * 10_000 + " reserved in total by PyTorch",
    ],
    ids=["20k-digit request", "20k-digit GPU index", "20k of figures"],
)
def test_a_20kb_oom_line_parses_quickly_and_without_crashing(line):
    """Run in a child with a generous limit: the unbounded patterns took 40 s on 10 KB and ~68 s on 15 KB (they
    grow with the square of the line); int() refuses more than 4,300 digits."""
    import subprocess
    import sys

    assert len(line) >= 20_000
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _HOSTILE], input=line, capture_output=True, text=True, timeout=20, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "gpu" not in done.stdout  # a 20,000-digit GPU index is no GPU index


def test_a_figure_is_not_read_from_the_middle_of_a_digit_run():
    assert parse_oom("Tried to allocate 12345678901234567890123 GiB") == {}
    assert parse_oom("Tried to allocate 4.00 GiB. GPU 12")["gpu"] == 12


# torch >= 2.1 lists each process on the GPU; the held-out pastes (fixtures/held-out) show all three forms.
VERL_5840 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 23.93 GiB. GPU 0 has a total capacity of 95.08 GiB "
    "of which 22.35 GiB is free. Process 1541872 has 65.27 GiB memory in use. Process 1556355 has 7.41 GiB memory in "
    "use. Of the allocated memory 55.13 GiB is allocated by PyTorch, and 422.78 MiB is reserved by PyTorch but "
    "unallocated."
)
SLIME_1951 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.15 GiB. GPU 0 has a total capacity of 139.81 GiB "
    "of which 47.69 GiB is free. Process 22249 has 3.24 GiB memory in use. Including non-PyTorch memory, this process "
    "has 88.83 GiB memory in use. Of the allocated memory 82.55 GiB is allocated by PyTorch, and 2.06 GiB is reserved "
    "by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    ("message", "others"),
    [
        (VERL_5840, 7.41 * GIB),  # this process is not named: the one at least its reserved 55.55 GiB is it
        (SLIME_1951, 3.24 * GIB),  # "this process has" named: every "Process N" is another
        (TORCH_21, 0),  # torch 2.1 named only this process, as "Process N"
        (TORCH_211_FRAGMENTATION, 0),  # no process list
    ],
)
def test_what_other_processes_hold_on_the_gpu(message, others):
    assert parse_oom(message).get("other_processes_bytes", 0) == pytest.approx(others, rel=1e-3)


def test_other_processes_holding_more_than_the_shortfall_are_the_first_fix():
    from offloaddoctor.api import diagnose_text

    (verl,) = diagnose_text(VERL_5840).findings
    assert verl.fix_note.startswith("Other processes hold at least 7.41 GiB of this GPU, more than the 1.58 GiB")
    (slime,) = diagnose_text(SLIME_1951).findings  # 3.24 GiB against 10.46 GiB short: not the fix
    assert "Other processes" not in slime.fix_note


def test_a_real_oom_beside_another_process_is_capacity_and_freeing_it_comes_first():
    """b07 (one H100): n16's GPT, which fits alone (b08 trained: 46,388 MiB), beside a process holding 40 GiB. The
    request was covered (488.76 MiB free + slack against 256 MiB), but the GPU left to this process cannot hold the
    step: capacity, not fragmentation. Its fixes, in order: free the other process (b08), else micro-batch 2, which
    trained beside it (b09)."""
    from offloaddoctor.api import diagnose
    from offloaddoctor.policy import Policy

    calibration = FIXTURES / "memory-calibration"
    report = diagnose([str(calibration / "out-of-memory" / "b07-gpt1b-beside-a-40g-process.log.gz")], policy=Policy())
    (finding,) = report.findings
    assert finding.signature.id == "oom-capacity"
    assert finding.facts["other_processes_bytes"] == pytest.approx(40.51 * GIB, rel=1e-3)
    assert finding.fix_note.startswith("Other processes hold at least 40.51 GiB of this GPU")
    assert finding.overrides == ["--micro-batch-size 2"]
    trained = [row.split("\t") for row in (calibration / "runs.tsv").read_text().splitlines()]
    assert any(
        row[0] == "b09-gpt1b-mbs2-beside-a-40g-process-advised" and "--micro-batch-size 2" in row[-1] for row in trained
    )


SLIME_1767 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 61.34 GiB. GPU 3 has a total capacity of 79.11 GiB "
    "of which 27.07 GiB is free. Process 520735 has 3.17 GiB memory in use. Process 530150 has 48.84 GiB memory in use. "
    "Of the allocated memory 44.61 GiB is allocated by PyTorch, and 410.55 MiB is reserved by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    ("message", "named"), [(SLIME_1767, True), (VERL_5840, False), (TORCH_211_FRAGMENTATION, False)]
)
def test_one_allocation_over_half_the_gpu_points_at_its_tensor_first(message, named):
    from offloaddoctor.api import diagnose_text

    (finding,) = diagnose_text(message).findings
    assert finding.fix_note.startswith("One allocation of 61.34 GiB is 78% of the memory") is named


def _recorded_oom_lines():
    """The first PyTorch OOM message of every out-of-memory run recorded on our GPUs (H100, H200; torch 2.11)."""
    import gzip

    logs = [
        *(FIXTURES / "memory-calibration" / "out-of-memory").glob("*.log.gz"),
        *(FIXTURES / "offload-sweep").glob("*.log.gz"),
        *(FIXTURES / "oom-small-gpu-recorded").rglob("*.log"),
    ]
    for path in sorted(logs):
        with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as log:
            line = next((line for line in log if "CUDA out of memory. Tried to allocate" in line), None)
        if line is not None:
            yield path.name, line


def test_a_recorded_oom_never_had_twice_its_request_free():
    """docs/oom.md condition 1: PyTorch reads the message's free figure after it released its cache and asked the
    driver again, so a real OOM's free memory is under the request, give or take rounding; twice it, the figure is
    not the moment's. Every OOM recorded here bears that out."""
    ratios = {
        name: usable_free(facts) / facts["requested_bytes"]
        for name, line in _recorded_oom_lines()
        if (facts := parse_oom(line))
    }
    assert len(ratios) >= 40
    assert max(ratios.values()) < 1.05, max(ratios.items(), key=lambda item: item[1])


OLD_CACHED = (
    "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB already "
    "allocated; 9.28 GiB free; 4.68 MiB cached)"
)


@pytest.mark.parametrize(
    ("message", "release"),
    [
        (TORCH_211_FRAGMENTATION, None),
        (TORCH_21, None),
        (TORCH_20, "max_split_size_mb, which the message names"),
        (OLD_CACHED, "the message names no allocator setting"),
    ],
)
def test_a_message_of_torch_2_0_or_older_says_its_allocator_has_no_expandable_segments(message, release):
    said = parse_oom(message).get("allocator_release")
    assert (said is None) if release is None else said.endswith(release)


def test_the_setting_printed_for_torch_2_0_served_the_fragmented_requests_on_the_gpu():
    """fixtures/oom-small-gpu-recorded (an H100 capped at 16 GiB, torch 2.11): the two requests the defaults could
    not serve in a fragmented cache were served with the setting printed for an OOM of torch 2.0 or older."""
    from offloaddoctor.scanning.oom import MAX_SPLIT_SIZE

    recorded = FIXTURES / "oom-small-gpu-recorded"
    for case in ("frag-16g-wide", "frag-16g-close"):
        defaults = (recorded / "job.log" if case == "frag-16g-wide" else recorded / "more" / f"{case}.log").read_text()
        with_it = (recorded / "more" / f"{case}-max-split-128.log").read_text()
        assert "OutOfMemoryError" in defaults and "request served" not in defaults
        assert with_it.startswith(f"# PYTORCH_CUDA_ALLOC_CONF={MAX_SPLIT_SIZE}\n") and "request served" in with_it


def test_an_old_torchs_fragmentation_fix_is_a_setting_it_has():
    """torch 2.0.1 refuses expandable segments at its first CUDA allocation: an OOM in 2.0's wording gets the
    max_split_size_mb its message names, and one whose message names no setting gets the capacity fixes alone."""
    from offloaddoctor.api import diagnose

    [named] = diagnose([str(FIXTURES / "held-out" / "megatron-gpt2-large-v100-old-wording" / "job.log")]).findings
    assert named.id == "oom-fragmentation"
    assert named.overrides == ["export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128"]
    assert "Unrecognized CachingAllocator option: expandable_segments" in named.fix_sentences[0]
    log = FIXTURES / "held-out" / "megatron-lm-gpt2-2.6b-v100-backward-allreduce-oom" / "job.log"
    [unnamed] = diagnose([str(log)]).findings
    assert unnamed.id == "oom-fragmentation" and unnamed.overrides
    assert not any("PYTORCH_CUDA_ALLOC_CONF" in line for line in unnamed.overrides)
    assert "expandable segments in the job's environment" not in " ".join(unnamed.fix_sentences)
    # its capacity fix offloads the optimizer, which megatron-core warns of below torch 2.3
    assert "CPU offload is recommended for PyTorch >= 2.3.0" in unnamed.fix_sentences[0]


def test_an_old_torch_that_sets_max_split_size_already_is_not_told_to_set_it_again():
    from offloaddoctor.api import diagnose_text

    message = (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.59 GiB total capacity; 30.10 GiB "
        "already allocated; 1.10 GiB free; 36.50 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
        "memory try setting max_split_size_mb to avoid fragmentation."
    )
    [kept] = diagnose_text(message, {"env.PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6"}).findings
    assert kept.overrides == ["export PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,max_split_size_mb:128"]
    [already] = diagnose_text(message, {"env.PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}).findings
    assert not any("PYTORCH_CUDA_ALLOC_CONF" in line for line in already.overrides)
    assert "max_split_size_mb, which its message names, is set already" in already.fix_sentences[0]
