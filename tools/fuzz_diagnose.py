#!/usr/bin/env python3
"""Fuzz `diagnose` and `metrics`: generated and mutated logs through the library and every renderer. A case
fails when anything raises, or when a rendered output lets log text act: a raw control or escape character,
`##[`, or a line opening with `::` that is not one of our own GitHub annotations.

Seeds are lines of the bundled fixtures; mutations splice, truncate, flip bytes, repeat, and insert hostile
text (runner commands, ANSI/OSC escapes, rich markup, huge numbers, odd unicode) as lines of their own, after
lines that signatures match, and as the exception of a traceback, so it reaches the rendered evidence. One case in 16 is also
written as bytes to a file (plain, gzip or truncated gzip, with raw byte damage) and read through
`diagnose()` and `run_metrics()` as a user's log would be; refusing it with a UserError is a clean outcome.

    python3 tools/fuzz_diagnose.py [CASES] [--workers N] [--seed S]

Prints cases, seconds, cases/s, distinct finding ids seen, failures (each with the case number and seed
that reproduce it: `make_case(random.Random(seed * 1_000_003 + case), seed_lines())`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

HOSTILE = [
    "::error::pwned",
    "  ::add-mask::secret",
    "##[set-output name=x;]y",
    "%0A::warning::z",
    "\x1b]8;;http://x\x07l\x1b]8;;\x07",
    "\x1b[31m[bold red]markup[/bold red]\x1b[0m",
    "Traceback (most recent call last):",
    "[rank99999999999]: Error",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 99999999999999999999.99 GiB. GPU 0 has a total "
    "capacity of 1e400 GiB of which -5 MiB is free.",
    "iteration 4/ 3 | elapsed time per iteration (ms): nan |",
    "\u202e\u2066reversed\u2069",
    "\ud7ff\ue000\U0010ffff",
    "a" * 5000,
    "  pipeline_model_parallel_size ....... 1e9999",
    "------------------------ arguments ------------------------",
    "0: 1: [default3]: [rank2]: x",
    "\x9b31m c1 csi \x9d0;osc\x9c",
    "\u2028::error::sep \x85::error::nel",
    "\x0b::error::vt \x0c::error::ff",
    "x ::error::mid-line",
    "\t::warning::tab",
    "[link=http://x]click[/link]",
    "`````",
    "<script>",
    "| a | b |",
    "  recompute_granularity ........................ ::error::arg ##[x]",
    "+ export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True::error::env",
]
_ACTING = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_OUR_ANNOTATION = re.compile(r"^::(error|warning|notice) [^:]*::")
_COMMAND = re.compile(r"^\s*::")


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
        if choice < 0.15:
            lines.insert(position, rng.choice(HOSTILE))
        elif choice < 0.3 and lines:
            # Hostile text where it becomes evidence: after a line a signature matches, or as the exception
            # line of a traceback (the "most likely failure line" shown when nothing matches).
            index = rng.randrange(len(lines))
            if rng.random() < 0.7:
                lines[index] += " " + rng.choice(HOSTILE)
            else:
                lines[index:index] = ["Traceback (most recent call last):", f"RuntimeError: {rng.choice(HOSTILE)}"]
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


def as_file_bytes(rng: random.Random, text: str) -> tuple[bytes, str]:
    """The case as a file a crashed job might leave: raw byte damage, CRLF, maybe gzip (maybe cut short)."""
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(0, 4)):
        if data:
            data[rng.randrange(len(data))] = rng.choice([0x00, 0x0D, 0xFF, 0xC3, 0x80, 0x1B, rng.randrange(256)])
    if rng.random() < 0.2:
        data = data.replace(b"\n", b"\r\n")
    if rng.random() < 0.3:
        packed = gzip.compress(bytes(data))
        return (packed[: rng.randint(2, len(packed))] if rng.random() < 0.5 else packed), ".log.gz"
    return bytes(data), ".log"


def leak(output: str, allowed_annotations: bool = False) -> str | None:
    """Why this rendered output would let log text act on a terminal or a CI runner, or None."""
    acting = _ACTING.search(output)
    if acting:
        return f"raw {acting.group()!r}"
    if "##[" in output:
        return "##["
    for line in output.splitlines():
        if _COMMAND.match(line) and not (allowed_annotations and _OUR_ANNOTATION.match(line)):
            return f"runner command {line[:60]!r}"
    return None


def check_outputs(report, catalog, renderers) -> str | None:
    plain, json_report, markdown, github, junit = renderers[:5]
    annotations, summary = github(report)
    document = json_report(report)
    json.loads(document)
    xml = junit(report, catalog, {f.id for f in report.findings})
    ET.fromstring(xml)
    for name, output, ours in (
        ("text", plain(report), False),
        ("json", document, False),
        ("markdown", markdown(report), False),
        ("github", annotations, True),
        ("github summary", summary, False),
        ("junit", xml, False),
    ):
        problem = leak(output, ours)
        if problem:
            return f"{name}: {problem}"
    return None


def run_chunk(args: tuple[int, int, int]) -> tuple[int, set[str], list[str]]:
    start, count, seed = args
    from offloaddoctor.api import load_catalog
    from offloaddoctor.render.github import render_github
    from offloaddoctor.render.json_report import render_json
    from offloaddoctor.render.junit import render_junit
    from offloaddoctor.render.markdown import render_markdown
    from offloaddoctor.render.metrics_json import render_metrics_json
    from offloaddoctor.render.metrics_text import render_metrics_text
    from offloaddoctor.render.plain import render_plain

    renderers = (
        render_plain,
        render_json,
        render_markdown,
        render_github,
        render_junit,
        render_metrics_json,
        render_metrics_text,
    )
    catalog = load_catalog()
    seeds = seed_lines()
    ids: set[str] = set()
    failures: list[str] = []
    scratch = tempfile.mkdtemp(prefix="fuzz-diagnose-")
    try:
        _run_cases(start, count, seed, catalog, seeds, renderers, scratch, ids, failures)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return count, ids, failures


def _run_cases(start, count, seed, catalog, seeds, renderers, scratch, ids, failures) -> None:
    from offloaddoctor.api import diagnose, diagnose_text
    from offloaddoctor.errors import UserError
    from offloaddoctor.metrics import metrics_from_text, run_metrics

    _, _, _, _, _, render_metrics_json, render_metrics_text = renderers
    for case in range(start, start + count):
        rng = random.Random(seed * 1_000_003 + case)
        text = make_case(rng, seeds)
        config = {
            "optimizer.optimizer_cpu_offload": rng.choice([True, False, "maybe", None]),
            "optimizer.optimizer_offload_fraction": rng.choice([0.25, 1.5, -1, "x", None]),
        }
        try:
            report = diagnose_text(text, config if rng.random() < 0.5 else None, catalog)
            problem = check_outputs(report, catalog, renderers)
            ids.update(f.id for f in report.findings)
            runs = [metrics_from_text(text)]
            problem = problem or next(
                filter(None, (leak(render_metrics_json(runs)), leak(render_metrics_text(runs)))), None
            )
            if case % 16 == 0:
                data, suffix = as_file_bytes(rng, text)
                path = os.path.join(scratch, f"case{suffix}")
                with open(path, "wb") as handle:
                    handle.write(data)
                try:
                    from_file = diagnose([path], catalog=catalog)
                    problem = problem or check_outputs(from_file, catalog, renderers)
                    ids.update(f.id for f in from_file.findings)
                    problem = problem or leak(render_metrics_text([run_metrics(path)]))
                except UserError as exc:  # binary or unreadable: refused in one line is clean
                    if "\n" in str(exc):
                        problem = f"multi-line error {str(exc)[:60]!r}"
            if problem:
                failures.append(f"case {case} (seed {seed}): {problem}")
        except Exception:  # the point is to catch anything
            failures.append(f"case {case} (seed {seed}): {traceback.format_exc(limit=3).splitlines()[-1]}")


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
    print(
        f"cases {result['cases']:,} | {result['seconds']:.1f} s | {result['cases'] / result['seconds']:.0f} cases/s | "
        f"{len(result['ids'])} distinct finding ids | failures {len(result['failures'])}"
    )
    for failure in result["failures"][:20]:
        print("  " + failure)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
