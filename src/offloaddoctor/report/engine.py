"""From a scan and the run's resolved config to the report: each aggregate of log hits goes to the signature
that claims it (by priority, `when`), config-only and preflight signatures are checked against the config
and run facts, each finding gets its config verdict and rendered fix overrides, and the last failure line
no finding explains is kept as "unexplained"."""

from __future__ import annotations

import re

from offloaddoctor.report.findings import (
    CONFIRMED,
    CONTRADICTED,
    UNKNOWN,
    ConfigEvidence,
    ConfigVerdict,
    Finding,
    Report,
    SourceSummary,
)
from offloaddoctor.report.fixes import print_fixes
from offloaddoctor.scanning import (
    RAY_TASK_ERROR,
    Aggregate,
    Evidence,
    RunFacts,
    apply_baseline,
    compute_run_facts,
    keep_evidence,
    larger_than_the_gpu,
    lead_with_expandable_segments,
    offloading_on_an_older_torch,
    one_allocation_over_half_the_gpu,
    one_allocation_over_the_gpu,
    optimizer_state_over_the_gpu,
    other_processes_first,
    parameters_over_the_gpu,
    raising_statement,
    says_only_that_a_rank_failed,
    shortfall_bytes,
)
from offloaddoctor.catalog.model import Catalog, Signature
from offloaddoctor.catalog.predicates import NotAChoice, Predicate, evaluate, missing, names_in
from offloaddoctor.config.derived import SUGGESTED, allocator_setting, fix_values, flagscale_places
from offloaddoctor.config.dialect import (
    BRIDGE,
    FLAGSCALE,
    FLAGSCALE_PLACES_UNKNOWN,
    MEGATRON_LM,
    flags_it_lacks,
    render_changes,
)
from offloaddoctor.config.keys import VALUE_CHOICES
from offloaddoctor.config.values import ConfigStore, format_value
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.text_safety import cut

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from collections.abc import Callable, Sequence

    from offloaddoctor.metrics.parameter_lines import ParameterCounts
    from offloaddoctor.scanning import Matcher, ScanResult

    # What `build_report` calls to add numbers to the findings: (findings, config, parameter counts, catalogue).
    Advise = Callable[[list[Finding], ConfigStore, ParameterCounts, Catalog], None]
    # And once their fixes are printed, to weigh the changes they print: (findings, config).
    WeighFixes = Callable[[list[Finding], ConfigStore], None]

_PLACEHOLDER = lazy_compile(r"\{([\w.]+)\}")


