"""Megatron-Bridge's start-up "Configuration Summary (Non-Default Values vs Megatron Core)" block.

Bridge 0.3.x (`ConfigContainer.log_non_default_values`) prints it on rank 0 after `validate()`:

    ======================================================================
    Configuration Summary (Non-Default Values vs Megatron Core)
    ======================================================================

    [optimizer] Non-default values (vs Mcore OptimizerConfig):
      optimizer_cpu_offload: True  (Mcore default: False)
    ...
    ----------------------------------------------------------------------
    Other Configuration Values:
    ----------------------------------------------------------------------

    [train]:
      micro_batch_size: 1
    ======================================================================

Values are Python reprs. A key missing from a compared section ([model], [optimizer], [ddp]) equals the
default of the named Megatron-Core class, so once the block is complete (its closing rule seen) those keys get
that default, with the block's title line as their source.
"""

from __future__ import annotations

from offloaddoctor.config.defaults import DEFAULTS, MCORE_VERSION
from offloaddoctor.config.keys import BRIDGE_FALLBACKS, canonical_key
from offloaddoctor.config.printed import parse_printed
from offloaddoctor.lazy_pattern import lazy_compile

TITLE = "Configuration Summary (Non-Default Values vs Megatron Core)"
_RULE = lazy_compile(r"^\s*(?:={20,}|-{20,})\s*$")
_COMPARED = lazy_compile(r"^\[(\w+)\] Non-default values \(vs Mcore (\w+)\):\s*$")
_OTHER_SECTION = lazy_compile(r"^\[(\w+)\]:\s*$")
# Indented by two spaces as printed; prefixes (`[default0]:`, timestamps) may have eaten some of that, so
# the field name's shape carries it: dataclass fields are lower-case snake_case.
_ENTRY = lazy_compile(r"^\s*([a-z_][a-z0-9_]*): (.*)$")
_DEFAULT_SUFFIX = "  (Mcore default: "
_OTHER_TITLE = "Other Configuration Values:"
# A real block is ~150 lines; past this the "block" is something else, and reading every line is not free.
MAX_BLOCK_LINES = 5000
# The Megatron-Core classes Bridge compares against, by section (log_non_default_values in 0.3.1; a DeepSeek
# model is compared with MLATransformerConfig, which inherits these fields' defaults).
COMPARED_CLASSES = {
    "model": "TransformerConfig",
    "optimizer": "OptimizerConfig",
    "ddp": "DistributedDataParallelConfig",
}


class BridgeSummaryBlock:
    """Fed the lines after the title; `add(key, value, line, detail)` receives every value read."""

    def __init__(self, title_line: int, add) -> None:
        self.title_line = title_line
        self._add = add
        self._section: str | None = None
        self._compared = True
        self._listed: set[str] = set()
        self._given: set[str] = set()  # keys listed with a value (not None)
        self._in_other = False

    def feed(self, text: str, line: int) -> bool:
        """True while the line belongs to the block; False on the line after it (the line is not consumed)."""
        if line - self.title_line > MAX_BLOCK_LINES:
            self.finish()
            return False
        if _RULE.match(text):
            if text.strip().startswith("=") and (self._section is not None or self._in_other):
                self.finish(complete=True)  # the closing rule; the one under the title comes before any section
            return True
        if not text.strip():
            return True
        if text.strip() == _OTHER_TITLE:
            self._in_other = True
            self._section = None
            return True
        compared = _COMPARED.match(text)
        if compared:
            self._section, self._compared = compared.group(1), True
            return True
        other = _OTHER_SECTION.match(text)
        if other:
            self._section, self._compared = other.group(1), False
            return True
        entry = _ENTRY.match(text)
        if entry and self._section is not None:
            name, raw = entry.groups()
            detail = "Bridge summary"
            if self._compared:
                cut = raw.rfind(_DEFAULT_SUFFIX)
                if cut >= 0 and raw.endswith(")"):
                    raw = raw[:cut]
                detail = "Bridge summary, non-default"
            key, value = f"{self._section}.{name}", parse_printed(raw)
            if BRIDGE_FALLBACKS.get(key) in self._given:
                return True  # `[model]`, printed first, has the value the tokenizer's stands in for
            self._listed.add(key)
            if value is not None:
                self._given.add(key)
            self._add(key, value, line, detail)
            return True
        # Anything else: the block was cut short (a crash, interleaved output) or is over.
        self.finish()
        return False

    def finish(self, complete: bool = False) -> None:
        """Close the block. Only a complete block says that a key it leaves out holds the Megatron-Core default:
        one cut short (interleaved output, a truncated log) may have lost the very line. Idempotent."""
        if self._add is None:
            return
        add, self._add = self._add, None
        if not complete:
            return
        listed = {canonical_key(k) for k in self._listed}
        for key, (value, owner) in DEFAULTS.items():
            if owner in COMPARED_CLASSES.values() and key not in listed:
                add(
                    key,
                    value,
                    self.title_line,
                    f"Bridge summary: not listed, so the {owner} default (megatron-core {MCORE_VERSION})",
                )

    @property
    def open(self) -> bool:
        return self._add is not None
