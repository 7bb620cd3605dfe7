"""Output formats are declared once, in render/formats.py."""

from __future__ import annotations

import pytest

from offloaddoctor.cli.common import OutputFormat
from offloaddoctor.errors import UserError
from offloaddoctor.render.formats import FILE_FORMATS, Format
from offloaddoctor.render.outputs import parse_output


def test_the_cli_choices_are_the_render_formats():
    assert OutputFormat is Format
    from typer.main import get_command

    from offloaddoctor.cli import app

    diagnose = get_command(app).commands["diagnose"]  # type: ignore[attr-defined] # the app is a group
    choices = next(param.type.choices for param in diagnose.params if param.name == "output_format")
    assert list(choices) == [f.value for f in Format]


@pytest.mark.parametrize("name", FILE_FORMATS)
def test_every_file_format_is_accepted_by_output(name):
    assert parse_output(f"{name}=report.out") == (name, "report.out")


def test_terminal_is_not_a_file_format():
    with pytest.raises(UserError, match="say the format as FORMAT=PATH"):
        parse_output("terminal=report.out")
