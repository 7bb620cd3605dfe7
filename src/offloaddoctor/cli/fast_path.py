"""The fast road: run `diagnose` without importing typer, which alone costs about five bare Python start-ups
(CI and Slurm epilogs call offloaddoctor once per log).

The road is driven by `_fast_spec.py`, generated from the typer declaration by `build_spec` (a test fails
when it is stale), so the options are declared once, in typer. It takes only argv it parses exactly as
click would: long options with a separate or `=` value, short options with a separate value, flags, `--`,
positionals. Anything else (help, a usage error, a short-option cluster, an unknown choice) returns None
and typer handles it, with its messages. A property test checks both roads hand the command the same
arguments.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

# Commands with a fast road, and the typer-free function each one calls with the declared parameters.
TARGETS = {
    "diagnose": "offloaddoctor.cli.run_diagnose:run_diagnose",
    "check": "offloaddoctor.cli.run_check:run_check",
    "metrics": "offloaddoctor.cli.run_check:run_metrics",
}

Parsed = tuple[str, dict[str, "Any"]]


def parse(argv: Sequence[str], commands: dict[str, Any] | None = None) -> Parsed | None:
    """(target, keyword arguments) exactly as typer would pass them, or None: let typer parse it."""
    if commands is None:
        from offloaddoctor.cli._fast_spec import COMMANDS

        commands = COMMANDS
    if not argv or argv[0] not in commands:
        return None
    spec: dict[str, Any] = commands[argv[0]]
    given: dict[str, Any] = {}
    positionals: list[str] = []
    tokens = iter(argv[1:])
    for token in tokens:
        if token == "--":
            positionals.extend(tokens)
            break
        if token == "-" or not token.startswith("-"):
            positionals.append(token)
            continue
        name, has_value, value = token.partition("=") if token.startswith("--") else (token, "", "")
        param_name = spec["options"].get(name)
        if param_name is None:
            return None
        param = spec["params"][param_name]
        if param["kind"] == "flag":
            if has_value:
                return None
            given[param_name] = True
            continue
        if not has_value:
            following = next(tokens, None)
            if following is None:
                return None
            value = following
        converted = _convert(param, value)
        if converted is None:
            return None
        if param["multiple"]:
            given.setdefault(param_name, []).append(converted)
        else:
            given[param_name] = converted
    if not _place_positionals(spec["arguments"], positionals, given):
        return None
    kwargs = {}
    for param_name, param in spec["params"].items():
        if param_name in given:
            kwargs[param_name] = given[param_name]
        elif param["required"]:
            return None
        else:
            kwargs[param_name] = _default(param)
    return TARGETS[argv[0]], kwargs


def run(argv: Sequence[str]) -> int | None:
    """The exit code of the command run on the fast road, or None when typer must take argv."""
    parsed = parse(argv)
    if parsed is None:
        return None
    target, kwargs = parsed
    module_name, function_name = target.split(":")
    command = getattr(importlib.import_module(module_name), function_name)
    from offloaddoctor.cli.common import guarded

    try:
        return guarded(command)(**kwargs)
    except KeyboardInterrupt:  # as the typer road does (cli/__init__.py): 130, never 1 ("findings")
        sys.stderr.write("\noffloaddoctor: interrupted\n")
        return 130
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # `| head`: click exits 1 without a traceback; silence the flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        raise


def _convert(param: dict[str, Any], value: str) -> Any:
    kind = param["kind"]
    if kind == "str":
        return value
    if kind == "path":
        # click.Path(readable=True) refuses an existing unreadable path with its own message
        if os.path.exists(value) and not os.access(value, os.R_OK):
            return None
        return Path(value)
    if kind == "enum":
        if value not in param["choices"]:
            return None
        return _enum(param)(value)
    if kind == "int":
        try:
            return int(value)  # as click's INT converts it
        except ValueError:
            return None  # typer says what is wrong with it
    raise ValueError(f"fast road: unknown parameter kind {kind!r}")


def _default(param: dict[str, Any]) -> Any:
    default = param["default"]
    if param["multiple"]:
        return None if default is None else list(default)  # typer hands an absent optional list as None
    if param["kind"] == "enum" and default is not None:
        return _enum(param)(default)
    return default


def _enum(param: dict[str, Any]):
    module_name, class_name = param["enum"].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def _place_positionals(arguments: list[dict[str, Any]], positionals: list[str], given: dict[str, Any]) -> bool:
    """Positionals are all nargs=1 except perhaps the last, nargs=-1 (`build_spec` refuses other shapes)."""
    for argument in arguments:
        if argument["multiple"]:
            taken, positionals = positionals, []
            if not taken and argument["required"]:
                return False
            if taken:
                given[argument["name"]] = taken
            continue
        if not positionals:
            if argument["required"]:
                return False
            continue
        given[argument["name"]], positionals = positionals[0], positionals[1:]
    return not positionals


def build_spec(app) -> dict[str, Any]:
    """The parsing spec of every command in TARGETS, from the typer declaration (imports typer)."""
    import typing

    import typer.main

    group = typer.main.get_command(app)
    callbacks = {
        info.name or info.callback.__name__.replace("_", "-"): info.callback for info in app.registered_commands
    }
    commands: dict[str, Any] = {}
    for name in TARGETS:
        command = group.commands[name]  # type: ignore[attr-defined] # the app is a typer group
        hints = typing.get_type_hints(callbacks[name])
        options: dict[str, str] = {}
        params: dict[str, Any] = {}
        arguments: list[dict[str, Any]] = []
        for click_param in command.params:
            annotation = hints[click_param.name]
            param = {
                "kind": _kind(click_param, annotation),
                "multiple": click_param.multiple or click_param.nargs == -1,
                "required": click_param.required,
                "default": _plain_default(click_param.default),
            }
            if param["kind"] == "enum":
                enum_class = _enum_class(annotation)
                param["enum"] = f"{enum_class.__module__}:{enum_class.__qualname__}"
                param["choices"] = list(click_param.type.choices)
            params[click_param.name] = param
            if click_param.param_type_name == "argument":
                if arguments and arguments[-1]["multiple"]:
                    raise ValueError(f"{name}: only the last positional may take many values")
                arguments.append(
                    {"name": click_param.name, "multiple": param["multiple"], "required": click_param.required}
                )
            else:
                if click_param.secondary_opts or click_param.envvar or click_param.callback or click_param.is_eager:
                    raise ValueError(f"{name} {click_param.opts}: not something the fast road parses")
                options.update(dict.fromkeys(click_param.opts, click_param.name))
        commands[name] = {"options": options, "arguments": arguments, "params": params}
    return commands


def _kind(click_param, annotation) -> str:
    # typer vendors click (typer._click): recognise click's types by their names, not their classes
    if getattr(click_param, "is_flag", False):
        if click_param.default is not False or click_param.count:
            raise ValueError(f"{click_param.opts}: only off-by-default flags")
        return "flag"
    if _enum_class(annotation) is not None:
        if click_param.type.name != "choice" or not click_param.type.case_sensitive:
            raise ValueError(f"{click_param.opts}: an enum parameter that is not a case-sensitive choice")
        return "enum"
    if click_param.type.name == "path":
        path = click_param.type
        if (
            path.exists,
            path.file_okay,
            path.dir_okay,
            path.writable,
            path.readable,
            path.resolve_path,
            path.allow_dash,
        ) != (False, True, True, False, True, False, False):
            raise ValueError(f"{click_param.opts}: a click.Path with checks the fast road does not make")
        return "path"
    if type(click_param.type).__name__ == "StringParamType":
        return "str"
    if type(click_param.type).__name__ == "IntParamType":  # not a range: those check bounds the road does not
        return "int"
    raise ValueError(f"{click_param.opts}: type {click_param.type!r} is not one the fast road converts")


def _enum_class(annotation):
    import enum
    import typing

    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
            return candidate
    return None


def _plain_default(default: Any) -> Any:
    if isinstance(default, (list, tuple)):
        return [_plain_default(item) for item in default]
    return getattr(default, "value", default)


def render_spec(commands: dict[str, Any]) -> str:
    import pprint

    return (
        '"""Generated by `python3 tools/gen_fast_spec.py` from the typer declaration: the fast road\'s parsing spec\n'
        '(see `fast_path.py`). Do not edit; tests/test_fast_path.py fails when it is stale."""\n\n'
        f"COMMANDS = {pprint.pformat(commands, width=110, sort_dicts=True)}\n"
    )
