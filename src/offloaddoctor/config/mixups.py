"""A log passed as `--config`, or a config passed as the log: say so instead of "invalid YAML" or
"no known failure"."""

from __future__ import annotations

from pathlib import Path

from offloaddoctor.errors import UserError
from offloaddoctor.lazy_pattern import lazy_compile

CONFIG_SUFFIXES = (".yaml", ".yml", ".sh", ".bash", ".slurm", ".sbatch")
_SAMPLE_BYTES = 64 * 1024
# Lines only a training log has: a traceback, rank prefixes, Megatron's iteration and `> ...` lines, logging
# levels and timestamps at a line start, a Python exception.
_LOG_LINE = lazy_compile(
    r"(?m)^(?:Traceback \(most recent call last\)|\[rank\d+\]|\[default\d+\]|\d+: |\s*iteration\s+\d+/"
    r"|> |\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[?(?:INFO|WARNING|ERROR|DEBUG)\b|[IWEF]\d{4} \d\d:\d\d"
    r"|[\w.]*(?:Error|Exception): )"
)


def looks_like_log(text: str) -> bool:
    return _LOG_LINE.search(text[:_SAMPLE_BYTES]) is not None


def log_given_as_config(path: str, text: str) -> UserError | None:
    """The error for a config file that is really a log (checked once YAML has refused it)."""
    if not looks_like_log(text):
        return None
    return UserError(
        f"{path}: this is a training log, not a config: pass it as LOG "
        f"(offloaddoctor diagnose {path} [--config RUN_CONFIG.yaml])"
    )


def refuse_configs_as_logs(paths: list[str]) -> None:
    """A log named `*.yaml` or `*.sh` with no log line in its first 64 KiB is a config given as the log."""
    for raw in paths:
        path = Path(raw)
        if path.suffix.lower() not in CONFIG_SUFFIXES or not path.is_file():
            continue
        try:
            with open(path, "rb") as handle:
                sample = handle.read(_SAMPLE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue  # reading it as a log says what is wrong
        if sample.strip() and not looks_like_log(sample):
            raise UserError(
                f"{raw}: this is a config, not a log: pass it with --config (offloaddoctor diagnose LOG --config {raw})"
            )