def build_report(
    catalog: Catalog,
    scan: ScanResult,
    store: ConfigStore,
    matchers: list[Matcher],
    baseline: Any = None,
    advise: Advise | None = None,
    weigh_fixes: WeighFixes | None = None,
) -> Report:
    """`baseline`: the RunMetrics of a healthy run; its measured numbers replace heuristics. `advise`: adds
    numbers to the findings (the advice package's `add_advice`, given by `api`: the report does not know
    advice), before the fixes are ordered and printed, since it may change a fix's lines; `weigh_fixes` (its
    `weigh_fixes`), after, to weigh the changes printed."""
    run = compute_run_facts(scan)
    if baseline is not None:
        apply_baseline(run, baseline.summary)
    findings: dict[str, Finding] = {}
    unclaimed: list[Evidence] = []  # error lines a signature matched but whose condition did not hold
    went_past: list[Finding] = []  # constraints the config breaks that the run trained past
    no_shortage: list[
        Aggregate
    ] = []  # out-of-memory errors that say no memory of the run's ran short (scanning/oom.py)
    for aggregate in scan.aggregates:
        signature = _winner(catalog, aggregate, store, run)
        if signature is not None:
            _merge(findings, signature, aggregate, store, run)
        elif aggregate.evidence and _reads_as_error(catalog, aggregate.matcher_id):
            unclaimed.append(aggregate.evidence[-1])
            if aggregate.facts.get("not_a_shortage"):
                no_shortage.append(aggregate)
    for signature in catalog.signatures:
        if signature.id in findings:
            continue
        if signature.match is None and signature.shares_match_of is None and signature.when is not None:
            finding = condition_finding(signature, signature.when, store, run)
        elif signature.preflight and signature.config is not None:
            # The constraint is violated in the run's config although the log does not show the error
            # (cut short, another error first): report it, marked as found in the config.
            finding = condition_finding(signature, signature.config, store, run, trigger="config")
            if finding is not None and _trained(scan):
                went_past.append(finding)
                finding = None
        else:
            finding = None
        if finding is not None:
            findings[signature.id] = finding
    ordered = sorted(findings.values(), key=lambda f: f.sort_key)
    if any(f.signature.known_issue_entries for f in ordered):  # rare: not imported otherwise
        from offloaddoctor.report.known_issues import apply_known_issues

        apply_known_issues(ordered, store)
    if advise is not None:
        advise(ordered, store, scan.parameters, catalog)
    allocator = allocator_setting(store)
    conf = str(allocator.value) if allocator is not None else ""
    lead_with_expandable_segments(ordered, store.value("allocator.expandable_segments"), conf)
    one_allocation_over_the_gpu(ordered)
    parameters_over_the_gpu(ordered, store)
    optimizer_state_over_the_gpu(ordered)
    if not _megatron_run(scan, store, ordered):
        _drop_fix_lines(ordered, *_NOT_MEGATRON)
    elif store.value("deepspeed") is True:
        _drop_fix_lines(ordered, *_DEEPSPEED)
    frozen = _frozen_model(store, run)
    if frozen is not None:
        _leave_the_optimizer_of_a_frozen_model(ordered, frozen)
    other_processes_first(ordered)
    one_allocation_over_half_the_gpu(ordered)
    # No config to take the dialect from: the training code the tracebacks ran (ROCm/Megatron-LM#85's paste, in
    # megatron/training/arguments.py, was given Bridge's lines)
    code = scan.training_code
    fallback = FLAGSCALE if "flagscale" in code else MEGATRON_LM if code == {"megatron-lm"} else BRIDGE
    # the start-up refusals (report/preflight.py's constraints; it imports this module)
    refusals = [s for s in catalog.signatures if s.preflight and s.config is not None and s.severity == "error"]
    dialect = print_fixes(ordered, store, fallback, refusals)
    if dialect == MEGATRON_LM:
        _leave_out_flags_it_lacks(ordered, store.printed_arguments)
    offloading_on_an_older_torch(ordered)
    placed = any(not key.startswith("env.") for f in ordered for key, _ in f.changes)  # a `train.*` line printed
    if dialect == FLAGSCALE and not flagscale_places(store) and placed:
        notes_first = [FLAGSCALE_PLACES_UNKNOWN]
    else:
        notes_first = []
    if weigh_fixes is not None:
        weigh_fixes(ordered, store)
    mismatch = config_mismatch(store)
    keyed = store.keyed_disagreements()
    notes = notes_first + ([mismatch] if mismatch else []) + list(scan.warnings) + _empty_log_notes(scan)
    if baseline is not None:
        notes.append(_baseline_note(run.values, ordered))
    notes += [note for _, note in keyed]
    notes += [_trained_past_note(finding) for finding in went_past] + [_no_shortage_note(a) for a in no_shortage]
    if run.values.get("script_rerun_in_child"):
        notes.append(_script_rerun_note(run.evidence["script_rerun_in_child"][0]))
    if mismatch:
        for finding in ordered:
            if (
                finding.config.verdict != UNKNOWN
                and any(v.known for v in finding.config.values)
                and "another run" not in finding.config.explanation  # advice may have said it, with its numbers
            ):
                finding.config.explanation += "; but the config is probably from another run"
    unmatched = _unexplained_failure(scan, ordered, matchers, unclaimed)
    started = run.evidence["oom_in_start_up"][0] if run.values.get("oom_in_start_up") else None
    if (
        unmatched is not None
        and started is not None
        and unmatched.path == started.path
        and (unmatched.line or 0) > (started.line or 0)
    ):
        unmatched = started  # a later rank's error is the echo of one that ran out of memory while the job was set up
    if unmatched is not None and unmatched in [a.evidence[-1] for a in no_shortage if not larger_than_the_gpu(a.facts)]:
        unmatched = _failure_before(scan, unmatched)  # a request sized wrongly is the failure itself
    went_on = _run_went_on_after(scan, unmatched) if unmatched is not None else None
    if unmatched is not None and went_on is not None:
        notes.append(
            f"{unmatched.path}:{unmatched.line}: `{cut(unmatched.text.strip(), 100)}` reads like an error, but the run "
            f"{went_on}: it did not stop the run"
        )
        unmatched = None
    traceback = unmatched is not None and any(unmatched is e for e in scan.exceptions)
    echoes = _only_echoes_of(ordered, unmatched) if traceback and unmatched is not None else None
    if unmatched is not None and echoes is not None:
        ordered = []
        notes.append(
            f"{unmatched.path}:{unmatched.line}: the NCCL errors after this failure (from line "
            f"{min(e.line or 0 for e in echoes.evidence)}) follow from it: the other ranks' collectives lost this "
            "rank, so they are no cause of their own"
        )
    return Report(
        findings=ordered,
        unmatched=unmatched,
        unmatched_traceback=traceback,
        sources=[SourceSummary(path, lines) for path, lines in scan.lines_read.items()],
        notes=notes,
        run_facts=run.values,
        ranks_seen=sorted(scan.ranks_seen),
        note_keys={note: key for key, note in keyed},
        config_mismatch=mismatch,
        fix_dialect=dialect,
    )


