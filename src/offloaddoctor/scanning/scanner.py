"""`diagnose`'s reading of the logs: one handler set over the shared line pass (logs/line_pass.py).

The handlers, in the order a line meets them: the ranks seen, the config the log prints (config/from_log.py),
open tracebacks (`TracebackTracker`), a sample of the iteration lines (`IterationSampler`), parameter counts,
and last the catalogue's matchers (`FailureMatcher`), which aggregate hits and remember the last error line.
Lines inside an arguments block or a traceback reach the handlers whatever they hold; every other line only
if it holds one of the handlers' literals.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple
from time import perf_counter

from offloaddoctor.scanning.evidence import MAX_EVIDENCE, Aggregate, Aggregates, Evidence
from offloaddoctor.scanning.fact_parsers import FACT_PARSERS, captured_facts
from offloaddoctor.scanning.oom import before_the_first_step, raised_in, without_the_warnings_of_a_start_up_oom
from offloaddoctor.scanning.scan_result import ScanResult
from offloaddoctor.scanning.failure_lines import (
    FAILURE_LINE_LITERALS,
    FAILURE_LINE_PATTERN,
    FORWARD_BACKWARD_FUNCTIONS,
    MODEL_BUILD_FUNCTIONS,
    OPTIMIZER_BUILD_FUNCTIONS,
    START_UP_FUNCTIONS,
    DYNAMO_USER_CODE,
    SOURCE_LINE_LITERALS,
    exception_line_raised_by,
    frame_function,
    indented_raising_statement,
    is_frame_header,
    runs_a_path,
    is_pasted_frame_header,
    message_follows,
    names_only_its_class,
    passes_megatron,
    raised_by,
    raising_statement,
    training_code,
    FROZEN_MODEL_FRAMES,
)
from offloaddoctor.catalog.model import Catalog, MatchSpec
from offloaddoctor.config.from_log import LogConfigCollector, config_handlers
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.logs.line_pass import Line, LineHandler, LinePass, pass_literals
from offloaddoctor.logs.normalize import rank_in_message
from offloaddoctor.logs.sources import LogSource
from offloaddoctor.metrics.iteration_lines import LITERAL as ITERATION_LITERAL
from offloaddoctor.metrics.iteration_lines import NEMO_LITERAL
from offloaddoctor.metrics.iteration_lines import IterationMetrics, has_steady_state, iteration_found, speed_record
from offloaddoctor.metrics.parameter_lines import BUCKET_LITERAL
from offloaddoctor.metrics.parameter_lines import LITERAL as PARAMETERS_LITERAL
from offloaddoctor.metrics.parameter_lines import ParameterCounts, read_parameter_line

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Literal

__all__ = ["MAX_EVIDENCE", "Aggregate", "Evidence", "Matcher", "ScanResult", "Scanner", "build_matchers"]

# A pattern that still backtracks badly (the loader refuses the known shapes) gives up on that line.
SEARCH_TIMEOUT_S = 0.25
# ... and after this many give-ups it is switched off for the rest of the scan: each costs the full limit.
MAX_TIMEOUTS_PER_SIGNATURE = 3
# A team's (user) patterns share one budget of give-up time per scan: 20 bad ones must not cost 20 × 0.75 s.
# Once it is spent, a user pattern is switched off at its first give-up, after at most USER_SEARCH_FLOOR_S.
USER_PATTERN_BUDGET_S = 1.0
USER_SEARCH_FLOOR_S = 0.02
# Every search of a user pattern counts against that budget, not only those that give up: `(.*,){20}X` takes
# 0.1 s a line without ever giving up (230 s for 1.3 MB). Once the budget is spent, a user signature whose own
# searches ran slower than this is switched off; a linear pattern searches tens of MB a second.
USER_SEARCH_MIN_CHARS_PER_S = 1_000_000
# ... by more than this: a loaded machine (other jobs on both cores) slowed a linear pattern's searches of short
# lines to 0.6 MB/s for a moment (0.07 s); a backtracking one spends this in two or three lines.
USER_SLOW_SLACK_S = SEARCH_TIMEOUT_S
# Iteration records kept, evenly thinned: plenty for a median, and a long log parses a few thousand lines, not 100k.
MAX_ITERATION_RECORDS = 1024
# The catalogue's literals a line holds are remembered by the line's shape (FailureMatcher._present) for this
# many shapes of lines up to this long.
SHAPES_KEPT = 1024
SHAPE_MAX_CHARS = 1024
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
TRACEBACK = "Traceback (most recent call last)"
_TRACEBACK_MAX_LINES = 400
# The lines after an exception line that its message may hold (NCCL's: the error, `Last error:`, what failed).
_MESSAGE_LINES = 3
# the functions an OOM's traceback is read for (a build, the start-up, a step's forward/backward), the first one it
# passed (scanning/oom.py raised_in)
_WHERE_RAISED = MODEL_BUILD_FUNCTIONS | OPTIMIZER_BUILD_FUNCTIONS | START_UP_FUNCTIONS | FORWARD_BACKWARD_FUNCTIONS
# What _ERROR_LINE needs, spelled as long as it allows (short literals slow the grep prefilter down).
_ERROR_LITERALS = (
    "Error:",
    "Exception:",
    "ERROR",
    "error:",
    "Killed",
    "Segmentation fault",
    "exit code",
    "exited with code",
    *FAILURE_LINE_LITERALS,
)
_NCCL_LAST_ERROR = "Last error:"
# NCCL's `Last error:` only introduces the line after it, which is the one to show. `Error::` is C++'s scope, not
# an error: a c10 stack frame (`frame #0: c10::Error::Error(c10::SourceLocation, …)`) is no failure line.
_ERROR_LINE = lazy_compile(
    r"\b[\w.]*(?:Error|Exception)\b:(?!:)|\bERROR\b|(?<!Last )\berror:|\bKilled\b|Segmentation fault|exit(?:ed with)? code [1-9]|"
    + FAILURE_LINE_PATTERN
)
# c10's own log lines at warning or info level (`[W410 20:32:41.415038541 ProcessGroupNCCL.cpp:1771] …`): not a
# failure whatever they say (a finished run's teardown warns "Failed to check the "should dump" flag on TCPStore …
# with error: Broken pipe": fixtures/held-out/mds-healthy-exit0-tcpstore-teardown).
_C10_NOT_AN_ERROR = lazy_compile(r"\[[WI]\d{3,4} \d{2}:\d{2}:\d{2}")
# argparse's refusal (`%(prog)s: error: %(message)s`, then exit 2): the process's own failure, as an exception's line is,
# so neither an earlier attempt's traceback nor the launcher's line after it is shown for it (held-out
# megatron-deepspeed-llama-cpt-empty-num-layers-arg-startup, megatron-deepspeed-llama2tokenizer-invalid-tokenizer-type).
_ARGPARSE_ERROR = lazy_compile(
    r"^\s*[\w.-]+: error: (?:argument |unrecognized arguments: |the following arguments are required: |"
    r"one of the arguments |ambiguous option: )"
)
_EXCEPTION_LINE = lazy_compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Timeout)(?::|$)")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# Launchers wrap the real failure; it is never the line to show.
WRAPPER_EXCEPTIONS = ("ChildFailedError", "SystemExit", "KeyboardInterrupt")


class Matcher(NamedTuple):
    id: str
    spec: MatchSpec
    user: bool = False  # from a signature directory of the user's, not the built-in catalogue

    def match(self, text: str, timeout: float = SEARCH_TIMEOUT_S) -> dict | None:
        if not any(literal in text for literal in self.spec.literals):
            return None
        return self.search(text, timeout)

    def search(self, text: str, timeout: float = SEARCH_TIMEOUT_S) -> dict | None:
        """`match` for a line known to hold one of the literals."""
        for pattern in self.spec.patterns:
            found = pattern.search(text, timeout=timeout)
            if found:
                facts = captured_facts(found.groupdict())
                if self.spec.facts:
                    facts.update(FACT_PARSERS[self.spec.facts](text, facts))
                return facts
        return None


def build_matchers(catalog: Catalog) -> list[Matcher]:
    from offloaddoctor.catalog.loader import is_team_signature

    return [Matcher(s.id, s.match, user=is_team_signature(s.path)) for s in catalog.signatures if s.match is not None]


class TracebackTracker(LineHandler):
    """Open Python tracebacks, one per rank: from the `Traceback (most recent call last)` header through its
    indented frames to the exception line that ends it, which is handed to `on_exception`. While one is open
    every line is read; a line that is neither a frame nor a candidate ends there. A traceback that never
    ends (cut or interleaved output, or a paste that stops at its last frame) is given up after
    _TRACEBACK_MAX_LINES lines or at the end of the log; its last frame's `raise`/`assert` line, if any, is
    handed to `on_cut` as the failure."""

    literals = (TRACEBACK,)

    def __init__(
        self,
        on_exception,
        on_cut,
        training_code_seen: set[str] | None = None,
        reruns: list[Evidence] | None = None,
        frozen_frames: dict[str, Evidence] | None = None,
    ):
        # (Line, exception text, its raising statement or None, the model-build or start-up function it passed or
        # None) -> None
        self.on_exception = on_exception
        # whose training code the frames are in (failure_lines.training_code), shared with the scan result
        self.training_code_seen = training_code_seen if training_code_seen is not None else set()
        self.on_cut = on_cut  # (Evidence, whether the traceback passed Megatron's code) -> None
        self.reruns = reruns if reruns is not None else []  # the scan result's script_rerun, where one is found
        self.frozen_frames = frozen_frames if frozen_frames is not None else {}  # the scan result's, likewise
        self.awaiting: dict[int | None, int] = {}  # rank -> line of its open header
        self._indent: dict[int | None, int] = {}  # torchrun's root-cause block indents the whole traceback
        self._raising_frame: dict[int | None, Evidence] = {}  # rank -> last `raise`/`assert` frame line
        self._frame_header: dict[int | None, str] = {}  # rank -> the last frame header of its open traceback
        # rank -> the model-build or start-up function its open traceback passed (failure_lines.py)
        self._building: dict[int | None, str] = {}
        self._through_megatron: set[int | None] = set()  # ranks whose open traceback passed Megatron's code
        # rank -> the `<module>` frame after runpy.run_path in its open traceback (None until it comes)
        self._ran_a_path: dict[int | None, Evidence | None] = {}

    def feed(self, line: Line) -> bool:
        awaiting = self.awaiting
        if awaiting:
            if line.rank in awaiting and self._frame_or_end(line):
                return True
            if not line.candidate:
                return True
        if TRACEBACK in line.text:
            text = line.text
            awaiting[line.rank] = line.number
            # torchrun's root-cause block indents the whole traceback: `  traceback : Traceback (most …`
            self._indent[line.rank] = len(text) - len(text.lstrip())
            self._raising_frame.pop(line.rank, None)
            self._frame_header.pop(line.rank, None)
            self._building.pop(line.rank, None)
            self._ran_a_path.pop(line.rank, None)
            self._through_megatron.discard(line.rank)
            return True
        return False

    def wants_every_line(self, number: int) -> bool:
        awaiting = self.awaiting
        if awaiting:
            for rank, opened in list(awaiting.items()):
                if number - opened > _TRACEBACK_MAX_LINES:
                    self._close_cut(rank)
                    del awaiting[rank]  # a traceback that never ended (interleaved or cut output)
        return bool(awaiting)

    def finish(self) -> None:
        for rank in self.awaiting:
            self._close_cut(rank)
        self.awaiting.clear()
        self._indent.clear()
        self._raising_frame.clear()
        self._frame_header.clear()
        self._building.clear()
        self._through_megatron.clear()
        self._ran_a_path.clear()

    def _frame_or_end(self, line: Line) -> bool:
        """True while the line is a frame of the open traceback, or the exception line that ends it."""
        text, rank = line.text, line.rank
        if line.number - self.awaiting[rank] > _TRACEBACK_MAX_LINES:
            self._close_cut(rank)
            del self.awaiting[rank]
            return False
        indent = self._indent.get(rank, 0)
        body = text[indent:] if indent and text[:indent].isspace() else text
        if not text.strip() or body[:1].isspace() or body.startswith(_CHAINED) or TRACEBACK in text:
            statement = raising_statement(body)
            if statement is not None:
                self._raising_frame[rank] = Evidence(line.path, line.number, rank, statement)
            elif is_frame_header(body):
                self._raising_frame.pop(rank, None)
                self._frame_header[rank] = body
                code = training_code(body)
                if code is not None:
                    self.training_code_seen.add(code)
                through_megatron = passes_megatron(body)
                if through_megatron:
                    self._through_megatron.add(rank)
                for fact, frozen_frame in FROZEN_MODEL_FRAMES:
                    if fact not in self.frozen_frames and frozen_frame(body):
                        self.frozen_frames[fact] = Evidence(line.path, line.number, rank, body.strip())
                function = frame_function(body)
                if function == "run_path" and runs_a_path(body):
                    self._ran_a_path[rank] = None
                if rank not in self._building and function in _WHERE_RAISED:
                    self._building[rank] = function
                if rank in self._ran_a_path and not self.reruns:
                    self._script_rerun(line, rank, body, function, code is not None or through_megatron)
            return True
        if _EXCEPTION_LINE.match(body):
            del self.awaiting[rank]
            frame = self._raising_frame.pop(rank, None)
            header = self._frame_header.get(rank)
            raising = raised_by(header, frame.text) if frame is not None and names_only_its_class(body) else None
            self.on_exception(line, body, raising, self._building.pop(rank, None))
            return True
        return False

    def _script_rerun(self, line: Line, rank: int | None, body: str, function: str | None, training: bool) -> None:
        """After runpy.run_path, a script's `<module>` frame that goes on into Megatron's training code: the script
        run again in a spawned child, training and all (a missing main guard)."""
        if function == "<module>":
            self._ran_a_path[rank] = Evidence(line.path, line.number, rank, body.strip())
        elif training and (found := self._ran_a_path[rank]) is not None:
            self.reruns.append(found)

    def _close_cut(self, rank: int | None) -> None:
        """A pasted traceback that stops at its last frame: the `raise`/`assert` there is the failure."""
        frame = self._raising_frame.pop(rank, None)
        if frame is not None:
            self.on_cut(frame, rank in self._through_megatron)


class PastedExcerpt(LineHandler):
    """What users paste instead of a whole log (issue 27), outside the tracebacks TracebackTracker holds open:
    frames without their header, whose last `raise`/`assert` or last frame's statement is the failure (a lone
    indented `assert …` line is one such frame), and an exception class alone on its line, whose message
    follows on the next non-blank line: the failure shows both. Feeds nothing on: it only remembers."""

    literals = SOURCE_LINE_LITERALS
    _MESSAGE_WITHIN = 2  # lines after the class line: its message, maybe after one blank line

    def __init__(self, result: ScanResult, on_last_statement=None):
        self.result = result
        # (Evidence) -> None: at the source's end, its last statement where its frames passed Megatron's code
        self.on_last_statement = on_last_statement
        self._through_megatron = False
        self._statement_at: int | None = None  # the line after a frame header: the frame's statement
        self._class_line: tuple[int, Evidence] | None = None  # a bare exception class awaiting its message
        self._joined: Evidence | None = None  # the class and its message, kept over the message line's own reading
        self._path = ""
        self._dynamo_from: tuple[str, int] | None = None  # torch._dynamo's `from user code:` line: its frames follow

    def feed(self, line: Line) -> bool:
        text, number = line.text, line.number
        self._path = line.path
        if DYNAMO_USER_CODE in text and text.strip() == DYNAMO_USER_CODE:
            self._dynamo_from = (line.path, number)
            return False
        if self._class_line is not None and text.strip():
            at, evidence = self._class_line
            self._class_line = None
            if number - at <= self._MESSAGE_WITHIN:
                self._joined = Evidence(evidence.path, evidence.line, evidence.rank, f"{evidence.text} {text.strip()}")
        if self._statement_at == number:
            self._statement_at = None
            if text[:1].isspace() and text.strip() and not is_pasted_frame_header(text):
                if not self._in_dynamo_context(line):
                    self.result.last_source_line = Evidence(line.path, number, line.rank, text.strip())
                return False
        if '", line ' in text and is_pasted_frame_header(text):
            self._statement_at = number + 1
            code = training_code(text)
            if code is not None:
                self.result.training_code.add(code)
            self._through_megatron = self._through_megatron or passes_megatron(text)
            return False
        statement = indented_raising_statement(text)
        if statement is not None and not self._in_dynamo_context(line):
            self.result.last_source_line = Evidence(line.path, number, line.rank, statement)
        return False

    def _in_dynamo_context(self, line: Line) -> bool:
        """Under torch._dynamo's `from user code:` in this log, and no error line read since: its frames follow."""
        if self._dynamo_from is None or self._dynamo_from[0] != line.path:
            return False
        last = self.result.last_error_line
        if last is not None and last.path == line.path and (last.line or 0) > self._dynamo_from[1]:
            self._dynamo_from = None
            return False
        return True

    def wants_every_line(self, number: int) -> bool:
        """Asked once every handler read line `number`: the failure matcher has judged it by now."""
        result = self.result
        if self._joined is not None:
            joined, self._joined = self._joined, None
            for index, exception in enumerate(result.exceptions[-1:], len(result.exceptions) - 1):
                if (exception.path, exception.line) == (joined.path, joined.line):
                    result.exceptions[index] = joined
            last = result.last_error_line
            if last is not None and last.path == joined.path and (last.line or 0) in (joined.line, number):
                result.last_error_line = joined
        last = result.last_error_line
        candidates = (last, result.exceptions[-1] if result.exceptions else None)
        for evidence in candidates:
            if evidence is not None and (evidence.path, evidence.line) == (self._path, number):
                if message_follows(evidence.text):
                    self._class_line = (number, evidence)
                break
        if self._class_line is not None and number - self._class_line[0] > self._MESSAGE_WITHIN:
            self._class_line = None
        return self._statement_at is not None or self._class_line is not None

    def finish(self) -> None:
        last = self.result.last_source_line
        if (
            self._through_megatron
            and self.on_last_statement is not None
            and last is not None
            and last.path == self._path
        ):
            self.on_last_statement(last)
        self._statement_at = self._class_line = self._joined = None
        self._through_megatron = False


