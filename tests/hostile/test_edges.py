"""Issue 15, the edges: inputs that used to mislead (a wrong answer, not a crash), text from catalogues,
caches and file names, slow paths. Each test failed on the code before its fix."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from typer.testing import CliRunner

from offloaddoctor.cli import app

from tests.conftest import FIXTURES

RUNNER = CliRunner()
OOM_JOB = FIXTURES / "oom-fragmentation-multirank" / "job.log"
ZSTD_FRAME = b"\x28\xb5\x2f\xfd\x04\x58\x45\x00\x00\x10" + bytes(range(256)) * 8


# ---- a rank file we cannot read does not hide the others' failure ----------------------------------------


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (ZSTD_FRAME, "zstd-compressed; decompress first"),
        (b"BZh91AY&SY" + bytes(range(256)) * 8, "bzip2-compressed; decompress first"),
        (b"\xfd7zXZ\x00\x00\x04" + bytes(range(256)) * 8, "xz-compressed; decompress first"),
        (os.urandom(4096) + b"\x00" * 4096, "looks like a binary file"),
    ],
)
def test_an_unreadable_rank_file_is_skipped_with_a_note_and_the_rest_diagnosed(tmp_path, content, named):
    shutil.copy(OOM_JOB, tmp_path / "rank0.log")
    (tmp_path / "rank1.log").write_bytes(content)
    result = RUNNER.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert "oom-fragmentation" in [f["id"] for f in report["findings"]]
    assert any(
        note.startswith(f"{tmp_path / 'rank1.log'}: {named}") and note.endswith("; skipped") for note in report["notes"]
    ), report["notes"]


def test_metrics_skip_an_unreadable_rank_file_too(tmp_path):
    shutil.copy(OOM_JOB, tmp_path / "rank0.log")
    (tmp_path / "rank1.log").write_bytes(ZSTD_FRAME)
    result = RUNNER.invoke(app, ["metrics", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "zstd-compressed" in result.stdout


def test_a_directory_of_nothing_but_compressed_files_is_still_an_error(tmp_path):
    (tmp_path / "rank0.log").write_bytes(ZSTD_FRAME)
    (tmp_path / "rank1.log").write_bytes(ZSTD_FRAME)
    for command in ("diagnose", "metrics"):
        result = RUNNER.invoke(app, [command, str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert (
            result.stderr.strip()
            == f"offloaddoctor: error: {tmp_path / 'rank0.log'}: zstd-compressed; decompress first (zstd -d)"
        )


def test_a_named_compressed_file_is_an_error_that_names_the_format(tmp_path):
    (tmp_path / "job.log.zst").write_bytes(ZSTD_FRAME)
    result = RUNNER.invoke(app, ["diagnose", str(tmp_path / "job.log.zst")])
    assert result.exit_code == 2 and "zstd-compressed; decompress first" in result.stderr


# ---- a log that shrinks while it is read ----------------------------------------------------------------


def test_a_log_truncated_while_it_is_read_gives_a_note(tmp_path):
    from offloaddoctor.logs.candidates import CandidateReader, Wants
    from offloaddoctor.logs.sources import LogSource

    path = tmp_path / "train.log"
    path.write_bytes(b"iteration 1 fine\n" * 40_000)  # ~680 kB: several blocks

    def rotate(_count: int) -> None:
        with open(path, "r+b") as handle:  # copytruncate: the same file, cut in place
            handle.truncate(1000)

    warnings: list[str] = []
    list(CandidateReader(LogSource(str(path)), Wants([b"iteration"]), warnings, block_bytes=1 << 17, on_bytes=rotate))
    assert any("shrank from 680,000 to 1,000 bytes while it was read" in w for w in warnings), warnings


def test_a_log_that_keeps_its_size_gives_no_such_note(tmp_path):
    from offloaddoctor.logs.candidates import CandidateReader, Wants
    from offloaddoctor.logs.sources import LogSource

    path = tmp_path / "train.log"
    path.write_bytes(b"iteration 1 fine\n" * 40_000)
    warnings: list[str] = []
    list(CandidateReader(LogSource(str(path)), Wants([b"iteration"]), warnings, block_bytes=1 << 17))
    assert warnings == []


# ---- check: a value it cannot read is "not checkable", never "passed" ----------------------------------

VIOLATING = (
    "optimizer:\n  optimizer_cpu_offload: true\n  use_distributed_optimizer: false\n  optimizer_offload_fraction: 0.5\n"
)


def check_json(tmp_path, *sets):
    (tmp_path / "base.yaml").write_text(VIOLATING)
    args = ["check", str(tmp_path / "base.yaml"), "--format", "json"]
    for item in sets:
        args += ["--set", item]
    result = RUNNER.invoke(app, args)
    return result, json.loads(result.stdout)


def check_json_with(tmp_path, text):
    (tmp_path / "bad.yaml").write_text(text)
    result = RUNNER.invoke(app, ["check", str(tmp_path / "bad.yaml"), "--format", "json"])
    return result, json.loads(result.stdout)


def test_a_value_invalid_for_its_key_makes_the_constraint_not_checkable(tmp_path):
    before, _ = check_json(tmp_path)
    assert before.exit_code == 1
    # In a config file: not checkable, with a note. Given with --set it is a usage error (test_first_screen).
    _, report = check_json_with(
        tmp_path, VIOLATING.replace("optimizer_cpu_offload: true", "optimizer_cpu_offload: maybe")
    )
    assert "optimizer-offload-requires-distributed-optimizer" not in report["passed"]
    unchecked = {u["id"]: u for u in report["unchecked"]}
    assert unchecked["optimizer-offload-requires-distributed-optimizer"]["invalid"] == [
        "optimizer.optimizer_cpu_offload"
    ]
    assert any("optimizer.optimizer_cpu_offload = 'maybe'" in n and "not a valid value" in n for n in report["notes"])


def test_the_text_summary_counts_an_unreadable_value_as_not_checkable(tmp_path):
    (tmp_path / "base.yaml").write_text(
        VIOLATING.replace("optimizer_cpu_offload: true", "optimizer_cpu_offload: maybe")
    )
    result = RUNNER.invoke(app, ["check", str(tmp_path / "base.yaml")])
    assert "0 not checkable" not in result.stdout
    assert "needs a valid optimizer.optimizer_cpu_offload" in result.stdout


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
def test_a_fraction_that_is_not_a_finite_number_is_out_of_range(tmp_path, value):
    _, report = check_json(tmp_path, f"optimizer.optimizer_offload_fraction={value}")
    assert "optimizer-offload-fraction-range" in [v["id"] for v in report["violations"]]


def test_a_fraction_in_range_or_unset_still_passes(tmp_path):
    for value in ("0", "0.5", "1"):
        _, report = check_json(tmp_path, f"optimizer.optimizer_offload_fraction={value}")
        assert "optimizer-offload-fraction-range" in report["passed"], value
    _, report = check_json(tmp_path, "optimizer.optimizer_offload_fraction=null")
    assert "optimizer-offload-fraction-range" in report["passed"]


@pytest.mark.parametrize("item", ["a..b=1", "a.=1", ".a=1", "optimizer..optimizer_cpu_offload=True"])
def test_a_key_with_an_empty_part_is_refused(item):
    result = RUNNER.invoke(app, ["check", "--set", item])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"offloaddoctor: error: --set {item!r}: the key")


def test_predicates_read_an_unreadable_value_as_unknown():
    from offloaddoctor.catalog.predicates import evaluate, missing, parse_predicate

    values = {"x": "maybe", "n": "abc"}

    def lookup(_kind, name):
        return values.get(name, missing())

    for raw in (
        {"key": "x", "eq": True},
        {"key": "x", "ne": True},
        {"key": "n", "eq": 2},
        {"key": "n", "in": [1, 2]},
        {"key": "x", "not_in": [True]},
    ):
        assert evaluate(parse_predicate(raw, "t"), lookup) is None, raw
    assert evaluate(parse_predicate({"key": "x", "eq": "maybe"}, "t"), lookup) is True
    assert evaluate(parse_predicate({"key": "n", "in": ["abc", 2]}, "t"), lookup) is True


# ---- bisect across a rename ------------------------------------------------------------------------------

SAFE = "optimizer:\n  optimizer_cpu_offload: true\n  use_distributed_optimizer: true\n"
BROKEN = SAFE.replace("use_distributed_optimizer: true", "use_distributed_optimizer: false")


def test_bisect_follows_the_config_across_a_rename(tmp_path):
    from offloaddoctor.api import load_catalog
    from offloaddoctor.bisect.config_mode import bisect_config

    from tests.git_repos import git, make_repo

    repo, shas = make_repo(
        tmp_path,
        [
            ({"conf/old.yaml": SAFE}, "first"),
            ({"conf/old.yaml": SAFE + "# tuned\n"}, "tune"),
        ],
    )
    git(repo, "mv", "conf/old.yaml", "conf/new.yaml")
    git(repo, "commit", "-q", "-m", "rename the config")
    (repo / "conf" / "new.yaml").write_text(BROKEN + "# tuned\n")
    git(repo, "commit", "-q", "-am", "distributed optimizer off")
    renamed, broke = git(repo, "rev-parse", "HEAD~1", "HEAD").split()
    result = bisect_config(str(repo), shas[0], "HEAD", "conf/new.yaml", load_catalog())
    assert result.first_bad.sha == broke and result.last_good.sha == renamed
    assert result.skipped == []
    assert any(t.commit.sha == shas[0] and t.outcome.verdict == "good" for t in result.tested)


def test_bisect_names_the_commit_that_created_the_config_when_good_predates_it(tmp_path):
    from offloaddoctor.api import load_catalog
    from offloaddoctor.bisect.config_mode import bisect_config
    from offloaddoctor.errors import UserError

    from tests.git_repos import make_repo

    repo, shas = make_repo(
        tmp_path,
        [
            ({"README": "x\n"}, "start"),
            ({"conf/new.yaml": SAFE}, "add the config"),
            ({"conf/new.yaml": BROKEN}, "distributed optimizer off"),
        ],
    )
    with pytest.raises(UserError) as raised:
        bisect_config(str(repo), shas[0], shas[-1], "conf/new.yaml", load_catalog())
    message = str(raised.value)
    assert f"created in {shas[1][:12]} 'add the config'; try --good {shas[1][:12]}" in message
    assert "older good commit" not in message


# ---- write errors on standard output --------------------------------------------------------------------

CLEAN_LOG = FIXTURES / "clean-baseline" / "job.log"
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")


@needs_dev_full
@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", str(CLEAN_LOG), "--format", "json"],
        ["diagnose", str(CLEAN_LOG), "--format", "text"],
        ["diagnose", str(CLEAN_LOG), "--format", "junit", "--fail-on", "never"],  # typer's road
        ["metrics", str(CLEAN_LOG), "--format", "csv"],
        ["signatures"],
    ],
)
def test_a_full_disk_on_standard_output_is_exit_2_with_one_line(args):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "offloaddoctor", *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr == "offloaddoctor: error: cannot write the output to standard output: No space left on device\n"
    )


@needs_dev_full
def test_a_full_disk_on_an_output_path_is_exit_2_with_one_line():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "offloaddoctor", "diagnose", str(CLEAN_LOG), "--output", "json=/dev/full"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "offloaddoctor: error: --output /dev/full: cannot write: No space left on device"
    ]


# ---- catalogue text is escaped like log text --------------------------------------------------------------

HOSTILE_SIGNATURE = r"""id: disk-full
title: "T \e]0;TITLE\a \e[2J ::error::x ##[group]g \u202eevil"
severity: error
priority: 40
symptom: "line one\n::error::symptom \e[31m"
cause: "The disk ran out.\n::warning::cause \x9b2J"
match:
  literals: ["No space left"]
  patterns: ['Errno 28\]\s+No space left']
