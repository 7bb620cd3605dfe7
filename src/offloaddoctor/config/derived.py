"""Values implied by others: computed only where the key itself was not given anywhere. And, apart from them
(not config keys: nobody sets them), the values fix templates suggest (`{suggested.NAME}`, `fix_values`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from offloaddoctor.coerce import boolean, integer, names, number  # shared coercion rules
from offloaddoctor.config.values import ConfigStore, ConfigValue, Resolved, Source, format_value, same_value

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
# Spellings the store keeps as given (not known keys: registering `world_size` would rename it everywhere).
WORLD_KEYS = ("world_size", "parallel.world_size")
DATA_PARALLEL_KEYS = ("data_parallel_size", "parallel.data_parallel_size")
PROCESSES_PER_NODE_KEYS = ("nproc_per_node", "ntasks_per_node", "gpus_per_node")
NODES_KEYS = ("nnodes", "nodes", "env.SLURM_NNODES", "num_nodes")
TASKS_KEYS = ("ntasks", "env.SLURM_NTASKS", "env.WORLD_SIZE", "env.SLURM_NPROCS")
MODEL_PARALLEL_KEYS = (
    "model.tensor_model_parallel_size",
    "model.pipeline_model_parallel_size",
    "model.context_parallel_size",
)
# The sizes a model's parameters are split by (expert TP x TP x EP x PP must divide the world: expert-grid-divides-world).
EXPERT_GRID_KEYS = (
    "model.expert_tensor_parallel_size",
    "model.tensor_model_parallel_size",
    "model.expert_model_parallel_size",
    "model.pipeline_model_parallel_size",
)
DERIVED_INPUTS.update(
    {
        "parallel.run_world_size": (
            *WORLD_KEYS,
            *DATA_PARALLEL_KEYS,
            *MODEL_PARALLEL_KEYS,
            *PROCESSES_PER_NODE_KEYS,
            *NODES_KEYS,
            *TASKS_KEYS,
        ),
        "parallel.expert_grid_size": EXPERT_GRID_KEYS,
        "model.offload_modules_refused": (
            "model.fine_grained_activation_offloading",
            "model.offload_modules",
            "model.recompute_granularity",
            "model.recompute_modules",
        ),
    }
)
# The modules fine-grained activation offloading takes (TransformerConfig.__post_init__, megatron-core 0.16.1-0.19.0;
# fused_group_mlp from 0.19.0, with the Transformer Engine op fuser), and those inside the MoE layer, which 0.19.0
# refuses to offload while selective recompute takes the whole layer ('moe' in recompute_modules).
OFFLOAD_MODULES = (
    "attn_norm",
    "qkv_linear",
    "core_attn",
    "attn_proj",
    "mlp_norm",
    "expert_fc1",
    "moe_act",
    "fused_group_mlp",
)
MOE_OFFLOAD_MODULES = ("expert_fc1", "moe_act", "fused_group_mlp")


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
    _flagscale(store)
    _expandable_segments(store)
    _megatron_lm_cpu_offloading(store)
    _layers_per_pipeline_rank(store)
    _virtual_pipeline_from_layers(store)
    _run_world_size(store)
    _expert_grid_size(store)
    _offload_modules_refused(store)


SUGGESTED = "suggested."  # the namespace of fix-template values
# A fix value is searched for by counting down from the run's own count: past this many (a mistyped VPP of
# 10**12, a world of 10**15 GPUs) the count is a typo, not a run, and no value is suggested.
SEARCHED_COUNT_LIMIT = 1 << 20


def fix_values(store: ConfigStore, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """`suggested.NAME` -> the value a fix template fills in, for those the config (or, failing it, the message's
    `facts`) allows computing."""
    values: dict[str, Any] = {}
    fraction = _suggested_offload_fraction(store)
    if fraction is not None:
        values[SUGGESTED + "offload_fraction"] = fraction
    vpp = _suggested_virtual_pipeline_size(store)
    if vpp is not _UNKNOWN:
        values[SUGGESTED + "virtual_pipeline_size"] = vpp
    expert_parallel = _suggested_expert_parallel_size(store, (facts or {}).get("world_size"))
    if expert_parallel is not None:
        values[SUGGESTED + "expert_model_parallel_size"] = expert_parallel
    without_tp = _suggested_expert_parallel_without_tensor_parallel(store)
    if without_tp is not None:
        values[SUGGESTED + "expert_parallel_without_tensor_parallel"] = without_tp
    values[SUGGESTED + "omp_threads"] = _suggested_omp_threads(store)
    offload_layers = _suggested_offload_layers(store, (facts or {}).get("max_offload_layers"))
    if offload_layers is not None:
        values[SUGGESTED + "offload_layers"] = offload_layers
    if store.resolve("model.offload_modules_refused") is not None:  # the list is known (or the run's default)
        modules = store.value("model.offload_modules")
        values[SUGGESTED + "offload_modules"] = list(offload_modules_taken(names(modules), _recomputes_moe(store)))
    elif facts is not None:  # megatron-core's refusal names the modules it refused, and nothing else of the list
        named = names(str(facts.get("offload_modules_named", "")).strip("{}"))
        in_moe = names(str(facts.get("offload_modules_in_recomputed_moe", "")).strip("{}"))
        values[SUGGESTED + "offload_modules"] = list(offload_modules_taken(named + in_moe, bool(in_moe)))
    return values


def _suggested_offload_layers(store: ConfigStore, message_most: Any = None) -> int | None:
    """The most layers activation offloading takes: one under the model's (TransformerConfig refuses a count not
    below num_layers), from megatron-core's refusal where it printed the layer count, else from the config."""
    most = integer(str(message_most if message_most is not None else ""))
    if most is None:
        layers = _count(store.resolve("model.num_layers"))
        most = layers - 1 if layers else None
    return most if most is not None and most >= 0 else None


