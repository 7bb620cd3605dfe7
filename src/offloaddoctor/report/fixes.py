"""The report's fixes as one consistent change set, printed in the dialect of the config the user edits.

Until here a fix is Bridge-style lines (the signature's template, the memory model's advice). Each line is
read into (canonical key, value) changes; where two findings set one key to different values, the finding
whose constraint reads that key keeps it (it is the fix of that key: `state-offload-conflict` turns
`optimizer_cpu_offload` off, while `pp-cpu-offload` only suggests it as an alternative to activation
offloading), and the other leaves the line out and says why. Then every fix is printed in one dialect.
"""

from __future__ import annotations

from collections.abc import Sequence

from offloaddoctor.report.findings import Finding
from offloaddoctor.catalog.predicates import names_in
from offloaddoctor.config.derived import (
    ALLOCATOR_CONF_KEYS,
    MODEL_PARALLEL_KEYS,
    allocator_options,
    allocator_setting,
    flagscale_places,
    gpus_hold,
    model_parallel_product,
)
from offloaddoctor.config.dialect import BRIDGE, FLAGSCALE, dialect_of, parse_fix_line, render_changes
from offloaddoctor.config.keys import VALUE_KINDS
from offloaddoctor.coerce import is_none, number
from offloaddoctor.config.values import ConfigStore, format_value, same_value

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from collections.abc import Callable
    from typing import Any

    from offloaddoctor.catalog.model import Signature

    Say = Callable[[list], str]  # changes -> how a note quotes them, in the fix's dialect

# Settings that only mean something while their switch is on, or that a fix sets only because the switch needs
# them (pp-cpu-offload's distributed and precision-aware optimizer): left out with it.
_NEEDS_ON = {
    "optimizer.optimizer_cpu_offload": (
        "optimizer.optimizer_offload_fraction",
        "optimizer.overlap_cpu_optimizer_d2h_h2d",
        "optimizer.use_torch_optimizer_for_cpu_offload",
        "optimizer.use_precision_aware_optimizer",
        "optimizer.use_distributed_optimizer",
    ),
}

# Settings another takes the place of (Megatron-LM accepts one of them): a fix that sets or clears the first
# clears the others where the config gives them (arguments.py asserts at most one of the two VPP flags).
_REPLACES = {
    "model.virtual_pipeline_model_parallel_size": ("model.num_layers_per_virtual_pipeline_stage",),
    # The deprecated switches win over cuda_graph_impl (TransformerConfig sets it from them, megatron-core 0.19.0).
    "model.cuda_graph_impl": ("model.enable_cuda_graph", "model.external_cuda_graph"),
}


def print_fixes(
    findings: Sequence[Finding], store: ConfigStore, fallback: str = BRIDGE, constraints: Sequence[Signature] = ()
) -> str:
    """Resolve the findings' changes into one consistent set and print each finding's fix in the dialect of
    the run's config (config/dialect.py), `fallback` where it gives none. `constraints`: the catalogue's preflight
    errors, which no fix may lead the run into (_held_to_the_constraints). Returns the dialect."""
    dialect = dialect_of(store, fallback)
    recipe = store.resolve("mixed_precision")  # Bridge's precision recipe: null says there is none
    has_recipe = recipe is None or not is_none(recipe.value)
    # each line's changes, or the line itself when it is not a change (free text stays in place)
    items = {
        id(f): [
            _with_replaced(_allocator_options_kept(parse_fix_line(line), store), store) or line for line in f.overrides
        ]
        for f in findings
    }
    places = flagscale_places(store) if dialect == FLAGSCALE else None

    def say(changes) -> str:  # changes as the notes quote them
        return "; ".join(render_changes(changes, dialect, places=places))

    _leads_into_another_refusal(findings, items, store, say)  # before the conflicts: it may settle them
    _resolve_conflicts(findings, items, say)
    _settled_by_another_fix(findings, items, store, say)
    for finding in findings:
        _leave_out_layouts_the_gpus_cannot_hold(finding, items, store, say)
        _held_to_the_constraints(finding, items, store, constraints, say)
    for finding in findings:
        out: list[str] = []
        items[id(finding)] = [_not_in_effect(item, store) for item in items[id(finding)]]
        finding.changes = [change for item in items[id(finding)] if not isinstance(item, str) for change in item]
        keys = {key for key, _ in finding.changes}
        for item in items[id(finding)]:
            lines = [item] if isinstance(item, str) else render_changes(item, dialect, keys, has_recipe, places)
            out += [line for line in lines if line not in out]
        finding.overrides = out
    return dialect


