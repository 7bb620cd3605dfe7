"""Errors meant for users: one line saying what failed, on which input, and what to do."""


class UserError(Exception):
    """Bad input or usage. The CLI prints the message on one line and exits 2."""
