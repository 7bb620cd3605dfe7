#!/usr/bin/env python3
"""Fuzz `diagnose` and `metrics`: generated and mutated logs through the library and every renderer; any exception is a
failure. Seeds are lines of the bundled fixtures; mutations splice, truncate, flip bytes, repeat, and insert
hostile lines (runner commands, ANSI/OSC escapes, rich markup, huge numbers, odd unicode).

    python3 tools/fuzz_diagnose.py [CASES] [--workers N] [--seed S]

Prints cases, seconds, cases/s, distinct finding ids seen, failures (with a reproducing seed).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

HOSTILE = [
    "::error::pwned", "  ::add-mask::secret", "##[set-output name=x;]y", "%0A::warning::z", "\x1b]8;;http://x\x07l\x1b]8;;\x07",
    "\x1b[31m[bold red]markup[/bold red]\x1b[0m", "Traceback (most recent call last):", "[rank99999999999]: Error",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 99999999999999999999.99 GiB. GPU 0 has a total "
    "capacity of 1e400 GiB of which -5 MiB is free.", "iteration 4/ 3 | elapsed time per iteration (ms): nan |",
    "\u202e\u2066reversed\u2069", "\ud7ff\ue000\U0010ffff", "a" * 5000, "  pipeline_model_parallel_size ....... 1e9999",
    "------------------------ arguments ------------------------", "0: 1: [default3]: [rank2]: x",
]


def seed_lines() -> list[str]:
    lines: list[str] = []
    for log in sorted((ROOT / "fixtures").glob("*/job.log")):
        text = log.read_text(errors="replace").splitlines()
        lines.extend(text[-120:])  # the interesting end: tracebacks, OOMs, NCCL, iteration lines
        lines.extend(text[::97])  # and a thin sample of the start-up and arguments block
    return lines


def make_case(rng: random.Random, seeds: list[str]) -> str:
    start = rng.randrange(len(seeds))
    lines = seeds[start : start + rng.randint(1, 40)]
    for _ in range(rng.randint(0, 6)):
        choice = rng.random()
        position = rng.randint(0, len(lines))
        if choice < 0.3:
            lines.insert(position, rng.choice(HOSTILE))
        elif choice < 0.5 and lines:
            index = rng.randrange(len(lines))
            line = lines[index]
            cut = rng.randint(0, len(line))
            lines[index] = line[:cut] if rng.random() < 0.5 else line[:cut] + chr(rng.randint(0, 0x2FFF)) + line[cut:]
        elif choice < 0.65 and lines:
            lines.extend(lines[: rng.randint(1, 5)] * rng.randint(1, 4))
        elif choice < 0.8:
            lines.insert(position, seeds[rng.randrange(len(seeds))])
        elif lines:
            index = rng.randrange(len(lines))
            raw = bytearray(lines[index].encode("utf-8", "surrogatepass"))
            for _ in range(rng.randint(1, 4)):
                if raw:
                    raw[rng.randrange(len(raw))] = rng.randrange(256)
            lines[index] = raw.decode("utf-8", "replace")
    return "\n".join(lines)


def run_chunk(args: tuple[int, int, int]) -> tuple[int, set[str], list[str]]:
    start, count, seed = args
    from offloaddoctor.api import diagnose_text, load_catalog
    from offloaddoctor.metrics import metrics_from_text
    from offloaddoctor.render.metrics_json import render_metrics_json
    from offloaddoctor.render.github import render_github
    from offloaddoctor.render.json_report import render_json
    from offloaddoctor.render.markdown import render_markdown
    from offloaddoctor.render.plain import render_plain

    catalog = load_catalog()
    seeds = seed_lines()
    ids: set[str] = set()
    failures: list[str] = []
    for case in range(start, start + count):
        rng = random.Random(seed * 1_000_003 + case)
        text = make_case(rng, seeds)
        config = {"optimizer.optimizer_cpu_offload": rng.choice([True, False, "maybe", None]),
                  "optimizer.optimizer_offload_fraction": rng.choice([0.25, 1.5, -1, "x", None])}
        try:
            report = diagnose_text(text, config if rng.random() < 0.5 else None, catalog)
            for render in (render_plain, render_json, render_markdown, render_github):
                render(report)
            ids.update(f.id for f in report.findings)
            render_metrics_json([metrics_from_text(text)])
        except Exception:  # noqa: BLE001 - the point is to catch anything
            failures.append(f"case {case} (seed {seed}): {traceback.format_exc(limit=3).splitlines()[-1]}")
    return count, ids, failures


def fuzz(cases: int, workers: int = 2, seed: int = 0) -> dict:
    chunk = max(1, min(2000, cases // (workers * 4) or 1))
    tasks = [(start, min(chunk, cases - start), seed) for start in range(0, cases, chunk)]
    started = time.perf_counter()
    if workers > 1:
        with get_context("fork").Pool(workers) as pool:
            results = pool.map(run_chunk, tasks)
    else:
        results = [run_chunk(task) for task in tasks]
    seconds = time.perf_counter() - started
    ids = set().union(*(r[1] for r in results))
    failures = [f for r in results for f in r[2]]
    return {"cases": sum(r[0] for r in results), "seconds": seconds, "ids": ids, "failures": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description="fuzz offloaddoctor diagnose")
    parser.add_argument("cases", nargs="?", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = fuzz(args.cases, args.workers, args.seed)
    print(f"cases {result['cases']:,} | {result['seconds']:.1f} s | {result['cases'] / result['seconds']:.0f} cases/s | "
          f"{len(result['ids'])} distinct finding ids | failures {len(result['failures'])}")
    for failure in result["failures"][:20]:
        print("  " + failure)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
