"""Resolve user paths into log sources and stream their lines without holding a whole file."""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from offloaddoctor.errors import UserError
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import BinaryIO

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")  # the one list; each may carry GZIP_SUFFIX after it
GZIP_SUFFIX = ".gz"
STDIN_NAME = "<stdin>"
STDIN_CLOSED = "-: standard input is closed; pipe a log into it or name a log file"
# Longer lines are cut: nothing we match is that long, and a 1 GB line must not become a 1 GB string.
MAX_LINE_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"
_GLOB = lazy_compile(r"[*?\[]")
# Searched in the lower-cased name: a case-sensitive pattern starts with a literal the engine finds fast
# (an IGNORECASE one is tried at every character; 200,000 rank logs).
_RANK_IN_NAME = lazy_compile(r"rank[-_.]?(\d{1,6})")


# slots: 200,000 rank logs are 200,000 of these; not frozen (treat it as if it were): a frozen dataclass is made
# 3x slower (1.2 µs), and hashing is kept.
@dataclass(slots=True, unsafe_hash=True)
class LogSource:
    """One log to read: a file path, or standard input when `path` is `-`. `listed`: found by listing a
    directory or expanding a pattern, not named by the user: if it is gone by the time it is read (logs
    rotated, a job cleaning up), that is a warning, not the end of the run."""

    path: str
    listed: bool = False
    # Bytes when the path was resolved (the stat that tells files apart gives it): to balance work, not to read.
    size: int | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return STDIN_NAME if self.path == "-" else self.path

    @property
    def rank_from_name(self) -> int | None:
        """Per-rank log files are often named `…rank3.log`; lines without a prefix get that rank."""
        if self.path == "-":
            return None
        found = _RANK_IN_NAME.search(os.path.basename(self.path).lower())
        return int(found.group(1)) if found else None


def is_log_name(name: str) -> bool:
    """A log a directory scan lists: `job.log`, `job.out.gz`, ..."""
    name = name.lower()
    if name.endswith(GZIP_SUFFIX):
        name = name[: -len(GZIP_SUFFIX)]
    return name.endswith(LOG_SUFFIXES)


def reads_as_log(path: str) -> bool:
    """Read as a log where a config could also be given (`estimate`): a log's name, or anything gzip-compressed
    (no config format is)."""
    return is_log_name(path) or path.lower().endswith(GZIP_SUFFIX)


def resolve_sources(paths: Sequence[str], recursive: bool = False, notes: list[str] | None = None) -> list[LogSource]:
    """Expand globs and directories (their log files; with `recursive`, their subdirectories' too) into
    sources, each file once; fail with one clear line on anything unusable. What a directory scan passes over
    (a symbolic link leading out of the directory, a subdirectory it cannot list) is said in `notes`."""
    notes = notes if notes is not None else []
    if not paths:
        raise UserError("no log given: pass one or more log files, directories, or - for standard input")
    named: list[tuple[str, bool]] = []  # (path, listed): a LogSource is made once, with the size its stat gives
    for raw in paths:
        if raw == "-":
            if sys.stdin is None:
                raise UserError(STDIN_CLOSED)
            named.append(("-", False))
            continue
        if _GLOB.search(raw) and not Path(raw).exists():
            import glob  # patterns are the exception (the shell expands them first)

            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                raise UserError(f"{raw}: the pattern matches no file")
            files = [(m, True) for m in matches if Path(m).is_file()]
            if not files:
                raise UserError(f"{raw}: the pattern matches no regular file (only directories or special files)")
            named.extend(files)
            continue
        path = Path(raw)
        if path.is_dir():
            listed = _listed_logs(path, recursive, notes)
            linked = [name for name, identity in listed if identity is None]
            if linked:
                kept = set(_inside(path, linked, notes))
                listed = [(name, identity) for name, identity in listed if identity is not None or name in kept]
            if listed and len(paths) == 1:
                # One directory and nothing else: its entries tell files apart by their inode numbers,
                # with no stat each (200,000 rank logs); symbolic links within it are still followed.
                return _unique([(name, True) for name, _ in listed], [inode for _, inode in listed])
            found = [name for name, _ in listed]
            if not found:
                where = " or below it" if recursive else " (--recursive looks in subdirectories)"
                raise UserError(
                    f"{raw}: directory has no log files{where} (looked for {', '.join('*' + s for s in LOG_SUFFIXES)} and {GZIP_SUFFIX})"
                )
            named.extend((name, True) for name in found)
        elif path.exists():
            if not path.is_file():
                raise UserError(f"{raw}: not a regular file")
            named.append((raw, False))
        elif path.is_symlink():
            raise UserError(f"{raw}: symbolic link that leads nowhere (dangling, or a loop)")
        else:
            raise UserError(f"{raw}: no such file or directory")
    return _unique(named)


