"""Issue 14: what a person sees first, verdicts they can trust, and one vocabulary across commands."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from offloaddoctor.api import check, diagnose, diagnose_text
from offloaddoctor.cli import app
from offloaddoctor.render.json_report import render_json
from offloaddoctor.render.plain import render_plain
from offloaddoctor.render.terminal import render_terminal

from tests.conftest import FIXTURES, REPO

RUNNER = CliRunner()
MULTIRANK = str(FIXTURES / "oom-fragmentation-multirank" / "job.log")
BRIDGE = FIXTURES / "oom-partial-optimizer-offload-bridge"
OTHER_RUN_CONFIG = str(FIXTURES / "configs" / "bridge-run-config-optimizer-offload.yaml")
FAMILY = FIXTURES / "compare-family"
CAPACITY_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
    "79.18 GiB of which 680.19 MiB is free. Including non-PyTorch memory, this process has 78.51 GiB memory in "
    "use. Of the allocated memory 76.00 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but "
    "unallocated."
)


def run(*args: str):
    return RUNNER.invoke(app, list(args))


# --- the first screen -------------------------------------------------------------------------------------------


def test_summary_first_one_line_per_finding_root_cause_first():
    lines = render_plain(diagnose([MULTIRANK])).splitlines()
    first = lines[:10]
    oom = next(i for i, line in enumerate(first) if " oom-fragmentation " in line)
    nccl = next(i for i, line in enumerate(first) if " nccl-collective-failure " in line)
    assert oom < nccl  # the root cause leads the echo on the other ranks
    assert re.search(
        r"ERROR\s+oom-fragmentation\s+5\s+unknown\s+export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  \(\+\d+ more below\)$",
        first[oom],
    )
    assert re.search(r"nccl-collective-failure\s+0-4,6-7\s", first[nccl])


def test_details_flag_shows_cause_and_confirm_and_the_default_does_not():
    report = diagnose([MULTIRANK])
    short, full = render_plain(report), render_plain(report, details=True)
    assert "Cause " not in short and "Confirm " not in short
    assert "   Cause      " in full and "   Confirm    " in full
    # the whole OOM message only with --details
    assert "optimizing-memory-usage-with-pytorch-cuda-alloc-conf" not in short
    assert "optimizing-memory-usage-with-pytorch-cuda-alloc-conf" in full
    assert RUNNER.invoke(app, ["diagnose", MULTIRANK, "-f", "text", "-v"]).stdout == full


def test_evidence_differing_only_in_rank_and_time_collapses_to_one_line_with_the_rank_set():
    text = render_plain(diagnose([MULTIRANK]), details=True)
    assert text.count("Watchdog caught collective operation timeout") == 1
    assert "job.log:1053-1057 [ranks 0-4]" in text


def test_the_same_evidence_line_is_never_listed_twice():
    report = diagnose([str(FIXTURES / "optimizer-offload-slowdown-restart" / "job.log")])
    finding = report.findings[0]
    locations = [(e.path, e.line, e.text) for e in finding.evidence]
    assert len(locations) == len(set(locations))
    evidence = json.loads(render_json(report))["findings"][0]["evidence"]
    assert [e["line"] for e in evidence].count(2107) == 1
    assert render_plain(report, details=True).count("job.log:2107") == 1


def test_config_notes_only_about_keys_a_finding_reads():
    report = diagnose([str(BRIDGE / "job.log")], [OTHER_RUN_CONFIG])
    text = render_plain(report)
    assert "optimizer.timers" not in text and "Timers object" not in text
    assert re.search(
        r"note: \d+ more config values differ between the config and the log, for keys no finding reads", text
    )
    assert "optimizer.timers" in render_plain(report, details=True)
    assert sum(1 for line in text.splitlines() if line.startswith("note:")) == 1


def test_progress_bar_only_for_long_scans(monkeypatch, capsys):
    from offloaddoctor.cli import diagnose as diagnose_command
    from offloaddoctor.cli.common import OutputFormat

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with diagnose_command._progress_bar(["x.log"], OutputFormat.text) as update:
        update(1000, 60_000)  # a 1,000-line log
        update(60_000, 60_000)
    assert capsys.readouterr().err == ""
    started = []
    monkeypatch.setattr("rich.progress.Progress.start", lambda self: started.append(self))  # noqa: PLW0108 - a method
    monkeypatch.setattr("rich.progress.Progress.stop", lambda self: None)
    with diagnose_command._progress_bar(["x.log"], OutputFormat.text) as update:
        update(1, diagnose_command.PROGRESS_MIN_BYTES)
    assert len(started) == 1


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_fits_the_width_and_leads_with_the_summary(width, monkeypatch):
    monkeypatch.chdir(REPO)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    render_terminal(diagnose(["fixtures/oom-fragmentation-multirank/job.log"]), console)
    lines = buffer.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    assert any("oom-fragmentation" in line and "unknown" in line for line in lines[:4])
    assert not any("Cause" in line for line in lines)


# --- verdicts ---------------------------------------------------------------------------------------------------


def test_verdict_is_unknown_when_no_config_value_is_known():
    finding = diagnose_text(CAPACITY_OOM).findings[0]  # a PyTorch (Lightning) OOM: no config anywhere
    assert finding.id == "oom-capacity"
    assert finding.config.verdict == "unknown"
    assert all(not v.known for v in finding.config.values)
    known = diagnose_text(CAPACITY_OOM, {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}).findings[0]
    assert known.config.verdict == "confirmed"


def test_config_from_another_run_is_said_up_front():
    report = diagnose([str(BRIDGE / "job.log")], [OTHER_RUN_CONFIG])
    assert report.notes[0].startswith(
        "the config is probably from another run: it disagrees with the log on the model "
        "(config vs log: model.num_layers 48 vs 8, "
    )
    lines = render_plain(report).splitlines()
    assert lines[1].startswith("warning: the config is probably from another run")
    assert "confirmed (other run?)" in "\n".join(lines[:6])
    assert "probably from another run" in report.findings[0].config.explanation
    matching = diagnose([str(BRIDGE / "job.log")], [str(BRIDGE / "run_config.yaml")])
    assert matching.config_mismatch is None and not any("another run" in n for n in matching.notes)


def test_a_config_the_log_itself_printed_is_never_called_another_runs():
    """The memory model far below the message's figures said "the config is probably from another run" (and
    "confirmed (other run?)") where the config was the log's own arguments block, or a file that agrees with it
    on the model: the report's own comparison rules that out. It now says only that more is on the GPU."""
    logs_own = diagnose([str(FIXTURES / "oom-activation-offload" / "job.log")])  # no --config: the arguments block
    matching = diagnose([str(BRIDGE / "job.log")], [str(BRIDGE / "run_config.yaml")])
    for report in (logs_own, matching):
        finding = report.findings[0]
        assert "estimate_vs_allocated" in finding.facts  # the case: 6.6x / 7.6x the memory model's peak
        assert "another run" not in render_plain(report)
        assert "other run?" not in render_plain(report)
        assert "more is on the GPU than the config explains" in finding.config.explanation
    other = diagnose([str(BRIDGE / "job.log")], [OTHER_RUN_CONFIG])  # disagrees with the log on the model
    assert "probably from another run" in other.findings[0].config.explanation
    assert "a config from another run" in other.findings[0].facts["estimate_vs_allocated"]