def _not_in_effect(item, store: ConfigStore):
    """A line's changes less those the run already has (the log or config sets the key to that value): a fix line
    that repeats a setting reads as if the run lacked it (`optimizer.overlap_cpu_optimizer_d2h_h2d=True` for a
    run that overlaps). Free text stays."""
    if isinstance(item, str):
        return item
    return [change for change in item if not in_effect(change, store)]


# A setting's values from the least memory saved to the most: a fix that would move the run down the list
# already has what it asks for (ms-swift#9191 ran full recompute and was offered selective).
_SAVING_ORDER = {"model.recompute_granularity": ("selective", "full")}


def in_effect(change, store: ConfigStore) -> bool:
    """The run already has this (key, value), or more of it (_SAVING_ORDER): its log or config sets the key so."""
    key, value = change
    given = store.resolve(key)
    if given is None or given.origin == "default":
        return False
    order = _SAVING_ORDER.get(key, ())
    if value in order and given.value in order:
        return order.index(given.value) >= order.index(value)
    return same_value(given.value, value)


def _allocator_options_kept(changes, store: ConfigStore):
    """An allocator setting the fix exports keeps the options the run already sets
    (`garbage_collection_threshold:0.6,max_split_size_mb:512` + `expandable_segments:True`), in the variable the
    run sets them in: `export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` alone dropped them."""
    given = allocator_setting(store)
    if given is None:
        return changes
    out = []
    for key, value in changes:
        if key in ALLOCATOR_CONF_KEYS and value is not None:
            options = {**allocator_options(str(given.value)), **allocator_options(str(value))}
            key, value = given.key, ",".join(f"{name}:{setting}" for name, setting in options.items())
        out.append((key, value))
    return out


def _with_replaced(changes, store: ConfigStore):
    """The changes, plus clearing each setting one of them takes the place of, where the config gives it."""
    if not changes:
        return changes
    cleared = []
    for key, _ in changes:
        for other in _REPLACES.get(key, ()):
            given = store.resolve(other)
            if given is not None and given.value not in (None, False) and given.origin != "default":
                cleared.append((other, False if VALUE_KINDS.get(other) == "bool" else None))
    return [*changes, *cleared]


def _leave_out_layouts_the_gpus_cannot_hold(finding: Finding, items: dict[int, list], store: ConfigStore, say: Say):
    """A fix's TP/PP/CP change the run's GPUs cannot be split into (config/derived.py gpus_hold) is left out, and
    the fix says why. Only where the config says how many GPUs there are."""
    changed = {
        key: number(value)
        for item in items[id(finding)]
        if not isinstance(item, str)
        for key, value in item
        if key in MODEL_PARALLEL_KEYS
    }
    if not changed or gpus_hold(store, changed):
        return
    product = model_parallel_product(store, changed)
    world = number(store.value("parallel.run_world_size"))
    wanted = [
        (key, int(changed[key] or number(store.value(key)) or 1)) for key in MODEL_PARALLEL_KEYS if key in changed
    ]
    lines = say(wanted)
    _leave_out(
        finding,
        items,
        set(changed),
        f"`{lines}` left out of this fix: TP x PP x CP = {product:g} does not divide the run's {world:g} "
        f"GPU{'s' if world != 1 else ''}.",
    )


def _resolve_conflicts(findings: Sequence[Finding], items: dict[int, list], say: Say) -> None:
    values: dict[str, list[tuple[Finding, Any]]] = {}
    for finding in findings:
        for item in items[id(finding)]:
            for key, value in item if not isinstance(item, str) else ():
                values.setdefault(key, []).append((finding, value))
    for key, setters in values.items():
        if len({_text(value) for _, value in setters}) < 2:
            continue
        owners = [f for f, _ in setters if key in names_in(f.signature.config, "key")]
        winner = owners[0] if owners else setters[0][0]
        value = next(v for f, v in setters if f is winner)
        dropped = {key} | (set(_NEEDS_ON.get(key, ())) if value is False else set())
        kept = say([(key, value)])
        for finding, other in setters:
            if _text(other) != _text(value):
                left = say([(key, other)])
                _leave_out(
                    finding,
                    items,
                    dropped,
                    f"`{left}` left out of this fix: {winner.id}'s fix says `{kept}`, and the two must agree.",
                )


def _changes_of(finding: Finding, items: dict[int, list]) -> dict[str, Any]:
    return {key: value for item in items[id(finding)] if not isinstance(item, str) for key, value in item}


