"""What crashed jobs leave behind, through the CLI (in-process and as a real `python -m offloaddoctor`) and the
library: a clean outcome for each — a one-line error naming the input (exit 2) or a read as far as valid —
never a traceback, never a hang, never executed config."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from offloaddoctor.api import check, diagnose
from offloaddoctor.cli import app
from offloaddoctor.errors import UserError
from offloaddoctor.metrics import collect_metrics

from tests.conftest import FIXTURES, REPO, RUNNER

PP_LOG = FIXTURES / "pp-cpu-offload" / "job.log"
ALIAS_BOMB = (
    "a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
)


@contextmanager
def deadline(seconds: float):
    """Fail instead of hanging the suite when a read blocks (a FIFO with no writer)."""

    def expired(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offloaddoctor: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def one_line_error(args, *fragments):
    with deadline(20):
        assert_one_line_error(RUNNER.invoke(app, [str(a) for a in args]), *fragments)


# ---- logs that cannot be read: every entry point refuses in one line ------------------------------------


def unreadable(tmp_path, case):
    """(path to pass, fragments the message must contain)."""
    if case == "binary":
        path = tmp_path / "core.log"
        path.write_bytes(os.urandom(4096) + b"\x00" * 4096)
        return path, [str(path), "binary"]
    if case == "binary-in-gz":
        path = tmp_path / "core.log.gz"
        path.write_bytes(gzip.compress(b"\x00\x01\x02\x03" * 4096))
        return path, [str(path), "binary"]
    if case == "corrupt-gz":
        path = tmp_path / "job.log.gz"
        # A gzip header, then a deflate block of the reserved type 3: invalid from the first byte. (Random bytes
        # after the header made this test flaky: ~1 in 200 inflate to a few bytes before the CRC check fails.)
        path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\x07" + os.urandom(63))
        return path, [str(path), "gzip"]
    if case == "gz-magic-only":
        path = tmp_path / "job.log.gz"
        path.write_bytes(b"\x1f\x8b")
        return path, [str(path), "gzip"]
    if case == "dir-without-logs":
        path = tmp_path / "nologs"
        path.mkdir()
        (path / "notes.md").write_text("x")
        return path, [str(path), "no log files"]
    if case == "symlink-loop":
        path = tmp_path / "loop.log"
        os.symlink(path, path)
        return path, [str(path), "loop"]
    if case == "dangling-symlink":
        path = tmp_path / "gone.log"
        os.symlink(tmp_path / "nowhere.log", path)
        return path, [str(path), "leads nowhere"]
    if case == "fifo":
        path = tmp_path / "pipe.log"
        os.mkfifo(path)
        return path, [str(path), "not a regular file"]
    if case == "device":
        return "/dev/zero", ["/dev/zero", "not a regular file"]
    if case == "missing":
        return tmp_path / "missing.log", ["missing.log", "no such file"]
    if case == "glob-of-directories":
        (tmp_path / "a.log").mkdir()
        return f"{tmp_path}/*.log", ["*.log", "no regular file"]
    raise AssertionError(case)


UNREADABLE = [
    "binary",
    "binary-in-gz",
    "corrupt-gz",
    "gz-magic-only",
    "dir-without-logs",
    "symlink-loop",
    "dangling-symlink",
    "fifo",
    "device",
    "missing",
    "glob-of-directories",
]


@pytest.mark.parametrize("case", UNREADABLE)
@pytest.mark.parametrize("entry", ["cli-diagnose", "cli-metrics", "library-diagnose", "library-metrics"])
def test_unreadable_logs_are_one_line_errors(tmp_path, case, entry):
    path, fragments = unreadable(tmp_path, case)
    if entry == "cli-diagnose":
        one_line_error(["diagnose", path, "-f", "json"], *fragments)
    elif entry == "cli-metrics":
        one_line_error(["metrics", path], *fragments)
    else:
        call = diagnose if entry == "library-diagnose" else collect_metrics
        with deadline(20), pytest.raises(UserError) as caught:
            call([str(path)])
        message = str(caught.value)
        assert "\n" not in message and all(f in message for f in fragments), message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied(tmp_path):
    locked = tmp_path / "job.log"
    locked.write_text("x\n")
    locked.chmod(0)
    one_line_error(["diagnose", locked], str(locked), "ermission")
    one_line_error(["metrics", locked], str(locked), "ermission")
    config = tmp_path / "cfg.yaml"
    config.write_text("a: 1\n")
    config.chmod(0)
    one_line_error(["check", config], str(config), "ermission")


# ---- damaged logs: read as far as they are valid ---------------------------------------------------------


def damaged(tmp_path, case):
    path = tmp_path / "job.log"
    real = PP_LOG.read_bytes()
    data = {
        "empty": b"",
        "invalid-utf8": b"\xff\xfe\xc3(" + real + b"\x80\x81 tail\n",
        "nul-bytes": real.replace(b"\n", b"\x00\n", 5),
        "crlf-and-progress": real.replace(b"\n", b"\r\n").replace(b"iteration", b"10%\r50%\riteration"),
        "no-final-newline": real.rstrip(b"\n"),
        "binary-tail": real + os.urandom(2048),  # a crash wrote junk after the text: the text still counts
    }.get(case)
    if data is not None:
        path.write_bytes(data)
        return path
    path = tmp_path / "job.log.gz"
    compressed = gzip.compress(real)
    path.write_bytes(
        {
            "truncated-gz": compressed[: len(compressed) // 2],
            "gz-trailing-garbage": compressed + b"garbage\n",
            "empty-gz-name": b"",
        }[case]
    )
    return path


DAMAGED = [
    "empty",
    "invalid-utf8",
    "nul-bytes",
    "crlf-and-progress",
    "no-final-newline",
    "binary-tail",
    "truncated-gz",
    "gz-trailing-garbage",
    "empty-gz-name",
]
FINDS_THE_ERROR = {
    "invalid-utf8",
    "nul-bytes",
    "crlf-and-progress",
    "no-final-newline",
    "binary-tail",
    "gz-trailing-garbage",
}


@pytest.mark.parametrize("case", DAMAGED)
def test_damaged_logs_are_read_as_far_as_valid(tmp_path, case):
    path = damaged(tmp_path, case)
    report = diagnose([str(path)])
    collect_metrics([str(path)])
    result = RUNNER.invoke(app, ["diagnose", str(path), "-f", "json"])
    assert result.exit_code == (1 if report.findings else 0) and "Traceback" not in result.output, result.output
    data = json.loads(result.stdout)
    assert RUNNER.invoke(app, ["metrics", str(path), "-f", "json"]).exit_code == 0
    if case in FINDS_THE_ERROR:
        assert [f.id for f in report.findings] == ["pp-cpu-offload"]
    if case in ("truncated-gz", "gz-trailing-garbage"):
        assert any("gzip" in note for note in data["notes"]), data["notes"]  # read as far as valid, with a warning


def test_standard_input_binary_and_invalid_utf8():
    assert_one_line_error(
        RUNNER.invoke(app, ["diagnose", "-"], input=os.urandom(2048) + b"\x00" * 2048), "<stdin>", "binary"
    )
    result = RUNNER.invoke(app, ["diagnose", "-", "-f", "json"], input=b"\xff\xfe\x80" + PP_LOG.read_bytes())
    assert result.exit_code == 1 and json.loads(result.stdout)["findings"][0]["id"] == "pp-cpu-offload"


def test_a_directory_with_special_entries_reads_only_its_regular_logs(tmp_path):
    shutil.copy(PP_LOG, tmp_path / "rank0.log")
    os.mkfifo(tmp_path / "pipe.log")
    os.symlink(tmp_path / "loop.log", tmp_path / "loop.log")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path, tmp_path / "sub" / "up.log")  # a directory loop for --recursive
    shutil.copy(PP_LOG, tmp_path / "sub" / "rank1.log")
    with deadline(20):
        flat = RUNNER.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
        deep = RUNNER.invoke(app, ["diagnose", "--recursive", str(tmp_path), "-f", "json"])
    assert [s["path"].rsplit("/", 1)[-1] for s in json.loads(flat.stdout)["sources"]] == ["rank0.log"]
    assert [s["path"].rsplit("/", 1)[-1] for s in json.loads(deep.stdout)["sources"]] == ["rank0.log", "rank1.log"]


def test_one_binary_file_in_a_directory_is_named_and_skipped(tmp_path):
    shutil.copy(PP_LOG, tmp_path / "rank0.log")
    (tmp_path / "core.out").write_bytes(os.urandom(4096) + b"\x00" * 4096)
    result = RUNNER.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [f["id"] for f in report["findings"]] == ["pp-cpu-offload"]
    assert f"{tmp_path / 'core.out'}: looks like a binary file, not a text log; skipped" in report["notes"]
    assert not any("is empty" in note for note in report["notes"])  # skipped, not read: not "empty"


# ---- configs -----------------------------------------------------------------------------------------


def test_config_tags_are_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run_config.yaml"
    config.write_text(
        'model:\n  pipeline_model_parallel_size: !!python/object/apply:os.system ["touch PWNED"]\n'
        "  cpu_offloading: true\n_target_: !!python/name:os.system\n"
        "optimizer: !!python/object/new:os.system [touch PWNED]\n"
    )
    report = check([str(config)])
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "--config", str(config), "-f", "json"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert RUNNER.invoke(app, ["check", str(config)]).exit_code == (1 if report.violations else 0)
    assert not (tmp_path / "PWNED").exists()
    assert "pp-cpu-offload" not in [v.id for v in report.violations]  # the tagged value is text, not a number


def bad_config(tmp_path, case):
    """(path, fragment of the one-line error)."""
    path = tmp_path / "bad.yaml"
    texts = {
        "alias-bomb": (ALIAS_BOMB, "alias bomb"),
        "list-top-level": ("- just\n- a list\n", "mapping"),
        "scalar-top-level": ("just a string\n", "mapping"),
        "duplicate-key": ("model:\n  num_layers: 8\n  num_layers: 16\n", "duplicate key 'num_layers'"),
        "invalid-yaml": ("model: [unclosed\n", "invalid YAML"),
        "empty": ("", "empty"),
        "deep-lists": ("model:\n  x: " + "[" * 600 + "]" * 600 + "\n", "too deeply"),
        "deep-mappings": ("a: " + "{b: " * 600 + "1" + "}" * 600 + "\n", "too deeply"),
        "deep-block-sequences": ("a:\n" + "- " * 3000 + "x\n", "too deeply"),
        "nul-character": ("model:\n  num_layers: 8\x00\n", "invalid YAML"),
    }
    if case in texts:
        text, fragment = texts[case]
        path.write_text(text)
        return path, fragment
    if case == "invalid-utf8":
        path.write_bytes(b"model:\n  num_layers: \xff\xfe\n")
        return path, "not UTF-8"
    if case == "binary":
        path.write_bytes(os.urandom(4096))
        return path, "bad.yaml"
    if case == "too-large":
        with path.open("w") as handle:
            handle.write("model:\n  comment: '" + "x" * 2**20 + "'\n")
        return path, "larger than"
    if case == "directory":
        path.mkdir()
        return path, "directory"
    if case == "fifo":
        os.mkfifo(path)
        return path, "not a regular file"
    if case == "fifo-script":
        path = tmp_path / "launch.sh"
        os.mkfifo(path)
        return path, "not a regular file"
    if case == "device":
        return "/dev/zero", "not a regular file"
    if case == "symlink-loop":
        os.symlink(path, path)
        return path, "symbolic links"
    if case == "missing":
        return tmp_path / "missing.yaml", "not found"
    if case == "script-without-flags":
        path = tmp_path / "launch.sh"
        path.write_bytes(os.urandom(2048).replace(b"-", b"_").replace(b"=", b"_"))
        return path, "no --flags"
    raise AssertionError(case)


BAD_CONFIGS = [
    "alias-bomb",
    "list-top-level",
    "scalar-top-level",
    "duplicate-key",
    "invalid-yaml",
    "empty",
    "deep-lists",
    "deep-mappings",
    "deep-block-sequences",
    "nul-character",
    "invalid-utf8",
    "binary",
    "too-large",
    "directory",
    "fifo",
    "fifo-script",
    "device",
    "symlink-loop",
    "missing",
    "script-without-flags",
]


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_bad_configs_are_one_line_errors_everywhere(tmp_path, case):
    path, fragment = bad_config(tmp_path, case)
    name = os.path.basename(str(path))
    one_line_error(["diagnose", PP_LOG, "--config", path], name, fragment)
    one_line_error(["check", path], name, fragment)
    with deadline(20), pytest.raises(UserError) as caught:
        check([str(path)])
    assert name in str(caught.value) and fragment in str(caught.value) and "\n" not in str(caught.value)


def test_duplicate_keys_name_both_lines(tmp_path):
    # Refused, as OmegaConf (which Megatron-Bridge loads configs with) refuses them; PyYAML would keep the last.
    config = tmp_path / "dup.yaml"
    config.write_text(
        "model:\n  pipeline_model_parallel_size: 2\n  cpu_offloading: true\n  pipeline_model_parallel_size: 1\n"
    )
    one_line_error(["check", config], "dup.yaml:4: duplicate key 'pipeline_model_parallel_size' (first at line 2)")


@pytest.mark.parametrize("value", ['"four"', "[1, 2]", "{a: 1}", "null", "2.5x", "!!binary AAAA", "''"])
def test_wrong_types_leave_the_constraint_unknown(tmp_path, value):
    config = tmp_path / "typed.yaml"
    config.write_text(f"model:\n  pipeline_model_parallel_size: {value}\n  cpu_offloading: true\n")
    report = check([str(config)])
    assert "pp-cpu-offload" not in [v.id for v in report.violations]
    assert "pp-cpu-offload" in [u.id for u in report.unchecked] + report.passed
    assert RUNNER.invoke(app, ["check", str(config)]).exit_code == 0
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "--config", str(config), "-f", "json"])
    assert result.exit_code == 1 and "Traceback" not in result.output  # the log's own error is still reported


def test_set_without_equals():
    one_line_error(["diagnose", PP_LOG, "--set", "optimizer.optimizer_cpu_offload"], "KEY=VALUE")
    one_line_error(["check", "--set", "optimizer.optimizer_cpu_offload"], "KEY=VALUE")
    one_line_error(["check", "--set", "=True"], "KEY=VALUE")
    with pytest.raises(UserError, match="KEY=VALUE"):
        check([], ["nope"])


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        (
            ".offloaddoctor.yaml",
            'fail_on: !!python/object/apply:os.system ["touch PWNED"]\n',
            "cannot read project settings",
        ),
        (".offloaddoctor.yaml", "fail_on: " + "[" * 600 + "]" * 600 + "\n", "nested too deeply"),
        (".offloaddoctor.yaml", "fail_on: never\nfail_on: error\n", "duplicate key 'fail_on'"),
        (".offloaddoctor.yaml", "- fail_on\n", "must be a mapping"),
        (".offloaddoctor.yaml", "ignore: 5\n", "ignore must be a list"),
        (".offloaddoctor.yaml", ALIAS_BOMB, "alias bomb"),
        ("pyproject.toml", "[tool.offloaddoctor\n", "pyproject.toml"),
        ("pyproject.toml", "[tool.offloaddoctor]\nignore = 5\n", "ignore must be a list"),
    ],
)
def test_hostile_project_settings_are_one_line_errors(tmp_path, monkeypatch, name, text, fragment):
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    one_line_error(["diagnose", PP_LOG], name, fragment)
    assert not (tmp_path / "PWNED").exists()


# ---- the real command, as a user's shell runs it ----------------------------------------------------------


def run_module(*args, cwd=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "offloaddoctor", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    "case",
    [
        "binary-log",
        "fifo-log",
        "device-log",
        "fifo-config",
        "device-config",
        "deep-config",
        "tagged-config",
        "set-without-equals",
        "bad-project-file",
    ],
)
def test_the_installed_command_never_shows_a_traceback(tmp_path, case):
    config = tmp_path / "cfg.yaml"
    if case == "binary-log":
        path = tmp_path / "core.log"
        path.write_bytes(os.urandom(8192) + b"\x00" * 8192)
        args, fragments = ["diagnose", path], [str(path), "binary"]
    elif case == "fifo-log":
        os.mkfifo(tmp_path / "pipe.log")
        args, fragments = ["metrics", tmp_path / "pipe.log"], ["pipe.log", "not a regular file"]
    elif case == "device-log":
        args, fragments = ["diagnose", "/dev/zero"], ["/dev/zero", "not a regular file"]
    elif case == "fifo-config":
        os.mkfifo(config)
        args, fragments = ["check", config], ["cfg.yaml", "not a regular file"]
    elif case == "device-config":
        args, fragments = ["diagnose", PP_LOG, "--config", "/dev/zero"], ["/dev/zero", "not a regular file"]
    elif case == "deep-config":
        config.write_text("a:\n" + "- " * 100_000 + "x\n")
        args, fragments = ["check", config], ["cfg.yaml", "too deeply"]
    elif case == "tagged-config":
        config.write_text('model: !!python/object/apply:os.system ["touch PWNED"]\n')
        result = run_module("check", config, cwd=tmp_path)
        assert not (tmp_path / "PWNED").exists()
        # `model` holds no setting offloaddoctor knows: refused in one line, the tag never run
        assert (
            result.returncode == 2
            and result.stderr.count("\n") == 1
            and "no setting offloaddoctor knows" in result.stderr
        )
        return
    elif case == "set-without-equals":
        args, fragments = ["check", "--set", "optimizer.optimizer_cpu_offload"], ["KEY=VALUE"]
    else:
        (tmp_path / ".offloaddoctor.yaml").write_text("ignore: 5\n")
        args, fragments = ["diagnose", PP_LOG], [".offloaddoctor.yaml", "ignore must be a list"]
    result = run_module(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("offloaddoctor: error: "), result.stderr
    assert all(f in lines[0] for f in fragments), lines[0]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "utf-8:strict"])
def test_output_is_written_whatever_the_console_encoding(tmp_path, encoding):
    """Non-ASCII log text and a file name with an undecodable byte (a lone surrogate to Python), on a console
    that cannot encode them: still written (UTF-8, the rest escaped), JSON still valid, no traceback."""
    logs = tmp_path / "logs"
    logs.mkdir()
    message = "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading é − \u202e"
    (logs / os.fsdecode(b"rank0-\xff\xfe.log")).write_text(message + "\n", encoding="utf-8")
    for fmt in ("text", "json", "junit", "terminal"):
        result = subprocess.run(
            [sys.executable, "-m", "offloaddoctor", "diagnose", str(logs), "-f", fmt, "--details"],
            capture_output=True,
            timeout=60,
            env={**os.environ, "PYTHONIOENCODING": encoding},
            check=False,
        )
        assert result.returncode == 1 and result.stderr == b"", result.stderr.decode(errors="replace")
        shown = result.stdout.decode("utf-8")
        if fmt == "json":
            assert json.loads(shown)["findings"][0]["id"] == "pp-cpu-offload"
        else:
            assert "é" in shown


# ---- a single 1 GB line: cut, never loaded; peak memory bounded ----------------------------------------


@pytest.fixture(scope="module")
def one_gb_line(tmp_path_factory):
    if shutil.disk_usage(tmp_path_factory.getbasetemp()).free < 4 * 2**30:
        pytest.skip("needs 4 GB of free disk")
    path = tmp_path_factory.mktemp("giant") / "one-line.log"
    block = b"x" * (1 << 20)
    with path.open("wb") as handle:
        handle.write(b"Error start " + block)
        for _ in range(1023):
            handle.write(block)
        handle.write(b"\n" + PP_LOG.read_bytes()[-400:])
    yield path
    path.unlink()


PEAK_RSS = (
    "import json, resource, subprocess, sys\n"
    "r = subprocess.run([sys.executable, '-m', 'offloaddoctor', *sys.argv[1:]], capture_output=True, text=True)\n"
    "print(json.dumps([r.returncode, r.stdout, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))"
)


@pytest.mark.parametrize("reader", ["grep-prefilter", "block-reader"])
@pytest.mark.parametrize("command", ["diagnose", "metrics"])
def test_a_single_1gb_line_is_cut_not_loaded(one_gb_line, reader, command):
    # A fresh parent, so the peak is this run's alone (offloaddoctor and the grep it may start). Without
    # grep on PATH the block reader does the whole read.
    env = {**os.environ, **({"PATH": ""} if reader == "block-reader" else {})}
    args = [command, str(one_gb_line), "-f", "json"]
    run = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
        check=True,
    )
    returncode, stdout, stderr, peak_kb = json.loads(run.stdout)
    assert returncode in (0, 1), stderr
    assert "Traceback" not in stderr
    if command == "diagnose":
        data = json.loads(stdout)
        assert any("line longer than" in note for note in data["notes"])
        assert [f["id"] for f in data["findings"]] == ["pp-cpu-offload"]  # the lines after the giant one still count
    assert peak_kb / 1024 < 300, f"peak RSS {peak_kb / 1024:.0f} MB"


def test_random_bytes_always_look_binary_and_text_with_a_stray_nul_does_not():
    import random

    from offloaddoctor.logs.sources import looks_binary

    generator = random.Random(5)
    # ~9 % of random bytes are controls, just under the control-share bar: the UTF-8 check decides.
    assert all(looks_binary(generator.randbytes(8192)) for _ in range(2000))
    text = ("iteration 10/100 | elapsed time per iteration (ms): 460.9 | lm loss: 8.1E+00 é\n" * 100).encode()
    assert not looks_binary(text[:4000] + b"\x00" + text[4000:8000])


def test_a_subdirectory_that_vanishes_during_the_walk_is_skipped(tmp_path, monkeypatch):
    """A job still writing, or logs being rotated: a directory listed a moment ago is gone when we look."""
    shutil.copy(PP_LOG, tmp_path / "rank0.log")
    (tmp_path / "gone").mkdir()
    shutil.copy(PP_LOG, tmp_path / "gone" / "rank1.log")
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("gone"):
            raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = RUNNER.invoke(app, ["diagnose", "--recursive", str(tmp_path), "-f", "json"])
    assert result.exit_code == 1, result.output
    assert [s["path"].rsplit("/", 1)[-1] for s in json.loads(result.stdout)["sources"]] == ["rank0.log"]


def test_a_directory_that_cannot_be_listed_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "logs").mkdir()
    locked = str(tmp_path / "logs")

    def refusing(real):
        def listing(path="."):
            if os.fspath(path) == locked:
                raise PermissionError(13, "Permission denied", locked)
            return real(path)

        return listing

    monkeypatch.setattr(os, "scandir", refusing(os.scandir))
    monkeypatch.setattr(os, "listdir", refusing(os.listdir))
    for recursive in ([], ["--recursive"]):
        one_line_error(
            ["diagnose", *recursive, tmp_path / "logs"], "logs", "cannot list the directory", "Permission denied"
        )


def test_a_listed_log_that_is_gone_when_read_is_a_note_and_the_run_goes_on(tmp_path, monkeypatch):
    """Found by listing the directory, removed before its turn (logrotate, a job cleaning up)."""
    import offloaddoctor.logs.sources
    from offloaddoctor.logs.sources import LogSource, resolve_sources

    shutil.copy(PP_LOG, tmp_path / "rank0.log")
    gone = tmp_path / "rank1.log"

    def listing_then_removal(paths, recursive=False, notes=None):
        return [*resolve_sources(paths, recursive, notes), LogSource(str(gone), listed=True)]

    # `api.diagnose` imports resolve_sources when it runs (start-up of `check`): patch it where it lives
    monkeypatch.setattr(offloaddoctor.logs.sources, "resolve_sources", listing_then_removal)
    result = RUNNER.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [f["id"] for f in report["findings"]] == ["pp-cpu-offload"]
    assert f"{gone}: gone before it was read (rotated or removed?); skipped" in report["notes"]


def test_a_named_log_that_is_gone_when_read_is_still_an_error(tmp_path):
    from offloaddoctor.scanning.scanner import Scanner, build_matchers
    from offloaddoctor.api import load_catalog
    from offloaddoctor.errors import UserError
    from offloaddoctor.logs.sources import LogSource, VanishedLog

    scanner = Scanner(build_matchers(load_catalog()))
    with pytest.raises(UserError, match="cannot read: No such file or directory") as raised:
        scanner.scan([LogSource(str(tmp_path / "named.log"))])
    assert not isinstance(raised.value, VanishedLog)


def test_metrics_note_a_listed_log_that_is_gone(tmp_path):
    from offloaddoctor.logs.sources import LogSource
    from offloaddoctor.metrics.reader import RunReader

    reader = RunReader(str(tmp_path))
    reader.read_source(LogSource(str(PP_LOG), listed=True))
    reader.read_source(LogSource(str(tmp_path / "gone.log"), listed=True))
    assert reader.run.sources == [(str(PP_LOG), reader.run.sources[0][1]), (str(tmp_path / "gone.log"), 0)]
    assert reader.run.sources[0][1] > 0
    assert any("gone before it was read" in note for note in reader.run.notes)
