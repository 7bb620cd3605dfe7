"""Activation offloading needs Transformer Engine: `check` says so before launch, like Megatron at start-up."""

from __future__ import annotations

from offloaddoctor.api import check

LOCAL_WITH_OFFLOAD = ["model.num_layers=8", "model.cpu_offloading_num_layers=2", "model.transformer_impl=local"]


def test_check_rejects_activation_offloading_with_the_local_implementation():
    report = check([], LOCAL_WITH_OFFLOAD)
    assert "cpu-offload-requires-te" in [v.id for v in report.violations]


def test_transformer_engine_or_no_offloading_passes():
    with_te = check([], [*LOCAL_WITH_OFFLOAD[:2], "model.transformer_impl=transformer_engine"])
    assert "cpu-offload-requires-te" not in [v.id for v in with_te.violations]
    without_offload = check([], ["model.num_layers=8", "model.transformer_impl=local"])
    assert "cpu-offload-requires-te" not in [v.id for v in without_offload.violations]


def test_megatron_default_implementation_is_transformer_engine():
    """A config that does not name the implementation gets Megatron's default, TE: no violation."""
    report = check([], LOCAL_WITH_OFFLOAD[:2])
    assert "cpu-offload-requires-te" not in [v.id for v in report.violations]
