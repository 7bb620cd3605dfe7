"""The library surface: what the CLI calls and what tests call directly."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from offloaddoctor.catalog import Catalog, Vocabulary
from offloaddoctor.catalog import load_catalog as _load_catalog
from offloaddoctor.errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from offloaddoctor.report import CheckReport, Report
    from offloaddoctor.catalog import Example, ExampleOutcome, ExampleRun, Signature
    from offloaddoctor.config import ConfigValue
    from offloaddoctor.policy import Policy

__all__ = [
    "CheckReport",
    "Report",
    "check",
    "compare",
    "diagnose",
    "diagnose_text",
    "estimate",
    "load_catalog",
    "run_examples",
    "vocabulary",
]


def vocabulary() -> Vocabulary:
    """What signatures may name: the fact parsers (scanning/fact_parsers.py) and config keys (config/keys.py)."""
    from offloaddoctor.scanning import FACT_PARSERS
    from offloaddoctor.config import is_known

    return Vocabulary(tuple(FACT_PARSERS), is_known)


def load_catalog(
    signature_dirs: Sequence[Path] = (), include_builtin: bool = True, policy: Policy | None = None
) -> Catalog:
    """The catalogue every command uses: the built-in signatures, the project file's `signatures:`
    directories (`policy`), then `signature_dirs`. Raises catalog.loader.CatalogError listing every problem."""
    dirs = [*(policy.signature_dirs if policy is not None else ()), *signature_dirs]
    return _load_catalog(vocabulary(), dirs, include_builtin=include_builtin)


def diagnose(
    paths: Sequence[str],
    config_paths: Sequence[str] = (),
    overrides: Sequence[str] = (),
    catalog: Catalog | None = None,
    signature_dirs: Sequence[Path] = (),
    baseline: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    recursive: bool = False,
    policy: Policy | None = None,
) -> Report:
    """Scan logs (files, directories, `-`) and correlate every finding with the run's config. `baseline`:
    a healthy run's log whose measured iteration time decides the slowdown finding instead of heuristics.
    `policy`: suppressions and extra signature directories (policy.py); by default the project file's,
    found from the current directory, as the CLI does. `Policy()` applies none."""
    if policy is None:
        from offloaddoctor.policy import load_policy

        policy = load_policy()
    catalog = catalog or load_catalog(signature_dirs, policy=policy)
    unknown = policy.unknown_ids(catalog)
    if unknown:
        raise UserError(f"--ignore: unknown signature id {unknown[0]!r}{did_you_mean(unknown[0], catalog)}")
    from offloaddoctor.logs.sources import first_not_text, resolve_sources  # not for `check`: start-up

    passed_over: list[str] = []  # what the directory scans did not read, and why
    sources = resolve_sources(paths, recursive, passed_over)
    from offloaddoctor.config import explicit_config, refuse_configs_as_logs

    refuse_configs_as_logs([p for p in paths if p != "-"])
    explicit = explicit_config(config_paths, overrides)
    baseline_metrics = None
    if baseline is not None:
        from offloaddoctor.metrics import run_metrics

        resolve_sources([baseline])
        baseline_metrics = run_metrics(baseline)
        if baseline_metrics.summary.median_iteration_ms is None:
            raise UserError(
                f"--baseline {baseline}: no steady-state iteration time in it (needs iteration lines after iteration 3)"
            )
    from offloaddoctor.report import runs_in_scan, several_runs
    from offloaddoctor.scanning import build_matchers, scan_sources

    matchers = build_matchers(catalog)
    scan = scan_sources(matchers, sources, progress=progress)
    if not any(scan.lines_read.values()):
        unreadable = first_not_text(sources)  # every file was skipped as binary: nothing was diagnosed
        if unreadable is not None:
            raise unreadable
    runs = runs_in_scan(scan)
    if len(runs) == 1:
        return policy.apply(_run_report(scan, explicit, catalog, matchers, baseline_metrics, passed_over))
    # Several runs (config/run_identity.py): each is scanned again on its own, as if diagnosed alone; the
    # common case (one job, however many rank logs) is read once.
    if any(s.path == "-" for s in sources):
        raise UserError(
            "standard input and the other logs are from different runs, and standard input cannot be read twice: "
            "diagnose it on its own (or save it to a file)"
        )
    from dataclasses import replace

    from offloaddoctor.report import notes_of_skipped

    # What belongs to no one run (logs passed over or skipped, project files ignored) is said once, for all.
    for_all = [*policy.warnings, *passed_over, *notes_of_skipped(scan)]
    run_policy = replace(policy, warnings=[])
    reports = []
    for run in runs:
        members = set(run.paths)
        run_scan = scan_sources(matchers, [s for s in sources if s.name in members])
        report = run_policy.apply(_run_report(run_scan, explicit, catalog, matchers, baseline_metrics, []))
        report.run = run
        reports.append(report)
    skipped = [path for path in scan.lines_read if path in scan.skipped]
    return several_runs(reports, for_all, skipped)


def _run_report(
    scan, explicit: list[ConfigValue], catalog: Catalog, matchers, baseline_metrics, passed_over: list[str]
) -> Report:
    """One run's report: its logs' config (never another run's), the --config/--set values on top, and the
    notes on what the directory scans passed over."""
    from offloaddoctor.config import build_store

    store = build_store(*(c.values for c in scan.collectors), explicit)
    report = _report(catalog, scan, store, matchers, baseline_metrics)
    report.notes[:0] = _unknown_set_keys(explicit, catalog, store) + passed_over
    return report


def _report(catalog: Catalog, scan, store, matchers, baseline_metrics=None) -> Report:
    """The report on a scan, with the advice's numbers: the report does not know advice exists, so it is
    composed here. Whether the OOM is fragmentation or capacity is weighed with the memory model's whole step
    first (it decides which signature claims the line); the numbers are added to the findings before their
    fixes are printed."""
    from offloaddoctor.advice import add_advice, weigh_fixes, weigh_whole_step
    from offloaddoctor.report import build_report

    store.printed_arguments = _all_printed([c.printed_arguments for c in scan.collectors])
    store.extend(_trained_share_values(scan.parameters, next(iter(scan.lines_read), "")))
    store.extend(_fp16_from_loss_scale(scan.iterations, store))
    store.extend(_what_the_tracebacks_ran(scan, store))
    weigh_whole_step(scan, store)
    return build_report(catalog, scan, store, matchers, baseline_metrics, advise=add_advice, weigh_fixes=weigh_fixes)


def _log_config(path: str, printed_arguments: list[frozenset[str]] | None = None) -> list[ConfigValue]:
    """What a log given to `estimate` prints of its config, and the share of its parameters that train, in one
    pass over it. `printed_arguments`: as load_log_config takes it."""
    from offloaddoctor.config import load_log_config
    from offloaddoctor.metrics import ParameterCounts
    from offloaddoctor.scanning import ParameterLines

    counts = ParameterCounts()
    values = load_log_config(path, also=[ParameterLines(counts)], printed_arguments=printed_arguments)
    return [*values, *_trained_share_values(counts, path)]


def _all_printed(blocks: Sequence[frozenset[str] | None]) -> frozenset[str] | None:
    """Every argument name the logs' complete arguments blocks printed; None where none printed one."""
    printed = [names for names in blocks if names is not None]
    return frozenset().union(*printed) if printed else None


def _trained_share_values(parameters, path: str) -> list[ConfigValue]:
    """The share of the parameters that train, where the log's gradient buckets say most are frozen: a log value
    (the memory model reads it; a config or --set value wins)."""
    from offloaddoctor.config import ConfigValue, Source
    from offloaddoctor.metrics.parameter_lines import trainable_share

    share = trainable_share(parameters)
    if share is None:
        return []
    source = Source(path, None, "gradient buckets against the parameter count")
    return [ConfigValue("runtime.trained_parameter_share", share, source, "log")]


def _fp16_from_loss_scale(iterations, store) -> list[ConfigValue]:
    """fp16, where nothing else says the run's precision and its iteration lines print a loss scale other than 1:
    fp16's dynamic loss scaling (bf16 and fp32 runs print 1.0). An fp16 run's fix that turns the precision-aware
    optimizer on then takes fp32 gradients (precision-aware-fp16-gradients: b100 stopped at its first step without
    them; held-out megatron-lm-gpt2-2.6b-v100-…, a V100 log whose loss scale was 268,435,456). Derived: it tells no
    fix dialect."""
    from offloaddoctor.config import ConfigValue, Source

    if store.resolve("model.fp16") is not None or store.resolve("model.bf16") is not None:
        return []
    for records in iterations.values():
        for record in records:
            if record.loss_scale is not None and record.loss_scale != 1.0:
                detail = f"loss scale {record.loss_scale:g} in an iteration line: fp16's dynamic loss scaling"
                return [ConfigValue("model.fp16", True, Source(record.path, record.line, detail), "derived")]
    return []


def _what_the_tracebacks_ran(scan, store) -> list[ConfigValue]:
    """Where no config says so: FlagScale's runner, where a traceback runs its training code (`flagscale/train/`), and
    LoRA, where one runs adapter code (`…/peft/lora.py`): what FlagScale's own checks read (flagscale-peft-recompute:
    held-out flagscale-memrift-lora-…'s log alone was offered recompute, which FlagScale refuses). Derived, not the
    log's own config: they tell no dialect, and anything the run prints wins."""
    from offloaddoctor.config import ConfigValue, Source

    found = []
    if "flagscale" in scan.training_code and store.resolve("launcher.flagscale") is None:
        where = Source(next(iter(scan.lines_read), ""), None, "a traceback frame in flagscale/train/")
        found.append(ConfigValue("launcher.flagscale", True, where, "derived"))
    adapter = scan.frozen_frames.get("trains_adapters")
    if adapter is not None and store.resolve("peft") is None:
        where = Source(adapter.path, adapter.line, "a traceback frame in adapter code")
        found.append(ConfigValue("peft", "lora", where, "derived"))
    return found


def did_you_mean(name: str, catalog: Catalog) -> str:
    import difflib

    close = difflib.get_close_matches(name, catalog.ids, n=3)
    return f"; did you mean {', '.join(close)}?" if close else "; run `offloaddoctor signatures` for the list"


def _unknown_set_keys(explicit: list[ConfigValue], catalog: Catalog, store) -> list[str]:
    """Notes for `--set` keys that nothing reads: a typo would otherwise change nothing, silently."""
    if not any(v.origin == "set" for v in explicit):
        return []
    from offloaddoctor.catalog import names_in
    from offloaddoctor.config import unknown_key_notes

    read = {key for s in catalog.signatures for predicate in (s.when, s.config) for key in names_in(predicate, "key")}
    # Any value from a file counts, also one a --set overrides (the resolved value is then the --set's own).
    present = {v.key for v in store.all_values() if v.origin not in ("set", "derived", "default")}
    return unknown_key_notes(explicit, read, present)


def diagnose_text(
    text: str,
    config: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
    name: str = "<text>",
) -> Report:
    """Diagnose an in-memory log excerpt; `config` maps any key spelling to a value."""
    from offloaddoctor.config import ConfigValue, Source, build_store, canonical_key
    from offloaddoctor.scanning import Scanner, build_matchers

    catalog = catalog or load_catalog()
    matchers = build_matchers(catalog)
    scan = Scanner(matchers).scan_lines(name, text.splitlines())
    given = [ConfigValue(canonical_key(k), v, Source("<config>", None, k), "config") for k, v in (config or {}).items()]
    store = build_store(*(c.values for c in scan.collectors), given)
    return _report(catalog, scan, store, matchers)


def check(
    config_paths: Sequence[str],
    overrides: Sequence[str] = (),
    catalog: Catalog | None = None,
    only: Sequence[str] = (),
    use_defaults: bool = True,
    gpu: str | None = None,
    gpu_memory: str | None = None,
    world_size: int | None = None,
    host_memory: str | None = None,
) -> CheckReport:
    """Validate a config before launch against every preflight constraint of the catalogue. Keys the
    config leaves out take megatron-core's defaults unless `use_defaults` is False. With `gpu`/`gpu_memory` the
    memory model's estimate is checked too (`memory-exceeds-capacity`), with `host_memory` (a node's) its host
    figure for optimizer offloading (`host-memory-exceeds-capacity`)."""
    if not config_paths and not overrides:
        raise UserError("nothing to check: pass a config file and/or --set KEY=VALUE items")
    from offloaddoctor.config import ConfigValue, Source, add_defaults, build_store, explicit_config

    catalog = catalog or load_catalog()
    values = explicit_config(config_paths, overrides)
    if _world_size(world_size):  # the job's GPUs, for the constraints that read them (expert-grid-divides-world) too
        values.append(ConfigValue("world_size", world_size, Source("--world-size", None), "set"))
    memory = None
    memory_note = None
    host = _host_memory(host_memory)
    if gpu or gpu_memory or host is not None:
        from offloaddoctor.advice import build_estimate, memory_summary
        from offloaddoctor.memory import MissingKeys

        capacity, _ = _memory_budget(gpu, gpu_memory, None, world_size)
        try:
            memory = build_estimate(values, list(config_paths), capacity, None, world_size, catalog, host)
        except MissingKeys as exc:
            memory_note = f"the memory constraints not checked: {exc}"
        else:
            summary = Source("estimate", None, memory_summary(memory))
            for key, verdict in (("memory.fits", memory.verdict), ("memory.host_fits", memory.host_verdict)):
                if verdict is not None:
                    values.append(ConfigValue(key, verdict.fits, summary, "derived"))
    store = build_store(values)
    if use_defaults:
        add_defaults(store)
    from offloaddoctor.report import check_store

    report = check_store(catalog, store, list(config_paths) + (["--set"] if overrides else []), only)
    if memory is not None:
        from offloaddoctor.advice import attach_memory

        attach_memory(report, memory)
    from offloaddoctor.advice import weigh_fixes
    from offloaddoctor.report import print_fixes

    print_fixes(report.violations, store)
    weigh_fixes(report.violations, store)
    if memory_note:
        report.notes.append(memory_note)
    report.notes[:0] = _unknown_set_keys(values, catalog, store) + _hydra_config_not_given(values, config_paths)
    return report


def _hydra_config_not_given(values: Sequence[ConfigValue], config_paths: Sequence[str]) -> list[str]:
    """A launch through Hydra (`--config-name X`: FlagScale's run.py) takes its settings from X: where X was not
    given, what it sets is not checked, and `check` says so beside its verdict."""
    given = {Path(path).stem for path in config_paths}
    notes = []
    for value in values:
        if value.key == "config_name" and value.origin == "config" and str(value.value) not in given:
            folder = next(
                (v.value for v in values if v.key == "config_path" and v.source.path == value.source.path), ""
            )
            notes.append(
                f"{value.source}: the launch takes its settings from Hydra's config {value.value!r}"
                f"{f' (in {folder})' if folder else ''}, which was not given: what it sets is read here as "
                "megatron-core's defaults; give that file with --config as well"
            )
    return notes


def estimate(
    config_paths: Sequence[str],
    overrides: Sequence[str] = (),
    gpu: str | None = None,
    gpu_memory: str | None = None,
    target: str | None = None,
    world_size: int | None = None,
    catalog: Catalog | None = None,
    log_paths: Sequence[str] = (),
    host_memory: str | None = None,
):
    """The memory model's estimate for a config (YAML, launch script, or a log's arguments block): the peak
    per component on the most-loaded GPU, whether it fits `gpu`/`gpu_memory`/`target`, and what would.
    `log_paths`: logs of the run, read like a log among `config_paths` whatever their name (the config wins).
    `host_memory`: a node's memory (e.g. "125GiB"), for the host verdict of optimizer offloading."""
    from offloaddoctor.advice import build_estimate, refusals
    from offloaddoctor.config import explicit_config
    from offloaddoctor.logs.sources import reads_as_log

    if not config_paths and not overrides and not log_paths:
        raise UserError("nothing to estimate: pass a config file, a launch script or a log, and/or --set KEY=VALUE")
    capacity, budget = _memory_budget(gpu, gpu_memory, target, world_size)
    logs = [p for p in config_paths if reads_as_log(p)] + list(log_paths)
    printed: list[frozenset[str]] = []
    values = [v for path in logs for v in _log_config(path, printed)]
    values += explicit_config([p for p in config_paths if p not in logs], overrides)
    catalog = catalog or load_catalog()
    host = _host_memory(host_memory)
    report = build_estimate(
        values,
        [*config_paths, *log_paths],
        capacity,
        budget,
        world_size,
        catalog,
        host,
        printed_arguments=_all_printed(printed),
    )
    report.refused_by = [(f.signature.id, f.signature.title) for f in refusals(values, catalog)]
    report.notes[:0] = _unknown_set_keys(values, catalog, report.store)
    return report


def _world_size(world_size: int | None) -> int | None:
    if world_size is not None and world_size < 1:
        raise UserError(f"--world-size {world_size}: must be at least 1")
    return world_size


def _host_memory(size: str | None) -> int | None:
    from offloaddoctor.memory.gpus import parse_size

    return None if size is None else parse_size(size, "--host-memory")


def _memory_budget(gpu: str | None, gpu_memory: str | None, target: str | None, world_size: int | None):
    """(the GPU's capacity, the --target bytes) from the command line, each None when not given."""
    from offloaddoctor.advice import Capacity
    from offloaddoctor.memory.gpus import gpu_memory as named_gpu, parse_size

    if gpu and gpu_memory:
        raise UserError("--gpu and --gpu-memory both given: pick one")
    _world_size(world_size)
    capacity = None
    if gpu:
        capacity = Capacity(*named_gpu(gpu))
    elif gpu_memory:
        capacity = Capacity(parse_size(gpu_memory, "--gpu-memory"), f"--gpu-memory {gpu_memory}")
    return capacity, (parse_size(target, "--target") if target else None)


def compare(
    baseline: str,
    runs: Sequence[str],
    run_configs: Mapping[str, Sequence[str]] | None = None,
    criteria: Any = None,
    catalog: Catalog | None = None,
):
    """Judge runs against a baseline by the offloading guide's success criteria (metrics/compare.py).
    `run_configs` maps a log path to config files whose offload settings replace what the log printed."""
    from offloaddoctor.config import explicit_config
    from offloaddoctor.scanning import build_matchers
    from offloaddoctor.memory import optimizer_state_bytes_per_parameter
    from offloaddoctor.metrics.compare import Criteria, compare_runs
    from offloaddoctor.metrics.settings import effective_offload_fraction, offload_settings

    if not runs:
        raise UserError("compare needs a baseline log and at least one run log")
    paths = [baseline, *runs]
    unknown = [p for p in (run_configs or {}) if p not in paths]
    if unknown:
        raise UserError(f"--run-config {unknown[0]}=…: {unknown[0]} is not one of the logs being compared")
    from offloaddoctor.logs.sources import resolve_sources

    resolve_sources(paths)  # every path is checked before any is read
    catalog = catalog or load_catalog()
    matchers = build_matchers(catalog)
    # Each path's logs read once, for its numbers and its diagnosis; read again per run only where the runs
    # are not the paths as given (metrics/runs.py), as `diagnose` does.
    by_path = {path: resolve_sources([path]) for path in dict.fromkeys(paths)}
    first = {path: _measure_and_diagnose(path, sources, catalog, matchers) for path, sources in by_path.items()}
    measured, errors, config_values = [], {}, {}
    for group, read_as_given in _compared_runs(baseline, paths, {p: r for p, (_, _, r) in first.items()}, by_path):
        if read_as_given:
            run, report, _ = first[group.name]
        else:
            run, report, _ = _measure_and_diagnose(group.name, group.sources, catalog, matchers)
        errors[group.name] = [f.id for f in report.findings if f.signature.severity == "error"]
        configs = [c for path in group.given for c in (run_configs or {}).get(path, ())]
        if configs:
            config_values[group.name] = explicit_config(configs, ())
            arguments = {**run.arguments, **{v.key: v.value for v in config_values[group.name]}}
            run.summary.offload = offload_settings(arguments)
            run.summary.effective_offload_fraction = effective_offload_fraction(run.summary.offload)
        measured.append(run)
    return compare_runs(
        measured[0],
        measured[1:],
        errors,
        criteria or Criteria(),
        _model_state_mb(measured[0], config_values.get(measured[0].path, ())),
        bytes_per_parameter=optimizer_state_bytes_per_parameter(),
        **_model_peaks(measured, config_values),
    )


def _run_store(run, config_values: Sequence[ConfigValue] = ()):
    """A run's config: its arguments block, with the `--run-config` files' values on top."""
    from offloaddoctor.config import ConfigValue, Source, build_store, canonical_key

    values = [
        ConfigValue(canonical_key(k), v, Source(run.path, None, "arguments block"), "log")
        for k, v in run.arguments.items()
    ]
    return build_store(values, config_values)


def _model_state_mb(run, config_values: Sequence[ConfigValue] = ()) -> tuple[float, str] | None:
    """The memory model's offloadable optimizer state per GPU for a run's config (None: keys missing)."""
    from offloaddoctor.byte_units import MIB
    from offloaddoctor.memory import offloadable_state, read_shape

    try:
        states = offloadable_state(read_shape(_run_store(run, config_values)))
    except UserError:
        return None
    return states.bytes / MIB, states.formula


def _model_peaks(runs: Sequence[Any], config_values: Mapping[str, Sequence[ConfigValue]]) -> dict[str, Any]:
    """compare_runs' `model_peaks` (the memory model's peak for each run's shape, the first optimizer build freed
    and not) and `model_missing` (why a config could not be read), from each run's config."""
    from offloaddoctor.byte_units import MIB
    from offloaddoctor.memory import MissingKeys, estimate as memory_estimate, read_shape
    from offloaddoctor.metrics.compare import ModelPeak

    peaks: dict[str, ModelPeak] = {}
    missing: dict[str, list[str]] = {}  # why -> the runs it holds for
    for run in runs:
        store = _run_store(run, config_values.get(run.path, ()))
        try:
            result = memory_estimate(read_shape(store))
        except MissingKeys as exc:  # its message names `--set`, which compare has not
            why = f"the memory estimate needs {', '.join(exc.keys)} (a --run-config file can give them)"
            missing.setdefault(why, []).append(run.path)
            continue
        except UserError as exc:
            missing.setdefault(str(exc), []).append(run.path)
            continue
        collected, lingering = result.peak_allocated_if_collected_bytes / MIB, result.peak_allocated_bytes / MIB
        fix = _first_build_fix(result.shape, store) if lingering > collected else ""
        peaks[run.path] = ModelPeak(round(collected, 2), round(lingering, 2), fix)
    why = "; ".join(f"{', '.join(paths)}: {reason}" for reason, paths in missing.items())
    return {"model_peaks": peaks, "model_missing": why}


def _first_build_fix(shape, store) -> str:
    """The advice that frees the optimizer's first build, as `estimate` and `diagnose` word it (advice/changes.py),
    with its lines in the run's dialect."""
    from offloaddoctor.advice import manual_gc_change
    from offloaddoctor.config.derived import flagscale_places
    from offloaddoctor.config.dialect import dialect_of, render_lines

    change = manual_gc_change(shape)
    lines = render_lines(change.overrides, dialect_of(store), flagscale_places(store)) if change else []
    return f"{change.change}: {' '.join(lines)}" if change else ""


def _compared_runs(baseline: str, paths: list[str], readers: dict, by_path: dict) -> list[tuple[Any, bool]]:
    """The runs to compare, by the rule `diagnose` and `metrics` use (metrics/runs.py), within each role: the
    baseline's logs must be one run; the other logs are grouped into runs (one job's logs given apart are one).
    Each with whether it is a path as given, already read by `readers[path]` (else its logs must be read)."""
    from offloaddoctor.report import describe_run
    from offloaddoctor.metrics.runs import runs_of

    base, base_as_given = runs_of({baseline: readers[baseline]}, {baseline: by_path[baseline]})
    if len(base) > 1:
        shown = "; ".join(describe_run(run.run) for run in base[:3])
        raise UserError(f"{baseline}: the baseline's logs are {len(base)} runs ({shown}): pass the logs of one run")
    rest = [path for path in dict.fromkeys(paths) if path != baseline]
    others, others_as_given = runs_of({p: readers[p] for p in rest}, {p: by_path[p] for p in rest})
    return [(run, bool(base_as_given)) for run in base] + [(run, bool(others_as_given)) for run in others]


def _measure_and_diagnose(name: str, sources, catalog: Catalog, matchers) -> tuple[Any, Report, Any]:
    """`run_metrics` and `diagnose` of one run's logs from one read of each: both handler sets share a pass.
    (The run's numbers, its report, and the RunReader that read them.)"""
    from offloaddoctor.config import build_store
    from offloaddoctor.scanning import Scanner
    from offloaddoctor.logs.line_pass import LinePass
    from offloaddoctor.metrics.reader import RunReader
    from offloaddoctor.metrics.summary import summarise

    scanner, reader = Scanner(matchers), RunReader(name)
    warnings: list[str] = []
    line_pass = LinePass(scanner.literals | reader.line_pass.literals, warnings)
    for source in sources:
        before = len(warnings)
        lines = line_pass.read_source(
            source, scanner.start_source(source.name), reader.start_source(source.name, shared=True)
        )
        scanner.result.lines_read[source.name] = lines
        reader.source_read(source.name, lines)
        scanner.result.warnings.extend(warnings[before:])
        reader.run.notes.extend(warnings[before:])
    scan = scanner.finish()
    store = build_store(*(c.values for c in scan.collectors))
    run = summarise(reader.run, reader.collectors, reader.layout_line)
    return run, _report(catalog, scan, store, matchers), reader


def run_example(catalog: Catalog, signature: Signature, index: int, example: Example) -> ExampleOutcome:
    """One signature example through diagnose_text: the same code path `signatures test` runs."""
    from offloaddoctor.catalog import judge_example

    report = diagnose_text(example.log, example.config, catalog, name=f"{signature.id}[{index}]")
    return judge_example(signature, index, example, report.findings)


def run_examples(catalog: Catalog, signatures: Sequence[Signature] | None = None) -> ExampleRun:
    """Every example of `signatures` (default: the whole catalogue): the confusion matrix of `signatures test`."""
    from offloaddoctor.catalog import ExampleRun

    run = ExampleRun()
    for signature in signatures if signatures is not None else catalog.signatures:
        for index, example in enumerate(signature.examples):
            run.outcomes.append(run_example(catalog, signature, index, example))
    return run


def __getattr__(name: str):
    if name in ("CheckReport", "Report"):  # loaded with `check` or `diagnose`, not at start-up
        import offloaddoctor.report

        return getattr(offloaddoctor.report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
