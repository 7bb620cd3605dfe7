"""One pass over a log's lines, shared by every reader of a log: `diagnose`'s scanner, the metrics reader,
the config collection. Each reader is a set of `LineHandler`s; the pass reads the source once
(logs/candidates.py: only lines holding a handler's literal, unless a handler asks for every line),
normalises each line it delivers (logs/normalize.py) and offers it to the handlers in order until one
says it consumed it.

A new kind of line (a start-up summary, another OOM wording) is one more handler: its `literals` make the
lines it needs candidates, its `feed` reads them. Nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from offloaddoctor.logs.normalize import normalize_line
from offloaddoctor.logs.sources import LogSource, VanishedLog


@dataclass(slots=True, eq=False)
class Line:
    """One delivered line. `candidate`: it holds one of the pass's literals (a line delivered only because
    a handler asked for every line has it False)."""

    path: str
    number: int
    rank: int | None
    text: str
    raw: str
    found: bool | None  # None: delivered because a handler wants every line, `gate` not tested yet
    gate: tuple[str, ...] = ()

    @property
    def candidate(self) -> bool:
        # Tested only when a handler asks (an open traceback's tracker): most lines delivered whole are
        # config, and testing each against every literal was a fifth of the test suite's CPU.
        if self.found is None:
            self.found = any(literal in self.raw for literal in self.gate)
        return self.found


class LineHandler:
    """A reader of some kind of line. Subclasses set `literals` and override what they need."""

    # A line holding none of these (as raw text, before normalising) is not offered to the handler set
    # unless some handler wants every line; a literal must be rare in healthy logs (docs/performance.md).
    literals: tuple[str, ...] = ()
    # Optional: (literal bytes, keep) for a handler that reads an even sample of the lines holding the literal.
    # keep(m) answers for the next m such lines at once: the index of the next one it keeps (counting up to
    # it), or None (counting all m); `keep_all` for a handler that needs every one (beside a sampler). Asked
    # only while no handler wants every line. A line one handler drops and another keeps reaches only the latter.
    sample: tuple[bytes, Callable[[int], int | None]] | None = None

    def feed(self, line: Line) -> bool:
        """Read the line; True when it is consumed (the handlers after this one do not see it)."""
        return False

    def wants_every_line(self, number: int) -> bool:
        """Asked after each delivered line: True while an open block (arguments, traceback) needs every
        following line, candidate or not. Only handlers that override it are asked."""
        return False

    def finish(self) -> None:
        """The source ended: close what is still open (a block cut short counts for what it held), and forget
        the source: the same handler set may read another one next (Scanner.scan, 20,000 rank logs)."""


def keep_all(m: int) -> int:
    return 0


def pass_literals(handlers: Iterable[LineHandler]) -> set[str]:
    return {literal for handler in handlers for literal in handler.literals if literal}


class LinePass:
    """Runs one handler set over sources. `literals` is computed once per pass, not per source."""

    def __init__(
        self,
        literals: Iterable[str],
        warnings: list[str],
        on_bytes: Callable[[int], None] | None = None,
        skipped: set[str] | None = None,
    ):
        self.literals = frozenset(literals)
        self._gate_literals = tuple(sorted(self.literals))
        self.warnings = warnings
        self.skipped = skipped if skipped is not None else set()  # sources gone or not text: noted, not read
        self.on_bytes = on_bytes
        self._plan: _Plan | None = None  # of the last handler sets run: the same ones again reuse it
        self._wanted: tuple[bytes, ...] | None = None  # the literals' byte strings for the reader, once a file is read

    def read_source(self, source: LogSource, *handler_sets: Sequence[LineHandler]) -> int:
        """Lines in the source (0 when a listed log vanished, which is noted in `warnings`). Each handler set
        sees every delivered line on its own: what one set consumes, the next set still gets."""
        from offloaddoctor.logs import candidates  # not for in-memory text (start-up time)

        plan = self._plan_for(handler_sets)
        if self._wanted is None:
            self._wanted = candidates.prefilter_literals(self.literals)
        wants = candidates.Wants(self._wanted, plan.skip, plan.sample)
        reader = candidates.CandidateReader(source, wants, self.warnings, on_bytes=self.on_bytes)
        try:
            self.run(source.name, source.rank_from_name, reader, handler_sets, reader, plan)
        except VanishedLog as gone:
            self.warnings.append(str(gone))
            self.skipped.add(source.name)
            return 0
        return reader.lines_read

    def read_lines(
        self, name: str, lines: Iterable[str], *handler_sets: Sequence[LineHandler], default_rank: int | None = None
    ) -> int:
        """In-memory text (signature examples, tests, `diagnose_text`) through the same path as files."""
        return self.run(name, default_rank, enumerate(lines, start=1), handler_sets)

    def _plan_for(self, handler_sets: Sequence[Sequence[LineHandler]]) -> _Plan:
        plan = self._plan
        if plan is None or not plan.runs(handler_sets):
            plan = self._plan = _Plan(handler_sets, self._gate_literals)
        return plan

    def run(
        self,
        path: str,
        default_rank: int | None,
        numbered,
        handler_sets: Sequence[Sequence[LineHandler]],
        reader=None,
        plan: _Plan | None = None,
    ) -> int:
        """`numbered` yields (line number, raw text); a CandidateReader (`reader`) yields only candidate
        lines unless its `wants.every_line` says a handler wants them all. Returns the last line number."""
        plan = plan or self._plan_for(handler_sets)
        finishes, watchers, skip, gate_literals = plan.finishes, plan.watchers, plan.skip, plan.gate_literals
        declined, feed_sets = plan.declined, plan.feed_sets
        declined[0] = None
        wants = reader.wants if reader is not None else None
        every = False
        number = 0
        for number, raw in numbered:
            # A line the reader found by a literal holds one (its bytes did, and decoding keeps valid UTF-8):
            # only lines read for a block, or cut (the literal may have been in the cut part), are tested again.
            found: bool | None = None
            if not every:
                if (reader is None or number == reader.last_cut) and not any(
                    literal in raw for literal in gate_literals
                ):
                    continue
                if reader is None and skip is not None and skip(number, raw.encode("utf-8", "surrogateescape")):
                    continue
                found = True
            text, rank = normalize_line(raw, default_rank, reader is not None and reader.no_controls)
            line = Line(path, number, rank, text, raw, found, gate_literals)
            if declined[0] != number:
                for feeds in feed_sets:
                    for feed in feeds:
                        if feed(line):
                            break
            else:
                stop = declined[1]
                for handlers in handler_sets:
                    for handler in handlers:
                        if handler in stop or handler.feed(line):  # a handler that declined it: as if consumed
                            break
            if watchers:
                every = False
                for wants_every_line in watchers:
                    if wants_every_line(number):
                        every = True  # every watcher is still asked: the question may expire state
                if wants is not None:
                    wants.every_line = every
        for finish in finishes:
            finish()
        return number


class _Plan:
    """What a run derives from its handler sets (who watches for blocks, who skips, which literal to test
    first): made once for a handler set that reads source after source."""

    def __init__(self, handler_sets: Sequence[Sequence[LineHandler]], gate_literals: tuple[str, ...]):
        self.handler_sets = tuple(tuple(handlers) for handlers in handler_sets)
        self.every_handler = [h for handlers in handler_sets for h in handlers]
        # (LineHandler's own finish does nothing: not called for each of 20,000 rank logs)
        self.finishes = [h.finish for h in self.every_handler if type(h).finish is not LineHandler.finish]
        # Bound once, not looked up for each line and handler.
        self.feed_sets = tuple(tuple(h.feed for h in handlers) for handlers in self.handler_sets)
        self.watchers = [
            h.wants_every_line
            for h in self.every_handler
            if type(h).wants_every_line is not LineHandler.wants_every_line
        ]
        self.declined: list = [None, ()]  # a line delivered although some handlers declined it: [number, handlers]
        samplers = [h for h in self.every_handler if h.sample is not None]
        self.skip = _combined_skip([(h, _skip_of(*h.sample)) for h in samplers], self.declined)  # type: ignore[misc]
        self.sample = samplers[0].sample if len(samplers) == 1 else None
        self.gate_literals = gate_literals
        if self.sample is not None and self.sample[1] is not keep_all:  # the common candidates: tested first
            first = self.sample[0].decode("utf-8", "surrogateescape")
            self.gate_literals = (first, *(g for g in gate_literals if g != first))

    def runs(self, handler_sets: Sequence[Sequence[LineHandler]]) -> bool:
        """Whether these are the very handler sets the plan was made for (the same objects, in order)."""
        # identity: handlers equal by value may hold other state. (Plain loops: asked for each of 20,000 rank logs.)
        if len(self.handler_sets) != len(handler_sets):
            return False
        for mine, theirs in zip(self.handler_sets, handler_sets):
            if len(mine) != len(theirs):
                return False
            for planned, given in zip(mine, theirs):
                if planned is not given:
                    return False
        return True


def _skip_of(literal: bytes, keep: Callable[[int], int | None]) -> Callable[[int, bytes], bool | None]:
    """A sampler's question for one line: None (no opinion) unless it holds the literal. A line holding it
    twice (two ranks' output run together) counts twice, as a reader counting occurrences in bulk counts it."""

    def skip(number: int, raw: bytes) -> bool | None:
        # find, not `in`: bytes' `in` first tries its operand as an int, and the TypeError it raises and
        # clears costs ~2.5k instructions a test.
        if raw.find(literal) < 0:
            return None
        times = raw.count(literal)
        kept = keep(times)
        if kept is not None and kept < times - 1:
            keep(times - kept - 1)  # counted: the line is kept once
        return kept is None

    return skip


def _combined_skip(skips: list, declined: list) -> Callable | None:
    """One skip question for the reader. With several handlers asked, a line one declines and another
    needs is delivered, and `declined` remembers who declined it (they do not see it)."""
    if not skips:
        return None
    if len(skips) == 1:
        return skips[0][1]  # None (no opinion) is falsy: the line stays

    def skip(number, raw) -> bool:
        answers = [(handler, ask(number, raw)) for handler, ask in skips]
        no = [handler for handler, answer in answers if answer is True]
        if not no:
            return False
        if any(answer is False for _, answer in answers):
            declined[0], declined[1] = number, no
            return False
        return True

    return skip
