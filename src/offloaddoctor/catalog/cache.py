"""A cache of parsed signature files, keyed by their paths and checksums, so that start-up skips YAML.

Only a catalogue that loaded without a problem is written, as JSON (never pickle: the file is read back into
a process). What it saves is parsing and the pattern-safety analysis; every field is still validated from the
cached data. Any doubt (unreadable, corrupt, not a list, different key) is a miss. Writing is best effort: a
read-only home or a full disk must never fail a diagnosis.

OFFLOADDOCTOR_CACHE_DIR moves it; OFFLOADDOCTOR_NO_CACHE=1 turns it off.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

from offloaddoctor import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

FORMAT = 1
KEEP = 16  # catalogue versions kept (built-in plus a few teams' directories); the oldest go first


def cache_dir() -> Path | None:
    if os.environ.get("OFFLOADDOCTOR_NO_CACHE"):
        return None
    configured = os.environ.get("OFFLOADDOCTOR_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "offloaddoctor"


def catalog_key(files: list[tuple[Path, bytes]]) -> str:
    """Version, then per file its path, length, CRC-32 and Adler-32: an edit that keeps all three is not
    an accident, and whoever can make one can write the signature file itself. (hashlib would load OpenSSL:
    5 ms of start-up.)"""
    parts = [f"offloaddoctor {__version__} catalog-cache {FORMAT}"]
    for path, content in files:
        parts.append(f"{str(path)!r} {len(content)} {zlib.crc32(content):08x} {zlib.adler32(content):08x}")
    return "\n".join(parts)


def _entry(directory: Path, key: str) -> Path:
    encoded = key.encode("utf-8", "backslashreplace")
    return directory / f"catalog-{zlib.crc32(encoded):08x}{zlib.adler32(encoded):08x}.json"


def read_cached(key: str, count: int) -> list[dict[str, Any]] | None:
    directory = cache_dir()
    if directory is None:
        return None
    try:
        with open(_entry(directory, key), encoding="utf-8") as handle:
            stored = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    data = stored.get("files")
    if not isinstance(data, list) or len(data) != count or not all(isinstance(item, dict) for item in data):
        return None
    return data


def write_cached(key: str, data: list[dict[str, Any]]) -> None:
    directory = cache_dir()
    if directory is None:
        return
    import tempfile

    try:
        text = json.dumps({"key": key, "files": data}, ensure_ascii=False)
        if json.loads(text)["files"] != data:  # a YAML value JSON cannot hold (a date, a non-string key)
            return
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".catalog-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, _entry(directory, key))
        except BaseException:
            os.unlink(temporary)
            raise
        _prune(directory)
    except (OSError, TypeError, ValueError):
        return


def _prune(directory: Path) -> None:
    entries = sorted(directory.glob("catalog-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in entries[KEEP:]:
        stale.unlink(missing_ok=True)