def _inside(directory: Path, found: list[str], notes: list[str]) -> list[str]:
    """The files of a directory scan that stay inside it: a symbolic link that leads out of the directory
    (`secret.log -> ~/.ssh/id_rsa`) is not followed, with a note; naming its target reads it."""
    root = os.path.realpath(directory)
    kept = []
    for name in found:
        if os.path.islink(name):
            target = os.path.realpath(name)
            if os.path.commonpath([root, target]) != root:
                notes.append(f"{name}: symbolic link to a file outside {directory}; skipped (name it to read it)")
                continue
        kept.append(name)
    return kept


def _unique(named: list[tuple[str, bool]], known: list[object] | None = None) -> list[LogSource]:
    """Each file once, in order. `known`: identities already at hand (None where a stat must tell)."""
    if known is not None:
        distinct = set(known)
        if None not in distinct and len(distinct) == len(known):
            return [LogSource(name, listed) for name, listed in named]  # all different: no dictionary needed
        # Entries whose listed inode number is shared are told apart by a stat: hard links (the same file),
        # or a filesystem that gives every entry the same made-up number (FUSE without `use_ino`).
        seen = Counter(known)
        known = [identity if seen[identity] == 1 else None for identity in known]
    unique: dict[object, LogSource] = {}
    for index, (name, listed) in enumerate(named):
        identity = known[index] if known is not None else None
        size = None
        if identity is None:
            identity, size = _identity(name)
        if identity not in unique:
            unique[identity] = LogSource(name, listed, size)
    return list(unique.values())


def _identity(path: str) -> tuple[object, int | None]:
    """The file behind a path and its size (one stat, where resolving a path costs one per component:
    20,000 rank logs)."""
    if path == "-":
        return "-", None
    try:
        found = os.stat(path)
        return (found.st_dev, found.st_ino), found.st_size
    except OSError:
        return str(Path(path).resolve()), None


class VanishedLog(UserError):
    """A listed log that no longer exists: the scanners note it and go on."""


class UnreadableLog(VanishedLog):
    """A listed log that cannot be opened (permission denied): skipped with a note, so that one rank's
    unreadable file does not end a directory's diagnosis; a log the user named is still an error."""


class NotTextLog(VanishedLog):
    """A listed log that is not text (binary, or compressed in a format we do not read): skipped with a
    note like a vanished one, so that one stray `rank3.log.zst` does not hide the other ranks' failure."""


