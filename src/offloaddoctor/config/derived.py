"""Values implied by others: computed only where the key itself was not given anywhere. And, apart from them
(not config keys: nobody sets them), the values fix templates suggest (`{suggested.NAME}`, `fix_values`)."""

from __future__ import annotations

import math

from offloaddoctor.coerce import boolean, number  # shared coercion rules
from offloaddoctor.config.values import ConfigStore, Resolved, Source, format_value

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

# Every offload fraction offloaddoctor computes (OOM advice, `estimate`'s smallest fraction that fits) is a
# multiple of this: finer than the measured slowdown curves resolve would be false precision.
OFFLOAD_FRACTION_STEP = 0.05
# What a fix template suggests (`{suggested.offload_fraction}`) when no numbers say how much: the next quarter.
OFFLOAD_FRACTION_RAISE = 0.25

# Which given keys each derived key is computed from (bisect highlights a changed input of a failing rule).
DERIVED_INPUTS: dict[str, tuple[str, ...]] = {
    "allocator.expandable_segments": ("env.PYTORCH_CUDA_ALLOC_CONF", "env.PYTORCH_ALLOC_CONF"),
    "model.cpu_offloading": ("model.cpu_offloading_num_layers",),
    "model.layers_per_pipeline_rank": ("model.num_layers", "model.pipeline_model_parallel_size"),
    "model.virtual_pipeline_model_parallel_size": (
        "model.layers_per_pipeline_rank",
        "model.num_layers_per_virtual_pipeline_stage",
    ),
}


def inputs_of(keys) -> set[str]:
    """The keys plus every key they are derived from, transitively."""
    found, pending = set(), list(keys)
    while pending:
        key = pending.pop()
        if key not in found:
            found.add(key)
            pending.extend(DERIVED_INPUTS.get(key, ()))
    return found


def add_derived_values(store: ConfigStore) -> None:
    _expandable_segments(store)
    _megatron_lm_cpu_offloading(store)
    _layers_per_pipeline_rank(store)
    _virtual_pipeline_from_layers(store)


SUGGESTED = "suggested."  # the namespace of fix-template values


def fix_values(store: ConfigStore) -> dict[str, Any]:
    """`suggested.NAME` -> the value a fix template fills in, for those the config allows computing."""
    values: dict[str, Any] = {}
    fraction = _suggested_offload_fraction(store)
    if fraction is not None:
        values[SUGGESTED + "offload_fraction"] = fraction
    vpp = _suggested_virtual_pipeline_size(store)
    if vpp is not _UNKNOWN:
        values[SUGGESTED + "virtual_pipeline_size"] = vpp
    return values


def _derived(key: str, value, *given: Resolved | None, note: str = "") -> Resolved:
    """`given`: the values it is derived from (the callers pass resolved values; None is never one of them)."""
    inputs = [i for i in given if i is not None]
    # `at path:line [detail]`: brackets, not a second level of parentheses inside the source's own
    parts = ", ".join(f"{i.key}={format_value(i.value)} at {_location(i.source)}" for i in inputs)
    detail = f"derived from {parts}" + (f"; {note}" if note else "")
    first = inputs[0].source
    return Resolved(key, value, Source(first.path, first.line, detail), "derived")


def _location(source: Source) -> str:
    where = source.path if source.line is None else f"{source.path}:{source.line}"
    return f"{where} [{source.detail}]" if source.detail else where


def _expandable_segments(store: ConfigStore) -> None:
    for env_key in ("env.PYTORCH_CUDA_ALLOC_CONF", "env.PYTORCH_ALLOC_CONF"):
        setting = store.resolve(env_key)
        if setting is None or setting.value is None:
            continue
        options = {}
        for part in str(setting.value).strip("'\"").split(","):
            name, _, value = part.partition(":")
            options[name.strip()] = value.strip()
        enabled = boolean(options.get("expandable_segments", "False")) is True
        store.set_derived(_derived("allocator.expandable_segments", enabled, setting))
        return


def _megatron_lm_cpu_offloading(store: ConfigStore) -> None:
    layers = store.resolve("model.cpu_offloading_num_layers")
    count = number(layers.value) if layers else None
    if count is not None and count > 0:
        store.set_derived(
            _derived(
                "model.cpu_offloading",
                True,
                layers,
                note="Megatron-LM turns activation offloading on when cpu_offloading_num_layers > 0",
            )
        )


def _layers_per_pipeline_rank(store: ConfigStore) -> None:
    layers, stages = store.resolve("model.num_layers"), store.resolve("model.pipeline_model_parallel_size")
    count, size = (number(layers.value) if layers else None), (number(stages.value) if stages else None)
    if count is None or not size:
        return
    uneven = any(
        resolved is not None and resolved.value is not None
        for resolved in map(
            store.resolve, ("model.num_layers_in_first_pipeline_stage", "model.num_layers_in_last_pipeline_stage")
        )
    )
    if count % size and not uneven:
        # Megatron-LM's validate_args rejects this split before any VPP check: no per-rank count to judge.
        return
    store.set_derived(_derived("model.layers_per_pipeline_rank", int(count // size), layers, stages))


def _virtual_pipeline_from_layers(store: ConfigStore) -> None:
    """Megatron-LM's `--num-layers-per-virtual-pipeline-stage N` sets VPP to the layers per stage // N, and to
    none where that is 1 (megatron/training/arguments.py, validate_args, 0.19.0)."""
    per_rank, per_virtual = (
        store.resolve("model.layers_per_pipeline_rank"),
        store.resolve("model.num_layers_per_virtual_pipeline_stage"),
    )
    layers, chunk = (number(per_rank.value) if per_rank else None), (number(per_virtual.value) if per_virtual else None)
    if not layers or not chunk or layers % chunk:
        return  # Megatron-LM's own assertion rejects an uneven split
    vpp = int(layers // chunk)
    store.set_derived(
        _derived("model.virtual_pipeline_model_parallel_size", vpp if vpp > 1 else None, per_virtual, per_rank)
    )


_UNKNOWN = object()


def _suggested_offload_fraction(store: ConfigStore) -> float | None:
    """The next multiple of OFFLOAD_FRACTION_RAISE above the current fraction."""
    current = number(store.value("optimizer.optimizer_offload_fraction"))
    if current is None or not 0 <= current < 1:
        return None
    step = math.floor(current / OFFLOAD_FRACTION_RAISE + 1e-9) * OFFLOAD_FRACTION_RAISE + OFFLOAD_FRACTION_RAISE
    return min(1.0, round(step, 2))


def _suggested_virtual_pipeline_size(store: ConfigStore):
    """The largest VPP size up to the current one that divides the layers per stage; None turns VPP off. With
    layers per virtual stage that do not divide a stage (no VPP derived), the current one is what they ask for."""
    layers, current, chunk = (
        number(store.value(key))
        for key in (
            "model.layers_per_pipeline_rank",
            "model.virtual_pipeline_model_parallel_size",
            "model.num_layers_per_virtual_pipeline_stage",
        )
    )
    if layers and not current and chunk:
        current = layers // chunk
    if not layers or not current:
        return _UNKNOWN
    divisors = [d for d in range(int(current), 1, -1) if int(layers) % d == 0]
    return divisors[0] if divisors else None
