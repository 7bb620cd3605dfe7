"""One pass over a log's lines, shared by every reader of a log: `diagnose`'s scanner, the metrics reader,
the config collection. Each reader is a set of `LineHandler`s; the pass reads the source once
(logs/candidates.py: only lines holding a handler's literal, unless a handler asks for every line),
normalises each line it delivers (logs/normalize.py) and offers it to the handlers in order until one
says it consumed it.

A new kind of line (a start-up summary, another OOM wording) is one more handler: its `literals` make the
lines it needs candidates, its `feed` reads them. Nothing else changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from offloaddoctor.logs.normalize import normalize_line
from offloaddoctor.logs.sources import LogSource, VanishedLog


# Past this many sources in one pass (rank logs by the thousand) the literals' finder is taken: ~18 µs saved a
# small file, for ~9 ms of compiling once a process (literal_trie is cached: a worker's later runs of files
# get it for nothing).
FINDER_AFTER_SOURCES = 256


class Line:
    """One delivered line. `candidate`: it holds one of the pass's literals (a line delivered only because
    a handler asked for every line has it False)."""

    __slots__ = ("candidate", "number", "path", "rank", "raw", "text")

    def __init__(self, path: str, number: int, rank: int | None, text: str, raw: str, candidate: bool):
        self.path, self.number, self.rank, self.text, self.raw, self.candidate = (
            path,
            number,
            rank,
            text,
            raw,
            candidate,
        )


class LineHandler:
    """A reader of some kind of line. Subclasses set `literals` and override what they need."""

    # A line holding none of these (as raw text, before normalising) is not offered to the handler set
    # unless some handler wants every line; a literal must be rare in healthy logs (docs/performance.md).
    literals: tuple[str, ...] = ()
    # Optional: `skip(number, raw_bytes) -> bool | None`, asked before a candidate line is decoded while no
    # handler wants every line (the bytes hold the line, maybe behind a reader's own prefix: test for a
    # literal, nothing more). True: this handler will not use the line; False: it needs it; None: no
    # opinion. The line is dropped when one handler says True and none says False.
    skip: Callable[[int, bytes], bool | None] | None = None
    # Optional, with `skip`: (literal bytes, keep) for a handler that reads an even sample of the lines holding
    # the literal. keep(m) answers for the next m such lines at once, as `skip` would one by one: the index of
    # the next one it keeps (counting up to it), or None (counting all m). A reader thins runs of them in bulk.
    sampled: tuple[bytes, Callable[[int], int | None]] | None = None

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
        self._gates: dict[bytes, tuple[str, ...]] = {}  # the gate with a sampled literal first, by that literal
        self.warnings = warnings
        self.skipped = skipped if skipped is not None else set()  # sources gone or not text: noted, not read
        self.on_bytes = on_bytes
        self._reader_literals: list[bytes] | None = None  # _prefiltered()
        self._sources = 0
        # logs/literal_trie.py's pattern of them, once enough sources pay for compiling it.
        self._finder: re.Pattern[bytes] | None = None
        self._plan: _Plan | None = None  # of the last handler sets run: the same ones again reuse it

    def _gate_first(self, literal: bytes) -> tuple[str, ...]:
        gate = self._gates.get(literal)
        if gate is None:
            first = literal.decode("utf-8", "surrogateescape")
            rest = tuple(g for g in self._gate_literals if g != first)
            gate = self._gates[literal] = (
                (first, *rest) if len(rest) < len(self._gate_literals) else self._gate_literals
            )
        return gate

    def read_source(self, source: LogSource, *handler_sets: Sequence[LineHandler]) -> int:
        """Lines in the source (0 when a listed log vanished, which is noted in `warnings`). Each handler set
        sees every delivered line on its own: what one set consumes, the next set still gets."""
        from offloaddoctor.logs.candidates import CandidateReader

        self._sources += 1
        if self._sources == FINDER_AFTER_SOURCES and self._finder is None:
            self._take_finder()
        reader = CandidateReader(
            source, (), self.warnings, on_bytes=self.on_bytes, prefiltered=self._prefiltered(), finder=self._finder
        )
        try:
            self.run(source.name, source.rank_from_name, reader, handler_sets, reader)
        except VanishedLog as gone:
            self.warnings.append(str(gone))
            self.skipped.add(source.name)
            return 0
        return reader.lines_read

    def expect_sources(self, count: int) -> None:
        """`count` sources are coming (a worker's run of rank logs): as many as pay for the finder take it at
        once, not after their first FINDER_AFTER_SOURCES (each of those tests every literal: ~180k
        instructions a rank log more; a pool's every run of files starts a pass)."""
        if count >= FINDER_AFTER_SOURCES and self._finder is None:
            self._take_finder()

    def _take_finder(self) -> None:
        from offloaddoctor.logs.literal_trie import literal_trie

        self._finder = literal_trie(tuple(self._prefiltered()))

    def _prefiltered(self) -> list[bytes]:
        """The literals as the reader searches for them (prefilter_literals), worked out on first use."""
        if self._reader_literals is None:
            from offloaddoctor.logs.candidates import prefilter_literals

            self._reader_literals = prefilter_literals(self.literals)
        return self._reader_literals

    def read_lines(
        self, name: str, lines: Iterable[str], *handler_sets: Sequence[LineHandler], default_rank: int | None = None
    ) -> int:
        """In-memory text (signature examples, tests, `diagnose_text`) through the same path as files."""
        return self.run(name, default_rank, enumerate(lines, start=1), handler_sets)

    def run(
        self, path: str, default_rank: int | None, numbered, handler_sets: Sequence[Sequence[LineHandler]], reader=None
    ) -> int:
        """`numbered` yields (line number, raw text); a CandidateReader (`reader`) yields only candidate
        lines unless told (`every_line`) that a handler wants them all. Returns the last line number."""
        plan = self._plan
        if plan is None or not plan.runs(handler_sets):
            plan = self._plan = _Plan(handler_sets, self._gate_literals, self._gate_first)
        every_handler, watchers, skip, sampled, gate_literals = (
            plan.every_handler,
            plan.watchers,
            plan.skip,
            plan.sampled,
            plan.gate_literals,
        )
        declined = plan.declined
        declined[0] = None
        if reader is not None:
            reader.skip = skip
            reader.sampled = sampled
        every = False
        number = 0
        exact = reader.exact_candidate if reader is not None else None
        for number, raw in numbered:
            # A line the reader found by a literal holds one (its bytes did, and decoding keeps valid UTF-8):
            # only lines read for a block, or cut, are tested again.
            candidate = (not every and exact is not None and exact(number)) or any(
                literal in raw for literal in gate_literals
            )
            if not every:
                if not candidate:
                    continue
                if reader is None and skip is not None and skip(number, raw.encode("utf-8", "surrogateescape")):
                    continue
            text, rank = normalize_line(raw, default_rank, reader is not None and reader.no_controls)
            line = Line(path, number, rank, text, raw, candidate)
            stop = declined[1] if declined[0] == number else ()
            for handlers in handler_sets:
                for handler in handlers:
                    if handler in stop or handler.feed(line):  # a handler that declined it: as if consumed
                        break
            if watchers:
                every = False
                for watcher in watchers:
                    if watcher.wants_every_line(number):
                        every = True  # every watcher is still asked: the question may expire state
                if reader is not None:
                    reader.every_line = every
        for handler in every_handler:
            handler.finish()
        return number


class _Plan:
    """What a run derives from its handler sets (who watches for blocks, who skips, which literal to test
    first): made once for a handler set that reads source after source."""

    def __init__(self, handler_sets: Sequence[Sequence[LineHandler]], gate_literals: tuple[str, ...], gate_first):
        self.handler_sets = tuple(tuple(handlers) for handlers in handler_sets)
        self.every_handler = [h for handlers in handler_sets for h in handlers]
        self.watchers = [h for h in self.every_handler if type(h).wants_every_line is not LineHandler.wants_every_line]
        self.declined: list = [None, ()]  # a line delivered although some handlers declined it: [number, handlers]
        skippers = [h for h in self.every_handler if h.skip is not None]
        self.skip = _combined_skip([(h, h.skip) for h in skippers], self.declined)
        self.sampled = skippers[0].sampled if len(skippers) == 1 else None
        # The sampled literal's lines are the common candidates: test it first.
        self.gate_literals = gate_first(self.sampled[0]) if self.sampled is not None else gate_literals

    def runs(self, handler_sets: Sequence[Sequence[LineHandler]]) -> bool:
        """Whether these are the very handler sets the plan was made for (the same objects, in order)."""
        if len(self.handler_sets) != len(handler_sets):
            return False
        for mine, theirs in zip(self.handler_sets, handler_sets):
            if len(mine) != len(theirs):
                return False
            for planned, given in zip(mine, theirs):
                if planned is not given:  # identity: handlers equal by value may hold other state
                    return False
        return True


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