_NCCL = "nccl-collective-failure"  # the finding that says a collective failed, the echo of other failures


def _only_echoes_of(findings: list[Finding], failure: Evidence) -> Finding | None:
    """The NCCL finding where it is the only finding and every line of it comes after `failure`, a traceback's
    exception no signature explains, in the same log and from other ranks: those NCCL errors are its echo, not a cause
    (held-out megatron-deepspeed-2node-missing-index-cache-on-remote-node: a FileNotFoundError on one node, then
    NCCL's `Connection closed by remote peer` on the other)."""
    if len(findings) != 1 or findings[0].id != _NCCL or not findings[0].evidence:
        return None
    if raising_statement(failure.text) is not None:  # a cut traceback's last frame: what it raised is not known
        return None
    # A rank's own NCCL error after its exception is not known to be that exception's echo.
    after = all(
        e.path == failure.path and (e.line or 0) > (failure.line or 0) and (e.rank is None or e.rank != failure.rank)
        for e in findings[0].evidence
    )
    return findings[0] if after else None


# Keys that describe the model itself: a config and a log that disagree on them are from different runs.
MODEL_IDENTITY_KEYS = (
    "model.num_layers",
    "model.hidden_size",
    "model.ffn_hidden_size",
    "model.num_attention_heads",
    "model.num_query_groups",
    "model.kv_channels",
    "model.seq_length",
    "model.num_moe_experts",
    "model.transformer_impl",
    "model.vocab_size",
)


def config_mismatch(store: ConfigStore) -> str | None:
    """'the config is probably from another run: …' when a config file and the log's own printout disagree
    on what the model is (not on a setting someone may have changed between attempts)."""
    differences = []
    for key in MODEL_IDENTITY_KEYS:
        resolved = store.resolve(key)
        if resolved is None or resolved.origin != "config":
            continue
        logged = [v for v in resolved.overridden if v.origin == "log"]
        if logged:
            differences.append(f"{key} {format_value(resolved.value)} vs {format_value(logged[-1].value)}")
    if not differences:
        return None
    shown = ", ".join(differences[:3]) + (f" and {len(differences) - 3} more" if len(differences) > 3 else "")
    return (
        f"the config is probably from another run: it disagrees with the log on the model (config vs log: {shown}). "
        "Verdicts read the config's values: check that the config belongs to this log"
    )


def model_printed_by_log(store: ConfigStore) -> bool:
    """Whether the log printed what the model is and the config (a file, or the log's own printout) agrees
    with it: then the config is this run's, whatever else disagrees with the message's figures."""
    logged = any(v.origin == "log" and v.key in MODEL_IDENTITY_KEYS for v in store.all_values())
    return logged and config_mismatch(store) is None


def _empty_log_notes(scan: ScanResult) -> list[str]:
    return [
        f"{'standard input' if path == '-' else path} is empty: check the path (or whether the job wrote its log elsewhere)"
        for path, lines in scan.lines_read.items()
        if lines == 0 and path not in scan.skipped  # a skipped log has its own note: not read is not empty
    ]


def _baseline_note(run: dict, findings: list[Finding]) -> str:
    ratio, base_ms, run_ms = run.get("slowdown_ratio"), run.get("baseline_iteration_ms"), run.get("median_iteration_ms")
    if ratio is None or not run_ms:
        return "measured against the baseline: this log has no steady-state iteration time, so no slowdown could be measured"
    reported = any("slowdown_ratio" in f.facts for f in findings)
    return (
        f"measured against the baseline: iteration time {ratio:.2f}x the baseline's ({run_ms:g} ms vs {base_ms:g} ms)"
        + ("" if reported else "; below the threshold of a slowdown finding")
    )


