"""Project defaults for CI: when to fail, which signatures to suppress (with a reason), extra catalogues.
Applied by the library (`api.diagnose(policy=…)`, `Policy.apply`), so every caller gets what the CLI gets.

Read from `.offloaddoctor.yaml` or `[tool.offloaddoctor]` in `pyproject.toml`, the nearest one found
walking up from the current directory, no higher than the repository's root (a directory holding `.git`) or
the user's home; command-line options add to it or override it. A file that someone else could have written
(writable by group or others, or owned by a user other than root and the current one) is ignored with a
warning: one planted in a shared directory must not turn a failed run into a pass.

    fail_on: warning                    # error (default) | warning | unknown | never
    signatures: [ci/signatures]         # relative to the project file
    ignore:
      - {id: optimizer-offload-slowdown, reason: "benchmark job: offloading on purpose"}
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from offloaddoctor.errors import UserError
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing, and the findings (with the scanner), cost start-up time
    from typing import Any

    from offloaddoctor.report import Finding, Report

FAIL_ON = ("error", "warning", "unknown", "never")
# Besides these severities, every level but `never` fails on a traceback no signature explains (a crash nobody
# recognises must not pass CI), and `unknown` also on any failure line no signature explains and on input
# that gave not one line (empty, or every log skipped as unreadable).
_FAILING_SEVERITIES = {"error": {"error"}, "warning": {"error", "warning"}, "unknown": {"error"}, "never": set()}


@dataclass
class Policy:
    fail_on: str = "error"
    ignore: dict[str, str] = field(default_factory=dict)  # id -> reason
    signature_dirs: list[Path] = field(default_factory=list)
    source: str | None = None  # the project file, when one was read
    warnings: list[str] = field(default_factory=list)  # project files passed over, and why
    ignored_by: dict[str, str] = field(default_factory=dict)  # id -> "--ignore" or the project file

    def fails(self, finding: Finding) -> bool:
        return finding.signature.severity in _FAILING_SEVERITIES[self.fail_on]

    def failed(self, report: Report) -> bool:
        """Whether the run fails by `fail_on`: a finding left after suppression has a failing severity, or a
        traceback no signature explains (all but `never`); with `unknown`, also any failure line no signature
        explains, or not one line read. Logs of several runs fail when one run does."""
        if self.fail_on == "never":
            return False
        if report.runs:
            return any(self.failed(run) for run in report.runs)
        if any(self.fails(f) for f in report.findings) or report.unmatched_traceback:
            return True
        return self.fail_on == "unknown" and (
            report.unmatched is not None or not any(source.lines for source in report.sources)
        )

    def add_command_line(self, fail_on: str | None = None, ignore: list[str] | tuple[str, ...] = ()) -> Policy:
        """Command-line options on top of the project file: `--fail-on` replaces, `--ignore` adds."""
        if fail_on is not None:
            if fail_on not in FAIL_ON:
                raise UserError(f"--fail-on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
            self.fail_on = fail_on
        self.ignore.update(dict.fromkeys(ignore, "--ignore on the command line"))
        self.ignored_by.update(dict.fromkeys(ignore, "--ignore"))
        return self

    def unknown_ids(self, catalog) -> list[str]:
        """Ignored ids the catalogue does not know (a typo would silently suppress nothing)."""
        return [i for i in self.ignore if catalog.get(i) is None]

    def apply(self, report: Report) -> Report:
        """Move ignored findings out of `findings` into `suppressed` (id -> reason), saying by what
        (`suppressed_by`) and how often they matched; the report names the project file read, if one was
        (`project_file`), and notes the ones passed over."""
        report.notes[:0] = [n for n in self.warnings if n not in report.notes]
        gone = [f for f in report.findings if f.id in self.ignore]
        report.suppressed = {f.id: self.ignore[f.id] for f in gone}
        report.suppressed_by = {f.id: self.ignored_by.get(f.id, self.source or "--ignore") for f in gone}
        report.suppressed_occurrences = {f.id: f.occurrences for f in gone}
        report.findings = [f for f in report.findings if f.id not in self.ignore]
        report.project_file = self.source
        return report


def find_project_file(start: Path, warnings: list[str] | None = None) -> Path | None:
    """The nearest trusted project file from `start` up to the repository root or home; a file not trusted
    (`untrusted_reason`) is passed over with a line in `warnings`."""
    try:
        home: Path | None = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no password entry
        home = None
    for directory in [start, *start.parents]:
        for candidate in (directory / ".offloaddoctor.yaml", directory / "pyproject.toml"):
            if not candidate.is_file():
                continue
            if candidate.name == "pyproject.toml" and _pyproject_table(candidate) is None:
                continue
            reason = untrusted_reason(candidate)
            if reason is None:
                return candidate
            if warnings is not None:
                warnings.append(f"{candidate}: project settings ignored: {reason}")
        if directory == home or (directory / ".git").exists():
            break
    return None


def untrusted_reason(path: Path) -> str | None:
    """Why a project file may have been written by someone else, or None: writable by group or others, or
    owned by a user who is neither root nor the current one."""
    import stat

    try:
        info = os.stat(path)
    except OSError:
        return None  # reading it says what is wrong
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by group or others (chmod go-w to use it)"
    getuid = getattr(os, "getuid", None)
    if getuid is not None and info.st_uid not in (0, getuid()):
        return f"owned by another user (uid {info.st_uid})"
    return None


def load_policy(start: Path | None = None) -> Policy:
    warnings: list[str] = []
    path = find_project_file(start or Path.cwd(), warnings)
    if path is None:
        return Policy(warnings=warnings)
    if path.name == "pyproject.toml":
        table = _pyproject_table(path)
    else:
        # here, not at the top: most projects have no such file, and PyYAML costs start-up
        import yaml

        from offloaddoctor.config.files import read_config_text
        from offloaddoctor.config.yaml_config import safe_load_bounded

        try:
            table = safe_load_bounded(read_config_text(str(path)), str(path))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: cannot read project settings: {' '.join(str(exc).split())[:200]}") from None
        except RecursionError:
            raise UserError(f"{path}: cannot read project settings: nested too deeply") from None
    policy = _parse(table or {}, path)
    policy.warnings = warnings
    return policy


# Where a `tool.offloaddoctor` table can be defined: a `[tool.offloaddoctor…]` (or `[[…]]`) header, a `[tool]`
# header (`offloaddoctor…` keys under it), a `tool.offloaddoctor… =` dotted key or a `tool = {…}` inline table.
# Only then is TOML worth parsing: a project that merely depends on offloaddoctor is spared tomllib at start-up.
_MAYBE_OUR_TABLE = lazy_compile(
    r"""(?m)^[ \t]*(?:\[\[?[ \t]*["']?tool["']?[ \t]*(?:\]|\.[ \t]*["']?offloaddoctor)"""
    r"""|["']?tool["']?[ \t]*(?:=|\.[ \t]*["']?offloaddoctor))"""
)


def may_define_our_table(text: str) -> bool:
    return "offloaddoctor" in text and _MAYBE_OUR_TABLE.search(text) is not None


def _pyproject_table(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read pyproject.toml: {exc}") from None
    if not may_define_our_table(text):  # the common case: not worth importing a TOML parser
        return None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: cannot read pyproject.toml: {exc}") from None
    return data.get("tool", {}).get("offloaddoctor")


def _parse(table: Any, path: Path) -> Policy:
    if not isinstance(table, dict):
        raise UserError(f"{path}: project settings must be a mapping")
    unknown = set(table) - {"fail_on", "ignore", "signatures"}
    if unknown:
        raise UserError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))} (known: fail_on, ignore, signatures)")
    fail_on = table.get("fail_on", "error")
    if fail_on not in FAIL_ON:
        raise UserError(f"{path}: fail_on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
    ignore: dict[str, str] = {}
    if not isinstance(table.get("ignore") or [], list):
        raise UserError(f"{path}: ignore must be a list of {{id: ..., reason: ...}} entries")
    for entry in table.get("ignore") or []:
        if not isinstance(entry, dict) or not entry.get("id") or not str(entry.get("reason") or "").strip():
            raise UserError(f"{path}: every ignore entry needs an id and a reason, e.g. {{id: ..., reason: ...}}")
        ignore[str(entry["id"])] = str(entry["reason"]).strip()
    dirs = table.get("signatures") or []
    if not isinstance(dirs, list):
        raise UserError(f"{path}: signatures must be a list of directories")
    return Policy(
        fail_on, ignore, [path.parent / str(d) for d in dirs], str(path), ignored_by=dict.fromkeys(ignore, str(path))
    )