def _suggested_omp_threads(store: ConfigStore) -> str:
    return omp_threads_a_rank(processes_per_node(store))


def processes_per_node(store: ConfigStore) -> int | None:
    """The ranks a node runs, where the launch command says (`--nproc-per-node`, Slurm's tasks a node)."""
    return _count(_first_given(store, PROCESSES_PER_NODE_KEYS))


def omp_threads_a_rank(per_node: int | None = None) -> str:
    """OpenMP threads a rank may use, as the shell works it out on the node: its cores over its ranks (the
    launch command's processes per node where known, else one rank a GPU)."""
    return f"$(( $(nproc) / {per_node or '$(nvidia-smi -L | wc -l)'} ))"


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


# FlagScale's config sections, which its runner merges into Megatron-LM's arguments (config/dialect.py), and
# arguments it adds to Megatron-LM's (flagscale/train/arguments.py `_add_hetero_args`, "FlagScale specific"; FlagGems):
# an arguments block with one is a FlagScale run's (eight held-out FlagScale logs print them).
FLAGSCALE_SECTIONS = ("train.system.", "train.model.", "train.data.", "train.trainer.")
FLAGSCALE_ARGUMENTS = frozenset({"enable_hetero", "hetero_process_meshes", "enable_flag_gems"})


# `system` is FlagScale's section alone: a file with it is a FlagScale train config (conf/train/*.yaml) whose
# `model`/`data` sections are FlagScale's too.
def flagscale_places(values: ConfigStore | Iterable[ConfigValue]) -> dict[str, str]:
    """Canonical key -> the path the user's FlagScale config sets it at (`train.system.recompute_granularity`), from
    the config files and overrides given; empty where none is FlagScale's."""
    given = (
        values.given_values()
        if hasattr(values, "given_values")
        else [v for v in values if v.origin in ("config", "set")]
    )
    train_files = {v.source.path for v in given if _written(v).startswith("system.")}
    places: dict[str, str] = {}
    for value in given:
        written = _written(value)
        if value.source.path in train_files and written.startswith(("system.", "model.", "data.", "trainer.")):
            written = "train." + written
        if written.startswith(FLAGSCALE_SECTIONS):
            places[value.key] = written
    return places


def _written(value: ConfigValue) -> str:
    return (value.written or value.key).lstrip("+")


def _flagscale(store: ConfigStore) -> None:
    """launcher.flagscale: the run goes through FlagScale's runner, which checks Megatron-LM's arguments with its own
    rules too (flagscale-peft-recompute): its config's paths were given, or its log prints FlagScale's arguments."""
    printed = (store.resolve(key) for key in FLAGSCALE_ARGUMENTS)
    shown = next((given for given in printed if given is not None and given.origin == "log"), None)
    if shown is None:
        shown = next((store.resolve(key) for key in flagscale_places(store)), None)
    if shown is not None:
        store.set_derived(_derived("launcher.flagscale", True, shown))


