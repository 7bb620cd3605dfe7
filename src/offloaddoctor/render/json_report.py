"""`--format json`: the versioned, documented schema (docs/json-output.md)."""

from __future__ import annotations

import json

from itertools import islice
from json.encoder import encode_basestring as string  # the ensure_ascii=False form

from offloaddoctor.text_safety import inert_json

from offloaddoctor import __version__
from offloaddoctor.report import Finding, Report, SourceSummary
from offloaddoctor.scanning import format_ranks  # each loads its own module: `check` never loads the scanner

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from collections.abc import Callable, Iterator
    from typing import Any

SCHEMA_VERSION = 1


def report_to_dict(report: Report) -> dict[str, Any]:
    return _document(report, list(_source_entries(report)))


def _source_entries(report: Report) -> Iterator[dict[str, Any]]:
    found_in = _found_in(report)
    for s in report.sources:
        yield {"path": s.path, "lines": s.lines, "findings": found_in.get(s.path, [])}


def _found_in(report: Report) -> dict[str, list[str]]:
    """path -> the ids of the findings in it: one NCCL timeout can be in all 20,000 rank logs."""
    found_in: dict[str, list[str]] = {}
    for finding in report.findings:
        for path in finding.files:
            found_in.setdefault(path, []).append(finding.id)
    return found_in


def _document(report: Report, sources: list[dict[str, Any]]) -> dict[str, Any]:
    run_of = {id(f): index for index, run in enumerate(report.runs, start=1) for f in run.findings}
    document = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "offloaddoctor", "version": __version__},
        "sources": sources,
        "findings": [
            {**finding_to_dict(f), **({"run": run_of[id(f)]} if id(f) in run_of else {})} for f in report.findings
        ],
        **_run_fields(report),
        "project_file": report.project_file,
    }
    if report.runs:  # the logs hold several runs: each one's own view (docs/json-output.md)
        document["runs"] = [_run_entry(index, run) for index, run in enumerate(report.runs, start=1)]
    return document


def _run_fields(report: Report) -> dict[str, Any]:
    """What the document says of the run, and each run's entry of its own run (`runs`)."""
    suppressed = [
        {
            "id": key,
            "reason": reason,
            "by": report.suppressed_by.get(key, "--ignore"),
            "occurrences": report.suppressed_occurrences.get(key, 0),
        }
        for key, reason in report.suppressed.items()
    ]
    return {
        "fix_dialect": report.fix_dialect,
        "unmatched": report.unmatched._asdict() if report.unmatched else None,
        "run": dict(report.run_facts),
        "notes": list(report.notes),
        "suppressed": suppressed,
    }


def _run_entry(index: int, report: Report) -> dict[str, Any]:
    run = report.run
    return {
        "index": index,
        "paths": list(run.paths) if run else [s.path for s in report.sources],
        "differs_in": list(run.differs_in) if run else [],
        "prints_config": run.placed if run else True,
        "findings": [f.id for f in report.findings],
        **_run_fields(report),
    }


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    signature = finding.signature
    entry = {
        "id": finding.id,
        "severity": signature.severity,
        "title": signature.title,
        "priority": signature.priority,
        "trigger": finding.trigger,
        "symptom": signature.symptom,
        "cause": signature.cause,
        "evidence": [e._asdict() for e in finding.evidence],
        "occurrences": finding.occurrences,
        "ranks": finding.ranks,
        "ranks_compact": format_ranks(finding.ranks),
        "files": list(finding.files),
        "facts": finding.facts,
        "config": {
            "verdict": finding.config.verdict,
            "explanation": finding.config.explanation,
            "values": [
                {
                    "key": v.key,
                    "known": v.known,
                    "value": v.value,
                    "source": v.source,
                    "overridden": list(v.overridden),
                }
                for v in finding.config.values
            ],
        },
        "confirm": list(signature.confirm),
        "fix": {
            "summary": signature.fix.summary,
            "overrides": list(finding.overrides),
            **({"note": finding.fix_note} if finding.fix_note else {}),
            "sentences": finding.fix_sentences,
            "changes": [[key, value] for key, value in finding.changes],
        },
        "references": [dict(r) for r in signature.references],
    }
    if finding.known_issues:  # only when there is one: most findings never have any
        entry["known_issues"] = [
            {
                "id": k.issue.id,
                "title": k.issue.title,
                "link": k.issue.link,
                "package": k.issue.package,
                "versions": list(k.issue.versions),
                "fixed_by": k.issue.fixed_by,
                "matched_by": (["config"] if k.by_config else []) + ([f"version {k.version}"] if k.version else []),
            }
            for k in finding.known_issues
        ]
    return entry


def render_json(report: Report) -> str:
    return "".join(json_parts(report))


def json_parts(report: Report) -> Iterator[str]:
    """`render_json`'s text in parts, for writing without one more copy of it all (200,000 rank logs). The
    sources, one entry per log, are encoded a batch at a time into the place of an empty list: a dict for each of
    200,000 rank logs at once was ~60 MB; a finding's long list of files is written a batch at a time too
    (_indented_parts). The text is the same as encoding them in place; `inert_json` is applied per part, which
    is the same (it rewrites single characters and `##[`, and no part ends inside a `##[`: each ends at a `[`,
    `}` or `]` of the document's structure, at the separators between them, or after a newline)."""
    pieces = _indented_parts(_document(report, []))
    head = next(pieces)  # the text up to the first list set aside: the empty sources list is in it
    empty = '\n  "sources": [],\n'
    at = head.index(empty) + len(empty) - 4  # the empty list's `[`
    yield inert_json(head[:at])
    yield from _source_list(report)  # made as written: one batch of entries in memory at a time
    yield from _cut_at_newlines(head[at + 2 :])
    for piece in pieces:
        yield from _cut_at_newlines(piece)
    yield "\n"