# Compressed formats we do not read, by their magic bytes: a hint beats "binary".
_COMPRESSED = (
    (b"\x28\xb5\x2f\xfd", "zstd-compressed; decompress first (zstd -d)"),
    (b"BZh", "bzip2-compressed; decompress first (bunzip2)"),
    (b"\xfd7zXZ\x00", "xz-compressed; decompress first (unxz)"),
    (b"\x04\x22\x4d\x18", "lz4-compressed; decompress first (lz4 -d)"),
    (b"PK\x03\x04", "a zip archive; extract it first"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive; extract it first"),
)


_BINARY_REASON = "looks like a binary file, not a text log"
_MAGIC_FIRST_BYTES = frozenset(magic[0] for magic, _ in _COMPRESSED)


# The start of our own reports (text, markdown, JSON, JUnit; tests/test_outputs.py renders each against it): one
# saved in a log directory must not be read back as a log, where its evidence lines would be findings again.
_OUR_REPORT = lazy_compile(
    r"(?:## offloaddoctor\n\n)?offloaddoctor [^\s:]+: (?:no known failure|\d[\d,]* findings?) in \d[\d,]* logs? \("
    r'|\{\n  "schema_version": \d+,\n  "tool": \{\n    "name": "offloaddoctor"'
    r'|<\?xml[^\n]*\n<testsuites name="offloaddoctor"'
)
_OUR_REPORT_FIRST_BYTES = frozenset(b"#o{<")
OUR_REPORT_REASON = "an offloaddoctor report (written by --output), not a log"


_UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def is_utf16(head: bytes) -> bool:
    """A byte-order mark, then text that reads as mostly ASCII in UTF-16 (a log's is): `\\xff\\xfe` in front of
    invalid UTF-8 is not enough."""
    encoding = _UTF16_BOMS.get(head[:2])
    if encoding is None:
        return False
    sample = head[2:4098]
    text = sample[: len(sample) // 2 * 2].decode(encoding, "replace")
    return not text or sum(char.isascii() for char in text) >= len(text) / 2


def leading_nul_bytes(block: bytes) -> int:
    """The NUL bytes a block starts with: a log whose start was zeroed (some filesystems, after a crash before the
    data reached the disk) is text after them. The readers skip them, with nul_note."""
    return len(block) - len(block.lstrip(b"\x00")) if block[:1] == b"\x00" else 0


def nul_note(name: str, count: int) -> str:
    return (
        f"{name}: starts with {count:,} NUL bytes (zeroed, as a crash can leave a log on some filesystems); "
        "skipped them, the first line read may be the end of a line"
    )


def not_text_reason(block: bytes) -> str | None:
    """Why the first block of a source is not a text log (naming the compression when recognisable, or saying
    it is one of our reports), or None. A leading run of NUL bytes is not judged (leading_nul_bytes): a block
    of nothing else cannot tell."""
    if block[:1] == b"\x00":
        block = block[leading_nul_bytes(block) :]
    if block[:1] and block[0] in _OUR_REPORT_FIRST_BYTES and _OUR_REPORT.match(block[:300].decode("utf-8", "replace")):
        return OUR_REPORT_REASON
    if block[:1] and block[0] not in _MAGIC_FIRST_BYTES:  # (one test for the usual log, not one per format)
        return _BINARY_REASON if looks_binary(block) else None
    for magic, reason in _COMPRESSED:
        if block.startswith(magic) and (magic != b"BZh" or looks_binary(block) or block[3:4].isdigit()):
            return reason
    if looks_binary(block):
        return _BINARY_REASON
    return None


def not_text_error(source: LogSource, reason: str) -> UserError:
    """A listed source is skipped with a note; a source the user named is an error."""
    if source.listed:
        return NotTextLog(f"{source.name}: {reason}; skipped")
    return UserError(f"{source.name}: {reason}")


def first_not_text(sources: Sequence[LogSource]) -> UserError | None:
    """When a run read nothing at all: the error for its first source that is not text or cannot be opened,
    if every listed one was skipped as such (a directory holding only a core dump, or only files we may not
    read, is an error, not an empty report)."""
    first: UserError | None = None
    for source in sources:
        if source.path == "-" or not source.listed:
            return None
        try:
            with open_binary(source) as stream:
                reason = not_text_reason(stream.read(8192))
        except UnreadableLog as exc:
            first = first or UserError(str(exc).removesuffix("; skipped"))
            continue
        except (UserError, EOFError, gzip.BadGzipFile, zlib.error, OSError):
            return None
        if reason is None:
            return None
        first = first or UserError(f"{source.name}: {reason}")
    return first


def _listed_logs(directory: Path, recursive: bool, notes: list[str]) -> list[tuple[str, object]]:
    """The log files in `directory` (with `recursive`, below it too; symlinked directories are not followed),
    sorted as paths, each with its identity from the listing itself (no stat per file: 200,000 rank logs):
    (its directory's device, inode) for a regular file, None for a symbolic link (it may lead anywhere: a stat
    must tell). A subdirectory that cannot be listed is skipped with a note in `notes` (one that vanished while
    we walk, a job still writing or logs being rotated, silently); the directory named itself must be listable."""
    found: list[tuple[str, object]] = []
    try:
        listings = [_listing(str(directory))]
    except OSError as exc:
        raise UserError(f"{directory}: cannot list the directory: {exc.strerror or exc}") from None
    # Depth first, each directory's entries by name: the order of sorted paths (`a/x.log` before `a-c/x.log`).
    while listings:
        device, prefix, entries = listings[-1]
        for entry in entries:
            if recursive and _is_dir(entry):
                if entry.is_symlink():
                    continue
                try:
                    listings.append(_listing(prefix + entry.name))
                    break  # its files come before this directory's next entries
                except OSError as exc:
                    if not isinstance(exc, FileNotFoundError):
                        notes.append(f"{prefix}{entry.name}: cannot list the directory: {exc.strerror or exc}; skipped")
            elif is_log_name(entry.name) and _is_file(entry):
                found.append((prefix + entry.name, None if entry.is_symlink() else (device, entry.inode())))
        else:
            listings.pop()
    return found


def _listing(directory: str) -> tuple[int, str, Iterator[os.DirEntry]]:
    """A directory's device, the prefix of its entries' paths, its entries by name."""
    device = os.stat(directory).st_dev
    with os.scandir(directory) as scan:
        return device, os.path.join(directory, ""), iter(sorted(scan, key=_name))


def _name(entry: os.DirEntry) -> str:
    return entry.name


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry) -> bool:
    """As Path.is_file: a symbolic link that loops or leads nowhere is not a file, not an error."""
    try:
        return entry.is_file()
    except OSError:
        return False


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged or truncated log (or .gz) raises (evaluated in an `except`: only on an error)."""
    isal = sys.modules.get("isal.isal_zlib")  # loaded only where a large .gz was opened with it
    return (EOFError, gzip.BadGzipFile, zlib.error, OSError, *([isal.error] if isal is not None else []))


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def open_log(source: LogSource) -> int:
    """The file's descriptor, opened once: every later read of the source goes through it, so a
    logger rotating the file by name while it is read cannot change what is read."""
    try:
        return os.open(source.path, _READ_FLAGS)
    except FileNotFoundError:
        if source.listed:
            raise VanishedLog(f"{source.path}: gone before it was read (rotated or removed?); skipped") from None
        raise UserError(f"{source.path}: cannot read: No such file or directory") from None
    except OSError as exc:
        if source.listed:
            raise UnreadableLog(f"{source.path}: cannot read: {exc.strerror or exc}; skipped") from None
        raise UserError(f"{source.path}: cannot read: {exc.strerror or exc}") from None


def stream_over(fd: int) -> BinaryIO:
    """A buffered stream over an open descriptor (which it closes), gunzipped when the file is gzip, decoded to
    UTF-8 when it is UTF-16 with a byte-order mark (as Windows tools and PowerShell's `>` write logs)."""
    handle = open(fd, "rb")  # noqa: SIM115 - closed by the caller's context
    head = handle.peek(4098)[:4098]
    if head[:2] == GZIP_MAGIC:
        return _gunzip(handle)
    if is_utf16(head):
        return io.BufferedReader(_Utf16AsUtf8(handle))
    return handle


ISAL_MIN_BYTES = 1 << 20  # a .gz this large (compressed) is inflated by isal where installed: 3-4x zlib's speed


def _gunzip(handle: BinaryIO) -> BinaryIO:
    """A large .gz through isal (a damaged one's warning then quotes isal's words), a small one through zlib."""
    try:
        large = os.fstat(handle.fileno()).st_size >= ISAL_MIN_BYTES
    except OSError:
        large = False
    if large:
        try:
            from isal.igzip import IGzipFile
        except ImportError:
            pass
        else:
            return IGzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value, unused-ignore]
    return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]