def test_the_fix_follows_the_numbers():
    finding = diagnose([str(BRIDGE / "job.log")], [str(BRIDGE / "run_config.yaml")]).findings[0]
    assert str(finding.facts["offload_fraction_needed"]).startswith("more than 1.0 (1.13)")
    # One H100 (data_parallel_size 1): twice the pipeline stages has no GPU to go to, so recompute leads.
    assert finding.overrides[0] == "model.recompute_granularity=selective"
    assert not any(line.startswith("model.pipeline_model_parallel_size") for line in finding.overrides)
    assert "cannot free enough" in finding.fix_note and "1.13" in finding.fix_note
    assert (
        json.loads(render_json(diagnose([str(BRIDGE / "job.log")], [str(BRIDGE / "run_config.yaml")])))["findings"][0][
            "fix"
        ]["note"]
        == finding.fix_note
    )


def _offloading_7b_oom(asked_gib: str, dp: int):
    """The finding for a 7B run offloading a quarter of its optimizer that asked for `asked_gib` GiB more."""
    params = " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 7000000000\n"
    oom = CAPACITY_OOM.replace("4.00 GiB. GPU", f"{asked_gib} GiB. GPU")
    config = {
        "optimizer.optimizer_cpu_offload": True,
        "optimizer.optimizer_offload_fraction": 0.25,
        "optimizer.use_distributed_optimizer": True,
        "data_parallel_size": dp,
    }
    return diagnose_text(params + oom, config).findings[0]