# Sections a Megatron(-Bridge) config or arguments block fills; any value under them marks a Megatron run.
_MEGATRON_SECTIONS = ("model.", "optimizer.", "ddp.")


def _megatron_run(scan: ScanResult, store: ConfigStore, findings: list[Finding]) -> bool:
    """Iteration or parameter lines, Megatron's start-up lines, a traceback through Megatron-LM's or Bridge's training
    code, a Megatron config value, or a message only Megatron raises (the signature's first source is Megatron's: a
    Bridge `validate()` traceback, a pasted assert) show a Megatron run."""
    if scan.iterations or scan.parameters.billions or scan.parameters.per_model_parallel_rank:
        return True
    if scan.megatron_startup or scan.training_code:
        return True
    if any(_raised_by_megatron(f.signature) for f in findings):
        return True
    resolved = (store.resolve(key) for key in store.keys() if key.startswith(_MEGATRON_SECTIONS))  # noqa: SIM118 - a ConfigStore
    return any(value is not None and value.origin in ("log", "config", "set") for value in resolved)


def _raised_by_megatron(signature: Signature) -> bool:
    sources = [ref["source"] for ref in signature.references if "source" in ref]
    return bool(sources) and sources[0].startswith("megatron/")


# Why a fix's lines under these sections would not apply: a log with no Megatron line and no Megatron config; a
# Megatron-DeepSpeed run (`deepspeed True` in its arguments), which takes none of Megatron-Core's optimizer settings
# as flags, DeepSpeed's ZeRO doing that work (held-out megatron-deepspeed-summit-moe-oom-…).
_NOT_MEGATRON = (
    _MEGATRON_SECTIONS,
    "Megatron settings left out of this fix: the log shows no Megatron run (no arguments block, iteration lines or "
    "Megatron config), and they apply only to Megatron runs; in a Megatron run, they are the settings the text "
    "names.",
)
_DEEPSPEED = (
    ("optimizer.", "ddp.use_distributed_optimizer"),
    "Megatron-Core's optimizer settings left out of this fix: the run uses DeepSpeed (`deepspeed True` in its "
    "arguments), whose ZeRO stage shards the optimizer state and offloads it (zero_optimization.stage and "
    "offload_optimizer in the DeepSpeed config), not those flags.",
)


# What names a parameter-efficient fine-tuning method that trains adapters (the `peft` key's value, or a part of it)
_ADAPTER_METHODS = ("lora", "dora", "adapter", "ia3")


def _frozen_model(store: ConfigStore, run: RunFacts) -> str | None:
    """Why the run's model is frozen under what it trains, in words: its config's `peft` (Bridge's `peft._target_`
    too), a traceback frame in adapter code (held-out flagscale-memrift-lora-…: `flagscale/train/peft/lora.py`), or
    one in megatron-core's road for a frozen weight (held-out flagscale-lora-…-seq9728: its output layer)."""
    where = None
    for key in sorted(store.keys()):  # a ConfigStore, not a dict
        if key == "peft" or key.startswith("peft."):
            given = store.resolve(key)  # not one a traceback's adapter frame gave (api.py): the frame says it below
            if (
                given is not None
                and given.origin != "derived"
                and any(method in str(given.value).lower() for method in _ADAPTER_METHODS)
            ):
                where = f"{key} = {format_value(given.value)} at {given.source}"
                break
    if where is None and run.values.get("trains_adapters"):
        frame = run.evidence["trains_adapters"][0]
        where = f"its traceback runs {cut(frame.text, 100)} at {frame.path}:{frame.line}"
    if where is not None:
        return (
            f"the run trains adapters over a frozen model ({where}), so the optimizer holds the adapters' state alone "
            "and sharding or offloading it frees next to nothing"
        )
    if run.values.get("frozen_weight_in_traceback"):
        frame = run.evidence["frozen_weight_in_traceback"][0]
        return (
            f"the weight its traceback multiplies by is frozen ({frame.path}:{frame.line}: megatron-core's "
            "`linear_with_frozen_weight`, for a weight that takes no gradient), as a run that trains adapters leaves "
            "its model: the optimizer holds state only for what trains, so where the frozen part is the bulk of the "
            "model, sharding or offloading it frees next to nothing"
        )
    return None


