"""A cache of parsed signature files, keyed by their paths and checksums, so that start-up skips YAML.

Only a catalogue that loaded without a problem is written, as JSON (never pickle: the file is read back into
a process). What it saves is parsing and the pattern-safety analysis. An entry is two lines: a header (the
key, and the checksums of the second line) and the parsed files. What is read back is not trusted: a second
line that does not match its checksums (an edited or damaged entry) is a miss, every field is validated again
from the cached data, and the loader falls back to the YAML on any problem with it (loader.py). Any doubt
(unreadable, corrupt, not a list, different key) is a miss, and so is an entry that is not a regular file of
at most MAX_ENTRY_BYTES: a FIFO put in its place would block the read forever, a link to /dev/zero would
fill memory. Writing is best effort: a read-only home or a
full disk must never fail a diagnosis, and the cache never creates a home directory: it is skipped when the
directory it would live in has no parent (HOME pointing nowhere).

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

FORMAT = 2  # 2: a header line with the checksums of the data line
KEEP = 16  # catalogue versions kept (built-in plus a few teams' directories); the oldest go first
MAX_ENTRY_BYTES = 64 * 1024 * 1024  # the built-in catalogue's entry is 64 KB


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


def _checksum(data: bytes) -> str:
    return f"{len(data)} {zlib.crc32(data):08x} {zlib.adler32(data):08x}"


def read_cached(key: str, count: int) -> list[dict[str, Any]] | None:
    directory = cache_dir()
    if directory is None:
        return None
    try:
        content = _read_entry(_entry(directory, key))
        if content is None:
            return None
        header_line, _, body = content.partition(b"\n")
        header = json.loads(header_line)
        if not isinstance(header, dict) or header.get("key") != key or header.get("check") != _checksum(body):
            return None
        data = json.loads(body)
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or len(data) != count or not all(isinstance(item, dict) for item in data):
        return None
    return data


def _read_entry(path: Path) -> bytes | None:
    """The entry's bytes, read through one descriptor that is checked first: not a link (O_NOFOLLOW), never
    blocking on a FIFO (O_NONBLOCK), a regular file (fstat) of at most MAX_ENTRY_BYTES."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_ENTRY_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            content = handle.read(MAX_ENTRY_BYTES + 1)  # a file that grew after fstat is still bounded
    finally:
        os.close(fd)
    return content if len(content) <= MAX_ENTRY_BYTES else None


def write_cached(key: str, data: list[dict[str, Any]]) -> None:
    directory = cache_dir()
    if directory is None:
        return
    import tempfile

    try:
        body = json.dumps(data, ensure_ascii=False)
        if json.loads(body) != data:  # a YAML value JSON cannot hold (a date, a non-string key, NaN)
            return
        encoded = body.encode("utf-8")
        header = json.dumps({"key": key, "check": _checksum(encoded)}, ensure_ascii=True)
        if not _make_directory(directory):
            return
        fd, temporary = tempfile.mkstemp(prefix=".catalog-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(header.encode("ascii") + b"\n" + encoded)
            os.replace(temporary, _entry(directory, key))
        except BaseException:
            os.unlink(temporary)
            raise
        _prune(directory)
    except (OSError, TypeError, ValueError):
        return


def forget_cached(key: str) -> None:
    """Drop an entry the loader found wrong (it is rewritten from the YAML)."""
    directory = cache_dir()
    if directory is not None:
        try:
            _entry(directory, key).unlink(missing_ok=True)
        except OSError:
            pass


def _make_directory(directory: Path) -> bool:
    """Create the cache directory, and its parent only where that is `~/.cache` in an existing home (or
    `$XDG_CACHE_HOME` in an existing directory); never anything higher, so never a home directory."""
    if directory.is_dir():
        return True
    parent = directory.parent
    if not parent.is_dir():
        if not parent.parent.is_dir() or os.environ.get("OFFLOADDOCTOR_CACHE_DIR"):
            return False
        parent.mkdir(mode=0o700)
    directory.mkdir(mode=0o700, exist_ok=True)
    return True


def _prune(directory: Path) -> None:
    entries = sorted(directory.glob("catalog-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in entries[KEEP:]:
        stale.unlink(missing_ok=True)