# The allocator's settings, in the order they are read (the first one the run sets).
ALLOCATOR_CONF_KEYS = ("env.PYTORCH_CUDA_ALLOC_CONF", "env.PYTORCH_ALLOC_CONF")


def allocator_options(text: str) -> dict[str, str]:
    """`expandable_segments:True,max_split_size_mb:512` as {name: value}, in order."""
    parts = (part.partition(":") for part in text.strip("'\"").split(",") if part.strip())
    return {name.strip(): value.strip() for name, _, value in parts}


def allocator_setting(store: ConfigStore) -> Resolved | None:
    """The run's allocator settings (PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF), where it sets them."""
    return _first_given(store, ALLOCATOR_CONF_KEYS)


def _expandable_segments(store: ConfigStore) -> None:
    setting = allocator_setting(store)
    if setting is not None:
        enabled = boolean(allocator_options(str(setting.value)).get("expandable_segments", "False")) is True
        store.set_derived(_derived("allocator.expandable_segments", enabled, setting))


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


def model_parallel_product(store: ConfigStore, changed: Mapping[str, float | None] | None = None) -> float:
    """TP x PP x CP of the run, with `changed` sizes in place of its own (an unset size is 1)."""
    changed = changed or {}
    return math.prod(changed.get(key) or number(store.value(key)) or 1 for key in MODEL_PARALLEL_KEYS)


def gpus_hold(store: ConfigStore, changed: Mapping[str, float | None]) -> bool:
    """Whether the run's GPUs (parallel.run_world_size; unknown: yes) split into TP x PP x CP with `changed` sizes:
    Megatron asserts the product divides the world (PP 2 on one GPU, or on an odd data-parallel size, cannot be)."""
    world = number(store.value("parallel.run_world_size"))
    return not world or world % model_parallel_product(store, changed) == 0


def _first_given(store: ConfigStore, keys: tuple[str, ...]) -> Resolved | None:
    return next((r for r in map(store.resolve, keys) if r is not None and r.value is not None), None)


def _count(resolved: Resolved | None) -> int | None:
    """A positive whole number of ranks, else None (unset, null, a word, 0, a fraction)."""
    value = number(resolved.value) if resolved is not None else None
    return int(value) if value and math.isfinite(value) and value > 0 and value == int(value) else None


def _run_world_size(store: ConfigStore) -> None:
    """The run's GPUs, read as the memory model reads them (memory/shape.py `_data_parallel`): world_size; or the
    data-parallel size x TP x PP x CP (first where one was given with --set); or the launch command's process
    count (Slurm's tasks, or torchrun --nproc-per-node x --nnodes). Nothing where the config does not say."""
    world, dp = _first_given(store, WORLD_KEYS), _first_given(store, DATA_PARALLEL_KEYS)
    data_parallel = _count(dp)
    if dp is not None and data_parallel and (world is None or dp.origin == "set"):
        sizes = [r for r in map(store.resolve, MODEL_PARALLEL_KEYS) if r is not None and r.value is not None]
        counts = [_count(r) for r in sizes]
        if all(counts):
            total = math.prod((c or 1 for c in counts), start=data_parallel)
            store.set_derived(_derived("parallel.run_world_size", total, dp, *sizes, note="DP x TP x PP x CP"))
            return
    if _count(world):
        store.set_derived(_derived("parallel.run_world_size", _count(world), world))
        return
    tasks, per_node = _first_given(store, TASKS_KEYS), _first_given(store, PROCESSES_PER_NODE_KEYS)
    nodes = _first_given(store, NODES_KEYS)
    if _count(tasks):
        store.set_derived(_derived("parallel.run_world_size", _count(tasks), tasks))
    elif _count(per_node) and (nodes is None or _count(nodes)):
        total = (_count(per_node) or 0) * (_count(nodes) or 1)
        note = "the launch command's process count"
        store.set_derived(_derived("parallel.run_world_size", total, per_node, nodes, note=note))


