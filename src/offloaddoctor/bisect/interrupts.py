"""Ctrl-C, SIGTERM, SIGHUP (terminal closed) and SIGQUIT all unwind the same way, so every `finally` runs:
the test job is ended, temporary worktrees and directories are removed.

Work that must not be cut in half (a `git worktree add`, starting the job, the clean-up itself) runs inside
`signals_deferred()`: a signal that arrives there is held and raised when the section ends. After the first
signal has been raised, later ones are ignored, so a second Ctrl-C cannot interrupt the clean-up.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class _State:
    depth = 0  # how many deferred sections we are in
    pending: int | None = None  # a signal held by a deferred section
    raised = False  # a signal has unwound the stack already: clean-up is under way


def _on_signal(signum: int, frame: object) -> None:
    if _State.raised:
        return
    if _State.depth:
        _State.pending = _State.pending or signum
        return
    _State.raised = True
    raise Interrupted(signum)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Turn the handled signals into `Interrupted` while the block runs (main thread only)."""
    try:
        previous = {signum: signal.signal(signum, _on_signal) for signum in HANDLED_SIGNALS}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    _State.depth, _State.pending, _State.raised = 0, None, False
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _State.depth, _State.pending, _State.raised = 0, None, False


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold signals until the block ends (nests); a held signal is raised then, unless one already was."""
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if not _State.depth and _State.pending is not None and not _State.raised:
            signum, _State.pending = _State.pending, None
            _State.raised = True
            raise Interrupted(signum)