def _leave_the_optimizer_of_a_frozen_model(findings: list[Finding], frozen: str) -> None:
    """An out-of-memory fix for a run whose model is frozen under what it trains (adapters) keeps no optimizer setting
    and says why, in place of the summary (whose first advice is the optimizer's): the frozen model has no optimizer
    state, so sharding or offloading it frees next to nothing (b10-b12: a model frozen but its layer norms)."""
    why = (
        f"{frozen}. The step's memory is the frozen weights and the activations: recompute, a shorter sequence, "
        "context parallelism or a smaller micro-batch cut the activations."
    )
    for finding in findings:
        if "requested_bytes" not in finding.facts and "allocator_figures" not in finding.facts:
            continue
        before = len(finding.overrides)
        _drop_fix_lines([finding], ("optimizer.", "ddp.use_distributed_optimizer"), "")
        if len(finding.overrides) < before:
            said = f"Optimizer settings left out of this fix: {why}"
        elif not finding.fix_note_replaces_summary:  # the summary would be shown, and it leads with the optimizer
            said = why[0].upper() + why[1:]
        else:  # the memory model's own change, which is not the optimizer's
            continue
        finding.fix_note = f"{finding.fix_note} {said}".strip()
        finding.fix_note_replaces_summary = True


def _drop_fix_lines(findings: list[Finding], sections: tuple[str, ...], note: str) -> None:
    for finding in findings:
        kept = [line for line in finding.overrides if not line.split("=", 1)[0].startswith(sections)]
        if len(kept) != len(finding.overrides):
            finding.overrides = kept
            finding.fix_note = f"{finding.fix_note} {note}".strip()


def _leave_out_flags_it_lacks(findings: list[Finding], printed_arguments: frozenset[str] | None) -> None:
    """A fix line whose flag the run's arguments block does not print is one its Megatron-LM would refuse
    (`unrecognized arguments`): held-out logs of 2021-2024 Megatron-LM were given optimizer offloading's flags."""
    for finding in findings:
        lacking = flags_it_lacks(finding.overrides, printed_arguments)
        if not lacking:
            continue
        finding.overrides = [line for line in finding.overrides if line.split(" ", 1)[0] not in lacking]
        finding.changes = [change for change in finding.changes if not _only_flags_in(change, lacking)]
        one = len(set(lacking)) == 1
        flags = ", ".join(f"`{flag}`" for flag in dict.fromkeys(lacking))
        said = (
            f"This run's Megatron-LM has no {flags}: its arguments block, which prints every argument it takes, does "
            f"not list {'it' if one else 'them'}, and it would refuse {'that line' if one else 'those lines'} as "
            "unrecognized arguments: left out."
        )
        if not finding.overrides:
            said += " What it takes instead: a smaller micro-batch or sequence, or more tensor or pipeline parallelism."
            finding.fix_note_replaces_summary = True
        finding.fix_note = f"{finding.fix_note} {said}".strip()


def _only_flags_in(change: tuple, flags: list[str]) -> bool:
    """The change is printed as Megatron-LM flags, each of them among `flags` (its lines all left out)."""
    printed = [line.split(" ", 1)[0] for line in render_changes([change], MEGATRON_LM) if line.startswith("--")]
    return bool(printed) and set(printed) <= set(flags)


def config_lookup(store: ConfigStore, facts: dict):
    def lookup(kind: str, name: str) -> Any:
        if kind == "fact":
            return facts[name] if name in facts else missing()
        resolved = store.resolve(name)
        if resolved is None:
            return missing()
        choices = VALUE_CHOICES.get(name)
        if choices and resolved.value is not None and str(resolved.value) not in choices:
            return NotAChoice(resolved.value)
        return resolved.value

    return lookup


def _reads_as_error(catalog: Catalog, matcher_id: str) -> bool:
    """A warning's line whose condition did not hold is no failure: torchrun's OMP_NUM_THREADS banner, printed by
    every multi-GPU run, matters only with optimizer offloading on (optimizer-offload-one-omp-thread)."""
    signature = catalog.get(matcher_id)
    return signature is None or signature.severity == "error"


def _winner(catalog: Catalog, aggregate: Aggregate, store: ConfigStore, run: RunFacts) -> Signature | None:
    """Signatures sharing one matcher are tried by priority; the first whose `when` holds takes the line."""
    candidates = [
        s for s in catalog.signatures if s.id == aggregate.matcher_id or s.shares_match_of == aggregate.matcher_id
    ]
    lookup = config_lookup(store, {**run.values, **aggregate.facts})
    for signature in sorted(candidates, key=lambda s: -s.priority):
        if signature.when is None or evaluate(signature.when, lookup) is True:
            return signature
    return None


