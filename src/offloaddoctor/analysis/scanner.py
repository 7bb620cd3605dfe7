"""One streaming pass over the logs: candidate lines only, constant memory in the log's size.

A line is looked at only if it contains one of the literals the catalogue and the config/metric readers
care about (one compiled alternation over the raw line); everything else costs a single C-level search.
Lines inside an arguments block or a traceback bypass the gate, as their content is not known ahead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from offloaddoctor.analysis.facts import FACT_PARSERS, captured_facts
from offloaddoctor.analysis.failure_lines import (
    FAILURE_LINE_LITERALS, FAILURE_LINE_PATTERN, is_frame_header, raising_statement,
)
from offloaddoctor.analysis.iterations import LITERAL as ITERATION_LITERAL
from offloaddoctor.analysis.iterations import IterationRecord, parse_iteration_speed
from offloaddoctor.catalog.model import Catalog, MatchSpec
from offloaddoctor.config.from_log import LITERALS as CONFIG_LITERALS
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.logs.candidates import CandidateReader
from offloaddoctor.logs.normalize import normalize_line
from offloaddoctor.logs.sources import LogSource, VanishedLog
from offloaddoctor.metrics.parameter_lines import LITERAL as PARAMETERS_LITERAL
from offloaddoctor.metrics.parameter_lines import ParameterCounts, read_parameter_line

MAX_EVIDENCE = 5
# A pattern that still backtracks badly (the loader refuses the known shapes) gives up on that line.
SEARCH_TIMEOUT_S = 0.25
# ... and after this many give-ups it is switched off for the rest of the scan: each costs the full limit.
MAX_TIMEOUTS_PER_SIGNATURE = 3
# A team's (user) patterns share one budget of give-up time per scan: 20 bad ones must not cost 20 × 0.75 s.
# Once it is spent, a user pattern is switched off at its first give-up, after at most USER_SEARCH_FLOOR_S.
USER_PATTERN_BUDGET_S = 1.0
USER_SEARCH_FLOOR_S = 0.02
MAX_ITERATION_RECORDS = 1024  # evenly thinned: plenty for a median, and a long log parses a few thousand lines, not 100k
_ITERATION_BYTES = ITERATION_LITERAL.encode()
TRACEBACK = "Traceback (most recent call last)"
_TRACEBACK_MAX_LINES = 400
# What _ERROR_LINE needs, spelled as long as it allows (short literals slow the grep prefilter down).
_ERROR_LITERALS = ("Error:", "Exception:", "ERROR", "error:", "Killed", "Segmentation fault", "exit code", "exited with code",
                   *FAILURE_LINE_LITERALS)
# NCCL's `Last error:` only introduces the line after it, which is the one to show.
_ERROR_LINE = lazy_compile(
    r"\b[\w.]*(?:Error|Exception)\b:|\bERROR\b|(?<!Last )\berror:|\bKilled\b|Segmentation fault|exit(?:ed with)? code [1-9]|"
    + FAILURE_LINE_PATTERN
)
_EXCEPTION_LINE = lazy_compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Timeout)(?::|$)")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# Launchers wrap the real failure; it is never the line to show.
WRAPPER_EXCEPTIONS = ("ChildFailedError", "SystemExit", "KeyboardInterrupt")


@dataclass(frozen=True)
class Evidence:
    path: str
    line: int | None
    rank: int | None
    text: str


@dataclass
class Aggregate:
    """Every hit of one matcher with identical parsed facts: one entry per failure, however many ranks."""

    matcher_id: str
    facts: dict
    first_seen: int
    evidence: list[Evidence] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)  # every file the failure appeared in
    count: int = 0


@dataclass(frozen=True)
class Matcher:
    id: str
    spec: MatchSpec
    user: bool = False  # from a signature directory of the user's, not the built-in catalogue

    def match(self, text: str, timeout: float = SEARCH_TIMEOUT_S) -> dict | None:
        if not any(literal in text for literal in self.spec.literals):
            return None
        for pattern in self.spec.patterns:
            found = pattern.search(text, timeout=timeout)
            if found:
                facts = captured_facts(found.groupdict())
                if self.spec.facts:
                    facts.update(FACT_PARSERS[self.spec.facts](text, facts))
                return facts
        return None


@dataclass
class ScanResult:
    aggregates: list[Aggregate] = field(default_factory=list)
    exceptions: list[Evidence] = field(default_factory=list)  # last line of each traceback, bounded
    last_error_line: Evidence | None = None
    iterations: dict[tuple[str, int], list[IterationRecord]] = field(default_factory=dict)
    collectors: list[LogConfigCollector] = field(default_factory=list)
    lines_read: dict[str, int] = field(default_factory=dict)
    ranks_seen: set[int] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    parameters: ParameterCounts = field(default_factory=ParameterCounts)


def build_matchers(catalog: Catalog) -> list[Matcher]:
    from pathlib import Path

    from offloaddoctor.catalog.loader import builtin_signature_dir

    builtin = builtin_signature_dir().resolve()
    return [Matcher(s.id, s.match, user=Path(s.path).resolve().parent != builtin)
            for s in catalog.signatures if s.match is not None]


class Scanner:
    def __init__(self, matchers: list[Matcher], on_bytes=None):
        self.matchers = matchers
        self.on_bytes = on_bytes  # progress callback, bytes read
        literals = {lit for m in matchers for lit in m.spec.literals}
        literals |= set(CONFIG_LITERALS) | set(_ERROR_LITERALS) | {TRACEBACK, ITERATION_LITERAL, PARAMETERS_LITERAL}
        self.literals = literals
        # Checked only on lines the reader hands over (already candidates, or inside a block); a plain
        # `in` per literal is as fast there as a compiled alternation, which costs ms to build at start-up.
        self._gate_literals = tuple(sorted(literals))
        self.result = ScanResult()
        self._aggregates: dict[tuple, Aggregate] = {}
        self._sequence = 0
        self._iteration_sampling: dict[tuple[str, int], list[int]] = {}  # (path, segment) -> [seen, stride]
        self._timeouts: dict[str, int] = {}
        self._user_budget = USER_PATTERN_BUDGET_S
        self._traceback_indent: dict[int | None, int] = {}
        self._raising_frame: dict[int | None, Evidence] = {}  # rank -> last `raise`/`assert` frame line

    def scan(self, sources: Iterable[LogSource]) -> ScanResult:
        for source in sources:
            self._scan_source(source)
        self.result.aggregates = sorted(self._aggregates.values(), key=lambda a: a.first_seen)
        return self.result

    def merge(self, results: Iterable[ScanResult]) -> ScanResult:
        """Combine per-source results (scanned in parallel) as if the sources had been scanned in order."""
        for partial in results:
            for aggregate in partial.aggregates:
                self._absorb(aggregate)
            merged = self.result
            merged.exceptions = (merged.exceptions + partial.exceptions)[-64:]
            merged.last_error_line = partial.last_error_line or merged.last_error_line
            merged.iterations.update(partial.iterations)
            merged.collectors.extend(partial.collectors)
            merged.lines_read.update(partial.lines_read)
            merged.ranks_seen |= partial.ranks_seen
            merged.warnings.extend(partial.warnings)
            merged.parameters.per_model_parallel_rank.update(partial.parameters.per_model_parallel_rank)
            merged.parameters.billions.update(partial.parameters.billions)
        self.result.aggregates = sorted(self._aggregates.values(), key=lambda a: a.first_seen)
        return self.result

    def _absorb(self, other: Aggregate) -> None:
        key = (other.matcher_id, tuple(sorted((k, repr(v)) for k, v in other.facts.items())))
        aggregate = self._aggregates.get(key)
        if aggregate is None:
            self._sequence += 1
            aggregate = self._aggregates[key] = Aggregate(other.matcher_id, other.facts, self._sequence)
        aggregate.count += other.count
        aggregate.ranks |= other.ranks
        aggregate.paths |= other.paths
        for evidence in other.evidence:
            if len(aggregate.evidence) < MAX_EVIDENCE and (
                evidence.rank not in {e.rank for e in aggregate.evidence} or evidence.rank is None
            ):
                aggregate.evidence.append(evidence)

    def scan_lines(self, name: str, lines: Iterable[str]) -> ScanResult:
        """Scan in-memory text (signature examples, tests) through the same path as files."""
        self._scan_numbered(name, None, enumerate(lines, start=1))
        self.result.aggregates = sorted(self._aggregates.values(), key=lambda a: a.first_seen)
        return self.result

    def _scan_source(self, source: LogSource) -> None:
        reader = CandidateReader(source, self.literals, self.result.warnings, on_bytes=self.on_bytes)
        try:
            self._scan_numbered(source.name, source.rank_from_name, reader, reader)
        except VanishedLog as gone:
            self.result.warnings.append(str(gone))
        self.result.lines_read[source.name] = reader.lines_read

    def _scan_numbered(self, path: str, default_rank: int | None, numbered, reader: CandidateReader | None = None) -> None:
        """`numbered` yields (line number, text); a CandidateReader skips lines that cannot matter unless
        told (`every_line`) that an arguments block or a traceback is open."""
        collector = LogConfigCollector(path)
        self.result.collectors.append(collector)
        awaiting: dict[int | None, int] = {}  # rank -> line of its open "Traceback" header
        gate = self._gate
        sampled_out = self._sampled_out
        if reader is not None:  # the reader drops sampled-out iteration lines before decoding them
            reader.skip = lambda raw: _ITERATION_BYTES in raw and sampled_out(path, collector)
        line_number = 0
        for line_number, raw in numbered:
            if reader is None and ITERATION_LITERAL in raw and not (awaiting or collector.in_arguments) and sampled_out(path, collector):
                continue
            if awaiting or collector.in_arguments or gate(raw):
                self._scan_line(path, line_number, raw, default_rank, collector, awaiting)
            if awaiting:
                for rank, opened in list(awaiting.items()):
                    if line_number - opened > _TRACEBACK_MAX_LINES:
                        self._close_cut_traceback(rank)
                        del awaiting[rank]  # a traceback that never ended (interleaved or cut output)
            if reader is not None:
                reader.every_line = bool(awaiting or collector.in_arguments)
        collector.finish()
        for rank in awaiting:
            self._close_cut_traceback(rank)
        self._raising_frame.clear()
        self.result.lines_read[path] = line_number

    def _gate(self, raw: str) -> bool:
        return any(literal in raw for literal in self._gate_literals)

    def _scan_line(self, path: str, line_number: int, raw: str, default_rank: int | None,
                   collector: LogConfigCollector, awaiting: dict) -> None:
        text, rank = normalize_line(raw, default_rank)
        if rank is not None:
            self.result.ranks_seen.add(rank)
        if collector.feed(text, line_number):
            return
        if awaiting:
            if rank in awaiting and self._traceback_line(path, line_number, rank, text, awaiting):
                return
            if not self._gate(raw):
                return
        if TRACEBACK in text:
            awaiting[rank] = line_number
            # torchrun's root-cause block indents the whole traceback: `  traceback : Traceback (most …`
            self._traceback_indent[rank] = len(text) - len(text.lstrip())
            self._raising_frame.pop(rank, None)
            return
        if ITERATION_LITERAL in text:
            self._iteration(path, line_number, rank, collector.segment, text)
            return
        if PARAMETERS_LITERAL in text and read_parameter_line(text, self.result.parameters):
            return
        self._match(path, line_number, rank, text)

    def _traceback_line(self, path: str, line: int, rank: int | None, text: str, awaiting: dict) -> bool:
        """True while the line is a frame of the open traceback; records the exception line that ends it."""
        if line - awaiting[rank] > _TRACEBACK_MAX_LINES:
            self._close_cut_traceback(rank)
            del awaiting[rank]
            return False
        indent = self._traceback_indent.get(rank, 0)
        body = text[indent:] if indent and text[:indent].isspace() else text
        if not text.strip() or body[:1].isspace() or body.startswith(_CHAINED) or TRACEBACK in text:
            statement = raising_statement(body)
            if statement is not None:
                self._raising_frame[rank] = Evidence(path, line, rank, statement)
            elif is_frame_header(body):
                self._raising_frame.pop(rank, None)
            return True
        if _EXCEPTION_LINE.match(body):
            del awaiting[rank]
            self._raising_frame.pop(rank, None)
            self._remember_exception(Evidence(path, line, rank, body.strip()))
            self._match(path, line, rank, body)
            return True
        return False

    def _close_cut_traceback(self, rank: int | None) -> None:
        """A pasted traceback that stops at its last frame: the `raise`/`assert` there is the failure."""
        frame = self._raising_frame.pop(rank, None)
        if frame is not None:
            self._remember_exception(frame)

    def _remember_exception(self, evidence: Evidence) -> None:
        exceptions = self.result.exceptions
        exceptions.append(evidence)
        if len(exceptions) > 64:
            del exceptions[:32]

    def _sampled_out(self, path: str, collector: LogConfigCollector) -> bool:
        """Past MAX_ITERATION_RECORDS lines, parse only every `stride`-th iteration line of a segment: the
        records are thinned to an even sample anyway, so the median is the same and long logs stay cheap."""
        key = (path, len(collector.segment_starts) - 1)  # (path, segment), without the property: hot path
        state = self._iteration_sampling.get(key)
        if state is None:
            state = self._iteration_sampling[key] = [0, 1]
        seen = state[0]
        state[0] = seen + 1
        return seen % state[1] != 0

    def _iteration(self, path: str, line: int, rank: int | None, segment: int, text: str) -> None:
        parsed = parse_iteration_speed(text)
        if parsed is None:
            return
        iteration, fields = parsed
        records = self.result.iterations.setdefault((path, segment), [])
        records.append(IterationRecord(path, line, rank, segment, iteration, fields, text.strip()))
        if len(records) > MAX_ITERATION_RECORDS:
            del records[1::2]  # keep the first and an even thinning of the rest
            self._iteration_sampling.setdefault((path, segment), [0, 1])[1] *= 2

    def _match(self, path: str, line: int, rank: int | None, text: str) -> None:
        matched = False
        for matcher in self.matchers:
            timeout = max(USER_SEARCH_FLOOR_S, min(SEARCH_TIMEOUT_S, self._user_budget)) if matcher.user else SEARCH_TIMEOUT_S
            try:
                facts = matcher.match(text, timeout)
            except TimeoutError:
                if matcher.user:
                    self._user_budget -= timeout
                self._timed_out(matcher, path, line, timeout)
                continue
            if facts is None:
                continue
            matched = True
            self._record(matcher.id, facts, Evidence(path, line, rank, text.strip()))
        if not matched and _ERROR_LINE.search(text):
            self.result.last_error_line = Evidence(path, line, rank, text.strip())

    def _timed_out(self, matcher: Matcher, path: str, line: int, timeout: float) -> None:
        count = self._timeouts[matcher.id] = self._timeouts.get(matcher.id, 0) + 1
        note = f"{path}:{line}: signature {matcher.id}: pattern search gave up after {timeout:g} s on this line"
        if count >= MAX_TIMEOUTS_PER_SIGNATURE or (matcher.user and self._user_budget <= 0):
            # a new list: the loop in _match keeps iterating the old one
            self.matchers = [m for m in self.matchers if m is not matcher]
            note += f"; switched off for the rest of the scan after {count} such lines (run `offloaddoctor signatures lint`)"
        self.result.warnings.append(note)

    def _record(self, matcher_id: str, facts: dict, evidence: Evidence) -> None:
        key = (matcher_id, tuple(sorted((k, repr(v)) for k, v in facts.items())))
        aggregate = self._aggregates.get(key)
        if aggregate is None:
            self._sequence += 1
            aggregate = self._aggregates[key] = Aggregate(matcher_id, facts, self._sequence)
        aggregate.count += 1
        aggregate.paths.add(evidence.path)
        if evidence.rank is not None:
            aggregate.ranks.add(evidence.rank)
        if len(aggregate.evidence) < MAX_EVIDENCE and (
            evidence.rank not in {e.rank for e in aggregate.evidence} or evidence.rank is None
        ):
            aggregate.evidence.append(evidence)