class IterationSampler(LineHandler):
    """An even sample of one log's iteration lines per segment. Past MAX_ITERATION_RECORDS records the
    kept ones are thinned by half and only every `stride`-th line is parsed from then on: the median is the
    same, and a long log parses a few thousand lines, not 100k. Lines read while a handler wants every line
    (inside a block) are always kept.

    A kept line is only found to be a record here (its `iteration N/ M |`): it waits in `unparsed`, under
    its (path, segment), for the Scanner to decide whether it can ever be cited (Scanner._source_done).
    Until then `records` holds that key's place, in the order records were first found."""

    literals = (ITERATION_LITERAL, NEMO_LITERAL)  # NeMo 2's step lines are few: each is read, not sampled
    _BYTES = ITERATION_LITERAL.encode()

    def __init__(
        self, records: dict, unparsed: dict, collector: LogConfigCollector, limit: int = MAX_ITERATION_RECORDS
    ):
        self.records = records  # (path, segment) -> records, shared with the scan result
        self.unparsed = unparsed  # (path, segment) -> [(iteration, its match, line number, rank)], the Scanner's
        self.collector = collector
        self.limit = limit
        self._state: dict[int, list[int]] = {}  # segment -> [lines seen, stride]
        self.sample = (self._BYTES, self._keep)

    def _keep(self, m: int) -> int | None:
        """LineHandler.sample's keep(m), on the current segment's count of lines seen and its stride."""
        state = self._state.setdefault(len(self.collector.segment_starts) - 1, [0, 1])
        seen, stride = state
        first = -seen % stride
        if first >= m:
            state[0] = seen + m
            return None
        state[0] = seen + first + 1
        return first

    def feed(self, line: Line) -> bool:
        if ITERATION_LITERAL not in line.text and NEMO_LITERAL not in line.text:
            return False
        found = iteration_found(line.text)
        if found is None:
            return True
        segment = self.collector.segment
        key = (line.path, segment)
        waiting = self.unparsed.get(key)
        if waiting is None:
            waiting = self.unparsed[key] = []
            self.records.setdefault(key, [])
        waiting.append((int(found.group(1)), found, line.number, line.rank))
        if len(waiting) > self.limit:
            del waiting[1::2]  # keep the first and an even thinning of the rest
            self._state.setdefault(segment, [0, 1])[1] *= 2
        return True

    def finish(self) -> None:
        self._state.clear()