def _says_more(facts: dict, than: dict) -> bool:
    """A rank that ran out by more, or by as much with more known of it: ranks printing at once interleave their
    tracebacks, and the copy of one OOM line whose traceback was read whole knows where it was raised (held-out
    megatron-deepspeed-summit-gpt1.3b-fp16-optimizer-init-oom: four ranks, the same figures)."""
    more, known = shortfall_bytes(facts), shortfall_bytes(than)
    return more > known or (more == known and len(facts) > len(than))


def _merge(
    findings: dict[str, Finding], signature: Signature, aggregate: Aggregate, store: ConfigStore, run: RunFacts
) -> None:
    existing = findings.get(signature.id)
    if existing is not None and _says_more(aggregate.facts, existing.facts):
        # A later rank ran out by more: its figures are the finding's (and its fix's), the first-seen order stays.
        existing.facts = dict(aggregate.facts)
        existing.config = verdict_for(signature.config, store, {**run.values, **existing.facts})
        existing.overrides, existing.fix_note, existing.fix_note_replaces_summary = render_overrides(
            signature, store, {**run.values, **existing.facts}
        )
    if existing is None:
        facts = dict(aggregate.facts)
        overrides, left_out, instead = render_overrides(signature, store, {**run.values, **facts})
        findings[signature.id] = Finding(
            signature=signature,
            evidence=list(aggregate.evidence),
            ranks=sorted(aggregate.ranks),
            occurrences=aggregate.count,
            facts=facts,
            config=verdict_for(signature.config, store, {**run.values, **facts}),
            overrides=overrides,
            first_seen=aggregate.first_seen,
            files=sorted(aggregate.paths),
            fix_note=left_out,
            fix_note_replaces_summary=instead,
        )
        return
    existing.occurrences += aggregate.count
    existing.ranks = sorted(set(existing.ranks) | aggregate.ranks)
    existing.files = sorted(set(existing.files) | aggregate.paths)
    for evidence in aggregate.evidence:
        keep_evidence(existing.evidence, evidence)


def condition_finding(
    signature: Signature, condition: Predicate, store: ConfigStore, run: RunFacts, trigger: str | None = None
) -> Finding | None:
    """A finding from the run's config and numbers alone, when `condition` holds (not merely unknown)."""
    facts = dict(run.values)
    if evaluate(condition, config_lookup(store, facts)) is not True:
        return None
    fact_names = list(dict.fromkeys(names_in(condition, "fact")))
    evidence: list[Evidence] = []
    for name in fact_names:
        evidence.extend(run.evidence.get(name, []))
    # Keys read from one line (a launch command's flags) are one piece of evidence: a line is cited once.
    settings: dict[tuple, list[str]] = {}
    for key in dict.fromkeys(names_in(condition, "key")):
        resolved = store.resolve(key)
        if resolved is not None:
            where = (resolved.source.path, resolved.source.line)
            settings.setdefault(where, []).append(f"{key} = {format_value(resolved.value)}")
    evidence.extend(Evidence(path, line, None, ", ".join(texts)) for (path, line), texts in settings.items())
    # Two facts read from one line (the median iteration time and the slowdown) cite it once.
    evidence = list({(e.path, e.line, e.text): e for e in evidence}.values())
    used = set(fact_names) | set(names_in(signature.config, "fact"))
    overrides, left_out, instead = render_overrides(signature, store, facts)
    return Finding(
        signature=signature,
        evidence=evidence,
        ranks=[],
        occurrences=1,
        facts={k: v for k, v in facts.items() if k in used},
        config=verdict_for(signature.config or signature.when, store, facts),
        overrides=overrides,
        first_seen=10**12,  # after every log match of the same priority
        trigger=trigger or ("metrics" if fact_names else "config"),
        fix_note=left_out,
        fix_note_replaces_summary=instead,
    )


def verdict_for(predicate: Predicate | None, store: ConfigStore, facts: dict) -> ConfigVerdict:
    if predicate is None:
        return ConfigVerdict(UNKNOWN, [], "this signature reads no config")
    values = []
    for key in dict.fromkeys(names_in(predicate, "key")):
        resolved = store.resolve(key)
        if resolved is None:
            values.append(ConfigEvidence(key, known=False))
        else:
            values.append(
                ConfigEvidence(
                    key,
                    True,
                    resolved.value,
                    str(resolved.source),
                    tuple(f"{format_value(v.value)} at {v.source}" for v in resolved.overridden),
                )
            )
    outcome = evaluate(predicate, config_lookup(store, facts))
    if values and not any(v.known for v in values):
        # No config value is known (no config given, the log prints none): whatever the log's numbers say,
        # the config has not confirmed or contradicted anything.
        outcome = None
    if outcome is True:
        return ConfigVerdict(CONFIRMED, values, "the run's config agrees with this cause")
    if outcome is False:
        return ConfigVerdict(
            CONTRADICTED,
            values,
            "the config disagrees with this cause: the log and the config may come from different runs",
        )
    return ConfigVerdict(UNKNOWN, values, "the values that would confirm this cause are not known")


