"""`offloaddoctor bisect-step`: one verdict for the commit `git bisect run` has checked out.

git bisect run's contract: 0 good, 1 bad, 125 skip (cannot test), 128 and above abort the bisection.
We never return 128 or more: a killed job (137), a timeout or an unreadable config is a skip.
"""

from __future__ import annotations

from pathlib import Path

from offloaddoctor.bisect.judge import ConfigJudge
from offloaddoctor.bisect.interrupts import signals_interrupt
from offloaddoctor.bisect.search import BAD, GOOD, SKIP, Outcome
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.loading import load_config_file
from offloaddoctor.errors import UserError

EXIT_GOOD, EXIT_BAD, EXIT_SKIP = 0, 1, 125
EXIT_FOR = {GOOD: EXIT_GOOD, BAD: EXIT_BAD, SKIP: EXIT_SKIP}


def bisect_step(
    catalog: Catalog,
    config_path: str | None = None,
    command: str | None = None,
    log_path: str | None = None,
    timeout: float | None = None,
    signature_id: str | None = None,
) -> Outcome:
    if command:
        from offloaddoctor.bisect.run_mode import run_and_judge  # here: worktrees, tempfile, the diagnosis

        with signals_interrupt():
            configs = [config_path] if config_path else []
            return run_and_judge(command, Path.cwd(), catalog, log_path, timeout, signature_id, configs)
    if not config_path:
        raise UserError("bisect-step needs --config PATH or --run CMD")
    try:
        values = load_config_file(config_path)
    except UserError as exc:
        return Outcome(SKIP, str(exc))
    return ConfigJudge(catalog, signature_id).judge(values)