class ParameterLines(LineHandler):
    literals = (PARAMETERS_LITERAL, BUCKET_LITERAL)

    def __init__(self, counts: ParameterCounts):
        self.counts = counts

    def feed(self, line: Line) -> bool:
        text = line.text
        return (PARAMETERS_LITERAL in text or BUCKET_LITERAL in text) and read_parameter_line(text, self.counts)


class RanksSeen(LineHandler):
    """The ranks of the lines read, and which logs share a rank (config/run_identity.py: another run)."""

    def __init__(self, result: ScanResult):
        self.ranks = result.ranks_seen
        self.result = result
        self._in_source: set[int] = set()
        self._path = ""

    def feed(self, line: Line) -> bool:
        if line.rank is not None:
            self.ranks.add(line.rank)
            self._in_source.add(line.rank)
            self._path = line.path
        return False

    def finish(self) -> None:
        if self._in_source:
            note_ranks(self.result, self._path, self._in_source)
            self._in_source = set()


# What Megatron-LM's training loop prints when it returns (training.py print_datetime): the run went past its steps;
# and what save_checkpoint prints once a checkpoint is written (checkpointing.py): the run went on to save one.
TRAINING_DONE = "[after training is done]"
CHECKPOINT_SAVED = "successfully saved checkpoint"
CHECKPOINT_LOADED = "successfully loaded checkpoint"