def render_overrides(signature: Signature, store: ConfigStore, facts: dict) -> tuple[list[str], str, bool]:
    """Fill a fix's `{name}` placeholders: a fact, a `suggested.*` value (config/derived.py), or a config key.
    A line with a value nothing gives is left out (a `<name>` is not a line to paste), and the note says so. Where
    one of the fix's `instead` conditions holds on the run's config, its lines replace the fix's and its note the
    summary (the third value says so)."""
    instead = next((i for i in signature.fix.instead if store.holds(i.when) is True), None)
    templates = instead.overrides if instead is not None else signature.fix.overrides
    suggestions = fix_values(store, facts) if any(SUGGESTED in line for line in templates) else {}
    unfilled: list[str] = []  # the current line's placeholders nothing gives

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name in facts:
            return _override_value(facts[name])
        if name in suggestions:
            return _override_value(suggestions[name])
        resolved = None if name.startswith(SUGGESTED) else store.resolve(name)
        if resolved is None:
            unfilled.append(name)
            return ""
        return _override_value(resolved.value)

    lines, left_out = [], []
    for line in templates:
        unfilled.clear()
        filled = _PLACEHOLDER.sub(fill, line) if "{" in line else line
        if unfilled:
            left_out.append(f"`{line.split('=', 1)[0]}`")
        else:
            lines.append(filled)
    note = " ".join(instead.note.split()) if instead is not None else ""
    if not left_out:
        return lines, note, instead is not None
    return (
        lines,
        f"{note} Left out of this fix: {', '.join(left_out)}, whose value needs settings that neither the log nor "
        "the config gives; the text says how to choose it.".strip(),
        instead is not None,
    )


def _override_value(value: Any) -> str:
    return "null" if value is None else format_value(value)


def _later(error_line: Evidence | None, source_line: Evidence | None) -> Evidence | None:
    """An error line, unless a pasted frame's statement (no traceback header) comes after it in the same log and
    from the same rank: another rank's frames interleaved after it (bionemo-recipes#784) end no failure of theirs."""
    if source_line is None:
        return error_line
    if error_line is None:
        return source_line
    other_rank = None not in (error_line.rank, source_line.rank) and error_line.rank != source_line.rank
    frames_below_their_header = RAY_TASK_ERROR in error_line.text.split(":", 1)[0]
    if (
        error_line.path == source_line.path
        and (source_line.line or 0) > (error_line.line or 0)
        and not other_rank
        and not frames_below_their_header
    ):
        return source_line
    return error_line


# A rank that fails stops every rank at the next collective, so only the iteration it was in can still be logged after
# its error (another rank's line, or buffered output); an error line this many iterations were logged after did not
# stop the run (a start-up ERROR of a held-out FlagScale run that trained its 5 iterations was its "failure line").
_ITERATIONS_PAST_AN_ERROR = 2


def _trained(scan: ScanResult) -> bool:
    """The log shows training steps (iteration lines) or the training loop's end: every refusal a preflight
    constraint stands for (config classes, validate_args, model build, the first step's checks) is behind it."""
    return bool(scan.iterations) or scan.training_done is not None


def _failure_before(scan: ScanResult, oom: Evidence) -> Evidence:
    """An out-of-memory line that is no shortage points at the failure above it in the same log, where there is one:
    the last exception or error line before it (the ECC error before a start-up OOM; vLLM's allocator error before
    an OOM with the memory free)."""
    earlier = [
        line
        for line in (*scan.exceptions, scan.last_error_line)
        if line is not None and line.path == oom.path and (line.line or 0) < (oom.line or 0)
    ]
    return max(earlier, key=lambda line: line.line or 0) if earlier else oom


def _no_shortage_note(aggregate: Aggregate) -> str:
    where = aggregate.evidence[-1]
    return (
        f"{where.path}:{where.line}: this CUDA out-of-memory error is no shortage of this run's memory, so no "
        f"memory setting is the fix: {aggregate.facts['not_a_shortage']}"
    )


