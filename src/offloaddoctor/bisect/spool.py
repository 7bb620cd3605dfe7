"""The test command's output, kept on disk within a bound: a job can print for days.

What is kept: the first `head_bytes` (where a training log prints its arguments and config) and at least the
last `tail_bytes` (where it fails). The tail is two files that take turns: when the newer one is full, the
older one is dropped, so the disk holds at most `head_bytes + 2 * tail_bytes` while the job runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from offloaddoctor.scanning import format_bytes

OUTPUT_HEAD_BYTES = 8 * 2**20
OUTPUT_TAIL_BYTES = 64 * 2**20


class OutputSpool:
    def __init__(self, directory: Path, head_bytes: int | None = None, tail_bytes: int | None = None) -> None:
        self.head_bytes = OUTPUT_HEAD_BYTES if head_bytes is None else head_bytes
        self.tail_bytes = OUTPUT_TAIL_BYTES if tail_bytes is None else tail_bytes
        self.path = directory / "output.log"  # the head, and at the end the whole kept output
        self._head = self.path.open("wb")
        self._head_written = 0
        self._tails = [directory / "output.tail.0", directory / "output.tail.1"]
        self._older: Path | None = None
        self._newer = self._tails[0]
        self._tail = self._newer.open("wb")
        self._tail_written = 0
        self.total = 0  # bytes the command wrote
        self.dropped = 0  # bytes between the head and the tail that were not kept

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_bytes - self._head_written
        if room > 0:
            self._head.write(data[:room])
            self._head_written += min(room, len(data))
            data = data[room:]
        if not data:
            return
        if self._tail_written and self._tail_written + len(data) > self.tail_bytes:
            self._turn()
        self._tail.write(data)
        self._tail_written += len(data)

    def _turn(self) -> None:
        self._tail.close()
        if self._older is not None:
            self.dropped += self._older.stat().st_size
            self._older.unlink()
        self._older = self._newer
        self._newer = self._tails[1] if self._newer == self._tails[0] else self._tails[0]
        self._tail = self._newer.open("wb")
        self._tail_written = 0

    def finish(self) -> Path:
        """The kept output as one file: the head, then the tail (after a line break where bytes were cut)."""
        self._tail.close()
        if self.dropped and self._head_written and not self._last_byte_is_newline():
            self._head.write(b"\n")
        for part in (self._older, self._newer):
            if part is not None:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, self._head)
                part.unlink()
        self._head.close()
        return self.path

    def close(self) -> None:
        self._tail.close()
        self._head.close()

    def _last_byte_is_newline(self) -> bool:
        self._head.flush()
        with self.path.open("rb") as head:
            head.seek(-1, 2)
            return head.read(1) == b"\n"

    @property
    def note(self) -> str | None:
        """One line for the verdict when output was cut; None when all of it was kept."""
        if not self.dropped:
            return None
        return (
            f"output cut: kept the first {format_bytes(self.head_bytes)} and the last "
            f"{format_bytes(self.total - self.head_bytes - self.dropped)} of {format_bytes(self.total)}"
        )
