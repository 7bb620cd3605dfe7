"""One streaming pass over a run's logs, keeping only the parsed records.

Lines are read through logs/sources.py and normalised by logs/normalize.py exactly as diagnose reads them.
A line is parsed only if it contains one of a few literals (one compiled alternation over the raw line);
lines inside an arguments block bypass that gate. Memory grows with the number of iteration and memory-report
lines, never with the size of the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from offloaddoctor.analysis.iterations import LITERAL as ITERATION_LITERAL
from offloaddoctor.config.from_log import LITERALS as CONFIG_LITERALS
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.logs.normalize import normalize_line
from offloaddoctor.logs.candidates import CandidateReader
from offloaddoctor.logs.sources import LogSource, VanishedLog
from offloaddoctor.metrics import layout, memory_lines, parameter_lines
from offloaddoctor.metrics.iteration_lines import parse_iteration_metrics
from offloaddoctor.metrics.model import RunMetrics

_LITERALS = (
    ITERATION_LITERAL,
    memory_lines.LITERAL,
    memory_lines.THEORETICAL_LITERAL,
    parameter_lines.LITERAL,
    layout.LITERAL,
    *CONFIG_LITERALS,
)
_GATE = re.compile("|".join(re.escape(lit) for lit in sorted(set(_LITERALS), key=len, reverse=True)))


class RunReader:
    """Feed it the sources of one run; `run` holds the records, `collectors` the config each source printed."""

    def __init__(self, path: str):
        self.run = RunMetrics(path)
        self.collectors: list[LogConfigCollector] = []
        self.layout_line: dict[str, int] = {}

    def read_source(self, source: LogSource) -> None:
        # The reader diagnose uses: candidate lines found a block (or a grep pass) at a time.
        reader = CandidateReader(source, _LITERALS, self.run.notes)
        try:
            self.read_lines(source.name, reader, source.rank_from_name, reader)
        except VanishedLog as gone:
            self.run.notes.append(str(gone))
            self.run.sources.append((source.name, 0))
            return
        self.run.sources[-1] = (source.name, reader.lines_read)

    def read_lines(
        self, name: str, numbered: Iterable[tuple[int, str]], default_rank: int | None = None,
        reader: CandidateReader | None = None,
    ) -> None:
        collector = LogConfigCollector(name)
        self.collectors.append(collector)
        gate = _GATE.search
        line_number = 0
        for line_number, raw in numbered:
            if collector.in_arguments or gate(raw):
                self._read_line(name, line_number, raw, default_rank, collector)
            if reader is not None:
                reader.every_line = collector.in_arguments  # an arguments block is read line by line
        collector.finish()
        self.run.sources.append((name, line_number))

    def _read_line(self, name: str, line_number: int, raw: str, default_rank: int | None,
                   collector: LogConfigCollector) -> None:
        run = self.run
        text, rank = normalize_line(raw, default_rank)
        if collector.feed(text, line_number):
            return
        segment = collector.segment
        if ITERATION_LITERAL in text:
            record = parse_iteration_metrics(text, name, line_number, rank, segment)
            if record is not None:
                run.iterations.append(record)
                return
        if memory_lines.LITERAL in text:
            report = memory_lines.parse_memory_report(text, name, line_number, rank, segment)
            if report is not None:
                run.memory.append(report)
                return
        if memory_lines.THEORETICAL_LITERAL in text:
            theoretical = memory_lines.parse_theoretical_memory(text)
            if theoretical:
                run.theoretical_memory_mb = theoretical
            return
        if parameter_lines.LITERAL in text and parameter_lines.read_parameter_line(text, run.parameters):
            return
        if layout.LITERAL in text:
            self.layout_line.update(layout.parse_layout_line(text))