@pytest.mark.parametrize("dp,leads", [(2, "model.pipeline_model_parallel_size=2"), (1, "model.recompute_granularity")])
def test_more_pipeline_stages_are_advised_only_where_the_gpus_can_hold_them(dp, leads):
    """Twice the pipeline stages on the same GPUs halves data parallelism: advised for DP 2, not for one GPU
    (the README's headline example advised PP 2 for a one-H100 run)."""
    finding = _offloading_7b_oom("60.00", dp)
    assert "cannot free enough" in finding.fix_note
    assert finding.overrides[0].startswith(leads)
    assert ("raise pipeline parallelism" in finding.fix_note) is (dp == 2)


def test_the_fix_keeps_the_fraction_first_when_it_is_enough():
    finding = _offloading_7b_oom("2.00", 8)
    assert finding.overrides[0].startswith("optimizer.optimizer_offload_fraction=")
    # sized from the message's figures alone: the least the step needs, and said so (runs b83, b86, b88)
    assert finding.fix_note.startswith("The offload fraction below, ")


def test_baseline_ratio_is_always_reported(monkeypatch):
    monkeypatch.chdir(FAMILY)
    report = diagnose(["opt100.log"], baseline="baseline.log")
    assert not any(f.id == "optimizer-offload-slowdown" for f in report.findings)
    note = next(n for n in report.notes if n.startswith("measured against the baseline"))
    assert "iteration time 2.07x the baseline's" in note and "below the threshold" in note
    assert "note: measured against the baseline: iteration time 2.07x" in render_plain(report)


def test_no_megatron_settings_in_the_fix_of_a_log_that_is_not_megatron():
    finding = diagnose_text("Epoch 3:  41%|####1     | 82/200\n" + CAPACITY_OOM).findings[0]
    assert finding.id == "oom-capacity"
    assert not any(line.startswith(("model.", "optimizer.")) for line in finding.overrides)
    assert "apply only to Megatron runs" in finding.fix_note
    megatron = diagnose_text(CAPACITY_OOM, {"optimizer.optimizer_cpu_offload": False}).findings[0]
    assert any(line.startswith("optimizer.") for line in megatron.overrides) and not megatron.fix_note


def test_fail_on_unknown_fails_on_an_unexplained_traceback():
    log = str(FIXTURES / "unmatched-failure" / "job.log")
    # A traceback no signature explains fails by default too (issue 26.5: a crash nobody recognises passed CI).
    assert run("diagnose", log, "-f", "json").exit_code == 1
    assert run("diagnose", log, "-f", "json", "--fail-on", "never").exit_code == 0
    assert run("diagnose", log, "-f", "json", "--fail-on", "unknown").exit_code == 1
    assert run("diagnose", str(FIXTURES / "clean-baseline" / "job.log"), "--fail-on", "unknown").exit_code == 0
    # The fast road too.
    assert (
        subprocess.run(
            [sys.executable, "-m", "offloaddoctor", "diagnose", log, "--fail-on", "unknown"], capture_output=True
        ).returncode
        == 1
    )


