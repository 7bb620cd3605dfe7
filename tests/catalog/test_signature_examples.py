"""Every example in every signature file is a test: match examples must produce the finding (with the
stated verdict), no-match examples must not."""

from __future__ import annotations

import pytest

from offloaddoctor.api import run_example

from tests.conftest import builtin_catalog

CATALOG = builtin_catalog()
CASES = [
    pytest.param(signature, index, example, id=f"{signature.id}[{index}:{example.expect}]")
    for signature in CATALOG.signatures
    for index, example in enumerate(signature.examples)
]

REQUIRED_IDS = {
    "pp-cpu-offload",
    "recompute-cpu-offload",
    "cuda-graph-cpu-offload",
    "fine-grained-cpu-offload",
    "cpu-offload-num-layers",
    "oom-fragmentation",
    "oom-capacity",
    "oom-activation-offload",
    "oom-partial-optimizer-offload",
    "optimizer-offload-slowdown",
    "nccl-ub-expandable-segments",
    "cuda-graph-expandable-segments",
    "vpp-layer-divisibility",
    "state-offload-conflict",
    "state-offload-requires-te-fusedadam",
    "optimizer-offload-requires-distributed-optimizer",
    "optimizer-offload-fraction-range",
    "optimizer-offload-decoupled-weight-decay",
    "optimizer-offload-precision-aware",
}


@pytest.mark.parametrize("signature,index,example", CASES)
def test_example(signature, index, example):
    outcome = run_example(CATALOG, signature, index, example)  # the same code `signatures test` runs
    assert outcome.passed, outcome.problem


def test_catalogue_has_every_public_id():
    assert REQUIRED_IDS <= set(CATALOG.ids)


def test_every_log_signature_has_a_matching_example_that_passes_its_prefilter():
    for signature in CATALOG.signatures:
        if signature.match is None:
            continue
        matching = [e for e in signature.examples if e.expect == "match"]
        assert any(any(lit in e.log for lit in signature.match.literals) for e in matching), signature.id


def test_every_pattern_is_exercised_by_an_example():
    for signature in CATALOG.signatures:
        if signature.match is None:
            continue
        lines = [line for e in signature.examples if e.expect == "match" for line in e.log.splitlines()]
        for pattern in signature.match.patterns:
            assert any(pattern.search(line) for line in lines), f"{signature.id}: no example for {pattern.pattern}"
