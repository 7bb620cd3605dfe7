"""Two configs, no git: shrink the keys that differ to a minimal set that still fails the check
(Zeller's ddmin; the result is 1-minimal: undoing any one of its keys makes the check pass)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from offloaddoctor.bisect.changes import diff_configs, flatten, keys_read_by
from offloaddoctor.bisect.judge import ConfigJudge
from offloaddoctor.bisect.result import BisectResult
from offloaddoctor.bisect.search import BAD, GOOD
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.loading import load_config_file
from offloaddoctor.config.values import ConfigValue
from offloaddoctor.errors import UserError


def bisect_configs(good_path: str, bad_path: str, catalog: Catalog, signature_id: str | None = None) -> BisectResult:
    judge = ConfigJudge(catalog, signature_id)
    before, after = flatten(load_config_file(good_path)), flatten(load_config_file(bad_path))
    good_outcome, bad_outcome = judge.judge(list(before.values())), judge.judge(list(after.values()))
    if good_outcome.verdict != GOOD:
        raise UserError(f"--good-config {good_path} does not pass: {good_outcome.reason}")
    if bad_outcome.verdict != BAD:
        raise UserError(f"--bad-config {bad_path} does not fail {judge.target}: nothing to minimise")
    differing = [change.key for change in diff_configs(before, after, set())]  # by key: none is read

    def with_changes(keys: Sequence[str]) -> list[ConfigValue]:
        merged = dict(before)
        for key in keys:
            if key in after:
                merged[key] = after[key]
            else:
                merged.pop(key, None)
        return list(merged.values())

    minimal = ddmin(differing, lambda keys: judge.judge(with_changes(keys)).verdict == BAD)
    failing = judge.judge(with_changes(minimal)).detail
    result = BisectResult("configs", judge.target, failing=failing, total_changes=len(differing))
    result.changes = diff_configs(
        {k: before[k] for k in minimal if k in before},
        {k: after[k] for k in minimal if k in after},
        keys_read_by(catalog, failing),
    )
    return result


def ddmin(items: Sequence[str], fails: Callable[[Sequence[str]], bool]) -> list[str]:
    """`fails(items)` must hold. Returns a subset that fails, from which no single item can be removed."""
    current = list(items)
    granularity = 2
    while len(current) >= 2:
        chunks = _split(current, granularity)
        for chunk in chunks:
            if fails(chunk):
                current, granularity = chunk, 2
                break
        else:
            for chunk in chunks:
                complement = [item for item in current if item not in chunk]
                if fails(complement):
                    current, granularity = complement, max(granularity - 1, 2)
                    break
            else:
                if granularity >= len(current):
                    break
                granularity = min(len(current), granularity * 2)
    return current


def _split(items: list[str], parts: int) -> list[list[str]]:
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            chunks.append(items[start:end])
        start = end
    return chunks
