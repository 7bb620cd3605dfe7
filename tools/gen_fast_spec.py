#!/usr/bin/env python3
"""Regenerate src/offloaddoctor/cli/_fast_spec.py from the typer declaration (run after changing a
fast-road command's options; tests/test_fast_path.py says when)."""

from pathlib import Path

from offloaddoctor.cli import typer_app
from offloaddoctor.cli.fast_path import build_spec, render_spec

SPEC = Path(__file__).resolve().parents[1] / "src" / "offloaddoctor" / "cli" / "_fast_spec.py"

if __name__ == "__main__":
    SPEC.write_text(render_spec(build_spec(typer_app())), encoding="utf-8")
    print(f"wrote {SPEC}")