def expanded_size(path: str, size: int) -> int:
    """What a .gz decompresses to, for a progress bar measured in the log's own bytes: the gzip trailer holds
    it modulo 4 GiB (RFC 1952's ISIZE; of the last member, for a file of several). A log compresses several
    times over, so a figure below the file's own size has wrapped: 4 GiB are added until it is not. `size`
    (the file's own) for anything that is not gzip or cannot be read."""
    try:
        with open(path, "rb") as handle:
            if handle.read(2) != GZIP_MAGIC:
                return size
            handle.seek(-4, os.SEEK_END)
            expanded = int.from_bytes(handle.read(4), "little")
    except OSError:
        return size
    while expanded < size:
        expanded += 1 << 32
    return expanded


class _Utf16AsUtf8(io.RawIOBase):
    """A UTF-16 stream read as UTF-8 bytes, decoded a block at a time (invalid units become U+FFFD)."""

    def __init__(self, raw: BinaryIO):
        import codecs

        self.raw = raw
        self.decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending:
            chunk = self.raw.read(1 << 16)
            self.pending = self.decoder.decode(chunk, final=not chunk).encode("utf-8", "replace")
            if not chunk:
                break
        count = min(len(buffer), len(self.pending))
        buffer[:count] = self.pending[:count]
        self.pending = self.pending[count:]
        return count

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_binary(source: LogSource) -> BinaryIO:
    if source.path == "-":
        if sys.stdin is None:
            raise UserError(STDIN_CLOSED)
        return sys.stdin.buffer
    return stream_over(open_log(source))


def looks_binary(block: bytes) -> bool:
    if not block:
        return False
    if block.find(b"\x00") < 0:  # not `in`: see logs/line_pass.py _skip_of
        return False
    controls = sum(1 for byte in block if byte < 9 or 13 < byte < 32)
    if controls / len(block) > 0.10:
        return True
    # Random or compressed bytes hold ~9 % controls, just under the bar, but are mostly not UTF-8; a text
    # log with a stray NUL is.
    return block.decode("utf-8", errors="replace").count("\ufffd") / len(block) > 0.10


def describe_read_error(exc: BaseException) -> str:
    if isinstance(exc, gzip.BadGzipFile) or (isinstance(exc, read_errors()) and not isinstance(exc, OSError)):
        return f"corrupt or truncated gzip data ({exc or type(exc).__name__})"
    return str(exc)