def _cut_at_newlines(text: str) -> Iterator[str]:
    """`text` made inert in parts cut after a newline, which no `##[` spans: no copy of it all at once."""
    start = 0
    while start < len(text):
        stop = text.find("\n", start + TAIL_PART_CHARS)
        stop = len(text) if stop == -1 else stop + 1
        yield inert_json(text[start:stop])
        start = stop


def _source_list(report: Report) -> Iterator[str]:
    """The sources' list as `json.dumps(…, indent=2, ensure_ascii=False)` writes it at the document's second
    level, in parts (made inert), a batch of entries at a time. Written out, not encoded: an entry is a
    path, a count and finding ids, and json's indenting encoder is pure Python (1.3 s for 200,000 entries;
    its C encoder does not indent). Strings go through json's own string encoder, so escaping is json's."""
    found_in = _found_in(report)
    written: dict[tuple[str, ...], str] = {}  # finding ids -> their list as written: most sources share one

    def findings(path: str) -> str:
        ids = tuple(found_in.get(path, ()))
        text = written.get(ids)
        if text is None:
            text = written[ids] = "".join(_scalar_list(list(ids), "      "))
        return text

    def entry(source: SourceSummary) -> str:
        return (
            f'    {{\n      "path": {string(source.path)},\n      "lines": {int(source.lines)!r},\n'
            f'      "findings": {findings(source.path)}\n    }}'
        )

    return map(inert_json, _written_list(map(entry, report.sources), "  "))


JOIN_CHUNKS = 1 << 16
TAIL_PART_CHARS = 1 << 20
JOIN_ITEMS = 4096


# A list of this many strings or ints (a finding's files and ranks: every rank log) is written out instead of
# encoded: json's indenting encoder is pure Python, ~3 µs an item.
SPLICE_MIN_ITEMS = 64


def _indented_parts(document: dict[str, Any]) -> Iterator[str]:
    """`json.dumps(document, indent=2, ensure_ascii=False, default=str)` in parts: the encoded document joined a
    batch of chunks at a time (json.dumps holds every chunk at once: ~15 small strings per source, 200,000 rank
    logs made it ~180 MB), and each long list of strings, set aside behind a placeholder while encoding, written
    out in its place a batch at a time. The first part is the text before the first such list (or all of it)."""
    aside: dict[str, list[str] | list[int]] = {}
    chunks = json.JSONEncoder(ensure_ascii=False, indent=2, default=str).iterencode(_set_aside(document, aside))
    del document  # the generator holds it until it is done: then it goes before the final join
    pieces = []
    while True:
        batch = list(islice(chunks, JOIN_CHUNKS))
        pieces.append("".join(batch))
        if len(batch) < JOIN_CHUNKS:
            del batch, chunks
            break
    text = "".join(pieces)
    del pieces
    start = 0
    for placeholder, items in aside.items():  # in the order the encoder wrote them
        encoded = string(placeholder)
        at = text.index(encoded, start)
        line = text[text.rfind("\n", 0, at) + 1 : at]
        indent = " " * (len(line) - len(line.lstrip(" ")))
        yield text[start:at]
        yield from _scalar_list(items, indent)
        start = at + len(encoded)
    yield text[start:]


def _scalar_list(items: list[str] | list[int], indent: str) -> Iterator[str]:
    """A list of strings (or of ints) as json.dumps(indent=2, ensure_ascii=False) writes it on a line indented
    by `indent`, a batch of items a part."""
    encode: Callable[[Any], str] = string if items and type(items[0]) is str else int.__repr__
    return _written_list((indent + "  " + encode(item) for item in items), indent)


def _written_list(items: Iterator[str], indent: str) -> Iterator[str]:
    """A list whose items are already written (each on its own lines, indented), as json.dumps(indent=2) lays
    it out on a line indented by `indent`: `[]` when empty, else a batch of JOIN_ITEMS items a part."""
    opening = "[\n"
    while batch := list(islice(items, JOIN_ITEMS)):
        yield opening + ",\n".join(batch)
        opening = ",\n"
    yield "[]" if opening == "[\n" else "\n" + indent + "]"


def _set_aside(value: Any, aside: dict[str, list[str] | list[int]]) -> Any:
    """The document with each long list of strings (or of ints) replaced by a placeholder string (a copy: the caller's
    document is not changed). A placeholder holds a random token: the text cannot hold it by chance."""
    if isinstance(value, dict):
        return {key: _set_aside(item, aside) for key, item in value.items()}
    if isinstance(value, list):
        kind = type(value[0]) if value else None
        if len(value) >= SPLICE_MIN_ITEMS and kind in (str, int) and all(type(item) is kind for item in value):
            import secrets

            placeholder = f"\x00offloaddoctor-list-{len(aside)}-{secrets.token_hex(8)}"
            aside[placeholder] = value
            return placeholder
        return [_set_aside(item, aside) for item in value]
    return value