def _script_rerun_note(where: Evidence) -> str:
    return (
        f"{where.path}:{where.line}: a traceback runs the training script's top level through runpy.run_path "
        f"(`{cut(where.text, 100)}`): multiprocessing's spawn or forkserver start method re-running it in a child "
        "process (an asynchronous checkpoint worker, data-loader workers), which starts the training again there. Put "
        'the script\'s training call under `if __name__ == "__main__":`; the errors after it (NCCL, EOFError, a '
        "hang) follow from the second run (recorded: fixtures/memory-calibration/refused/b64)"
    )


def _trained_past_note(finding: Finding) -> str:
    """A constraint the run's config breaks but the run trained past (held-out: megatron-core 0.7.0 took the local
    implementation with sequence parallelism, which 0.16.1 refuses): a note, not a failure of this run."""
    settings = "; ".join(e.text for e in finding.evidence)
    return (
        f"{finding.id}: the config breaks this constraint ({settings}), but the log shows the run training past "
        f"where megatron-core refuses it, so the release that ran takes it; another release may not ({finding.signature.title})"
    )


def _run_went_on_after(scan: ScanResult, evidence: Evidence) -> str | None:
    """What the same log and segment show of the run after `evidence`, where it went on: enough iterations, or its
    training loop's end."""
    if evidence.line is None:
        return None
    collector = next((c for c in scan.collectors if c.path == evidence.path), None)

    def segment(line: int) -> int:
        return collector.segment_at(line) if collector is not None else 0

    later = [
        r for r in scan.iterations.get((evidence.path, segment(evidence.line)), ()) if r.path and r.line > evidence.line
    ]
    iterations = {r.iteration for r in later}
    if len(iterations) >= _ITERATIONS_PAST_AN_ERROR:
        last = later[-1]
        return f"logged {len(iterations)} more iterations after it (up to iteration {last.iteration}, line {last.line})"
    from offloaddoctor.scanning import CHECKPOINT_SAVED, TRAINING_DONE  # here: `check` loads no scanner

    for marker, what, literal in (
        (scan.training_done, "ended its training", TRAINING_DONE),
        (scan.checkpoint_saved, "saved a checkpoint", CHECKPOINT_SAVED),
    ):
        if (
            marker
            and marker[0] == evidence.path
            and marker[1] > evidence.line
            and segment(marker[1]) == segment(evidence.line)
        ):
            return f"{what} after it (`{literal}`, line {marker[1]})"
    return None


def _unexplained_failure(
    scan: ScanResult, findings: list[Finding], matchers: list[Matcher], unclaimed: Sequence[Evidence] = ()
) -> Evidence | None:
    """The most likely failure line (last exception of the last traceback, else the last error line, or a
    line a signature matched although its condition did not hold), unless a finding already explains it."""
    from offloaddoctor.scanning import WRAPPER_EXCEPTIONS  # here: `check` reads no logs

    candidates = [e for e in scan.exceptions if not any(w in e.text.split(":", 1)[0] for w in WRAPPER_EXCEPTIONS)]
    candidate = candidates[-1] if candidates else _later(scan.last_error_line, scan.last_source_line)
    for line in unclaimed if not candidates else ():
        if candidate is None or (line.path == candidate.path and (line.line or 0) > (candidate.line or 0)):
            candidate = line
    if candidate is None:
        return None
    if findings and (
        says_only_that_a_rank_failed(candidate.text)
        or any(w in candidate.text.split(":", 1)[0] for w in WRAPPER_EXCEPTIONS)
    ):
        return None  # torchrun's word that a rank failed: the findings say why
    explaining = {f.signature.shares_match_of or f.id for f in findings}
    for matcher in matchers:
        if matcher.id in explaining and matcher.match(candidate.text) is not None:
            return None
    if any((e.path, e.line) == (candidate.path, candidate.line) for f in findings for e in f.evidence):
        return None
    if (candidate.path, candidate.line) == scan.nccl_reason and any(
        f.id != _NCCL and f.trigger == "log" for f in findings
    ):
        return None  # what NCCL said failed, on a rank another finding's failure left: its echo, as the NCCL error is
    if candidate is scan.last_source_line and any(
        e.path == candidate.path and (e.line or 0) > (candidate.line or 0) for f in findings for e in f.evidence
    ):
        return None  # a pasted frame's `assert`, whose exception line below it a finding explains (ROCm/Megatron-LM#85)
    return candidate
