"""`estimate`: the memory model's answer for one config, against a GPU, with the changes that make it fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from functools import cached_property

from offloaddoctor.advice.changes import Suggestion, suggest
from offloaddoctor.advice.fix_numbers import estimate_facts
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.derived import processes_per_node
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.values import ConfigStore, ConfigValue
from offloaddoctor.memory import MemoryEstimate, RunShape, estimate, read_shape
from offloaddoctor.memory import calibration as cal
from offloaddoctor.memory.activations import layer_activations, offloaded_layers
from offloaddoctor.memory.model import offloadable_state
from offloaddoctor.memory.fit import FitVerdict, HostVerdict, host_verdict, with_expandable_segments
from offloaddoctor.memory.fit import verdict as fit_verdict
from offloaddoctor.byte_units import GIB, MIB


class Capacity(NamedTuple):
    bytes: int
    source: str


@dataclass
class EstimateReport:
    store: ConfigStore
    configs: list[str]
    estimate: MemoryEstimate
    capacity: Capacity | None
    target: int | None
    suggestions: list[Suggestion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    host_memory: int | None = None  # a node's, as given (--host-memory)
    ranks_per_node: int = 1
    # `check`'s errors for the config itself, (id, title): the run stops before or at its first step as configured
    refused_by: list[tuple[str, str]] = field(default_factory=list)

    @property
    def budget_bytes(self) -> int | None:
        """What must not be exceeded: the target if given, else the GPU's memory."""
        if self.target is not None:
            return self.target
        return self.capacity.bytes if self.capacity else None

    @cached_property
    def verdict(self) -> FitVerdict | None:
        """fits / tight / does not fit, on what PyTorch must reserve (memory/fit.py); None without a budget."""
        budget = self.budget_bytes
        return None if budget is None else fit_verdict(self.estimate, budget)

    @cached_property
    def host_verdict(self) -> HostVerdict | None:
        """fits / tight / does not fit on the node's host memory; None without it or without offloading."""
        if self.host_memory is None or not self.estimate.host_bytes:
            return None
        return _host_verdict(self.estimate, self.host_memory, self.ranks_per_node)

    @property
    def fits(self) -> bool | None:
        verdicts = [v for v in (self.verdict, self.host_verdict) if v is not None]
        return all(v.fits for v in verdicts) if verdicts else None

    @property
    def headroom_bytes(self) -> float | None:
        """Room left in the worst case the verdict counts (negative: short by that much)."""
        return self.verdict.headroom_bytes if self.verdict else None


GPUS_A_NODE = 8  # the ranks a node runs where the inputs do not say: one a GPU of an 8-GPU node


