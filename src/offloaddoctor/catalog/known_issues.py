"""Known upstream bugs a signature can point at: which versions, where it is tracked, the config shape
that reveals it. The engine shows one when its config shape holds or the log names an affected version."""

from __future__ import annotations

from typing import NamedTuple

from offloaddoctor.catalog.predicates import Predicate, PredicateError, names_in, parse_predicate

# Packages whose version a log can show (pip list / pip freeze lines), by the config key holding it.
VERSION_KEYS = {
    "megatron-bridge": "runtime.megatron_bridge_version",
    "megatron-core": "runtime.megatron_core_version",
}
_FIELDS = {"id", "title", "link", "package", "versions", "fixed_by", "when", "workaround"}
_OPTIONAL = {"fixed_by", "workaround"}


class KnownIssue(NamedTuple):
    id: str
    title: str
    link: str
    package: str
    versions: tuple[str, ...]  # affected releases, as the package prints them
    fixed_by: str
    when: Predicate  # the config shape that reveals it
    workaround: str = ""  # the fix where the config shape holds: the signature's own fix is for another cause


def build_known_issues(entries) -> tuple[KnownIssue, ...]:
    """Entries that passed load_known_issues (at load time, or before the catalogue was cached)."""
    problems: list[str] = []
    issues = load_known_issues(list(entries), lambda field, reason: problems.append(f"{field}: {reason}"))
    if problems:
        raise ValueError("; ".join(problems))
    return issues


def load_known_issues(raw, problem, is_known_key=None) -> tuple[KnownIssue, ...]:
    """`is_known_key`: the loader's Vocabulary check for config keys (None: entries already validated)."""
    if not isinstance(raw, list) or not raw:
        problem("known_issues", "must be a non-empty list of mappings")
        return ()
    issues = []
    for index, entry in enumerate(raw):
        where = f"known_issues[{index}]"
        if not isinstance(entry, dict):
            problem(where, "must be a mapping")
            continue
        missing = sorted(_FIELDS - set(entry) - _OPTIONAL)
        unknown = sorted(set(entry) - _FIELDS)
        for name in missing:
            problem(f"{where}.{name}", "required field is missing")
        for name in unknown:
            problem(f"{where}.{name}", "unknown field")
        texts = {name: entry.get(name, "") for name in ("id", "title", "link", "package", "fixed_by", "workaround")}
        for name, value in texts.items():
            if name in entry and (not isinstance(value, str) or not value.strip()):
                problem(f"{where}.{name}", "must be a non-empty string")
        if entry.get("package") not in VERSION_KEYS and "package" in entry:
            problem(f"{where}.package", f"must be one of {', '.join(VERSION_KEYS)}")
        versions = entry.get("versions")
        if "versions" in entry and (
            not isinstance(versions, list) or not versions or not all(isinstance(v, str) for v in versions)
        ):
            problem(f"{where}.versions", "must be a non-empty list of version strings (quoted)")
        when = None
        if "when" in entry:
            try:
                when = parse_predicate(entry["when"], f"{where}.when")
            except PredicateError as exc:
                problem(f"{where}.when", str(exc))
            else:
                for key in names_in(when, "key") if is_known_key is not None else ():
                    if not is_known_key(key):
                        problem(f"{where}.when", f"unknown config key {key!r} (see config/keys.py)")
        if missing or unknown or when is None or not isinstance(versions, list):
            continue
        issues.append(
            KnownIssue(
                texts["id"],
                texts["title"],
                texts["link"],
                texts["package"],
                tuple(versions),
                texts["fixed_by"],
                when,
                " ".join(texts["workaround"].split()),
            )
        )
    return tuple(issues)