def _expert_tensor_pipeline(store: ConfigStore) -> tuple[list[Resolved], int | None]:
    """(the sizes given, expert TP (TP when unset) x PP); None where a given size is not a count."""
    given = [r for r in map(store.resolve, EXPERT_GRID_KEYS) if r is not None and r.value is not None]
    counts = {r.key: _count(r) for r in given}
    if not all(counts.values()):
        return given, None  # a size that is not a count (0, a word): its own error, not this one
    tensor = counts.get("model.expert_tensor_parallel_size") or counts.get("model.tensor_model_parallel_size") or 1
    return given, tensor * (counts.get("model.pipeline_model_parallel_size") or 1)


def _expert_grid_size(store: ConfigStore) -> None:
    """megatron-core's expert_tensor_model_pipeline_parallel size, which must divide the world size
    (parallel_state.initialize_model_parallel, 0.16.1 and 0.19.0): expert TP (TP when unset) x EP x PP."""
    given, tensor_pipeline = _expert_tensor_pipeline(store)
    experts = _first_given(store, ("model.num_moe_experts",))  # a MoE run with no size set: a grid of 1
    inputs = given or ([experts] if experts is not None else [])
    if tensor_pipeline is None or not inputs:
        return
    grid = tensor_pipeline * (_count(store.resolve("model.expert_model_parallel_size")) or 1)
    note = "expert TP (TP when unset) x EP x PP; an unset size is 1"
    store.set_derived(_derived("parallel.expert_grid_size", grid, *inputs, note=note))


_UNKNOWN = object()


def _suggested_offload_fraction(store: ConfigStore) -> float | None:
    """The next multiple of OFFLOAD_FRACTION_RAISE above the current fraction."""
    current = number(store.value("optimizer.optimizer_offload_fraction"))
    if current is None or not 0 <= current < 1:
        return None
    step = math.floor(current / OFFLOAD_FRACTION_RAISE + 1e-9) * OFFLOAD_FRACTION_RAISE + OFFLOAD_FRACTION_RAISE
    return min(1.0, round(step, 2))


def _suggested_virtual_pipeline_size(store: ConfigStore):
    """The largest VPP size up to the current one that divides the layers of every stage whose count is known
    (the middle ones', and the first's and last's where set apart); None turns VPP off. With layers per virtual
    stage that do not divide a stage (no VPP derived), the current one is what they ask for."""
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
    ends = (number(store.value(f"model.num_layers_in_{end}_pipeline_stage")) for end in ("first", "last"))
    stages = [count for count in (layers, *ends) if count and math.isfinite(count)]
    if not stages or not current or not math.isfinite(current):
        return _UNKNOWN
    wholes, top = [int(count) for count in stages], int(current)
    top = min(top, *(abs(whole) for whole in wholes if whole))  # no divisor is larger
    if top > SEARCHED_COUNT_LIMIT:
        return _UNKNOWN
    divisors = [d for d in range(top, 1, -1) if all(whole % d == 0 for whole in wholes)]
    return divisors[0] if divisors else None


def _suggested_expert_parallel_size(store: ConfigStore, message_world: Any = None) -> int | None:
    """The largest EP up to the current one that divides world / (expert TP x PP) and the experts (MoELayer
    asserts num_moe_experts % EP == 0); None where no EP makes the expert grid divide the world. The world is
    the config's, else the one megatron-core's refusal printed (`message_world`)."""
    world = _count(store.resolve("parallel.run_world_size")) or integer(str(message_world or ""))
    current = _count(store.resolve("model.expert_model_parallel_size"))
    experts = _count(store.resolve("model.num_moe_experts"))
    _, tensor_pipeline = _expert_tensor_pipeline(store)
    if not world or not current or not tensor_pipeline or world % tensor_pipeline:
        return None
    room = world // tensor_pipeline
    if min(current, room) > SEARCHED_COUNT_LIMIT:
        return None
    return next(d for d in range(min(current, room), 0, -1) if room % d == 0 and (not experts or experts % d == 0))


