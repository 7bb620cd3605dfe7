from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.logs.normalize import normalize_line, strip_terminal_codes

MESSAGE = "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading"


def test_torchrun_rank_prefix():
    assert normalize_line(f"[rank3]: {MESSAGE}") == (MESSAGE, 3)
    assert normalize_line(f"[default12]:{MESSAGE}") == (MESSAGE, 12)


def test_slurm_label_then_torchrun_prefix_keeps_the_torchrun_rank():
    assert normalize_line(f"0: [rank7]: {MESSAGE}") == (MESSAGE, 7)
    assert normalize_line(f"12: {MESSAGE}") == (MESSAGE, 12)


def test_timestamps_are_stripped_in_any_order():
    assert normalize_line(f"2026-11-20 10:00:05,123 [rank1]: {MESSAGE}") == (MESSAGE, 1)
    assert normalize_line(f"[2026-11-20T10:00:05.123Z] {MESSAGE}")[0] == MESSAGE


def test_a_clock_time_is_not_a_slurm_label():
    assert normalize_line("10:51:25 something")[1] is None


def test_ansi_and_carriage_return_progress_bars():
    assert strip_terminal_codes("\x1b[31mred\x1b[0m") == "red"
    assert strip_terminal_codes("10%\r50%\r100% done\r") == "100% done"
    assert strip_terminal_codes("\x1b]8;;http://x\x07link\x1b]8;;\x07") == "link"


def test_default_rank_from_file_name_applies_without_prefix():
    assert normalize_line(MESSAGE, default_rank=4) == (MESSAGE, 4)
    assert normalize_line(f"[rank2]: {MESSAGE}", default_rank=4) == (MESSAGE, 2)


@given(st.text(), st.integers(0, 99999))
def test_prefixed_text_comes_back_with_its_rank(text, rank):
    clean = strip_terminal_codes(text).strip()
    if not clean or clean[0].isdigit() or clean.startswith("["):
        return
    assert normalize_line(f"[rank{rank}]: {clean}") == (clean, rank)


@given(st.text())
def test_normalized_text_has_no_control_characters(text):
    result, _ = normalize_line(text)
    assert not any(ord(c) < 32 and c != "\t" for c in result)


def _strip_reference(text: str) -> str:
    """strip_terminal_codes without its shortcut for printable lines."""
    import re

    if "\r" in text:
        text = text.rstrip("\r")
        text = text[text.rfind("\r") + 1 :]
    if "\x1b" in text:
        text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]", "", text)
    return re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", "", text)


@given(
    st.lists(st.sampled_from(list("ab [1]:\t\r\x1b\x07\x7f\u2028\u00a0é") + ["\x1b[31m", "\x1b]0;t\x07"])).map("".join)
)
def test_printable_lines_take_a_shortcut_that_strips_the_same(text):
    assert strip_terminal_codes(text) == _strip_reference(text)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # pdsh's node prefix (DeepSpeed's multi-node launcher), as fixtures/held-out/mds-* have it
        ("192.168.205.202: [rank28]: FileNotFoundError: x", ("FileNotFoundError: x", 28)),
        ("192.168.205.202: [2026-03-24 11:23:46,696] [ERROR] x", ("[ERROR] x", None)),
        (
            "v100x16-1: [rank5]:[W410 20:32:41.4 ProcessGroupNCCL.cpp:1771] x",
            ("[W410 20:32:41.4 ProcessGroupNCCL.cpp:1771] x", 5),
        ),
        # pdsh names the launching node `localhost` (fixtures/held-out/megatron-deepspeed-2node-nccl-init-calloc-…)
        ("localhost: [rank0]: Failed to CUDA calloc async 4 bytes", ("Failed to CUDA calloc async 4 bytes", 0)),
        # a word and a colon before torchrun's prefix is the program's own text, not a node
        ("WARNING: [rank1]: y", ("WARNING: [rank1]: y", None)),
        ("localhosts: [rank1]: y", ("localhosts: [rank1]: y", None)),
        ("node-1.cluster: plain line", ("node-1.cluster: plain line", None)),
    ],
)
def test_a_node_prefix_is_stripped_where_it_is_one(raw, expected):
    assert normalize_line(raw) == expected