def build_estimate(
    values: Sequence[ConfigValue],
    configs: Sequence[str],
    capacity: Capacity | None = None,
    target: int | None = None,
    world_size: int | None = None,
    catalog: Catalog | None = None,
    host_memory: int | None = None,
    printed_arguments: frozenset[str] | None = None,
) -> EstimateReport:
    """`printed_arguments`: the names the logs' complete arguments blocks printed (LogConfigCollector): a change
    needing a flag that Megatron-LM does not have is not suggested."""
    store = build_store(values)
    shape = read_shape(store, world_size)
    per_node = processes_per_node(store)
    ranks = per_node or min(shape.world_size, GPUS_A_NODE)
    report = EstimateReport(store, list(configs), estimate(shape), capacity, target, host_memory=host_memory)
    report.ranks_per_node = ranks
    budget = report.budget_bytes
    on_host = None
    if host_memory is not None:

        def on_host(result: MemoryEstimate) -> bool:
            return not result.host_bytes or _host_verdict(result, host_memory, ranks).fits

    if budget is not None and (target is not None or not report.fits):
        left_out: list[str] = []
        report.suggestions = suggest(
            shape,
            budget,
            values,
            catalog,
            report.estimate,
            on_host=on_host,
            printed_arguments=printed_arguments,
            left_out=left_out,
        )
        if left_out:
            report.notes.append(
                f"changes needing {', '.join(left_out)} are not suggested: the log's arguments block, which prints "
                "every argument its Megatron-LM takes, does not list them"
            )
    if report.estimate.host_bytes and shape.tensor_parallel > 1:
        low, high = cal.HOST_OVER_UNDER_TENSOR_PARALLEL
        report.notes.append(
            f"the host figure was {low:.0%}-{high:.0%} over what tensor-parallel runs' hosts gave up "
            "(fixtures/memory-calibration/host-memory: eight probes at tensor parallel 2 and 4; within 3 % without tensor "
            "parallelism): the host verdict's low end allows for it"
        )
    if report.estimate.host_bytes and shape.data_loader_workers > cal.HOST_WORKERS_MEASURED:
        report.notes.append(
            f"the host figure counts {shape.data_loader_workers} data-loader workers a loading rank at "
            f"{cal.HOST_WORKER_BYTES / GIB:.2f} GiB each of their own pages, as measured with up to "
            f"{cal.HOST_WORKERS_MEASURED} (fixtures/memory-calibration/host-memory p32); more were not measured"
        )
    if report.estimate.host_bytes and shape.data_loader_workers:
        report.notes.extend(_loader_forks_notes(shape))
    if shape.offload_optimizer_states and not report.estimate.host_bytes:
        report.notes.append(_state_offloading_host_note(shape, host_memory is not None))
    layers = offloaded_layers(shape, shape.num_layers // shape.pipeline_parallel)
    if layers:
        report.notes.append(_activation_offloading_host_note(shape, layers, host_memory is not None))
    if report.host_verdict is not None and not report.host_verdict.fits and budget is None:
        report.notes.append(
            "changes that fit the host are searched with the GPU given (--gpu or --gpu-memory): a smaller share "
            "offloaded must still fit it"
        )
    if report.host_verdict is not None and per_node is None:
        report.notes.append(
            f"the ranks a node runs are not in the inputs: {ranks} taken for the host verdict (the job's GPUs, at "
            f"most {GPUS_A_NODE}; give the launch script, whose --nproc-per-node says it)"
        )
    if _turns_on_expandable_segments(report) and store.value("allocator.expandable_segments") is None:
        # A log does not print the job's environment: the verdict turns on a setting the inputs do not show.
        report.notes.append(
            "PYTORCH_CUDA_ALLOC_CONF is not in the inputs: expandable segments are taken as off, and the verdict "
            "turns on them (give the launch script that exports it, or --set "
            "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True if the job had them)"
        )
    if shape.optimizer_cpu_offload and 0 < shape.optimizer_offload_fraction < 1:
        report.notes.append(
            "optimizer offloading moves whole parameter tensors in order until the fraction is reached: the "
            "real share can exceed the fraction by up to one tensor (the embedding or output layer: on a 128k "
            "vocabulary the peak was 7.9 % lower than estimated, fixtures/offload-sweep a-llama4b-gqa-f050-2)"
        )
    return report


def _loader_forks_notes(shape: RunShape) -> list[str]:
    """When the data loaders fork their workers, where that moves the host figure (p35, p36)."""
    notes = []
    if shape.validation_forks_in_training:
        notes.append(
            "the validation loader forks its data-loader workers at the first evaluation during training (a cyclic "
            "loader: Bridge's for a GPT dataset, Megatron-LM's with --dataloader-type cyclic or --full-validation); "
            "they keep the fp32 parameters and Adam's moments as they were then, which the following steps write: "
            "the host figure counts them, from that evaluation on (fixtures/memory-calibration/host-memory p35)"
        )
    if shape.training_loader_reforks:
        notes.append(
            "the training loader's workers are not persistent (dataset.persistent_workers: false, Bridge's default): "
            "it forks them again at each new pass over its data, and those keep Adam's moments as well (up to "
            f"{shape.exp_avg_bytes + shape.exp_avg_sq_bytes} B a parameter offloaded more): not counted, not measured"
        )
    return notes


def _state_offloading_host_note(shape: RunShape, host_memory_given: bool) -> str:
    """Optimizer-state offloading (PR 2811) has no host figure: none of the recorded runs had it (megatron-core 0.19.0
    does not), so only the source's lower bound is said, and no host verdict is given."""
    at_least = offloadable_state(shape).bytes / GIB
    return (
        "optimizer-state offloading keeps the fp32 master weights and Adam moments on the host between steps (PR "
        f"2811, pinned): at least {at_least:,.1f} GiB a rank by the source, not measured (no recorded run had it)"
        + ("; no host verdict is given for it" if host_memory_given else "")
    )


def _activation_offloading_host_note(shape: RunShape, layers: int, host_memory_given: bool) -> str:
    """Activation offloading's host memory is not in the host figure: it needs Transformer Engine, which no recorded
    run had, so the model's activation figure for the `layers` offloaded is said, and no host verdict is given."""
    held = layers * layer_activations(shape).total / GIB
    return (
        f"activation offloading keeps {layers} layers' activations on the host during forward and backward: about "
        f"{held:,.1f} GiB a rank by the activation figure, not measured on a host (it needs Transformer Engine, which "
        "no recorded run had)" + ("; no host verdict is given for it" if host_memory_given else "")
    )


def _host_verdict(result: MemoryEstimate, host_memory: int, ranks: int) -> HostVerdict:
    over = cal.HOST_OVER_UNDER_TENSOR_PARALLEL[1] if result.shape.tensor_parallel > 1 else 0.0
    return host_verdict(result.host_bytes_for(ranks), host_memory, ranks, over)


def _turns_on_expandable_segments(report: EstimateReport) -> bool:
    """The verdict would differ with expandable segments (the allocator's fragmenting decides it)."""
    verdict, budget = report.verdict, report.budget_bytes
    if verdict is None or budget is None or report.estimate.shape.expandable_segments:
        return False
    return fit_verdict(with_expandable_segments(report.estimate), budget).status != verdict.status


def mib(value: float) -> float:
    return round(value / MIB, 1)


def memory_summary(report: EstimateReport) -> str:
    est = report.estimate
    where = f"GPU {report.budget_bytes / MIB:,.0f} MiB" if report.budget_bytes is not None else "no GPU"
    return (
        f"memory estimate: peak allocated {est.peak_allocated_bytes / MIB:,.0f} MiB, nvidia-smi "
        f"≈ {est.nvidia_smi_bytes[0] / MIB:,.0f} MiB vs {where}"
    )


def memory_facts(report: EstimateReport) -> dict:
    facts = estimate_facts(report.estimate)
    if report.capacity is not None:
        facts["gpu_memory_bytes"] = report.capacity.bytes
    if report.verdict is not None:
        facts["fit_verdict"] = report.verdict.sentence("target" if report.target is not None else "GPU")
    if report.host_verdict is not None:
        facts["host_verdict"] = report.host_verdict.sentence()
    return facts


def attach_memory(check_report, report: EstimateReport) -> None:
    """The memory findings of `check` (the GPU's, the host's) carry the estimate's figures and the cheapest change
    that fits (both, where the node's memory is given)."""
    for finding in check_report.violations:
        if finding.id not in ("memory-exceeds-capacity", "host-memory-exceeds-capacity"):
            continue
        finding.facts.update(memory_facts(report))
        fitting = [s for s in report.suggestions if s.fits]
        if fitting:
            finding.facts["cheapest_change_that_fits"] = f"{fitting[0].change}; cost: {fitting[0].cost}"
            finding.overrides = list(fitting[0].overrides)
        else:  # the signature's template change would not fit either: no line that does not work
            finding.facts["cheapest_change_that_fits"] = "none alone (`offloaddoctor estimate` lists what helps most)"
            finding.overrides = []
