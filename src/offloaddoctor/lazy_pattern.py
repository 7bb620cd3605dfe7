"""Regular expressions compiled on first use.

Most module-level patterns serve lines a given log may not have (arguments blocks, iteration lines, OOM
messages, parameter counts, launch lines). Compiling all ~35 at import took ~10 ms, a large share of the
start-up budget of `diagnose` on a small log (benchmarks/startup.py); `lazy_compile` defers each to its
first use. After that, the methods are the compiled pattern's own bound methods: no cost per call.
"""

from __future__ import annotations

import re

_METHODS = ("search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split")


class LazyPattern:
    def __init__(self, pattern: str, flags: int = 0):
        self._source = (pattern, flags)

    def __getattr__(self, name: str):
        # Reached for the methods only before the first compile; afterwards for `pattern`, `flags`, ...
        if name.startswith("__") or name == "_source":  # copy/pickle probes, a half-built instance
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self.__dict__["_compiled"] = re.compile(*self._source)
            self.__dict__.update((method, getattr(compiled, method)) for method in _METHODS)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._source[0]!r}, {self._source[1]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Stands in for `re.compile` at module level: the same methods and attributes, compiled on first use."""
    return LazyPattern(pattern, flags)  # type: ignore[return-value]