def test_fail_on_unknown_in_the_project_file(tmp_path, monkeypatch):
    (tmp_path / ".offloaddoctor.yaml").write_text("fail_on: unknown\n")
    monkeypatch.chdir(tmp_path)
    assert run("diagnose", str(FIXTURES / "unmatched-failure" / "job.log")).exit_code == 1


def test_an_empty_log_says_it_is_empty(tmp_path):
    empty = tmp_path / "job.log"
    empty.write_bytes(b"")
    result = run("diagnose", str(empty), "-f", "text")
    assert result.exit_code == 0
    assert "the log is empty" in result.stdout.splitlines()[0]
    assert f"note: {empty} is empty: check the path" in result.stdout
    assert "shows no error" not in result.stdout


# --- --set ------------------------------------------------------------------------------------------------------


def test_set_key_typo_is_reported_with_did_you_mean():
    many = str(FIXTURES / "check" / "many-violations.yaml")
    report = check([many], ["optimizer.optimizer_ofload_fraction=1.5"])
    assert report.notes[0] == (
        "--set optimizer.optimizer_ofload_fraction: no check reads this key and the config does "
        "not have it; did you mean optimizer.optimizer_offload_fraction?"
    )
    result = run("check", many, "--set", "optimizer.optimizer_ofload_fraction=1.5", "-f", "text")
    assert "did you mean optimizer.optimizer_offload_fraction?" in result.stdout
    diagnosed = diagnose([MULTIRANK], overrides=["optimizer.optimzer_cpu_offload=True"])
    assert "did you mean optimizer.optimizer_cpu_offload" in diagnosed.notes[0]
    assert check([many], ["optimizer.optimizer_offload_fraction=0.5"]).notes[:1] != [""]
    assert not any("no check reads" in n for n in check([many], ["optimizer.optimizer_offload_fraction=0.5"]).notes)


def test_set_key_that_feeds_a_derived_key_is_not_reported_unread():
    """`--world-size` and `--set nproc_per_node` change `parallel.run_world_size`, which the checks read; the
    launch script has nproc_per_node: neither is a typo, and the config does have it."""
    launch = str(FIXTURES / "configs" / "launch-megatron-lm.sh")
    assert not any("no check reads" in n for n in check([launch], world_size=16).notes)
    notes = check([launch], ["nproc_per_node=16"]).notes
    assert not any("no check reads" in n for n in notes)
    assert any("nproc_per_node = 16 at --set" in n and "wins over 8" in n for n in notes)


def test_set_key_typo_in_estimate():
    from offloaddoctor.api import estimate

    report = estimate(
        [str(BRIDGE / "run_config.yaml")], ["model.hiden_size=4096", "model.seq_length=4096", "model.vocab_size=32000"]
    )
    assert report.notes[0].startswith("--set model.hiden_size: no check reads this key")
    assert "did you mean model.hidden_size" in report.notes[0]


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ("optimizer.optimizer_offload_fraction=banana", "takes a number, not 'banana'"),
        ("optimizer.optimizer_cpu_offload=maybe", "takes True or False"),
        ("model.pipeline_model_parallel_size=2.5", "takes a whole number"),
        ("model.transformer_impl=locall", "takes one of local, transformer_engine, inference_optimized"),
    ],
)
def test_set_value_of_the_wrong_type_is_an_error(item, fragment):
    for command in (["check"], ["diagnose", MULTIRANK], ["estimate"]):
        result = run(*command, "--set", item)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"offloaddoctor: error: --set {item}: ") and fragment in result.stderr


def test_set_null_and_right_types_are_accepted():
    from offloaddoctor.config.overrides import parse_overrides

    values = parse_overrides(
        [
            "model.virtual_pipeline_model_parallel_size=null",
            "optimizer.optimizer_offload_fraction=1",
            "optimizer.optimizer_cpu_offload=1",
            "model.num_layers=8",
        ]
    )
    assert [v.value for v in values] == [None, 1, 1, 8]


