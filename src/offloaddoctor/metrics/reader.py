"""The metrics reader: one handler set over the shared line pass (logs/line_pass.py), keeping only the
parsed records. Lines are read and normalised exactly as diagnose reads them; a line is parsed only if it
holds one of the handlers' literals (or sits in an arguments block). Memory grows with the number of
iteration and memory-report lines, never with the size of the log.
"""

from __future__ import annotations

from collections.abc import Iterable

from offloaddoctor.config.from_log import LogConfigCollector, config_handlers
from offloaddoctor.logs.line_pass import Line, LineHandler, LinePass, keep_all, pass_literals
from offloaddoctor.logs.sources import LogSource
from offloaddoctor.metrics import layout, memory_lines, parameter_lines
from offloaddoctor.metrics.iteration_lines import LITERAL as ITERATION_LITERAL
from offloaddoctor.metrics.iteration_lines import NEMO_LITERAL
from offloaddoctor.metrics.iteration_lines import parse_iteration_metrics
from offloaddoctor.metrics.model import RunMetrics


class MetricLines(LineHandler):
    """Iteration lines (all of them), memory reports, the theoretical-memory line, parameter counts and
    the layout line of one log, into `reader.run`."""

    literals = (
        ITERATION_LITERAL,
        NEMO_LITERAL,
        memory_lines.LITERAL,
        memory_lines.THEORETICAL_LITERAL,
        parameter_lines.LITERAL,
        layout.LITERAL,
    )
    _ITERATION_BYTES = ITERATION_LITERAL.encode()

    def __init__(self, reader: RunReader, collector: LogConfigCollector, shared: bool = False):
        self.run = reader.run
        self.layout_line = reader.layout_line
        self.collector = collector
        if shared:  # another handler set samples iteration lines: this one needs every one of them
            self.sample = (self._ITERATION_BYTES, keep_all)

    def feed(self, line: Line) -> bool:
        run, text = self.run, line.text
        segment = self.collector.segment
        if ITERATION_LITERAL in text or NEMO_LITERAL in text:
            record = parse_iteration_metrics(text, line.path, line.number, line.rank, segment)
            if record is not None:
                run.iterations.append(record)
                report = memory_lines.nemo_step_memory(record)
                if report is not None:
                    run.memory.append(report)
                return True
        if memory_lines.LITERAL in text:
            report = memory_lines.parse_memory_report(text, line.path, line.number, line.rank, segment)
            if report is not None:
                run.memory.append(report)
                return True
        if memory_lines.THEORETICAL_LITERAL in text:
            theoretical = memory_lines.parse_theoretical_memory(text)
            if theoretical:
                run.theoretical_memory_mb = theoretical
            return True
        if parameter_lines.LITERAL in text and parameter_lines.read_parameter_line(text, run.parameters):
            return True
        if layout.LITERAL in text:
            self.layout_line.update(layout.parse_layout_line(text))
        return False


class RunReader:
    """Feed it the sources of one run; `run` holds the records, `collectors` the config each source printed."""

    def __init__(self, path: str):
        self.run = RunMetrics(path)
        self.collectors: list[LogConfigCollector] = []
        self.layout_line: dict[str, int] = {}
        self.line_pass = LinePass(pass_literals(self.handlers_for(LogConfigCollector(path))), self.run.notes)

    def handlers_for(self, collector: LogConfigCollector, shared: bool = False) -> list[LineHandler]:
        return [*config_handlers(collector), MetricLines(self, collector, shared)]

    def start_source(self, name: str, shared: bool = False) -> list[LineHandler]:
        """The handler set for the next source (`shared`: in a pass with another set); call `source_read`
        with the source's line count once it is read."""
        collector = LogConfigCollector(name, warnings=self.run.notes)
        self.collectors.append(collector)
        return self.handlers_for(collector, shared)

    def source_read(self, name: str, lines: int) -> None:
        self.run.sources.append((name, lines))

    @classmethod
    def read(cls, name: str, sources: Iterable[LogSource]) -> RunReader:
        """A reader named `name` that has read `sources`, in order."""
        reader = cls(name)
        for source in sources:
            reader.read_source(source)
        return reader

    def read_source(self, source: LogSource) -> None:
        self.source_read(source.name, self.line_pass.read_source(source, self.start_source(source.name)))

    def read_lines(self, name: str, lines: Iterable[str], default_rank: int | None = None) -> None:
        """In-memory text, read exactly as a file would be."""
        handlers = self.start_source(name)
        self.source_read(name, self.line_pass.read_lines(name, lines, handlers, default_rank=default_rank))
