"""The output formats, declared once: the CLI's `--format` choices and `--output` file formats come from here."""

from __future__ import annotations

from enum import Enum


class Format(str, Enum):
    auto = "auto"  # terminal panels on a terminal, GitHub annotations under GitHub Actions, plain text otherwise
    terminal = "terminal"
    text = "text"
    json = "json"
    junit = "junit"
    github = "github"
    markdown = "markdown"


class CheckFormat(str, Enum):
    """What `check` renders (no CI formats: those belong to `diagnose`)."""

    auto = "auto"
    terminal = "terminal"
    text = "text"
    json = "json"


class TextOrJson(str, Enum):
    text = "text"
    json = "json"


# What `--output FORMAT=PATH` can write: everything but the two that depend on where stdout goes.
FILE_FORMATS = tuple(f.value for f in Format if f not in (Format.auto, Format.terminal))
# For machines: never a progress bar next to them.
MACHINE_FORMATS = (Format.json, Format.junit, Format.github, Format.markdown)


class MetricsFormat(str, Enum):
    """`metrics --format`."""

    text = "text"
    json = "json"
    csv = "csv"
