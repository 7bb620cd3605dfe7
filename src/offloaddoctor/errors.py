"""Errors meant for users: one line saying what failed, on which input, and what to do."""


class UserError(Exception):
    """Bad input or usage. The CLI prints the message on one line and exits 2."""


class StdoutWriteError(OSError):
    """Writing the output to standard output failed (a full disk, `> /dev/full`, a closed pipe): the CLI says
    so on stderr and exits 2 (1, silently, for a closed pipe)."""
