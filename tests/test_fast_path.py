"""The fast road (`diagnose` without typer): its spec is current, it parses exactly as typer does or
leaves argv to typer, and a run on it is indistinguishable from a run through typer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloaddoctor.cli import _fast_spec, app, fast_path, run_diagnose
from offloaddoctor.cli.common import OutputFormat

from .conftest import FIXTURES, REPO, RUNNER

SPEC = _fast_spec.COMMANDS["diagnose"]
PP_LOG = str(FIXTURES / "pp-cpu-offload" / "job.log")


def test_spec_is_current():
    wanted = fast_path.render_spec(fast_path.build_spec(app))
    assert Path(_fast_spec.__file__).read_text(encoding="utf-8") == wanted, "run: python3 tools/gen_fast_spec.py"


def typer_kwargs(argv: list[str], monkeypatch) -> dict | None:
    """What typer hands the command for argv, or None when typer refuses argv."""
    received = []

    def record(**kwargs):
        received.append(kwargs)
        return 0

    from offloaddoctor.cli import run_check

    monkeypatch.setattr(run_diagnose, "run_diagnose", record)
    monkeypatch.setattr(run_check, "run_check", record)
    monkeypatch.setattr(run_check, "run_metrics", record)
    result = RUNNER.invoke(app, argv)
    if not received:
        assert result.exit_code != 0, result.output
        return None
    assert result.exit_code == 0, result.output
    return received[0]


LONG_OPTIONS = sorted(name for name in SPEC["options"] if name.startswith("--"))
VALUES = [
    "json",
    "text",
    "JSON",
    "github",
    "bogus",
    "",
    "-",
    "--",
    "--format",
    "-c",
    "a=b",
    "x.log",
    "logs/",
    "error",
    "never",
    "Warning",
    "--recursive",
    "-r",
]
TOKENS = st.one_of(
    st.sampled_from(
        sorted(SPEC["options"]) + ["--help", "--bogus", "-x", "-rc", "-fjson", "-c=x", "--", "-", "---format"]
    ),
    st.sampled_from(VALUES),
    st.builds(lambda name, value: f"{name}={value}", st.sampled_from(LONG_OPTIONS), st.sampled_from(VALUES)),
    st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=6),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(TOKENS, max_size=8))
def test_fast_road_parses_as_typer_or_steps_aside(tokens, monkeypatch):
    argv = ["diagnose", *tokens]
    parsed = fast_path.parse(argv)
    if parsed is None:
        return  # typer takes it: whatever it does is by definition typer's behaviour
    target, kwargs = parsed
    assert target == "offloaddoctor.cli.run_diagnose:run_diagnose"
    assert typer_kwargs(argv, monkeypatch) == kwargs


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", "job.log"],
        ["diagnose", "rank0.log", "rank1.log", "--format", "json"],
        ["diagnose", "job.log", "-f", "json", "-o", "report.xml", "--output=md=summary.md"],
        ["diagnose", "-r", "logs/", "--fail-on", "warning", "--ignore", "optimizer-offload-slowdown"],
        ["diagnose", "job.log", "--config", "cfg.yaml", "-s", "model.cpu_offloading=true", "--set=a.b=c"],
        ["diagnose", "job.log", "--signatures", "team/", "--baseline", "base.log", "--format=github"],
        ["diagnose", "--", "-odd-name.log"],
        ["diagnose", "-"],
        ["check", "cfg.yaml"],
        ["check", "--set", "model.cpu_offloading=true", "-s", "a=1", "--no-defaults", "-f", "json", "--select", "x"],
        ["check", "a.yaml", "b.sh", "--signatures", "team/"],
        ["metrics", "job.log", "-f", "csv"],
        ["metrics", "a.log", "logs/", "--format=json"],
    ],
)
def test_ordinary_argv_takes_the_fast_road_with_typers_arguments(argv, monkeypatch):
    parsed = fast_path.parse(argv)
    assert parsed is not None
    assert typer_kwargs(argv, monkeypatch) == parsed[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose"],  # typer: missing argument
        ["diagnose", "--help"],
        ["diagnose", "job.log", "--format", "yaml"],  # typer names the choices
        ["diagnose", "job.log", "--format"],
        ["diagnose", "job.log", "-rf", "json"],  # a short-option cluster
        ["diagnose", "job.log", "--recursive=yes"],
        ["--version"],
        ["compare", "a.log", "b.log"],  # not a fast-road command
        ["metrics"],  # typer: missing argument
        ["metrics", "job.log", "-f", "yaml"],
        ["diagnose", "-h"],  # help, as --help: typer prints it
        ["diagnose", "job.log", "-h"],
        ["check", "-h"],
    ],
)
def test_anything_unusual_is_left_to_typer(argv):
    assert fast_path.parse(argv) is None


def fast_road(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = fast_path.run(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("output_format", [f.value for f in OutputFormat if f.value not in ("auto", "terminal")])
@pytest.mark.parametrize("log", ["pp-cpu-offload", "oom-fragmentation-multirank", "clean-baseline"])
def test_a_run_on_the_fast_road_is_a_run_through_typer(log, output_format, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    argv = ["diagnose", str(FIXTURES / log / "job.log"), "--format", output_format]
    through_typer = RUNNER.invoke(app, argv)
    assert fast_road(argv, capsys) == (through_typer.exit_code, through_typer.stdout, through_typer.stderr)


def test_usage_errors_found_by_the_command_are_the_same_one_line(tmp_path, capsys):
    argv = ["diagnose", str(tmp_path / "missing.log"), "--ignore", "no-such-id"]
    through_typer = RUNNER.invoke(app, argv)
    assert through_typer.exit_code == 2
    assert fast_road(argv, capsys) == (2, "", through_typer.stderr)


def run_module(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "offloaddoctor", *args], env=env, capture_output=True, text=True, check=False, **kwargs
    )


def test_the_installed_command_takes_the_fast_road_without_typer_or_typing(tmp_path):
    """Start-up budget (README, benchmarks/startup.py): importing typer costs ~5x a bare Python start and
    typing ~0.5x; modules on diagnose's path keep typing names under `if TYPE_CHECKING:`."""
    for _ in range(2):  # the first run may parse the catalogue's YAML into the cache
        result = _run_listing_modules(["diagnose", PP_LOG, "-f", "json"], ("typer", "typing", "yaml"), tmp_path)
    assert result.stderr == "1 []"
    assert '"id": "pp-cpu-offload"' in result.stdout


