"""The command line as users run it: exit codes, one-line errors, stdin, gz, directories, formats."""

from __future__ import annotations

import functools
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offloaddoctor.cli import app

from tests.conftest import EVERY_FIXTURE, FIXTURES, REPO, RUNNER, diagnosed_alone, run_python, schema_validator

PP_LOG = FIXTURES / "pp-cpu-offload" / "job.log"
CLEAN_LOG = FIXTURES / "clean-baseline" / "job.log"


def run(*args: str, input: str | bytes | None = None):
    return RUNNER.invoke(app, list(args), input=input)


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("offloaddoctor: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output


def test_error_finding_exits_1_and_clean_log_exits_0():
    assert run("diagnose", str(PP_LOG)).exit_code == 1
    clean = run("diagnose", str(CLEAN_LOG))
    assert clean.exit_code == 0
    assert "no known failure" in clean.stdout


def test_missing_file(tmp_path):
    assert_one_line_error(run("diagnose", str(tmp_path / "nope.log")), "nope.log", "no such file")


def test_directory_with_no_logs(tmp_path):
    (tmp_path / "notes.md").write_text("x")
    assert_one_line_error(run("diagnose", str(tmp_path)), "no log files")


def test_binary_file(tmp_path):
    path = tmp_path / "core.log"
    path.write_bytes(bytes(range(256)) * 64)
    assert_one_line_error(run("diagnose", str(path)), "binary")


def test_broken_yaml_config(tmp_path):
    config = tmp_path / "cfg.yaml"
    config.write_text("model:\n  pipeline_model_parallel_size: [4\n")
    assert_one_line_error(run("diagnose", str(PP_LOG), "--config", str(config)), "cfg.yaml", "invalid YAML")


def test_set_without_equals():
    assert_one_line_error(run("diagnose", str(PP_LOG), "--set", "model.pipeline_model_parallel_size"), "KEY=VALUE")


def test_unknown_signature_id_suggests():
    assert_one_line_error(run("explain", "pp-cpu-ofload"), "did you mean pp-cpu-offload")


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "job.log.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert_one_line_error(run("diagnose", str(path)), "gzip")


def test_truncated_gzip_is_read_as_far_as_it_goes(tmp_path):
    data = gzip.compress(PP_LOG.read_bytes())
    path = tmp_path / "job.log.gz"
    path.write_bytes(data[: len(data) * 3 // 4])
    result = run("diagnose", str(path), "--format", "json")
    assert result.exit_code in (0, 1)  # how much of the log survives decides whether the finding is there
    assert any("gzip" in note for note in json.loads(result.stdout)["notes"])


def test_gzip_directory_and_stdin_give_the_same_finding(tmp_path):
    (tmp_path / "job.log.gz").write_bytes(gzip.compress(PP_LOG.read_bytes()))
    from_dir = json.loads(run("diagnose", str(tmp_path), "-f", "json").stdout)
    from_stdin = json.loads(run("diagnose", "-", "-f", "json", input=PP_LOG.read_bytes()).stdout)
    assert [f["id"] for f in from_dir["findings"]] == [f["id"] for f in from_stdin["findings"]] == ["pp-cpu-offload"]
    assert from_stdin["sources"][0]["path"] == "<stdin>"


def test_crlf_and_invalid_utf8_are_tolerated(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(
        b"\xff\xfe junk\r\n[rank0]: ValueError: CPU offloading does not work when activation "
        b"recomputation is enabled\r\n"
    )
    data = json.loads(run("diagnose", str(path), "-f", "json").stdout)
    assert [f["id"] for f in data["findings"]] == ["recompute-cpu-offload"]
    assert data["findings"][0]["evidence"][0]["text"].endswith("enabled")


def test_signatures_and_explain():
    listing = run("signatures")
    assert listing.exit_code == 0 and "pp-cpu-offload" in listing.stdout
    listed = json.loads(run("signatures", "--format", "json").stdout)
    assert len(listed["signatures"]) >= 19
    explained = run("explain", "oom-fragmentation")
    assert explained.exit_code == 0 and "expandable_segments" in explained.stdout


def test_explain_says_where_the_fix_was_run_with_each_log_name_whole():
    explained = run("explain", "vpp-layer-divisibility").stdout
    assert "Where this fix was run" in explained
    assert "fixtures/memory-calibration/b30-gpt6l-pp2-advised.log.gz trained" in " ".join(explained.split())
    assert "fixtures/memory-calibration/refused/b29-gpt6l-pp2-vpp2-refused.log.gz" in explained  # one line


def test_explain_cites_the_guides_as_published_not_as_files_users_do_not_have():
    """References named the project's reference files (`seeds/skill-cpu-offloading.txt`), which no user has."""
    explained = run("explain", "pp-cpu-offload").stdout
    assert "seeds/" not in explained
    assert "the CPU-offloading guide (Megatron-Bridge docs/training/cpu-offloading.md" in explained
    assert "the memory-tuning guide (Megatron-Bridge docs/parallelisms.md" in explained
    for page in (REPO / "docs" / "signatures").glob("*.md"):
        assert "seeds/" not in page.read_text(encoding="utf-8"), page.name


def test_markup_in_logs_is_not_interpreted_by_the_terminal_renderer(tmp_path):
    path = tmp_path / "job.log"
    path.write_text(
        "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading "
        "[bold red]boom[/bold red] \x1b]0;pwned\x07\n"
    )
    result = run("diagnose", str(path), "-f", "terminal", "--details")  # the whole evidence line
    assert "[bold red]boom[/bold red]" in result.stdout
    assert "\x1b]0;" not in result.stdout


def test_installed_entry_point_runs_without_a_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "offloaddoctor", "diagnose", "/definitely/missing.log"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "offloaddoctor: error: /definitely/missing.log: no such file or directory"


def _fails(log: Path) -> bool:
    """Whether the library's report on the log fails the run: the exit code every format must give (one
    diagnosis per fixture for the three formats, shared with test_runs.py)."""
    from offloaddoctor.policy import Policy

    return Policy().failed(diagnosed_alone(str(log)))


@functools.cache
def _diagnosed_as_json(log: Path) -> tuple[int, str]:
    """`diagnose LOG -f json`: its exit code and output (text: immutable, shared by the two tests that read it)."""
    result = run("diagnose", str(log), "-f", "json")
    return result.exit_code, result.stdout


@EVERY_FIXTURE
def test_the_cli_exits_by_the_policy_on_every_fixture():
    for case in sorted(p.parent for p in FIXTURES.glob("*/job.log")):
        exit_code, output = _diagnosed_as_json(case / "job.log")
        assert exit_code == (1 if _fails(case / "job.log") else 0), (case.name, output)


@EVERY_FIXTURE
@pytest.mark.parametrize("details", [False, True])
def test_every_fixtures_report_renders_as_text_and_on_a_terminal(details, catalog):
    """The renderers behind `-f text` and `-f terminal`, on each fixture's report (the CLI's own road for each
    format is the next test's): every finding named, whatever the report holds."""
    import io

    from rich.console import Console

    from offloaddoctor.policy import Policy
    from offloaddoctor.render.outputs import render
    from offloaddoctor.render.terminal import render_terminal

    for log in sorted(FIXTURES.glob("*/job.log")):
        report = diagnosed_alone(str(log))
        screen = Console(file=io.StringIO(), force_terminal=True, width=100)
        render_terminal(report, screen, details)
        for output in (render(report, "text", catalog, Policy(), details), screen.file.getvalue()):
            assert all(finding.id in output for finding in report.findings), log


@pytest.mark.parametrize("fmt", ["text", "terminal"])
@pytest.mark.parametrize("case", ["pp-cpu-offload", "clean-baseline"])
def test_each_format_through_the_cli_exits_by_the_policy(fmt, case):
    log = FIXTURES / case / "job.log"
    result = run("diagnose", str(log), "-f", fmt)
    assert result.exit_code == (1 if _fails(log) else 0), result.output
    assert all(finding.id in result.output for finding in diagnosed_alone(str(log)).findings)


# `-f json` and `-fjson` (a value glued to a short option): click parses both.
@pytest.mark.parametrize("argv", [["diagnose", str(PP_LOG), "-f", "json"], ["diagnose", str(PP_LOG), "-fjson"]])
def test_an_internal_error_is_one_line_and_its_own_exit_code(argv, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("evidence")

    monkeypatch.setattr("offloaddoctor.report.build_report", broken)
    result = run(*argv)
    assert result.exit_code == 3
    assert result.stderr == (
        "offloaddoctor: internal error, please report: KeyError: 'evidence'; run again with --debug for the traceback\n"
    )
    assert result.stdout == ""


def test_debug_shows_the_traceback_of_an_internal_error(monkeypatch):
    from offloaddoctor.cli import common

    monkeypatch.setattr("offloaddoctor.report.build_report", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(common, "DEBUG", False)
    result = run("--debug", "diagnose", str(PP_LOG))
    assert result.exit_code == 3
    assert "Traceback (most recent call last)" in result.stderr and "ZeroDivisionError" in result.stderr
    assert (
        result.stderr.splitlines()[-1]
        == "offloaddoctor: internal error, please report: ZeroDivisionError: division by zero"
    )


def test_the_installed_command_reports_an_internal_error_with_exit_3(tmp_path):
    probe = (
        "import sys; sys.argv = ['offloaddoctor', 'diagnose', %r]\n"
        "import offloaddoctor.report as report\n"
        "report.build_report = lambda *a, **k: {}['boom']\n"
        "from offloaddoctor.cli import main\nmain()\n"
    ) % str(PP_LOG)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert result.stderr.startswith("offloaddoctor: internal error, please report: KeyError: 'boom'")


@EVERY_FIXTURE
def test_json_output_validates_against_the_published_schema():
    for case in sorted(p.parent for p in FIXTURES.glob("*/job.log")):
        data = json.loads(_diagnosed_as_json(case / "job.log")[1])
        schema_validator("report.schema.json").validate(data)


PP_LOG_NAME = str(PP_LOG)


def test_check_of_a_yaml_config_loads_neither_the_log_readers_nor_the_text_renderer(tmp_path):
    """Start-up of `check` (docs/performance.md): a config check reads no log, so the scanner, the line pass,
    the log-config collector and source resolution (gzip) stay unloaded, and JSON output skips the plain
    renderer."""
    config = tmp_path / "cfg.yaml"
    config.write_text("model:\n  num_layers: 16\n")
    unwanted = (
        "offloaddoctor.scanning.scanner",
        "offloaddoctor.logs.line_pass",
        "offloaddoctor.logs.sources",
        "offloaddoctor.config.from_log",
        "offloaddoctor.render.plain",
        "gzip",
    )
    result = _run_listing_modules(["check", str(config), "-f", "json"], unwanted, tmp_path)
    assert result.stderr == "0 []", result.stderr
    assert '"violations": []' in result.stdout


def test_a_closed_pipe_ends_quietly():
    for args in (["diagnose", PP_LOG_NAME, "-f", "json"], ["diagnose", PP_LOG_NAME, "-f", "json", "-rf", "json"]):
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


def test_help_and_version(command_line):
    assert "Usage:" in command_line("diagnose", "--help").stdout
    for argv in (["diagnose", "-h"], ["diagnose", PP_LOG_NAME, "-h"], ["-h"]):
        short = command_line(*map(str, argv))
        assert short.returncode == 0 and short.stdout.startswith("Usage: offloaddoctor"), short.stderr
    assert command_line("--version").stdout.startswith("offloaddoctor ")
    bad = command_line("diagnose", PP_LOG_NAME, "--format", "yaml")
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
    return run_python(probe, check=False, cwd=cwd)


@pytest.fixture
def warm_catalog_cache():
    """The built-in catalogue's JSON cache entry in place, as after a user's first run, for a CLI started next:
    loading it here reads the entry, or writes it where other catalogues' entries pushed it out (cache.KEEP)."""
    from offloaddoctor.api import load_catalog

    load_catalog()


# Start-up (docs/performance.md, "start-up"): one CLI, typer's; a command module imports only typer and light
# names at module level, the library and its heavy dependencies are imported by the command that runs.
LIBRARY_AND_HEAVY = (
    "offloaddoctor.api",
    "offloaddoctor.scanning.scanner",
    "offloaddoctor.catalog.loader",
    "offloaddoctor.config.loading",
    "offloaddoctor.metrics",
    "offloaddoctor.policy",
    "rich",
    "yaml",
    "regex",
    "json",
)


@pytest.mark.parametrize("argv", [["--version"], ["-h"], ["--help"], ["diagnose", "-h"], ["check", "--help"], []])
def test_help_and_version_load_neither_the_library_nor_rich_nor_yaml(argv, tmp_path):
    result = _run_listing_modules(argv, LIBRARY_AND_HEAVY, tmp_path)
    assert result.stderr.endswith(" []"), result.stderr
    assert result.stdout.startswith(("Usage: offloaddoctor", "offloaddoctor ")), result.stdout


def test_diagnose_as_json_loads_neither_rich_nor_yaml(tmp_path, warm_catalog_cache):
    """rich is for terminal output only; the catalogue comes from its JSON cache, not the YAML files."""
    result = _run_listing_modules(["diagnose", PP_LOG_NAME, "-f", "json"], ("rich", "yaml"), tmp_path)
    assert result.stderr == "1 []", result.stderr
    assert '"id": "pp-cpu-offload"' in result.stdout


@pytest.mark.parametrize(
    ("argv", "not_loaded", "shown"),
    [
        (["--version"], ("offloaddoctor.cli.diagnose", "offloaddoctor.cli.catalog"), "offloaddoctor "),
        (["estimate", str(FIXTURES / "estimate" / "llama3-8b-launch.sh")], ("yaml",), "Peak allocated"),
        (["explain", "pp-cpu-offload"], ("regex",), "one of the patterns"),
        (["signatures"], ("offloaddoctor.config.values", "offloaddoctor.config.loading"), "pp-cpu-offload"),
        (["metrics", PP_LOG_NAME], ("statistics",), "no iteration lines"),
        (
            ["check", str(FIXTURES / "check" / "many-violations.yaml"), "-f", "text"],
            ("offloaddoctor.config.run_identity", "offloaddoctor.report.runs"),
            "4 violations in",
        ),
        (
            [
                "bisect",
                "--good-config",
                str(FIXTURES / "configs" / "bridge-override-pp2-offload-layers-0.yaml"),
                "--bad-config",
                str(FIXTURES / "configs" / "bridge-override-pp2-activation-offload.yaml"),
            ],
            ("offloaddoctor.bisect.git",),
            "two configs",
        ),
        (
            ["bisect-step", "--config", str(FIXTURES / "check" / "many-violations.yaml")],
            ("offloaddoctor.bisect.run_mode",),
            "bad: violates",
        ),
    ],
)
def test_a_small_run_loads_only_what_it_uses(argv, not_loaded, shown, tmp_path, warm_catalog_cache):
    """`--version` builds no command; a launch script is read without PyYAML; `explain` prints the patterns'
    sources without compiling them (the `regex` module); listing the catalogue loads no config reading (its
    config values are dataclasses: creating them costs start-up); `metrics` of a log without iteration lines
    takes no median (`statistics` imports decimal, fractions, random); `check`'s text has no runs to tell apart;
    bisecting two configs loads no git plumbing; `bisect-step --config` loads no run mode. The catalogue's
    cache is warm, as after a user's first run."""
    result = _run_listing_modules(argv, not_loaded, tmp_path)
    assert result.stderr.endswith(" []"), result.stderr
    assert shown in result.stdout + result.stderr, result


def test_diagnose_of_a_small_log_creates_and_compiles_only_what_its_lines_need(tmp_path, warm_catalog_cache):
    """Issue 28.2 (start-up): the metrics command's run and summary records (metrics/model.py: four dataclasses,
    each ~1 ms to create) are not diagnose's; a fix line without `{key}`, a traceback's megatron/ paths and
    printable catalogue text compile no pattern."""
    probe = (
        f"import sys; sys.argv = ['offloaddoctor', 'diagnose', {PP_LOG_NAME!r}, '-f', 'json']\n"
        "from offloaddoctor.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "from offloaddoctor import text_safety\n"
        "from offloaddoctor.config import from_log\n"
        "from offloaddoctor.report import engine\n"
        "patterns = {'_UNSAFE': text_safety._UNSAFE, '_RUNNER_COMMAND': text_safety._RUNNER_COMMAND,"
        " '_VERSION_LINE': from_log._VERSION_LINE, '_PLACEHOLDER': engine._PLACEHOLDER}\n"
        "compiled = sorted(name for name, pattern in patterns.items() if '_compiled' in vars(pattern))\n"
        "sys.stderr.write(f\"{'offloaddoctor.metrics.model' in sys.modules} {compiled}\")"
    )
    result = run_python(probe, check=False, cwd=tmp_path)  # the catalogue's cache is warm
    assert result.stderr == "False []", result.stderr
    assert '"id": "pp-cpu-offload"' in result.stdout
    assert "megatron/core" in PP_LOG.read_text()  # the log has the lines the guards pass over


# Issue 28.2 (start-up): what a command reads and never changes is a NamedTuple; a frozen dataclass took ~3 M
# instructions to create on Python 3.11 (RunShape ~26 M). The catalogue's MatchSpec (its compiled patterns are
# cached on it) and Example (its config defaults to a new dict) are the two left.
SMALL_RUNS = {
    "diagnose": ["diagnose", PP_LOG_NAME, "-f", "json"],
    "check": ["check", str(FIXTURES / "check" / "many-violations.yaml")],
    "estimate": ["estimate", str(FIXTURES / "estimate" / "llama3-8b-launch.sh"), "--gpu", "H100-80GB"],
    "compare": ["compare", PP_LOG_NAME, PP_LOG_NAME],
    "bisect": [
        "bisect",
        *("--good-config", str(FIXTURES / "configs" / "bridge-override-pp2-offload-layers-0.yaml")),
        *("--bad-config", str(FIXTURES / "configs" / "bridge-override-pp2-activation-offload.yaml")),
    ],
    "bisect-step": ["bisect-step", "--config", str(FIXTURES / "check" / "many-violations.yaml")],
}


@pytest.mark.parametrize("command", SMALL_RUNS)
def test_a_small_run_makes_no_frozen_dataclass_but_the_catalogues_two(command, tmp_path, warm_catalog_cache):
    probe = (
        f"import sys; sys.argv = ['offloaddoctor', *{SMALL_RUNS[command]!r}]\n"
        "from offloaddoctor.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import dataclasses\n"
        "made = [(name, value) for name, module in list(sys.modules.items()) if name.startswith('offloaddoctor')"
        " for value in vars(module).values() if isinstance(value, type) and value.__module__ == name]\n"
        "frozen = sorted(f'{name}.{value.__name__}' for name, value in made"
        " if dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen)\n"
        "sys.stderr.write('\\nfrozen: ' + ' '.join(frozen))"
    )
    result = run_python(probe, check=False, cwd=tmp_path)
    frozen = result.stderr.rpartition("\nfrozen: ")[2]
    assert frozen == "offloaddoctor.catalog.model.Example offloaddoctor.catalog.model.MatchSpec", result.stderr


def test_there_is_one_command_line():
    """The second, typer-free parser of `diagnose`/`check`/`metrics` is gone (issue 28.2): every argv goes
    through typer, so a new option cannot be parsed one way here and another way there."""
    import offloaddoctor.cli as cli

    package = Path(cli.__file__).parent
    assert not (package / "fast_path.py").exists() and not (package / "_fast_spec.py").exists()
    assert not (REPO / "tools" / "gen_fast_spec.py").exists()


def test_typer_reads_the_commands_annotations_without_compiling_them():
    """Start-up (issue 28.2): typer reads every parameter's annotation (get_type_hints); a postponed one is a
    string that it compiles, ~20 M instructions of `--help`."""
    from offloaddoctor.cli import COMMAND_MODULES, typer_app

    app = typer_app()
    groups = [group.typer_instance for group in app.registered_groups]
    callbacks = [info.callback for typer in (app, *groups) for info in typer.registered_commands]
    callbacks += [typer.registered_callback.callback for typer in (app, *groups)]
    postponed = {
        f"{callback.__module__}.{callback.__name__}": name
        for callback in callbacks
        for name, annotation in callback.__annotations__.items()
        if isinstance(annotation, str)
    }
    assert len(callbacks) > len(COMMAND_MODULES) and postponed == {}


def test_every_command_is_declared_in_the_module_the_map_names():
    """`typer_app(command)` imports only that command's module: the map must name the module that declares it."""
    from offloaddoctor.cli import COMMAND_MODULES, typer_app

    app = typer_app()
    declared = {
        info.name or info.callback.__name__.replace("_", "-"): info.callback.__module__
        for info in app.registered_commands
    }
    for group in app.registered_groups:
        declared[group.name] = group.typer_instance.registered_callback.callback.__module__
    assert declared == {name: f"offloaddoctor.cli.{module}" for name, module in COMMAND_MODULES.items()}


def test_a_command_loads_only_its_own_module(tmp_path):
    others = tuple(f"offloaddoctor.cli.{module}" for module in ("check", "estimate", "bisect", "measure", "catalog"))
    for argv in (["diagnose", PP_LOG_NAME, "-f", "json"], ["--debug", "diagnose", PP_LOG_NAME, "-f", "json"]):
        result = _run_listing_modules(argv, others, tmp_path)
        assert result.stderr == "1 []", result.stderr
    result = _run_listing_modules(["metrics", PP_LOG_NAME], ("offloaddoctor.cli.diagnose",), tmp_path)
    assert result.stderr == "0 []", result.stderr


def test_help_lists_the_commands_in_their_order_whichever_ran_first(tmp_path):
    """In one process (embedding, tests), a command run first registers its module first."""
    from offloaddoctor.cli import COMMAND_MODULES

    probe = (
        "from offloaddoctor.cli import run_typer\n"
        "run_typer(['explain', 'pp-cpu-offload'])\n"  # registers explain and signatures before the others
        "run_typer(['metrics', '--help'])\n"
        "print('HELP')\n"
        "run_typer(['--help'])\n"
    )
    result = run_python(probe, cwd=tmp_path)
    commands = result.stdout.split("HELP\n")[1].split("Commands:\n")[1].split("\n\n")[0]
    listed = [line.split()[0] for line in commands.splitlines() if line.startswith("  ") and line[2] != " "]
    assert listed == list(COMMAND_MODULES)