def test_a_config_value_of_the_wrong_type_makes_its_constraints_not_checkable(tmp_path):
    config = tmp_path / "cfg.yaml"
    config.write_text("optimizer:\n  optimizer_cpu_offload: true\n  optimizer_offload_fraction: banana\n")
    report = check([str(config)])
    unchecked = {u.id: u for u in report.unchecked}
    assert unchecked["optimizer-offload-fraction-range"].invalid == ("optimizer.optimizer_offload_fraction",)
    assert any(f"optimizer.optimizer_offload_fraction = 'banana' at {config}:3" in note for note in report.notes)
    assert "optimizer-offload-fraction-range" not in report.passed


# --- one vocabulary ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "offered"),
    [
        (["check"], "<auto|terminal|text|json>"),
        (["estimate"], "<text|json|markdown>"),  # markdown is implemented there
        (["compare"], "<text|json>"),
        (["bisect"], "<text|json>"),
        (["signatures"], "<text|json>"),
    ],
)
def test_formats_offered_only_where_implemented(command, offered):
    result = run(*command, "--help")
    assert offered in result.stdout and "junit" not in result.stdout and "github" not in result.stdout
    assert "markdown" in offered or "markdown" not in result.stdout


def test_metavars_and_names():
    diagnose_help = run("diagnose", "--help").stdout
    assert " diagnose [OPTIONS] LOG...\n" in diagnose_help
    for shown in ("--config PATH", "--set KEY=VALUE", "--signatures DIR", "--ignore ID", "--baseline LOG", "--details"):
        assert shown in diagnose_help
    assert "<str>" not in diagnose_help and "<path>" not in diagnose_help and "{" not in diagnose_help
    check_help = run("check", "--help").stdout
    assert "--select ID" in check_help and "--signature " not in check_help
    compare_help = run("compare", "--help").stdout
    assert "--run-config LOG=PATH" in compare_help and "-c," not in compare_help
    assert "--format" in run("signatures", "--help").stdout and "--json" not in run("signatures", "--help").stdout
    assert json.loads(run("signatures", "--format", "json").stdout)["signatures"]


@pytest.mark.parametrize(
    ("argv", "old"),
    [
        (["check", "--signature", "oom-fragmentation"], "--signature"),  # now --select
        (["signatures", "--json"], "--json"),  # now --format json
        (["bisect", "--good-config", "a.yaml", "--bad-config", "b.yaml", "--signature", "x"], "--signature"),
        (["bisect-step", "--config", "a.yaml", "--signature", "x"], "--signature"),
        (["compare", "baseline.log", "run.log", "--config", "run.log=x.yaml"], "--config"),  # now --run-config
        (["compare", "baseline.log", "run.log", "-c", "run.log=x.yaml"], "-c"),
    ],
)
def test_the_old_option_names_are_gone(argv, old, command_line):
    """The five hidden old names (check's, bisect's and bisect-step's --signature, the signatures list's --json,
    compare's --config/-c) are usage errors now: one line naming the option, exit 2."""
    result = command_line(*argv)
    assert result.returncode == 2 and result.stdout == "", result
    assert re.fullmatch(rf"offloaddoctor: error: No such option: {old} \(.*\)\n", result.stderr), result.stderr


def _main(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "offloaddoctor", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    )


def test_bare_command_prints_help_to_stdout_with_full_summaries():
    result = _main()
    assert result.returncode == 0 and result.stderr == ""
    assert "Usage: offloaddoctor" in result.stdout
    commands = result.stdout.split("Commands:")[1]
    assert "..." not in commands  # no summary cut mid-sentence
    assert "all violations at once." in " ".join(commands.split())


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", "--bogus", "x.log"],
        ["check", "--format", "junit", "x.yaml"],
        ["compare", "only-one.log"],
        ["diagnose"],
    ],
)
def test_usage_errors_are_one_line_like_every_other_error(argv, command_line):
    result = command_line(*argv)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offloaddoctor: error: "), result.stderr
    assert "--help" in lines[0]


