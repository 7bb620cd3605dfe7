"""The one line pass: handler sets, plug-in handlers, and one read per log for compare."""

from __future__ import annotations

import json

import pytest

from offloaddoctor import api
from offloaddoctor.scanning.evidence import MAX_EVIDENCE, Aggregate, Evidence, keep_evidence
from offloaddoctor.scanning.scanner import IterationSampler, Scanner, TracebackTracker, build_matchers
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.logs import candidates
from offloaddoctor.logs.line_pass import Line, LineHandler, LinePass, _skip_of, keep_all
from offloaddoctor.logs.sources import LogSource, resolve_sources
from offloaddoctor.metrics import run_metrics
from offloaddoctor.render.json_report import render_json, report_to_dict
from offloaddoctor.render.metrics_json import metrics_to_dict

from tests.conftest import EVERY_LOG, FIXTURES, every_log_report


class Collect(LineHandler):
    def __init__(self, literal: str, consume: bool = True):
        self.literals = (literal,)
        self.literal = literal
        self.consume = consume
        self.seen: list[tuple[int, int | None, str]] = []

    def feed(self, line: Line) -> bool:
        if self.literal not in line.text:
            return False
        self.seen.append((line.number, line.rank, line.text))
        return self.consume


LINES = ["[rank3]: startup summary: tp=2", "noise", "[rank1]: RuntimeError: boom", "summary again", "noise"]


def test_a_new_kind_of_line_is_one_handler_with_its_literal():
    summary = Collect("summary")
    errors = Collect("Error")
    line_pass = LinePass({"summary", "Error"}, [])
    assert line_pass.read_lines("x.log", LINES, [summary, errors]) == 5
    assert summary.seen == [(1, 3, "startup summary: tp=2"), (4, None, "summary again")]
    assert errors.seen == [(3, 1, "RuntimeError: boom")]


def test_a_consumed_line_stops_its_set_but_not_the_other_set():
    first, later, other = Collect("summary"), Collect("summary"), Collect("summary")
    LinePass({"summary"}, []).read_lines("x.log", LINES, [first, later], [other])
    assert len(first.seen) == 2 and later.seen == [] and len(other.seen) == 2


def test_a_handler_that_wants_every_line_gets_them_marked_as_not_candidates():
    class Block(Collect):
        def feed(self, line):
            self.seen.append((line.number, line.candidate))
            return False

        def wants_every_line(self, number):
            return number < 3

    block = Block("summary")
    LinePass({"summary"}, []).read_lines("x.log", LINES, [block])
    assert block.seen == [(1, True), (2, False), (3, False), (4, True)]


def test_a_line_one_sampler_drops_reaches_only_a_handler_that_keeps_it():
    class Sampler(LineHandler):
        literals = ("summary",)

        def __init__(self, keep):
            self.sample, self.fed = (b"summary", keep), 0

        def feed(self, line):
            self.fed += 1
            return False

    def drop(m):
        return None

    dropping, other = Sampler(drop), Collect("boom")
    LinePass({"summary", "boom"}, []).read_lines("x.log", LINES, [dropping, other])
    assert dropping.fed == len(other.seen) == 1  # the "boom" line: without the literal, no opinion
    dropping, after, keeping = Sampler(drop), Sampler(drop), Sampler(keep_all)
    LinePass({"summary"}, []).read_lines("x.log", LINES, [dropping, after], [keeping])
    assert keeping.fed == 2  # delivered for the set that needs it ...
    assert dropping.fed == after.fed == 0  # ... and to the other set as if `dropping` had consumed it


def test_the_evidence_rule_is_five_lines_one_per_rank_rankless_always():
    kept: list[Evidence] = []
    for rank in (0, 0, None, None, 1, 2, 3):
        keep_evidence(kept, Evidence("x", 1, rank, "t"))
    assert [e.rank for e in kept] == [0, None, None, 1, 2] and len(kept) == MAX_EVIDENCE
    one, two = Aggregate("m", {}, 1), Aggregate("m", {}, 2)
    for rank in (0, 1):
        one.add(Evidence("a", rank, rank, "t"))
    for rank in (1, 2):
        two.add(Evidence("b", rank, rank, "t"))
    one.absorb(two)
    assert (one.count, one.ranks, one.paths, [e.rank for e in one.evidence]) == (4, {0, 1, 2}, {"a", "b"}, [0, 1, 2])


def test_traceback_tracker_hands_over_the_exception_line_and_gives_up_on_a_runaway():
    ended, cut = [], []
    tracker = TracebackTracker(
        lambda line, text, raising, building: ended.append(text), lambda frame, megatron: cut.append(frame)
    )
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: bad"]
    for number, text in enumerate(lines, 1):
        assert tracker.feed(Line("x", number, None, text, text, True))
        tracker.wants_every_line(number)
    assert ended == ["ValueError: bad"] and not tracker.awaiting
    tracker.feed(Line("x", 10, 0, lines[0], lines[0], True))
    assert tracker.wants_every_line(400) and not tracker.wants_every_line(411)


def test_a_traceback_pasted_up_to_its_last_frame_ends_at_the_raise():
    cut = []
    tracker = TracebackTracker(lambda line, text, raising, building: None, lambda frame, megatron: cut.append(frame))
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in step',
        '    raise RuntimeError("optimizer state does not fit")',
    ]
    for number, text in enumerate(lines, 1):
        tracker.feed(Line("x", number, 3, text, text, True))
        tracker.wants_every_line(number)
    tracker.finish()  # the log ended inside the traceback
    assert [(e.line, e.rank) for e in cut] == [(3, 3)] and "raise RuntimeError" in cut[0].text


