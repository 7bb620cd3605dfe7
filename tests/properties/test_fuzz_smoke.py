"""A short run of tools/fuzz_diagnose.py in the suite (the 100,000-case run's figures are in the README)."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO


def test_fuzz_smoke():
    spec = importlib.util.spec_from_file_location("fuzz_diagnose", REPO / "tools" / "fuzz_diagnose.py")
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    result = fuzz.fuzz(300, workers=1, seed=7)
    assert result["cases"] == 300
    assert result["failures"] == []
    assert len(result["ids"]) >= 5  # the mutations still reach the signatures


def test_overflowing_figures_are_dropped_not_fatal():
    from offloaddoctor.scanning.oom import parse_oom

    facts = parse_oom("CUDA out of memory. Tried to allocate 1e400 GiB. GPU 0 has a total capacity of 80.00 GiB")
    assert "requested_bytes" not in facts and facts["total_capacity_bytes"] == 80 * 2**30