class MegatronStartup(LineHandler):
    """Whether the log has a line Megatron's training loop prints on its way to the first step (training.py's
    timestamps and setup lines, Megatron-LM and Megatron-Bridge): a run's log without an arguments block, iteration
    line or config is still Megatron's (Megatron-Bridge#771's NCCL OOM came right after `Training ...`). And where
    the loop ended or saved a checkpoint: an error line before either did not stop the run."""

    literals = (
        "[after megatron is initialized]",
        "[after dataloaders are built]",
        "[before the start of training step]",
        "done with setup ...",
        "Setting rerun_state_machine.current_iteration",
        "time to initialize megatron",
        TRAINING_DONE,
        CHECKPOINT_SAVED,
        CHECKPOINT_LOADED,
    )

    def __init__(self, result: ScanResult):
        self.result = result

    def feed(self, line: Line) -> bool:
        if not self.result.megatron_startup and any(literal in line.text for literal in self.literals):
            self.result.megatron_startup = True
        if TRAINING_DONE in line.text:
            self.result.training_done = (line.path, line.number)
        elif CHECKPOINT_SAVED in line.text:
            self.result.checkpoint_saved = (line.path, line.number)
        elif CHECKPOINT_LOADED in line.text:
            self.result.checkpoint_loaded = (line.path, line.number)
        return False