def test_iteration_sampler_keeps_an_even_sample():
    records: dict = {}
    unparsed: dict = {}
    sampler = IterationSampler(records, unparsed, LogConfigCollector("x"), limit=8)
    skip = _skip_of(*sampler.sample)  # the question the pass asks of each line holding the literal
    for number in range(1, 101):
        text = f" iteration {number:6d}/ 1000 | elapsed time per iteration (ms): 100.0 |"
        if skip(number, text.encode()):
            continue
        sampler.feed(Line("x", number, None, text, text, True))
    assert records == {("x", 0): []}  # the key's place; its lines wait unparsed for the Scanner
    kept = [iteration for iteration, *_ in unparsed[("x", 0)]]
    assert kept[0] == 1 and len(kept) <= 8 and len({b - a for a, b in zip(kept[1:], kept[2:])}) == 1


def test_compare_reads_each_log_once(monkeypatch):
    opened = []
    real = candidates.CandidateReader.__iter__

    def reading(reader):
        opened.append(reader.source.path)
        return real(reader)

    monkeypatch.setattr(candidates.CandidateReader, "__iter__", reading)
    family = FIXTURES / "compare-family"
    monkeypatch.chdir(family)
    api.compare("baseline.log", ["opt050.log"])
    assert sorted(opened) == ["baseline.log", "opt050.log"]


@pytest.mark.parametrize(
    "case",
    [
        "compare-family/opt050.log",
        "oom-fragmentation-multirank/job.log",
        "optimizer-offload-slowdown-restart/job.log",
        "unmatched-failure/job.log",
    ],
)
def test_one_shared_pass_equals_the_two_separate_reads(case, catalog):
    path = str(FIXTURES / case)
    matchers = build_matchers(catalog)
    run, report, _ = api._measure_and_diagnose(path, resolve_sources([path]), catalog, matchers)
    alone = api.diagnose([path], catalog=catalog)
    assert json.dumps(report_to_dict(report), default=str) == json.dumps(report_to_dict(alone), default=str)
    assert metrics_to_dict([run]) == metrics_to_dict([run_metrics(path)])


def test_scanner_literals_are_the_handlers_literals(catalog):
    scanner = Scanner(build_matchers(catalog))
    for source in [LogSource(str(FIXTURES / "pp-cpu-offload" / "job.log"))]:
        handlers = scanner.start_source(source.name)
    assert scanner.literals == {lit for h in handlers for lit in h.literals}


WARNING_LINES = [
    "/usr/local/lib/python3.12/dist-packages/torch/utils/checkpoint.py:86: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None",
    "  warnings.warn(",
    "/usr/local/lib/python3.10/site-packages/torch/_dynamo/eval_frame.py:632: FutureWarning: "
    "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
    "  return fn(*args, **kwargs)",
]


@pytest.mark.parametrize("line", WARNING_LINES)
def test_a_python_warning_printed_every_step_is_not_a_candidate(line, catalog):
    scanner = Scanner(build_matchers(catalog))
    assert [literal for literal in scanner.literals if literal in line] == []


@pytest.mark.parametrize(
    "launch",
    [
        "python3.12 -m torch.distributed.run --nproc_per_node 8 pretrain_gpt.py --num-layers 16",
        "/usr/bin/python3 pretrain_gpt.py --num-layers 16",
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 16",
        "python -m megatron.training.pretrain --num-layers 16",
        "+ python3.11 /opt/Megatron-LM/pretrain_gpt.py --num-layers=16",
    ],
)
def test_launch_lines_are_still_read_for_config(launch, catalog):
    result = Scanner(build_matchers(catalog)).scan_lines("job.log", [launch])
    assert [(v.key, v.value) for c in result.collectors for v in c.values if v.key.endswith("num_layers")] == [
        ("model.num_layers", 16)
    ]


@EVERY_LOG
@pytest.mark.skipif(candidates._finder((b"x",), None) is None, reason="needs hyperscan")
def test_the_hyperscan_road_and_the_plain_road_give_the_same_reports(catalog, monkeypatch):
    """Every fixture, read with hyperscan finding the lines (and counting the iteration lines in bulk) and
    without it (a `find` pass per literal, every sampled line asked alone), gives one report."""
    logs = sorted(str(p) for p in FIXTURES.rglob("*.log") if p.stat().st_size > 0)
    monkeypatch.setattr(candidates, "USE_HYPERSCAN", False)
    assert render_json(api.diagnose(logs, catalog=catalog)) == every_log_report()


def test_a_line_the_reader_hands_out_without_a_literal_is_still_dropped(tmp_path):
    """Lines a reader found by a literal skip the gate; not a line cut short (its literal was in the part cut
    off)."""

    class Every(LineHandler):  # no literals: sees every line delivered
        def __init__(self):
            self.ranks = []

        def feed(self, line):
            self.ranks.append(line.rank)
            return False

    literals = {"optimizer cpu offload must be used", "offload_optimizer_states"}
    lines = ["[rank9]: " + "x" * 70_000 + " offload_optimizer_states", "[rank2]: offload_optimizer_states=1"]
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    every = Every()
    LinePass(literals, []).read_source(LogSource(str(path)), [every, Collect("offload_optimizer_states")])
    assert set(every.ranks) == {2}