def with_derived_changes(changes: list[tuple[str, Any]], store: ConfigStore) -> list[tuple[str, Any]]:
    """A fix's changes with what Megatron derives from them where the run does not set it: expert TP is TP's
    unless given, and the arguments block prints the value it took (b68's `expert_tensor_parallel_size 2` at TP 2),
    so a log's expert TP equal to TP follows a change of TP. A config file's is the user's and stays."""
    changed = dict(changes)
    tensor = changed.get("model.tensor_model_parallel_size")
    expert_tensor = store.resolve("model.expert_tensor_parallel_size")
    if (
        tensor is not None
        and "model.expert_tensor_parallel_size" not in changed
        and expert_tensor is not None
        and expert_tensor.origin == "log"
        and same_value(expert_tensor.value, store.value("model.tensor_model_parallel_size"))
    ):
        return [*changes, ("model.expert_tensor_parallel_size", tensor)]
    return list(changes)


def _suggested_expert_parallel_without_tensor_parallel(store: ConfigStore) -> int | None:
    """A MoE model that gives up tensor parallelism (moe-tp-requires-sequence-parallel where Transformer Engine is not
    there for sequence parallelism) spreads its experts over the GPUs TP held: up to EP x TP, as far as the experts
    and the world over PP divide (expert TP is TP's, 1, then). None where the world is not known."""
    tensor = _count(store.resolve("model.tensor_model_parallel_size"))
    experts = _count(store.resolve("model.num_moe_experts"))
    expert = _count(store.resolve("model.expert_model_parallel_size")) or 1
    world = _count(store.resolve("parallel.run_world_size"))
    pipeline = _count(store.resolve("model.pipeline_model_parallel_size")) or 1
    if not tensor or not experts or not world or world % pipeline or tensor * expert > SEARCHED_COUNT_LIMIT:
        return None
    room = world // pipeline
    return next(d for d in range(min(tensor * expert, experts, room), 0, -1) if experts % d == 0 and room % d == 0)


def _recomputes_moe(store: ConfigStore) -> bool:
    granularity = store.value("model.recompute_granularity")
    return granularity == "selective" and "moe" in names(store.value("model.recompute_modules"))


def offload_modules_refusal(modules: tuple[str, ...], recompute_moe: bool) -> str:
    """Why megatron-core refuses this offload_modules list with fine-grained offloading on; "" when it takes it."""
    if not modules:
        return "no module listed (megatron-core asserts the list is not empty)"
    unknown = [m for m in modules if m not in OFFLOAD_MODULES]
    if unknown:
        return f"not a module it offloads: {', '.join(unknown)}"
    if "attn_proj" in modules and "core_attn" not in modules:
        return "attn_proj without core_attn (the projection's input is the attention core's output)"
    inside = [m for m in modules if m in MOE_OFFLOAD_MODULES]
    if recompute_moe and inside:
        return f"{', '.join(inside)} offloaded inside the MoE layer that selective recompute takes whole ('moe')"
    return ""


def offload_modules_taken(modules: tuple[str, ...], recompute_moe: bool) -> tuple[str, ...]:
    """The nearest list megatron-core takes: the names it knows, core_attn before attn_proj, nothing inside a
    recomputed MoE layer; core_attn alone (every layer has one) where nothing is left."""
    kept = [m for m in modules if m in OFFLOAD_MODULES]
    if recompute_moe:
        kept = [m for m in kept if m not in MOE_OFFLOAD_MODULES]
    if "attn_proj" in kept and "core_attn" not in kept:
        kept.insert(kept.index("attn_proj"), "core_attn")
    return tuple(kept) or ("core_attn",)


def _offload_modules_refused(store: ConfigStore) -> None:
    """Whether fine-grained offloading's module list is one megatron-core refuses. Where no list is given, a
    config's run has megatron-core's default (an empty list); a log without one says nothing."""
    switch = store.resolve("model.fine_grained_activation_offloading")
    if switch is None or boolean(switch.value) is not True:
        return
    given = store.resolve("model.offload_modules")
    if given is None and switch.origin not in ("config", "set"):
        return
    recompute = [store.resolve(k) for k in ("model.recompute_granularity", "model.recompute_modules")]
    moe = _recomputes_moe(store)
    why = offload_modules_refusal(names(given.value) if given else (), moe)
    inputs = [switch, given, *(recompute if moe else [])]
    note = why or "a list megatron-core takes"
    if given is None:
        note += "; offload_modules not set: megatron-core's default, an empty list"
    store.set_derived(_derived("model.offload_modules_refused", bool(why), *inputs, note=note))
