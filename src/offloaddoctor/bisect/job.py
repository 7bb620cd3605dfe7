"""Run the user's test command and, whatever happens, end all of it.

The command gets a session of its own (a terminal's Ctrl-C or hang-up reaches us, not it) and a marker in its
environment. When it exits, times out or we are interrupted, its whole process group is killed, and so is every
process that still carries the marker: background jobs it left behind and `setsid` grandchildren that escaped
the group (a training job that outlived its launcher would keep its GPUs). A process that clears its own
environment and leaves the session escapes this; nothing short of a cgroup catches it.
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from offloaddoctor.bisect.interrupts import signals_deferred
from offloaddoctor.bisect.spool import OutputSpool

MARKER = "OFFLOADDOCTOR_BISECT_RUN"
_READ_CHUNK = 1 << 16
_POLL_SECONDS = 0.2  # how often the exit of the command is checked while a background job keeps the pipe open
_DRAIN_SECONDS = 1.0  # after the job is ended, how long its last output may take to arrive
_END_SECONDS = 10.0  # how long killed processes may take to be gone


@dataclass(frozen=True)
class JobResult:
    exit_code: int | None  # None when it timed out; negative: killed by that signal
    timed_out: bool
    output: Path
    output_note: str | None  # says what was cut from the output


@contextmanager
def scratch_directory() -> Iterator[Path]:
    path: Path | None = None
    try:
        with signals_deferred():
            path = Path(tempfile.mkdtemp(prefix="offloaddoctor-run-"))
        yield path
    finally:
        with signals_deferred():
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


def run_job(
    command: str,
    directory: Path,
    scratch: Path,
    timeout: float | None = None,
    environment: Mapping[str, str] | None = None,
) -> JobResult:
    token = secrets.token_hex(12)
    env = {**(os.environ if environment is None else environment), MARKER: token}
    spool = OutputSpool(scratch)
    process: subprocess.Popen | None = None
    read_end: int | None = None
    try:
        with signals_deferred():  # started and known to the `finally`, or not started at all
            read_end, write_end = os.pipe()
            try:
                process = subprocess.Popen(  # noqa: S602 - the user's own --run command, run as `git bisect run` would
                    command,
                    shell=True,
                    cwd=directory,
                    env=env,
                    stdout=write_end,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            finally:
                os.close(write_end)
        exit_code, timed_out = _pump(process, read_end, spool, timeout)
        with signals_deferred():
            end_job(process, token)
            _drain(read_end, spool)
            output = spool.finish()
        return JobResult(exit_code, timed_out, output, spool.note)
    finally:
        with signals_deferred():
            if process is not None:
                end_job(process, token)
            if read_end is not None:
                os.close(read_end)
            spool.close()


def _pump(
    process: subprocess.Popen, read_end: int, spool: OutputSpool, timeout: float | None
) -> tuple[int | None, bool]:
    """Copy output into the spool until the command exits (or the time is up)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        exit_code = process.poll()
        if exit_code is not None:
            return exit_code, False
        wait = _POLL_SECONDS
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, True
            wait = min(wait, left)
        readable, _, _ = select.select([read_end], [], [], wait)
        if readable:
            data = os.read(read_end, _READ_CHUNK)
            if data:
                spool.write(data)
            else:  # every writer closed the pipe: only the exit is left to wait for
                try:
                    return process.wait(
                        timeout=None if deadline is None else max(0.0, deadline - time.monotonic())
                    ), False
                except subprocess.TimeoutExpired:
                    return None, True


def _drain(read_end: int, spool: OutputSpool) -> None:
    """What is still in the pipe once the job is ended; a writer that escaped cannot hold us past the limit."""
    deadline = time.monotonic() + _DRAIN_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([read_end], [], [], left)
        if not readable:
            return
        data = os.read(read_end, _READ_CHUNK)
        if not data:
            return
        spool.write(data)


def end_job(process: subprocess.Popen, token: str) -> None:
    """SIGKILL the command's process group and every process carrying its marker, until none is left."""
    deadline = time.monotonic() + _END_SECONDS
    while True:
        left = job_processes(token, process.pid)
        _kill(os.killpg, process.pid)
        for pid in left:
            _kill(os.kill, pid)
        if process.returncode is None:
            process.wait()
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def job_processes(token: str, pgid: int) -> list[int]:
    """Live processes (not zombies) in process group PGID or whose environment carries MARKER=TOKEN.
    Read from Linux's /proc; elsewhere none are found and killing the group is all we do."""
    needle = f"{MARKER}={token}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state, _parent, group = handle.read().rsplit(b")", 1)[1].split()[:3]
            if state in (b"Z", b"X"):
                continue
            if int(group) == pgid:
                found.append(int(entry))
                continue
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except (OSError, ValueError, IndexError):  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def _kill(kill, target: int) -> None:
    """SIGKILL a process (os.kill) or process group (os.killpg) that may be gone already or not ours."""
    try:
        kill(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
