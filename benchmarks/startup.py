#!/usr/bin/env python3
"""CLI start-up of every subcommand on a small input, against `python3 -c pass`, as an installed package runs
it: bytecode compiled, the catalogue cache warm (the first run of a new catalogue parses YAML: +~60 ms). Rounds
run each command once, interleaved; per command it prints the median wall time, the median of the per-round
ratios to `python3 -c pass` (this machine's speed drifts from minute to minute), the median CPU time of the
child (user + system) and the fastest run, the cost least disturbed by other work. Run from an empty directory
(no project file). `import typer` for scale: every command imports it. `--against SRC` also runs every command
with another source tree first on PYTHONPATH (e.g. `git archive BASE src signatures | tar -x -C /tmp/base`, then
SRC = /tmp/base/src: a tree without its catalogue only fails), interleaved with this one: a before/after
comparison under the same load. `--instructions` counts each command's instructions once under valgrind instead
(cachegrind, no cache simulation): a figure other work on the machine does not move, for a loaded machine.
usage: python3 benchmarks/startup.py [ROUNDS] [--against SRC] [--instructions] [NAME...]
       (NAME: only the commands whose name starts so)"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def timed(command: list[str], cwd: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=cwd, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(command: list[str], cwd: str, env: dict[str, str] | None = None) -> int:
    """Instructions the command executes, counted by valgrind (user space, the child's whole run)."""
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = subprocess.run([*valgrind, *command], capture_output=True, text=True, check=False, cwd=cwd, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def small_log(directory: str) -> str:
    """The last 1 KB of a real failed run: one finding."""
    lines = (FIXTURES / "pp-cpu-offload" / "job.log").read_text().splitlines()[-12:]
    log = Path(directory) / "tail.log"
    log.write_text("\n".join(lines)[:1024] + "\n")
    return str(log)


def subcommands(log: str) -> dict[str, list[str]]:
    configs = FIXTURES / "configs"
    return {
        "--help": ["--help"],
        "-h": ["-h"],
        "--version": ["--version"],
        "diagnose -h": ["diagnose", "-h"],
        "diagnose": ["diagnose", log, "--format", "json"],
        "diagnose -v (text)": ["diagnose", log, "-v", "-f", "text"],
        "check": ["check", str(FIXTURES / "check" / "many-violations.yaml"), "-f", "text"],
        "estimate": ["estimate", str(FIXTURES / "estimate" / "llama3-8b-launch.sh"), "--gpu", "H100-80GB"],
        "metrics": ["metrics", log],
        "compare": ["compare", log, log],
        "explain": ["explain", "pp-cpu-offload"],
        "signatures": ["signatures"],
        "bisect (two configs)": [
            "bisect",
            "--good-config",
            str(configs / "bridge-override-pp2-offload-layers-0.yaml"),
            "--bad-config",
            str(configs / "bridge-override-pp2-activation-offload.yaml"),
        ],
        "bisect-step": ["bisect-step", "--config", str(FIXTURES / "check" / "many-violations.yaml")],
    }


def main() -> int:
    args = sys.argv[1:]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 9
    against = None
    if "--against" in args:
        at = args.index("--against")
        against = str(Path(args[at + 1]).resolve())
        del args[at : at + 2]
        subprocess.run([sys.executable, "-m", "compileall", "-q", against], stdout=subprocess.DEVNULL, check=True)
    counting = "--instructions" in args
    wanted = [arg for arg in args if arg != "--instructions"]
    with tempfile.TemporaryDirectory() as empty:
        log = small_log(empty)
        # The installed command, as users run it (pip's wrapper script), else `python -m offloaddoctor`.
        script = Path(sys.executable).with_name("offloaddoctor")
        entry = [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "offloaddoctor"]
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], stdout=subprocess.DEVNULL, check=True
        )
        other = {**os.environ, "PYTHONPATH": against} if against else None
        for env in (None, other) if other else (None,):  # also warms the catalogue cache of each tree
            warm = subprocess.run(
                [*entry, "diagnose", log, "-f", "json"], capture_output=True, text=True, check=False, cwd=empty, env=env
            )
            if '"id"' not in warm.stdout:  # e.g. an --against tree without its signatures/
                print(f"the 1 KB log gave no finding (exit {warm.returncode}): {warm.stderr[-300:]}", file=sys.stderr)
                return 2
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "bare": ([sys.executable, "-c", "pass"], None),
            "import typer": ([sys.executable, "-c", "import typer"], None),
        }
        for name, argv in subcommands(log).items():
            if not wanted or any(name.startswith(prefix) for prefix in wanted):
                if other is not None:
                    commands[f"{name} (against)"] = ([*entry, *argv], other)
                commands[name] = ([*entry, *argv], None)
        if counting:
            counts = {name: instructions(command, empty, env) for name, (command, env) in commands.items()}
            print(f"instructions (valgrind), python3 -c pass: {counts['bare'] / 1e6:.0f} M")
            for name, count in counts.items():
                if name != "bare":
                    print(f"{name:34} {count / 1e6:6.0f} M {count / counts['bare']:5.1f}x")
            return 0
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, (command, env) in commands.items():
                times[name].append(timed(command, empty, env))
    bare = times["bare"]
    load = os.getloadavg()
    print(f"{rounds} rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"python3 -c pass: {statistics.median(t[0] for t in bare) * 1000:.0f} ms wall (median)")
    print(f"{'command':34} {'wall':>7} {'ratio':>6} {'CPU':>7} {'fastest':>8}")
    for name, mine in times.items():
        if name == "bare":
            continue
        ratios = sorted(t[0] / b[0] for t, b in zip(mine, bare))
        print(
            f"{name:34} {statistics.median(t[0] for t in mine) * 1000:5.0f}ms {statistics.median(ratios):5.1f}x "
            f"{statistics.median(t[1] for t in mine) * 1000:5.0f}ms {min(t[0] for t in mine) * 1000:6.0f}ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