confirm: ["df -h \e]8;;http://x\alink", "::add-mask::confirm"]
fix: {summary: "Free space \e[2J", overrides: ["save=/big \e[31m", "::error::override"]}
references: [{doc: "runbook \e]0;ref\a"}]
examples:
  - {name: "hit \e[2J", expect: match, log: "OSError: [Errno 28] No space left on device"}
  - {expect: no_match, log: "OSError: [Errno 2] No such file or directory"}
"""


@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", "{log}", "--format", "text"],
        ["diagnose", "{log}", "--format", "terminal"],
        ["diagnose", "{log}", "--format", "markdown"],
        ["explain", "disk-full"],
        ["signatures"],
        ["signatures", "test", "{team}"],
    ],
)
def test_strings_from_a_team_catalogue_never_act_on_a_terminal_or_runner(tmp_path, args):
    from tests.render.test_ci_outputs import assert_inert

    team = tmp_path / "team"
    team.mkdir()
    (team / "disk-full.yaml").write_text(HOSTILE_SIGNATURE)
    log = tmp_path / "job.log"
    log.write_text("[rank3]: OSError: [Errno 28] No space left on device\n")
    args = [a.format(log=log, team=team) for a in args]
    if args[0] != "signatures" or len(args) == 1:
        args += ["--signatures", str(team)]
    result = RUNNER.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code in (0, 1), result.output
    shown = result.stdout
    if "terminal" in args:
        import re

        shown = re.sub(r"\x1b\[[0-9;]*m", "", shown)  # rich's own colour codes
    assert_inert(shown)
    if args[:2] != ["signatures", "test"]:
        assert "\\x1b" in shown  # shown, escaped, not dropped


# ---- CSV cells from file names are not spreadsheet formulas -------------------------------------------------


@pytest.mark.parametrize("name", ['=HYPERLINK("http:x","y")', "+1+cmd", "-2+3", "@SUM(A1)", "\tx=1"])
def test_metrics_csv_neutralises_formula_cells_from_file_names(tmp_path, monkeypatch, name):
    import csv
    import io

    monkeypatch.chdir(tmp_path)
    (tmp_path / f"{name}.log").write_bytes((FIXTURES / "clean-baseline" / "job.log").read_bytes())
    result = RUNNER.invoke(app, ["metrics", "--format", "csv", "--", f"{name}.log"])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert len(rows) > 2
    for row in rows[1:]:
        assert row[0] == f"'{name}.log" and row[1] == f"'{name}.log"
        assert not any(cell.startswith(("=", "+", "@", "\t")) for cell in row)


def test_metrics_csv_keeps_numbers_and_plain_names_as_they_are(tmp_path, monkeypatch):
    import csv
    import io

    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.log").write_text(
        "[2026] iteration 5/10 | elapsed time per iteration (ms): 100.0 | lm loss: -1.5E+00 |\n"
    )
    rows = list(csv.reader(io.StringIO(RUNNER.invoke(app, ["metrics", "run.log", "--format", "csv"]).stdout)))
    assert rows[1][0] == "run.log" and rows[1][1] == "run.log"


# ---- slow paths -----------------------------------------------------------------------------------------


def test_a_config_with_a_huge_flow_list_is_refused_while_composing(tmp_path):
    import time

    from offloaddoctor.config.yaml_config import MAX_COMPOSED_NODES, parse_yaml_config
    from offloaddoctor.errors import UserError

    text = "model:\n  x: [" + ",".join(["1"] * 500_000) + "]\n"  # ~1 MB, the size limit
    started = time.perf_counter()
    with pytest.raises(UserError) as raised:
        parse_yaml_config(text, "flow.yaml")
    elapsed = time.perf_counter() - started
    assert f"more than {MAX_COMPOSED_NODES:,} values" in str(raised.value)
    assert "alias bomb" not in str(raised.value)
    assert elapsed < 5, elapsed  # 12.7 s before, composing everything first


def test_an_alias_bomb_is_still_named_as_one(tmp_path):
    from offloaddoctor.config.yaml_config import parse_yaml_config
    from offloaddoctor.errors import UserError

    from tests.hostile.test_hostile_inputs import ALIAS_BOMB

    with pytest.raises(UserError, match="alias bomb"):
        parse_yaml_config(ALIAS_BOMB, "bomb.yaml")


@pytest.mark.parametrize("pattern", [r"(a|aa)+b", r"(a|aa)+$", r"x(?:a|b|ab)*y", r"(?:\w\w|\d)+!"])
def test_ambiguous_alternation_under_a_repeat_is_refused(pattern):
    from offloaddoctor.catalog.regex_safety import catastrophic

    assert "alternation under an unbounded repeat" in catastrophic(pattern)


@pytest.mark.parametrize(
    "pattern", [r"(foo|bar)+", r"(?:ab|ac)+", r"(?:ab|a)+c", r"(a|b)+", r"(?:x|\w)+", r"(a|aa){2}b"]
)
def test_unambiguous_or_bounded_alternation_is_accepted(pattern):
    from offloaddoctor.catalog.regex_safety import catastrophic

    assert catastrophic(pattern) is None


def test_signatures_lint_and_the_loader_flag_ambiguous_alternation(tmp_path):
    from tests.catalog.test_team_signatures import team_dir

    team = team_dir(tmp_path, pattern=r"No space left (?:on|o|n)+ device")
    result = RUNNER.invoke(app, ["signatures", "lint", str(team)])
    assert result.exit_code == 1
    assert "match.patterns[0]: refused, an alternation under an unbounded repeat" in result.stdout + result.stderr
    log = tmp_path / "job.log"
    log.write_text("OSError: [Errno 28] No space left on device\n")
    loaded = RUNNER.invoke(app, ["diagnose", str(log), "--signatures", str(team)])
    assert loaded.exit_code == 2 and "alternation under an unbounded repeat" in loaded.stderr


def test_user_patterns_share_one_time_budget_per_scan():
    import re

    from offloaddoctor.scanning import scanner
    from offloaddoctor.scanning.scanner import Matcher, Scanner
    from offloaddoctor.catalog.model import MatchSpec

    slow = [Matcher(f"team-slow-{i}", MatchSpec(("x",), (r"x(a|aa)*y",)), user=True) for i in range(20)]
    builtin = Matcher("fine", MatchSpec(("x aay",), (r"x aay",)))
    near_miss = "Error x" + "a" * 60
    result = Scanner([*slow, builtin]).scan_lines("job.log", [near_miss] * 4 + ["x aay fine"])
    # The time given to user patterns is the sum of their give-up limits (wall time depends on the machine's
    # load): at most the budget plus one floor-length try each, where it was 20 × 3 × 0.25 s = 15 s.
    limits = [float(re.search(r"gave up after ([\d.]+) s", w).group(1)) for w in result.warnings if "gave up" in w]
    assert sum(limits) <= scanner.USER_PATTERN_BUDGET_S + 20 * scanner.USER_SEARCH_FLOOR_S + 1e-9, limits
    switched_off = [w for w in result.warnings if "switched off" in w]
    assert len(switched_off) == 20
    assert [a.matcher_id for a in result.aggregates] == ["fine"]  # built-in patterns keep their full limit


def test_build_matchers_marks_a_teams_patterns_as_user_patterns(tmp_path):
    from offloaddoctor.scanning.scanner import build_matchers
    from offloaddoctor.api import load_catalog

    from tests.catalog.test_team_signatures import team_dir

    matchers = build_matchers(load_catalog([team_dir(tmp_path)]))
    assert {m.id for m in matchers if m.user} == {"checkpoint-disk-full"}


def test_a_listed_binary_file_is_a_note_when_scanned_in_parallel_too(tmp_path, monkeypatch):
    from offloaddoctor.scanning import parallel
    from offloaddoctor.scanning.scanner import build_matchers
    from offloaddoctor.api import load_catalog
    from offloaddoctor.logs.sources import resolve_sources

    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    shutil.copy(OOM_JOB, tmp_path / "rank0.log")
    (tmp_path / "rank1.log").write_bytes(ZSTD_FRAME)
    result = parallel.scan_sources(build_matchers(load_catalog()), resolve_sources([str(tmp_path)]), workers=2)
    assert "oom-capacity" in [a.matcher_id for a in result.aggregates]  # the OOM matcher (fragmentation shares it)
    assert any("rank1.log: zstd-compressed" in w for w in result.warnings)