def note_ranks(result: ScanResult, path: str, ranks: Iterable[int]) -> None:
    owners = result.rank_logs
    for rank in ranks:
        owner = owners.setdefault(rank, path)
        if owner != path:
            result.rank_clashes.add((owner, path))


class FailureMatcher(LineHandler):
    """The catalogue's matchers over every line that reaches it; hits are aggregated by (matcher, facts).
    A line nothing matched but that reads like an error is remembered as the last error line."""

    def __init__(self, matchers: list[Matcher], result: ScanResult):
        self.matchers = matchers
        self.result = result
        self.aggregates = Aggregates()
        self.literals = tuple(sorted({lit for m in matchers for lit in m.spec.literals} | set(_ERROR_LITERALS)))
        self._timeouts: dict[str, int] = {}
        self._user_budget = USER_PATTERN_BUDGET_S
        self._user_cost: dict[str, list[float]] = {}  # user signature id -> [seconds searching, characters searched]
        self._last_matched: tuple[str, int] = ("", 0)  # (path, line) of the last line a matcher took
        # rank -> (path, line, function) of its last exception whose traceback passed a start-up or build function:
        # the lines of that exception's message after it are raised there too (NCCL's `Last error:` / `Failed to
        # CUDA calloc async 4 bytes` under a DistBackendError; held-out megatron-deepspeed-2node-nccl-init-calloc-…)
        self._raised_in: dict[int | None, tuple[str, int, str]] = {}
        # (path, line, rank) of NCCL's `Last error:`, whose next line is what failed and holds no literal of ours
        self._last_error_at: tuple[str, int, int | None] | None = None
        self._index_literals()

    def _index_literals(self) -> None:
        """Which matchers each literal can start: a line asks each literal once, not each matcher for its own
        (16 matchers hold one literal of an NCCL timeout line; 20,000 rank logs each end with one)."""
        self._matcher_literals = tuple(sorted({lit for m in self.matchers for lit in m.spec.literals}))
        by_literal: dict[str, list[int]] = {}
        for position, matcher in enumerate(self.matchers):
            for literal in set(matcher.spec.literals):
                by_literal.setdefault(literal, []).append(position)
        self._by_literal = by_literal
        self._digit_free = tuple(lit for lit in self._matcher_literals if not any(c.isdigit() for c in lit))
        self._with_digits = tuple(lit for lit in self._matcher_literals if lit not in self._digit_free)
        self._present_by_shape: dict[bytes, list[str]] = {}

    def _present(self, text: str) -> list[str]:
        """The literals the line holds. Which of the literals without a digit it holds depends only on its
        shape, the line with every digit made 0: 20,000 ranks end with the same timeout line but for their
        numbers, and testing 31 literals costs ~30k instructions, masking and looking up ~5k."""
        if len(text) > SHAPE_MAX_CHARS:
            return [literal for literal in self._matcher_literals if literal in text]
        shape = text.encode("utf-8", "surrogatepass").translate(_DIGITS_TO_ZERO)
        present = self._present_by_shape.get(shape)
        if present is None:
            if len(self._present_by_shape) >= SHAPES_KEPT:
                self._present_by_shape.clear()
            present = self._present_by_shape[shape] = [literal for literal in self._digit_free if literal in text]
        if self._with_digits:
            present = present + [literal for literal in self._with_digits if literal in text]
        return present

    def _matchers_for(self, text: str) -> list[Matcher]:
        """The matchers one of whose literals the line holds, in catalogue order."""
        present = self._present(text)
        if not present:
            return []
        by_literal = self._by_literal
        if len(present) == 1:
            positions = by_literal[present[0]]
        else:
            positions = sorted({position for literal in present for position in by_literal[literal]})
        return [self.matchers[position] for position in positions]

    def feed(self, line: Line) -> bool:
        raised = self._raised_in.get(line.rank) if self._raised_in else None
        building = (
            raised[2] if raised and raised[0] == line.path and 0 < line.number - raised[1] <= _MESSAGE_LINES else None
        )
        introduced, self._last_error_at = self._last_error_at, None
        if introduced == (line.path, line.number - 1, line.rank) and line.text.strip():
            self._what_nccl_said(line, building)
            return True
        self.match(line.path, line.number, line.rank, line.text, building)
        if line.text.rstrip().endswith(_NCCL_LAST_ERROR):
            self._last_error_at = (line.path, line.number, line.rank)
        return True

    def wants_every_line(self, number: int) -> bool:
        """The line after NCCL's `Last error:` (`Duplicate GPU detected : rank 3 and rank 0 both on CUDA device
        f000`, `Socket recv failed …`): read whatever it holds."""
        return self._last_error_at is not None and self._last_error_at[1] == number

    def _what_nccl_said(self, line: Line, building: str | None) -> None:
        """NCCL's own word on what failed: matched as any line, and where no signature takes it, the failure line to
        show (held-out megatron-lm-duplicate-gpu-nccl-invalid-usage-startup showed the `ncclInvalidUsage` line above
        it)."""
        matched_before = self._last_matched
        self.match(line.path, line.number, line.rank, line.text, building)
        if self._last_matched == matched_before and not _C10_NOT_AN_ERROR.match(line.text):
            self.result.last_error_line = Evidence(line.path, line.number, line.rank, line.text.strip())
            self.result.nccl_reason = (line.path, line.number)

    def match(
        self, path: str, number: int, rank: int | None, text: str, building: str | None = None, shown: str = ""
    ) -> None:
        """`building`: the model-build function the line's traceback passed, for an out-of-memory line's verdict;
        `shown`: the line as the log has it, where `text` is what it says (a statement's exception line)."""
        matched = False
        for matcher in self._matchers_for(text):
            if matcher.user:
                facts = self._user_search(matcher, path, number, text)
                if facts is False:
                    continue
            else:
                try:
                    facts = matcher.search(text, SEARCH_TIMEOUT_S)
                except TimeoutError:
                    self._timed_out(matcher, path, number, SEARCH_TIMEOUT_S)
                    continue
            if facts is None:
                continue
            if building is not None and matcher.spec.facts == "cuda-oom":
                facts = raised_in(facts, building)
            if rank is None:
                rank = rank_in_message(text)
            matched = True
            self._last_matched = (path, number)
            self.aggregates.get(matcher.id, facts).add(Evidence(path, number, rank, (shown or text).strip()))
        if not matched and _ERROR_LINE.search(text) and not _C10_NOT_AN_ERROR.match(text):
            self.result.last_error_line = Evidence(
                path, number, rank if rank is not None else rank_in_message(text), text.strip()
            )
            if _ARGPARSE_ERROR.match(text):
                self.result.remember_exception(self.result.last_error_line)

    def exception(self, line: Line, text: str, raising: str | None = None, building: str | None = None) -> None:
        """The exception line that ends a traceback (`text`: without the traceback's own indent); `raising`: the
        frame statement that raised it, beside a line that names only its class, shown and matched with it (a
        bare `AssertionError` is known by its `assert`); `building`: the model-build function the traceback
        passed (an out-of-memory error there is capacity), or the start-up one (no shortage of the run's):
        scanning/oom.py raised_in."""
        shown = f"{text.strip()}, raised by {raising}" if raising else text.strip()
        self.result.remember_exception(Evidence(line.path, line.number, line.rank, shown))
        if building is not None:
            self._raised_in[line.rank] = (line.path, line.number, building)
        elif self._raised_in:
            self._raised_in.pop(line.rank, None)
        self.match(line.path, line.number, line.rank, shown if raising else text, building)

    def cut_traceback(self, frame: Evidence, through_megatron: bool) -> None:
        """A traceback that stops at its raising frame: the statement is its failure (remembered as the traceback's
        exception), and where the traceback passed Megatron's code, matched as the exception line it prints."""
        self.result.remember_exception(frame)
        if through_megatron:
            self.statement_raised(frame)

    def statement_raised(self, statement: Evidence) -> None:
        """A paste's last `raise`/`assert` in Megatron's code, matched as the exception line it prints when its
        message is one plain string (failure_lines.exception_line_raised_by), unless a failure line follows it.
        Only in Megatron's code: torch's own `raise ValueError("can't optimize a non-leaf Tensor")` is a user's
        tensor in fixtures/excerpt-cut-traceback, and optimizer offloading's refusal in Megatron-LM PR 7013's quote
        (fixtures/held-out/mcore-hdo-fp32-param-nonleaf), told apart by the frames above it."""
        path, number, result = statement.path, statement.line or 0, self.result
        if self._last_matched[0] == path and self._last_matched[1] >= number:
            return  # a signature took the statement's own line (pp-cpu-offload's message), or a line after it
        later = [(e.path, e.line or 0) for e in (result.last_error_line, *result.exceptions[-1:]) if e is not None]
        if any(at_path == path and at_line > number for at_path, at_line in later):
            return
        raised = exception_line_raised_by(statement.text)
        if raised is not None:
            self.match(path, number, statement.rank, raised, shown=statement.text)

    def _user_search(self, matcher: Matcher, path: str, number: int, text: str) -> dict | Literal[False] | None:
        """A user pattern's search, timed: its time is taken from the shared budget whether it gives up or not.
        False: it gave up, or it made the user patterns overspend and is itself slow (switched off, noted)."""
        timeout = max(USER_SEARCH_FLOOR_S, min(SEARCH_TIMEOUT_S, self._user_budget))
        cost = self._user_cost.setdefault(matcher.id, [0.0, 0])
        facts: dict | None = None
        gave_up = False
        started = perf_counter()
        try:
            facts = matcher.search(text, timeout)
        except TimeoutError:
            gave_up = True
        spent = perf_counter() - started
        self._user_budget -= spent
        cost[0] += spent
        cost[1] += len(text)
        if gave_up:
            self._timed_out(matcher, path, number, timeout)
            return False
        if self._user_budget <= 0 and cost[0] > cost[1] / USER_SEARCH_MIN_CHARS_PER_S + USER_SLOW_SLACK_S:
            self._switch_off(matcher)
            self.result.warnings.append(
                f"signature {matcher.id}: its pattern searches took {cost[0]:.2f} s for {int(cost[1]):,} characters "
                "(a backtracking pattern); switched off for the rest of the scan (run `offloaddoctor signatures lint`)"
            )
            return False
        return facts

    def _switch_off(self, matcher: Matcher) -> None:
        # a new list: the loop in match keeps iterating the old one
        self.matchers = [m for m in self.matchers if m is not matcher]
        self._index_literals()

    def _timed_out(self, matcher: Matcher, path: str, number: int, timeout: float) -> None:
        count = self._timeouts[matcher.id] = self._timeouts.get(matcher.id, 0) + 1
        note = f"{path}:{number}: signature {matcher.id}: pattern search gave up after {timeout:g} s on this line"
        if count >= MAX_TIMEOUTS_PER_SIGNATURE or (matcher.user and self._user_budget <= 0):
            self._switch_off(matcher)
            note += f"; switched off for the rest of the scan after {count} such lines (run `offloaddoctor signatures lint`)"
        self.result.warnings.append(note)


