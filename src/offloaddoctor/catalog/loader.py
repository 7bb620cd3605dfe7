"""Load signature YAML files, validate every field, and report all problems at once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import NamedTuple

from offloaddoctor.catalog.cache import catalog_key, forget_cached, read_cached, write_cached
from offloaddoctor.catalog.model import SEVERITIES, Catalog, Example, Fix, FixInstead, MatchSpec, Signature
from offloaddoctor.catalog.predicates import PredicateError, names_in, parse_predicate
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.text_safety import safe_lines, safe_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

_ID = lazy_compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FIELDS_REQUIRED = (
    "id",
    "title",
    "severity",
    "priority",
    "symptom",
    "cause",
    "confirm",
    "fix",
    "references",
    "examples",
)
_FIELDS_OPTIONAL = ("match", "when", "config", "preflight", "known_issues")


class Vocabulary(NamedTuple):
    """What a signature may name, given by the layers that own it (api.py assembles it): the fact parsers
    of scanning/fact_parsers.py for `match.facts`, and the config keys of config/keys.py for predicates."""

    fact_parsers: Collection[str]
    is_known_key: Callable[[str], bool]


class CatalogProblem(NamedTuple):
    path: str
    field: str
    reason: str

    def __str__(self) -> str:
        if self.field == "-":  # about the file or directory as a whole
            return f"{self.path}: {self.reason}"
        return f"{self.path}: {self.field}: {self.reason}"


class CatalogError(Exception):
    def __init__(self, problems: list[CatalogProblem]):
        self.problems = problems
        if len(problems) == 1:  # the common case (a clash, a typo) stays one line
            super().__init__(str(problems[0]))
        else:
            super().__init__(f"{len(problems)} problems in signature files:\n" + "\n".join(f"  {p}" for p in problems))


@functools.lru_cache(maxsize=1)
def builtin_signature_dir() -> Path:
    """The wheel carries the catalogue inside the package; a source checkout has it at the top level. (Asked
    once a process: each answer resolves this file's path.)"""
    packaged = Path(__file__).resolve().parent.parent / "_signatures"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "signatures"


def is_team_signature(path: str | Path) -> bool:
    """The one answer to "is this signature a team's?": its file is not in the built-in catalogue. A team's
    patterns are untrusted (a give-up budget when scanning), and a clash with a built-in id says so."""
    return _real_parent(str(path)) != _builtin_real_directory()


@functools.lru_cache(maxsize=1024)
def _real_parent(path: str) -> Path:
    """(Asked for every signature at every scan: one resolution each, an lstat per path component.)"""
    return Path(path).resolve().parent


@functools.lru_cache(maxsize=1)
def _builtin_real_directory() -> Path:
    """The built-in catalogue's real path, resolved once a process, not once a signature (start-up: 17
    signatures took ~70 path resolutions, each an lstat per path component)."""
    return builtin_signature_dir().resolve()


def load_catalog(vocabulary: Vocabulary, extra_dirs: Sequence[Path] = (), include_builtin: bool = True) -> Catalog:
    builtin = builtin_signature_dir()
    dirs = _distinct(([builtin] if include_builtin else []) + [Path(d) for d in extra_dirs])
    problems: list[CatalogProblem] = []
    contents: list[tuple[Path, bytes]] = []
    for directory in dirs:
        if not directory.is_dir():
            reason = (
                "the built-in catalogue is missing (a broken install?)" if directory == builtin else "not a directory"
            )
            problems.append(CatalogProblem(str(directory), "-", reason))
            continue
        files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
        if not files:
            problems.append(CatalogProblem(str(directory), "-", "no *.yaml signature files"))
        for path in files:
            content = _read_file(path, problems)
            if content is not None:
                contents.append((path, content))
    key = None if problems else catalog_key(contents)
    if key is None:
        return _build_catalog(contents, _parsed(contents, problems), problems, include_builtin, vocabulary, False)
    built = _BUILT.get((key, include_builtin, vocabulary))
    if built is not None:
        return built
    cached = read_cached(key, len(contents))
    catalog = None
    if cached is not None:
        try:
            catalog = _build_catalog(contents, cached, [], include_builtin, vocabulary, trusted_patterns=True)
        except (CatalogError, TypeError, ValueError, KeyError, AttributeError):
            forget_cached(key)  # an entry that does not validate: the YAML decides, and is cached again
    if catalog is None:
        parsed = _parsed(contents, problems)
        catalog = _build_catalog(contents, parsed, problems, include_builtin, vocabulary, trusted_patterns=False)
        write_cached(key, [data for data in parsed if data is not None])  # all of them: it loaded
    if len(_BUILT) >= 4:
        del _BUILT[next(iter(_BUILT))]
    _BUILT[key, include_builtin, vocabulary] = catalog
    return catalog


# The last catalogues this process built, by their files' key: a library caller diagnosing log after log
# (and the test suite) builds each once; the files are still read and checked every time.
_BUILT: dict[tuple[str, bool, Vocabulary], Catalog] = {}


def _parsed(contents: list[tuple[Path, bytes]], problems: list[CatalogProblem]) -> list[dict | None]:
    return [_parse_file(path, content, problems) for path, content in contents]


def _build_catalog(
    contents: list[tuple[Path, bytes]],
    parsed: Sequence[dict | None],
    problems: list[CatalogProblem],
    include_builtin: bool,
    vocabulary: Vocabulary,
    trusted_patterns: bool,
) -> Catalog:
    signatures: list[Signature] = []
    seen: dict[str, str] = {}
    for (path, _), data in zip(contents, parsed):
        signature = None if data is None else _build_signature(path, data, problems, vocabulary, trusted_patterns)
        if signature is None:
            continue
        if signature.id in seen:
            first = seen[signature.id]
            owner = " (the built-in catalogue)" if include_builtin and not is_team_signature(first) else ""
            reason = f"duplicate id {signature.id!r}: also defined in {first}{owner}; rename one of them"
            problems.append(CatalogProblem(str(path), "id", reason))
            continue
        seen[signature.id] = str(path)
        signatures.append(signature)
    _check_shared_matchers(signatures, problems)
    if problems:
        raise CatalogError(problems)
    return Catalog(tuple(sorted(signatures, key=lambda s: (-s.priority, s.id))))


def _distinct(dirs: list[Path]) -> list[Path]:
    """The same directory named twice (command line and project file, `x` and `./x`) is loaded once."""
    first: dict[Path, Path] = {}
    for directory in dirs:
        first.setdefault(directory.resolve(), directory)
    return list(first.values())


MAX_SIGNATURE_BYTES = 256 * 1024
MAX_NESTING = 64


def _read_file(path: Path, problems: list[CatalogProblem]) -> bytes | None:
    where = str(path)
    try:
        if not path.is_file():  # a FIFO named *.yaml would block the read forever
            problems.append(CatalogProblem(where, "-", "not a regular file"))
            return None
        if path.stat().st_size > MAX_SIGNATURE_BYTES:
            reason = f"larger than {MAX_SIGNATURE_BYTES // 1024} KiB: not a signature file"
            problems.append(CatalogProblem(where, "-", reason))
            return None
        return path.read_bytes()
    except OSError as exc:
        problems.append(CatalogProblem(where, "-", f"cannot read: {' '.join(str(exc).split())}"))
        return None


def _parse_file(path: Path, content: bytes, problems: list[CatalogProblem]) -> dict | None:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 10x faster
    where = str(path)
    try:
        text = content.decode("utf-8")
        if _nesting_depth(text, yaml, loader) > MAX_NESTING:
            # libyaml's composer recurses in C: a deeply nested file would crash the process, not raise
            problems.append(CatalogProblem(where, "-", f"nested deeper than {MAX_NESTING} levels"))
            return None
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        problems.append(CatalogProblem(where, "-", f"cannot parse: {' '.join(str(exc).split())}"))
        return None
    if not isinstance(data, dict):
        problems.append(CatalogProblem(where, "-", "top level must be a mapping"))
        return None
    return data


def _nesting_depth(text: str, yaml, loader) -> int:
    """Deepest collection nesting, from parser events only (the parser is iterative; composing is not)."""
    depth = deepest = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_NESTING:
                return deepest
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return deepest


def _build_signature(
    path: Path, data: dict, problems: list[CatalogProblem], vocabulary: Vocabulary, trusted_patterns: bool
) -> Signature | None:
    """Validate every field. `trusted_patterns`: the same bytes passed the pattern checks before (cache hit)."""
    where = str(path)
    before = len(problems)

    def problem(field_name: str, reason: str) -> None:
        problems.append(CatalogProblem(where, field_name, reason))

    for name in _FIELDS_REQUIRED:
        if name not in data:
            problem(name, "required field is missing")
    for name in sorted(set(data) - set(_FIELDS_REQUIRED) - set(_FIELDS_OPTIONAL)):
        problem(name, "unknown field")

    signature_id = data.get("id")
    if not isinstance(signature_id, str) or not _ID.match(signature_id):
        problem("id", "must be lower-case words joined by '-'")
    elif signature_id != path.stem:
        problem("id", f"must equal the file name {path.stem!r}")
    for name in ("title", "symptom", "cause"):
        if name in data and not _nonempty_str(data[name]):
            problem(name, "must be a non-empty string")
    if "severity" in data and data["severity"] not in SEVERITIES:
        problem("severity", f"must be one of {', '.join(SEVERITIES)}")
    priority = data.get("priority")
    if "priority" in data and (not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 100):
        problem("priority", "must be a whole number from 0 to 100")
    if "preflight" in data and not isinstance(data["preflight"], bool):
        problem("preflight", "must be true or false")

    match, shares = _load_match(data.get("match"), problem, vocabulary, trusted_patterns)
    when = _load_predicate(data, "when", problem)
    config = _load_predicate(data, "config", problem)
    if data.get("match") is None and when is None:
        problem("match", "a signature needs `match` (log patterns) or `when` (a run-level condition)")
    for predicate, name in ((when, "when"), (config, "config")):
        for key in names_in(predicate, "key"):
            if not vocabulary.is_known_key(key):
                problem(name, f"unknown config key {key!r} (see config/keys.py)")
    if data.get("preflight") and config is None:
        problem("preflight", "a preflight signature needs a `config` predicate")

    confirm = data.get("confirm")
    if "confirm" in data and (
        not isinstance(confirm, list) or not confirm or not all(_nonempty_str(c) for c in confirm)
    ):
        problem("confirm", "must be a non-empty list of strings")
    fix = _load_fix(data.get("fix"), problem, vocabulary.is_known_key) if "fix" in data else None
    references = data.get("references")
    if "references" in data and (
        not isinstance(references, list)
        or not references
        or not all(
            isinstance(r, dict) and ("doc" in r or "source" in r) and all(isinstance(v, str) for v in r.values())
            for r in references
        )
    ):
        problem("references", "must be a non-empty list of mappings with `doc` or `source` (strings)")
    examples = (
        _load_examples(data.get("examples"), data.get("match") is not None, problem) if "examples" in data else ()
    )
    known_issues = data.get("known_issues", ())
    if known_issues and not trusted_patterns:  # checked unless a cache hit: those bytes passed it before
        from offloaddoctor.catalog.known_issues import load_known_issues

        load_known_issues(known_issues, problem, vocabulary.is_known_key)
    elif "known_issues" in data and not known_issues:
        problem("known_issues", "must be a non-empty list of mappings")

    if len(problems) > before or fix is None:  # (a missing fix is one of the problems)
        return None
    assert isinstance(signature_id, str) and isinstance(priority, int)
    assert isinstance(confirm, list) and isinstance(references, list)
    # A team's catalogue is as untrusted as a log (a repository's .offloaddoctor.yaml can point at one): every
    # string that is shown goes through the log text's escaping here, once, for every renderer.
    return Signature(
        id=signature_id,
        title=safe_text(data["title"]),
        severity=data["severity"],
        priority=priority,
        symptom=safe_lines(data["symptom"].strip()),
        cause=safe_lines(data["cause"].strip()),
        match=match,
        shares_match_of=shares,
        when=when,
        config=config,
        preflight=bool(data.get("preflight", False)),
        confirm=tuple(safe_lines(c.strip()) for c in confirm),
        fix=fix,
        references=tuple({safe_text(k): safe_text(v) for k, v in r.items()} for r in references),
        examples=examples,
        path=where,
        known_issue_entries=tuple(known_issues),
    )


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _load_match(
    raw: Any, problem, vocabulary: Vocabulary, trusted_patterns: bool
) -> tuple[MatchSpec | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        problem("match", "must be a mapping")
        return None, None
    if "same_as" in raw:
        if set(raw) != {"same_as"} or not isinstance(raw["same_as"], str):
            problem("match.same_as", "must be a signature id and stand alone")
        return None, raw.get("same_as")
    unknown = sorted(set(raw) - {"literals", "patterns", "facts"})
    if unknown:
        problem("match", f"unknown field(s) {', '.join(unknown)}")
    literals = raw.get("literals")
    if not isinstance(literals, list) or not literals or not all(_nonempty_str(x) for x in literals):
        problem("match.literals", "must be a non-empty list of strings (the prefilter: a line must contain one)")
        literals = []
    patterns = raw.get("patterns")
    if not isinstance(patterns, list) or not patterns or not all(_nonempty_str(p) for p in patterns):
        problem("match.patterns", "must be a non-empty list of regular expressions")
        patterns = []
    elif not trusted_patterns:
        _check_patterns(patterns, problem)
    facts = raw.get("facts")
    if facts is not None and facts not in vocabulary.fact_parsers:
        problem("match.facts", f"unknown fact parser {facts!r} (known: {', '.join(vocabulary.fact_parsers)})")
    return MatchSpec(tuple(literals), tuple(patterns), facts), None


def _check_patterns(patterns: list[str], problem) -> None:
    import regex

    from offloaddoctor.catalog.regex_safety import catastrophic

    for index, pattern in enumerate(patterns):
        danger = catastrophic(pattern)
        if danger:
            problem(f"match.patterns[{index}]", f"refused, {danger}; quantify a group only if its body cannot repeat")
            continue
        try:
            regex.compile(pattern)
        except regex.error as exc:
            problem(f"match.patterns[{index}]", f"does not compile: {exc}")


def _load_predicate(data: dict, name: str, problem):
    if data.get(name) is None:
        return None
    try:
        return parse_predicate(data[name], name)
    except PredicateError as exc:
        problem(name, str(exc))
        return None


def _load_fix(raw: Any, problem, is_known_key: Callable[[str], bool]) -> Fix | None:
    if not isinstance(raw, dict) or not _nonempty_str(raw.get("summary")):
        problem("fix", "must be a mapping with a non-empty `summary`")
        return None
    unknown = sorted(set(raw) - {"summary", "overrides", "tried", "instead"})
    if unknown:
        problem("fix", f"unknown field(s) {', '.join(unknown)}")
    lines = {}
    for name, what in (("overrides", "override lines"), ("tried", "sentences, one a run of this fix")):
        lines[name] = raw.get(name, [])
        if not isinstance(lines[name], list) or not all(_nonempty_str(o) for o in lines[name]):
            problem(f"fix.{name}", f"must be a list of {what}")
            lines[name] = []
    return Fix(
        safe_lines(raw["summary"].strip()),
        tuple(safe_text(o.strip()) for o in lines["overrides"]),
        tuple(safe_text(t.strip()) for t in lines["tried"]),
        _load_fix_instead(raw.get("instead", []), problem, is_known_key),
    )


def _load_fix_instead(raw: Any, problem, is_known_key: Callable[[str], bool]) -> tuple[FixInstead, ...]:
    """`fix.instead`: lines that replace the fix's where a condition on the run's config holds."""
    if not isinstance(raw, list):
        problem("fix.instead", "must be a list of mappings with `when`, `note` and `overrides`")
        return ()
    out = []
    for index, entry in enumerate(raw):
        where = f"fix.instead[{index}]"
        if (
            not isinstance(entry, dict)
            or set(entry) - {"when", "note", "overrides"}
            or "when" not in entry
            or not _nonempty_str(entry.get("note"))
        ):
            problem(where, "must be a mapping with `when`, a non-empty `note` and `overrides`")
            continue
        when = _load_predicate(entry, "when", lambda _name, why, where=where: problem(f"{where}.when", why))
        overrides = entry.get("overrides", [])
        if not isinstance(overrides, list) or not all(_nonempty_str(o) for o in overrides):
            problem(f"{where}.overrides", "must be a list of override lines")
            continue
        unknown_keys = [key for key in names_in(when, "key") if not is_known_key(key)]
        for key in unknown_keys:
            problem(f"{where}.when", f"unknown config key {key!r} (see config/keys.py)")
        if when is not None and not unknown_keys:
            note = safe_lines(entry["note"].strip())
            out.append(FixInstead(when, note, tuple(safe_text(o.strip()) for o in overrides)))
    return tuple(out)


def _load_examples(raw: Any, has_match: bool, problem) -> tuple[Example, ...]:
    if not isinstance(raw, list) or not raw:
        problem("examples", "must be a non-empty list")
        return ()
    examples = []
    for index, item in enumerate(raw):
        where = f"examples[{index}]"
        if not isinstance(item, dict):
            problem(where, "must be a mapping")
            continue
        unknown = sorted(set(item) - {"name", "expect", "log", "config", "verdict"})
        if unknown:
            problem(where, f"unknown field(s) {', '.join(unknown)}")
        if item.get("expect") not in ("match", "no_match"):
            problem(f"{where}.expect", "must be match or no_match")
        log = item.get("log", "")
        if not isinstance(log, str) or (has_match and not log.strip()):
            problem(f"{where}.log", "must be a log excerpt (string)")
            log = ""
        config = item.get("config") or {}
        if not isinstance(config, dict):
            problem(f"{where}.config", "must be a mapping of config keys to values")
            config = {}
        verdict = item.get("verdict")
        if verdict is not None and verdict not in ("confirmed", "contradicted", "unknown"):
            problem(f"{where}.verdict", "must be confirmed, contradicted or unknown")
        examples.append(Example(item.get("expect", ""), log, config, verdict, safe_text(item.get("name", ""))))
    expectations = {e.expect for e in examples}
    if not {"match", "no_match"} <= expectations:
        problem("examples", "need at least one `match` and one `no_match` example")
    return tuple(examples)


def _check_shared_matchers(signatures: list[Signature], problems: list[CatalogProblem]) -> None:
    by_id = {s.id: s for s in signatures}
    for signature in signatures:
        if signature.shares_match_of is None:
            continue
        base = by_id.get(signature.shares_match_of)
        if base is None or base.match is None:
            reason = f"{signature.shares_match_of!r} is not a signature with its own `match`"
            problems.append(CatalogProblem(signature.path, "match.same_as", reason))
        elif signature.when is None:
            reason = "a signature sharing another's match needs `when` to tell them apart"
            problems.append(CatalogProblem(signature.path, "when", reason))