def _leads_into_another_refusal(
    findings: Sequence[Finding], items: dict[int, list], store: ConfigStore, say: Say
) -> None:
    """A fix after which the run would still be refused by another finding's constraint, where that finding's fix
    settles this one too, gives way to it: recompute-cpu-offload's `recompute off` on the local implementation, where
    cpu-offload-requires-te refuses activation offloading anyway, would lose recompute and still not train; turning
    activation offloading off settles both and keeps recompute (fixtures/memory-calibration b40-b42)."""
    for index, finding in enumerate(findings):
        condition = finding.signature.config
        own = _changes_of(finding, items)
        if condition is None or not own or store.holds(condition) is not True:
            continue
        for other in findings[index + 1 :]:  # one ranked before it settles it (_settled_by_another_fix)
            refusal = other.signature.config
            theirs = _changes_of(other, items)
            if (
                other.signature.severity != "error"
                or refusal is None
                or not theirs
                or store.holds(refusal) is not True
                or store.holds(refusal, own) is not True  # this fix leaves the other refusal standing
                or store.holds(condition, theirs) is not False  # and the other's fix settles this one
            ):
                continue
            left, taken = _shown(own, store, say), _shown(theirs, store, say)
            items[id(finding)] = [list(item) for item in items[id(other)] if not isinstance(item, str)]
            finding.fix_note = (
                f"{finding.fix_note} Not `{left}`: the run would still be refused by {other.signature.id}, whose "
                f"fix (`{taken}`) settles this one too."
            ).strip()
            finding.fix_note_replaces_summary = True  # the summary describes the fix left out
            break


def _settled_by_another_fix(findings: Sequence[Finding], items: dict[int, list], store: ConfigStore, say: Say) -> None:
    """A constraint that the fix of a finding ranked before it already settles (activation offloading turned off by
    pp-cpu-offload's fix leaves recompute-cpu-offload nothing to forbid) keeps no lines of its own: applied together,
    the two would undo both memory savers for one conflict."""
    for index, finding in enumerate(findings):
        condition = finding.signature.config
        # only a constraint the config violates as it is (not one the config contradicts, or cannot tell)
        if condition is None or not _changes_of(finding, items) or store.holds(condition) is not True:
            continue
        for other in findings[:index]:  # a finding ranked before it: the primary keeps its own fix (n76's, n78's run)
            applied = _changes_of(other, items)
            if applied and store.holds(condition, applied) is False:
                settled = _shown(applied, store, say)
                keys = set(_changes_of(finding, items))
                _leave_out(finding, items, keys, f"{other.signature.id}'s fix (`{settled}`) settles this one as well.")
                break


def _shown(changes: dict[str, Any], store: ConfigStore, say: Say) -> str:
    """Changes as a note quotes them: those the run does not have already, as the fix prints them."""
    return say([c for c in changes.items() if not in_effect(c, store)])


def _held_to_the_constraints(
    finding: Finding, items: dict[int, list], store: ConfigStore, constraints: Sequence[Signature], say: Say
) -> None:
    """A fix that would lead the run into a constraint it holds to now (one `check` would refuse at start-up) takes
    that constraint's own fix where it leaves this one's changes alone (an fp16 run offloading its optimizer needs
    fp32 gradients beside the precision-aware optimizer: b98's fix as printed trained, b99; without them it stopped at
    its first step, b100), else leaves out its changes of the keys the constraint reads (FlagScale refuses recompute in
    a PEFT run: flagscale-peft-recompute)."""
    for constraint in constraints:
        changes = _changes_of(finding, items)
        condition = constraint.config
        read = set(names_in(condition, "key")) & set(changes) if condition is not None else set()
        if not read or store.holds(condition) is True or store.holds(condition, changes) is not True:
            continue
        settle = dict(change for line in constraint.fix.overrides for change in parse_fix_line(line))
        why = f"the run would stop before it trains a step ({constraint.id}: {constraint.title})"
        if settle and not set(settle) & set(changes) and store.holds(condition, {**changes, **settle}) is False:
            items[id(finding)].append(list(settle.items()))
            finding.fix_note = f"{finding.fix_note} `{say(list(settle.items()))}` added: without it {why}.".strip()
        else:
            _leave_out(finding, items, read, f"`{say([(key, changes[key]) for key in read])}` left out: {why}.")


def _leave_out(finding: Finding, items: dict[int, list], keys: set[str], note: str) -> None:
    kept = []
    for item in items[id(finding)]:
        if not isinstance(item, str):
            item = [(k, v) for k, v in item if k not in keys]
            if not item:
                continue
        kept.append(item)
    items[id(finding)] = kept
    finding.fix_note = f"{finding.fix_note} {note}".strip()


def _text(value: Any) -> str:
    return "null" if value is None else format_value(value).lower()