MORE_THAN_A_PIPE_HOLDS = 1 << 20  # Linux's default pipe holds 64 KiB, macOS's at most 64 KiB


def wait_until_reading_stdin(process: subprocess.Popen, deadline_s: float = 60.0) -> None:
    """Return once the child has taken more of its standard input than a pipe holds: it is then in its reading
    loop, past start-up (a Ctrl-C during Python's imports would be Python's own traceback, not ours). Its
    standard input stays open, so it keeps waiting for more."""
    assert process.stdin is not None
    fd = process.stdin.fileno()
    os.set_blocking(fd, False)
    lines = b"iteration 1 | fine\n" * 4096
    taken = 0
    deadline = time.monotonic() + deadline_s
    while taken <= MORE_THAN_A_PIPE_HOLDS:
        assert process.poll() is None, f"exited ({process.returncode}) before reading its standard input"
        assert time.monotonic() < deadline, f"took {taken} bytes of standard input in {deadline_s} s"
        try:
            taken += os.write(fd, lines)
        except BlockingIOError:  # the pipe is full: the child has not read it yet
            time.sleep(0.01)


# `python -m offloaddoctor ARGS` with a terminal's Ctrl-C: a suite started in the background (`make test &`) hands
# its children SIGINT ignored, and Python then never raises KeyboardInterrupt.
AS_FROM_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'offloaddoctor'; runpy.run_module('offloaddoctor', run_name='__main__', alter_sys=True)"
)


def test_ctrl_c_exits_130():
    # diagnose, diagnose with a short-option cluster, and another command
    for argv in (["diagnose", "-"], ["diagnose", "-", "-rv"], ["metrics", "-"]):
        process = subprocess.Popen(
            [sys.executable, "-c", AS_FROM_A_TERMINAL, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until_reading_stdin(process)
        process.send_signal(signal.SIGINT)
        # Standard input stays open until the child has exited: closing it (as communicate() does) can hand a
        # loaded machine's child its end of input before the signal, and a finished run exits 0.
        assert process.stdin is not None and process.stderr is not None
        try:
            process.wait(timeout=30)
        finally:
            process.stdin.close()
        err = process.stderr.read()
        assert process.returncode == 130, (argv, err)
        assert "Traceback" not in err and "Aborted" not in err


def test_compare_json_has_the_tool_key(monkeypatch):
    monkeypatch.chdir(FAMILY)
    document = json.loads(run("compare", "baseline.log", "opt025.log", "-f", "json").stdout)
    assert document["tool"]["name"] == "offloaddoctor" and document["schema_version"] == 1


def test_config_given_as_the_log_and_log_given_as_config_are_recognised():
    result = run("diagnose", OTHER_RUN_CONFIG)
    assert result.exit_code == 2 and "this is a config, not a log: pass it with --config" in result.stderr
    result = run("diagnose", MULTIRANK, "--config", MULTIRANK)
    assert result.exit_code == 2 and "this is a training log, not a config: pass it as LOG" in result.stderr
    result = run("check", MULTIRANK)
    assert result.exit_code == 2 and "this is a training log, not a config" in result.stderr


def test_readme_headline_example_runs_from_fixtures():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("```\n$ cd ", 1)[1].split("```", 1)[0].splitlines()
    directory, command, expected = block[0], block[1], block[2:]
    assert command.startswith("$ offloaddoctor diagnose ")
    result = subprocess.run(
        [sys.executable, "-m", "offloaddoctor", *command[2:].split()[1:], "--format", "text"],
        cwd=REPO / directory,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    output = result.stdout.splitlines()
    # README lines appear in order; consecutive README lines are consecutive output lines; `…` skips lines.
    position, must_follow = 0, True
    for line in expected:
        if line == "…":
            must_follow = False
            continue
        found = output.index(line, position) if line in output[position:] else -1
        assert found >= 0, f"README line not in the output (in order): {line!r}"
        assert not must_follow or found == position, f"README line not where expected: {line!r}"
        position, must_follow = found + 1, True
