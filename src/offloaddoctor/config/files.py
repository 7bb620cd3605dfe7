"""A config file's text, read as every format is (YAML or a launch script): in a module of its own, so that
a launch script does not pay PyYAML's import (docs/performance.md, "start-up")."""

from __future__ import annotations

import os
import stat

from offloaddoctor.errors import UserError

# A Bridge run_config.yaml is tens of KB. PyYAML reads about 1 MB/s (flow collections much slower), so a
# larger file is refused rather than read for minutes.
MAX_CONFIG_BYTES = 2**20


def read_config_text(path: str, errors: str = "strict") -> str:
    """A config file's text. Only regular files: a FIFO would block forever and /dev/zero never ends."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise UserError(f"{path}: config is a directory, expected a YAML file")
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: config is not a regular file (a pipe or device?); pass a file")
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: config file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise UserError(f"{path}: config is larger than {MAX_CONFIG_BYTES // 2**20} MiB; refusing to read it")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise UserError(f"{path}: config is not UTF-8 text") from None
