"""CI formats (github, junit, markdown), several outputs in one run, --fail-on, --ignore, project files.
Log text is hostile here: nothing from it may become a runner command or a terminal escape."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from offloaddoctor.api import check, compare, diagnose
from offloaddoctor.cli import app
from offloaddoctor.render.github import (
    MAX_ANNOTATIONS,
    escape_data,
    escape_property,
    render_github,
)
from offloaddoctor.render.markdown import render_markdown

from tests.conftest import FIXTURES, RUNNER, builtin_catalog

CATALOG = builtin_catalog()
PP_LOG = FIXTURES / "pp-cpu-offload" / "job.log"
MULTI = FIXTURES / "oom-fragmentation-multirank" / "job.log"
HOSTILE = [
    "::error::pwned",
    "  ::add-mask::secret",
    "##[set-output name=x;]y",
    "%0A::warning::z",
    "\x1b]8;;http://x\x07link",
    "\x1b[31mred[/]",
    "[bold red]markup[/bold red]",
    "a\rb::error::c",
    # C1 controls (0x9b is CSI, 0x9d OSC to some terminals), OSC ended by ST, BEL, Unicode line breaks, bidi overrides
    "\x9b31mc1-csi",
    "\x9d0;title\x9c",
    "\x1b]0;title\x1b\\st",
    "bell\x07",
    "\u2028::error::ls",
    "\x85::error::nel",
    "\x0b::error::vt",
    "\x0c::error::ff",
    "\u202eevil\u202c",
    "\t::error::tab",
]
COMMAND = re.compile(r"^\s*::")
# Raw characters that act on a terminal or could end a line for some reader: everything but tab and newline.
_ACTING = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def hostile_log(tmp_path):
    lines = [
        f"[rank0]: ValueError: Currently there is no support for Pipeline parallelism with CPU offloading {h}"
        for h in HOSTILE
    ]
    lines += ["Traceback (most recent call last):", f"RuntimeError: unknown failure {HOSTILE[0]} {HOSTILE[2]}"]
    path = tmp_path / "hostile.log"
    path.write_bytes("\n".join(lines).encode() + b"\n")
    return path


def assert_inert(text: str, allowed_commands: int = 0) -> None:
    assert not _ACTING.findall(text) and "##[" not in text, sorted(set(_ACTING.findall(text)))
    commands = [line for line in text.splitlines() if COMMAND.match(line)]
    assert len(commands) <= allowed_commands
    for line in commands:  # ours: a known command, one line, data escaped
        assert re.match(r"^::(error|warning|notice) [^:]*::", line), line


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "markdown", "github"])
def test_hostile_log_text_never_becomes_a_command_or_escape(tmp_path, fmt, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = RUNNER.invoke(app, ["diagnose", str(hostile_log(tmp_path)), "--format", fmt])
    assert result.exit_code == 1, result.output
    assert_inert(result.stdout, allowed_commands=MAX_ANNOTATIONS if fmt == "github" else 0)


def test_github_escaping_follows_the_runner():
    assert escape_data("50%\r\n::x") == "50%25%0D%0A::x"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_annotations_are_capped_and_the_rest_goes_to_the_summary():
    report = diagnose([str(MULTI)])
    report.findings = report.findings * 6
    annotations, summary = render_github(report)
    lines = annotations.splitlines()
    assert len([line for line in lines if line.startswith("::")]) == MAX_ANNOTATIONS
    assert lines[0].startswith("::error file=") and ",line=" in lines[0] and "title=oom-fragmentation%3A" in lines[0]
    assert "more in the job summary" in lines[-1]
    assert summary.startswith("## offloaddoctor") and "| 12 |" in summary


def test_auto_is_github_under_actions_and_writes_the_step_summary(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG)])
    assert result.stdout.startswith("::error file=")
    written = summary.read_text()
    assert written.startswith("earlier step\n## offloaddoctor") and "pp-cpu-offload" in written


def test_junit_has_a_case_per_signature_and_failures_with_evidence(tmp_path):
    out = tmp_path / "junit.xml"
    result = RUNNER.invoke(
        app, ["diagnose", str(MULTI), "--format", "text", "--output", str(out), "--ignore", "nccl-collective-failure"]
    )
    assert result.exit_code == 1
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == set(CATALOG.ids)
    assert int(suite.get("tests")) == len(CATALOG.ids)
    failure = cases["oom-fragmentation"].find("failure")
    assert failure is not None and "job.log:" in failure.text and failure.get("type") == "error"
    assert cases["nccl-collective-failure"].find("skipped").get("message") == "--ignore on the command line"
    assert int(suite.get("failures")) == 1 and int(suite.get("skipped")) == 1
    for case in suite.findall("testcase"):
        assert case.get("classname") and case.get("time") == "0"


def test_markdown_keeps_log_text_in_fences(tmp_path):
    text = render_markdown(diagnose([str(hostile_log(tmp_path))]))
    outside_fences, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            outside_fences.append(line)
    assert not any("[bold red]" in line or "::error" in line for line in outside_fences)


def test_several_outputs_in_one_run(tmp_path):
    report_json, report_md = tmp_path / "r.json", tmp_path / "r.md"
    result = RUNNER.invoke(
        app, ["diagnose", str(PP_LOG), "-f", "text", "-o", f"json={report_json}", "-o", str(report_md)]
    )
    assert result.exit_code == 1 and result.stdout.startswith("offloaddoctor ")
    assert json.loads(report_json.read_text())["findings"][0]["id"] == "pp-cpu-offload"
    assert report_md.read_text().startswith("## offloaddoctor")


@pytest.mark.parametrize(
    ("args", "code"),
    [([], 1), (["--fail-on", "never"], 0), (["--ignore", "pp-cpu-offload"], 0), (["--fail-on", "warning"], 1)],
)
def test_fail_on_and_ignore(args, code):
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "-f", "json", *args])
    assert result.exit_code == code
    if "--ignore" in args:
        data = json.loads(result.stdout)
        assert data["suppressed"] == [
            {"id": "pp-cpu-offload", "reason": "--ignore on the command line", "by": "--ignore", "occurrences": 8}
        ]
        assert all(f["id"] != "pp-cpu-offload" for f in data["findings"])


def test_warning_fails_only_with_fail_on_warning(tmp_path):
    log = FIXTURES / "optimizer-offload-slowdown-restart" / "job.log"
    ids = [f["id"] for f in json.loads(RUNNER.invoke(app, ["diagnose", str(log), "-f", "json"]).stdout)["findings"]]
    assert ids == ["optimizer-offload-slowdown"]
    assert RUNNER.invoke(app, ["diagnose", str(log), "-f", "json"]).exit_code == 0
    assert RUNNER.invoke(app, ["diagnose", str(log), "-f", "json", "--fail-on", "warning"]).exit_code == 1


@pytest.mark.parametrize("kind", ["yaml", "pyproject"])
def test_project_file_sets_defaults_and_suppressions(tmp_path, monkeypatch, kind):
    if kind == "yaml":
        (tmp_path / ".offloaddoctor.yaml").write_text(
            "fail_on: never\nignore:\n  - {id: pp-cpu-offload, reason: 'known issue #12'}\n"
        )
    else:
        (tmp_path / "pyproject.toml").write_text(
            '[project]\nname = "x"\n[tool.offloaddoctor]\nfail_on = "never"\n'
            'ignore = [{id = "pp-cpu-offload", reason = "known issue #12"}]\n'
        )
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found by walking up
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "-f", "json"])
    assert result.exit_code == 0
    suppressed = json.loads(result.stdout)["suppressed"]
    assert [(s["id"], s["reason"], s["occurrences"]) for s in suppressed] == [("pp-cpu-offload", "known issue #12", 8)]
    project_file = tmp_path / (".offloaddoctor.yaml" if kind == "yaml" else "pyproject.toml")
    assert suppressed[0]["by"] == json.loads(result.stdout)["project_file"]
    assert Path(suppressed[0]["by"]).resolve() == project_file.resolve()
    assert (
        RUNNER.invoke(
            app, ["diagnose", str(PP_LOG), "-f", "json", "--fail-on", "error", "--ignore", "oom-capacity"]
        ).exit_code
        == 0
    )


@pytest.mark.parametrize(
    ("project", "args", "fragment"),
    [
        ("ignore:\n  - {id: pp-cpu-offload}\n", [], "needs an id and a reason"),
        ("fail_on: sometimes\n", [], "fail_on must be one of"),
        ("colour: blue\n", [], "unknown setting"),
        ("ignore:\n  - {id: pp-cpu-ofload, reason: typo}\n", [], "did you mean pp-cpu-offload"),
        ("", ["--output", "report.pdf"], "FORMAT=PATH"),
        ("", ["--output", "json=/nonexistent/dir/r.json"], "cannot write"),
        ("", ["--ignore", "nope"], "unknown signature id"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, monkeypatch, project, args, fragment):
    (tmp_path / ".offloaddoctor.yaml").write_text(project or "fail_on: error\n")
    monkeypatch.chdir(tmp_path)
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "-f", "json", *args])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr, result.stderr


def test_terminal_panels_show_markup_and_escapes_as_text(tmp_path):
    import io

    from rich.console import Console

    from offloaddoctor.render.terminal import render_terminal

    for index, hostile in enumerate(HOSTILE):
        log = tmp_path / f"{index}.log"
        log.write_text(
            f"[rank0]: ValueError: Currently there is no support for Pipeline parallelism with CPU offloading {hostile}\n"
        )
        buffer = io.StringIO()
        render_terminal(diagnose([str(log)]), Console(file=buffer, width=400, color_system=None))
        shown = buffer.getvalue()
        assert_inert(shown)
        if "[bold red]" in hostile:
            assert "[bold red]markup[/bold red]" in shown  # printed as written, not interpreted


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_check_output_is_inert(tmp_path, fmt):
    config = tmp_path / "cfg.yaml"
    config.write_text(
        "model:\n  pipeline_model_parallel_size: 4\n  cpu_offloading: true\n"
        '  recompute_granularity: "::error::x ##[set-output] \\e[31m [bold]"\n'
    )
    result = RUNNER.invoke(app, ["check", str(config), "-f", fmt])
    assert result.exit_code == 1
    assert_inert(result.stdout)


@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
def test_metrics_output_is_inert(tmp_path, fmt):
    log = tmp_path / "run.log"
    log.write_text("\n".join(HOSTILE) + "\n" + (FIXTURES / "clean-baseline" / "job.log").read_text())
    result = RUNNER.invoke(app, ["metrics", str(log), "-f", fmt])
    assert result.exit_code == 0, result.output
    assert_inert(result.stdout)


# ---- every command and format, with hostile file names, config values and log text in every field ---------

EVIL_NAME = "evil\n::error::name ##[group]\x1b[31m\x9b\u2028"
PP_MESSAGE = "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading"


def hostile_tree(tmp_path):
    """A directory of logs and a config where file names, arguments-block values, OOM and traceback lines,
    environment lines and config values all carry runner commands and escapes."""
    logs = tmp_path / "logs"
    logs.mkdir()
    trailer = " ".join(h for h in HOSTILE if "\r" not in h)  # a `\r` redraws the line: the text before it is gone
    iteration = (
        "[2026-11-22 10:50:4{i}.0] iteration        {i}/      10 | consumed samples: {s} | elapsed time per "
        "iteration (ms): 460.9 | throughput per GPU (TFLOP/s/GPU): 206.9 | learning rate: 1.0E-05 | global "
        "batch size:    32 | lm loss: 8.141713E+00 | loss scale: 1.0 | grad norm: 6.424 | number of skipped "
        "iterations:   0 | number of nan iterations:   0 |"
    )
    lines = [
        "------------------------ arguments ------------------------",
        "  pipeline_model_parallel_size .................... 4",
        "  cpu_offloading .................................. True",
        f"  recompute_granularity ........................... ::error::args {trailer}",
        "  optimizer ....................................... ##[group]adam\x9b31m",
        "  optimizer_cpu_offload ........................... ::warning::x",
        "  optimizer_offload_fraction ...................... ##[set-output]0.5",
        "-------------------- end of arguments ---------------------",
        "+ export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True##[x]\u202e::error::env",
        *(iteration.format(i=i, s=32 * i) for i in range(1, 10)),
        (
            "[Rank 0] (after 5 iterations) memory (MB) | allocated: 8269.31 | max allocated: 13800.10 | reserved: "
            "14388.00 | max reserved: 14388.00 ::error::mem"
        ),
        *(f"[rank{rank}]: {PP_MESSAGE} {h}" for rank, h in enumerate(HOSTILE)),
        (
            f"[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
            f"capacity of 79.18 GiB of which 680.19 MiB is free. {trailer}"
        ),
        "Error: " + "##[x]" * 20000,  # longer than a line may be: cut, with a note naming the file
        "Traceback (most recent call last):",
        f"RuntimeError: unknown failure {trailer}",
    ]
    (logs / "rank0.log").write_text("\n".join(lines) + "\n")
    (logs / f"{EVIL_NAME}.log").write_text(f"{PP_MESSAGE} {trailer}\n")
    config = tmp_path / f"cfg{EVIL_NAME}.yaml"
    config.write_text(
        "model:\n  pipeline_model_parallel_size: 4\n  cpu_offloading: true\n"
        '  recompute_granularity: "::error::x ##[set-output] \\e[31m \\x9b1m \\u2028::warning::y [bold]"\n'
        '  "::error::key ##[k]": 1\n'
    )
    overrides = ["--set", "optimizer.optimizer=::error::set ##[set-output]\x1b[31m\x9b"]
    return logs, config, overrides


def assert_all_inert(result, allowed_commands=0, summary=None):
    assert "Traceback" not in result.output
    assert_inert(result.stdout, allowed_commands)
    assert_inert(result.stderr)
    if summary is not None:
        assert_inert(summary)


@pytest.mark.parametrize("fmt", ["text", "terminal", "json", "junit", "github", "markdown"])
def test_every_diagnose_format_is_inert_with_hostile_names_config_and_log_text(tmp_path, monkeypatch, fmt):
    logs, config, overrides = hostile_tree(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = RUNNER.invoke(app, ["diagnose", str(logs), "--config", str(config), *overrides, "--format", fmt])
    assert result.exit_code == 1, result.output
    assert_all_inert(
        result, MAX_ANNOTATIONS if fmt == "github" else 0, summary.read_text() if fmt == "github" else None
    )
    if fmt == "json":
        data = json.loads(result.stdout)
        ids = {f["id"] for f in data["findings"]}
        assert "pp-cpu-offload" in ids and any(i.startswith("oom-") for i in ids), ids
        assert any(EVIL_NAME in s["path"] for s in data["sources"])  # JSON keeps the data exact, only escaped
        assert any("line longer than" in note for note in data["notes"])
    if fmt == "junit":
        ET.fromstring(result.stdout)  # still well-formed XML


def test_terminal_with_colour_emits_only_its_own_styling(tmp_path):
    import io

    from rich.console import Console

    from offloaddoctor.render.terminal import render_check_terminal, render_terminal

    logs, config, overrides = hostile_tree(tmp_path)
    for render, report in (
        (render_terminal, diagnose([str(logs)], [str(config)], [overrides[1]])),
        (render_check_terminal, check([str(config)], [overrides[1]])),
    ):
        buffer = io.StringIO()
        render(report, Console(file=buffer, width=200, force_terminal=True, color_system="truecolor"))
        shown = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())  # rich's own SGR colour codes
        assert_inert(shown)
        assert "\x1b[" in buffer.getvalue()  # colour was on: the test can tell its codes from the log's


@pytest.mark.parametrize("fmt", ["text", "json", "terminal"])
def test_check_with_hostile_names_and_values_is_inert(tmp_path, fmt):
    _, config, overrides = hostile_tree(tmp_path)
    result = RUNNER.invoke(app, ["check", str(config), *overrides, "-f", fmt])
    assert result.exit_code == 1, result.output
    assert_all_inert(result)
    if fmt == "json":
        assert any(EVIL_NAME in c for c in json.loads(result.stdout)["configs"])


@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
def test_metrics_with_hostile_names_and_arguments_is_inert(tmp_path, fmt):
    logs, _, _ = hostile_tree(tmp_path)
    for target in (logs, logs / f"{EVIL_NAME}.log", logs / "rank0.log"):
        result = RUNNER.invoke(app, ["metrics", str(target), "-f", fmt])
        assert result.exit_code == 0, result.output
        assert_all_inert(result)
    if fmt == "json":
        runs = json.loads(RUNNER.invoke(app, ["metrics", str(logs / "rank0.log"), "-f", fmt]).stdout)["runs"]
        assert runs[0]["arguments"]["optimizer.optimizer"].startswith("##[group]")  # exact data, escaped


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_compare_with_hostile_logs_is_inert(tmp_path, fmt):
    logs, _, _ = hostile_tree(tmp_path)
    run_log = logs / "rank0.log"
    result = RUNNER.invoke(app, ["compare", str(run_log), str(logs / f"{EVIL_NAME}.log"), "-f", fmt])
    expected = compare(str(run_log), [str(logs / f"{EVIL_NAME}.log")])
    assert result.exit_code == (1 if expected.failed else 0), result.output
    assert_all_inert(result)


def test_junit_keeps_log_text_it_cannot_hold_as_xml_readable(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(f"{PP_MESSAGE} \x00\x01\x0b\x1b[0m \ufffe \U0010ffff\n".encode("utf-8", "surrogatepass"))
    report = diagnose([str(log)])
    from offloaddoctor.render.junit import render_junit

    root = ET.fromstring(render_junit(report, CATALOG, {"pp-cpu-offload"}))
    assert "pp-cpu-offload" in ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("command", ["diagnose", "metrics"])
def test_an_error_naming_a_hostile_file_is_inert(tmp_path, command):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{EVIL_NAME}.log").write_bytes(bytes(range(256)) * 32)  # binary: refused, by name
    result = RUNNER.invoke(app, [command, str(logs)])
    assert result.exit_code == 2 and "binary" in result.stderr
    assert result.stderr.startswith("offloaddoctor: error: ")
    assert_inert(result.stderr)