class Scanner:
    def __init__(self, matchers: list[Matcher], on_bytes=None):
        self.matchers = matchers
        self.result = ScanResult()
        self.failures = FailureMatcher(matchers, self.result)
        # (path, segment) -> its sampled iteration lines not yet made records (IterationSampler)
        self._unparsed: dict[tuple[str, int], list[tuple]] = {}
        self.literals = pass_literals(self.handlers_for(LogConfigCollector("<literals>")))
        self.line_pass = LinePass(self.literals, self.result.warnings, on_bytes, self.result.skipped)
        self._uncitable: dict[int, IterationMetrics] = {}  # iteration number -> its shared stand-in record
        self._previous: tuple[str, LogConfigCollector] | None = None  # the log read before the current one
        self._stand_in_lists: dict[tuple[int, ...], list[IterationMetrics]] = {}

    def handlers_for(self, collector: LogConfigCollector) -> list[LineHandler]:
        """The handler set for one log (the collector and open blocks are per log, findings per scan)."""
        result = self.result
        return [
            RanksSeen(result),
            MegatronStartup(result),
            *config_handlers(collector),
            TracebackTracker(
                self.failures.exception,
                self.failures.cut_traceback,
                result.training_code,
                result.script_rerun,
                result.frozen_frames,
            ),
            PastedExcerpt(result, self.failures.statement_raised),
            IterationSampler(result.iterations, self._unparsed, collector),
            ParameterLines(result.parameters),
            self.failures,
        ]

    def start_source(self, path: str) -> list[LineHandler]:
        """The handler set for the next source (for a pass shared with another handler set)."""
        return self.handlers_for(self._collector_for(path))

    def _collector_for(self, path: str) -> LogConfigCollector:
        collector = LogConfigCollector(path, warnings=self.result.warnings)
        self.result.collectors.append(collector)
        return collector

    def scan(self, sources: Iterable[LogSource]) -> ScanResult:
        """One handler set reads source after source (each forgets its source when it finishes); only the
        log's collector is new each time, handed to the handlers that read into one."""
        handlers: list[LineHandler] | None = None
        with_collector: list = []
        lines_read, read_source = self.result.lines_read, self.line_pass.read_source
        for source in sources:
            name = source.name
            collector = self._collector_for(name)
            if handlers is None:
                handlers = self.handlers_for(collector)
                with_collector = [h for h in handlers if hasattr(h, "collector")]
            else:
                for handler in with_collector:
                    handler.collector = collector
            lines_read[name] = read_source(source, handlers)
            if name in self.result.skipped:
                handlers = None  # it went while being read, unfinished: the next source gets a fresh set
            self._source_done(name)
        return self.finish()

    def _source_done(self, path: str) -> None:
        """Keep memory and time bounded by the findings, not the file count (200,000 rank logs): a collector
        that collected nothing is dropped, and the iteration lines of a segment that can never be cited
        become stand-ins shared by every log, one per iteration number, without being parsed further.
        run_facts cites only steady-state records (it reads of the others only how many there are and their
        iteration numbers), and of those only the last log's of each run; runs are told apart by the config their
        logs print, so every log that prints config keeps its records, and of the rest only the last. The last
        log is known only once the next one is done, so that rule waits a log, and its lines wait unparsed."""
        result = self.result
        collector = result.collectors[-1]
        for segment in range(len(collector.segment_starts)):
            key = (path, segment)
            waiting = self._unparsed.get(key)
            if waiting is not None:
                numbers = _iterations(result.iterations[key], waiting)
                if not has_steady_state(numbers):
                    self._resolve(key, cite=False, numbers=numbers)
        if self._previous is not None:
            self._uncitable_unless_offload_known(*self._previous)
        self._previous = (path, collector)
        if not collector.values and len(collector.segment_starts) == 1:
            result.collectors.pop()

    def _uncitable_unless_offload_known(self, path: str, collector: LogConfigCollector) -> None:
        for segment in range(len(collector.segment_starts)):
            key = (path, segment)
            if key in self._unparsed:
                # A log that prints config may be a run of its own (report/runs.py groups logs by it) whose last
                # log with iteration lines is this one: its records stay citable (two held-out FlagScale logs, a
                # healthy run and an OOM, lost the healthy one's median iteration time before a third log's lines).
                self._resolve(key, cite=bool(collector.values))

    def _resolve(self, key: tuple[str, int], cite: bool, numbers: tuple[int, ...] | None = None) -> None:
        """A key's waiting lines become records (`cite`) or stand-ins (`numbers`: _iterations of the key, if
        known)."""
        waiting = self._unparsed.pop(key)
        done = self.result.iterations[key]  # [] until now, unless the same log was read twice
        if cite:
            path, segment = key
            done += [speed_record(found, path, number, rank, segment) for _, found, number, rank in waiting]
        else:
            self.result.iterations[key] = self._stand_ins(numbers or _iterations(done, waiting))

    def _stand_ins(self, numbers: tuple[int, ...]) -> list[IterationMetrics]:
        """One list per run of iteration numbers, shared by every log that logged those (never appended to
        again: its log is done)."""
        shared = self._stand_in_lists.get(numbers)
        if shared is None:
            stand_in = self._uncitable.setdefault
            shared = self._stand_in_lists[numbers] = [stand_in(n, IterationMetrics("", 0, None, 0, n)) for n in numbers]
        return shared

    def scan_lines(self, name: str, lines: Iterable[str]) -> ScanResult:
        """Scan in-memory text (signature examples, tests) through the same path as files."""
        self.result.lines_read[name] = self.line_pass.read_lines(name, lines, self.start_source(name))
        return self.finish()

    def merge(self, results: Iterable[ScanResult]) -> ScanResult:
        """Combine per-source results (scanned in parallel) as if the sources had been scanned in order."""
        merged = self.result
        for partial in results:
            for aggregate in partial.aggregates:
                self.failures.aggregates.get(aggregate.matcher_id, aggregate.facts).absorb(aggregate)
            for evidence in partial.exceptions:
                merged.remember_exception(evidence)
            merged.last_error_line = partial.last_error_line or merged.last_error_line
            merged.last_source_line = partial.last_source_line or merged.last_source_line
            merged.iterations.update(partial.iterations)
            merged.collectors.extend(partial.collectors)
            merged.lines_read.update(partial.lines_read)
            merged.ranks_seen |= partial.ranks_seen
            merged.rank_clashes |= partial.rank_clashes
            for rank, path in partial.rank_logs.items():
                note_ranks(merged, path, (rank,))
            merged.warnings.extend(partial.warnings)
            merged.skipped |= partial.skipped
            merged.training_code |= partial.training_code
            merged.megatron_startup |= partial.megatron_startup
            merged.training_done = partial.training_done or merged.training_done
            merged.checkpoint_saved = partial.checkpoint_saved or merged.checkpoint_saved
            merged.checkpoint_loaded = partial.checkpoint_loaded or merged.checkpoint_loaded
            merged.nccl_reason = partial.nccl_reason or merged.nccl_reason
            if not merged.script_rerun:
                merged.script_rerun.extend(partial.script_rerun)
            for fact, frame in partial.frozen_frames.items():
                merged.frozen_frames.setdefault(fact, frame)
            merged.parameters.per_model_parallel_rank.update(partial.parameters.per_model_parallel_rank)
            merged.parameters.billions.update(partial.parameters.billions)
            merged.parameters.gradient_bucket_elements += partial.parameters.gradient_bucket_elements
        return self.finish()

    def finish(self) -> ScanResult:
        for key in list(self._unparsed):  # the last log's, and every log's when _source_done is not called
            self._resolve(key, cite=True)
        self.result.aggregates = without_the_warnings_of_a_start_up_oom(self.failures.aggregates.ordered())
        before_the_first_step(self.result.aggregates, self.result.iterations, self.result.checkpoint_loaded is not None)
        return self.result


def _iterations(done: list[IterationMetrics], waiting: list[tuple]) -> tuple[int, ...]:
    """The iteration numbers of a key's records and waiting lines, in order (comprehensions, not generators:
    asked for each of 20,000 rank logs)."""
    numbers = tuple([waiting_line[0] for waiting_line in waiting])
    return (*[record.iteration for record in done], *numbers) if done else numbers