def test_check_of_a_yaml_config_loads_neither_the_log_readers_nor_the_text_renderer(tmp_path):
    """Start-up of `check` (docs/performance.md): a config check reads no log, so the scanner, the line pass,
    the log-config collector and source resolution (gzip) stay unloaded, and JSON output skips the plain
    renderer (textwrap)."""
    config = tmp_path / "cfg.yaml"
    config.write_text("model:\n  num_layers: 16\n")
    unwanted = (
        "offloaddoctor.analysis.scanner",
        "offloaddoctor.logs.line_pass",
        "offloaddoctor.logs.sources",
        "offloaddoctor.config.from_log",
        "offloaddoctor.render.plain",
        "gzip",
        "textwrap",
        "typer",
    )
    result = _run_listing_modules(["check", str(config), "-f", "json"], unwanted, tmp_path)
    assert result.stderr == "0 []"
    assert '"violations": []' in result.stdout


def test_a_closed_pipe_ends_quietly_on_both_roads():
    for args in (["diagnose", PP_LOG, "-f", "json"], ["diagnose", PP_LOG, "-f", "json", "-rf", "json"]):
        process = subprocess.Popen(
            [sys.executable, "-m", "offloaddoctor", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
        process.stdout.close()  # before the child writes: its first write meets EPIPE
        stderr = process.stderr.read().decode()
        assert process.wait() == 1
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


def test_help_and_version_still_come_from_typer():
    assert "Usage:" in run_module("diagnose", "--help").stdout
    for argv in (["diagnose", "-h"], ["diagnose", PP_LOG, "-h"], ["-h"]):
        short = run_module(*map(str, argv))
        assert short.returncode == 0 and short.stdout.startswith("Usage: offloaddoctor"), short.stderr
    assert run_module("--version").stdout.startswith("offloaddoctor ")
    bad = run_module("diagnose", PP_LOG, "--format", "yaml")
    assert bad.returncode == 2 and "yaml" in bad.stderr


def _run_listing_modules(argv: list[str], modules: tuple[str, ...], cwd) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter; stderr is its exit code and which of `modules` it loaded."""
    probe = (
        f"import sys; sys.argv = ['offloaddoctor', *{argv!r}]\n"
        "from offloaddoctor.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"listed = {modules!r}\n"
        "sys.stderr.write(f'{code} {sorted(m for m in listed if m in sys.modules)}')"
    )
    return subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )
