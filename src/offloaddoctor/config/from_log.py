"""Config a training log prints about itself: the Megatron-LM arguments block, Megatron-Bridge's start-up
configuration summary (config/bridge_summary.py), the launch command line, environment dumps, and the `OptimizerConfig(...)` / `DistributedDataParallelConfig(...)` lines MCore logs."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import takewhile

from offloaddoctor.config.bridge_summary import TITLE as BRIDGE_SUMMARY_TITLE
from offloaddoctor.config.bridge_summary import BridgeSummaryBlock
from offloaddoctor.config.dialect import EITHER_DIALECT
from offloaddoctor.config.run_identity import START_UP_LINE
from offloaddoctor.config.keys import LIST_KEYS, canonical_key, legacy_name, legacy_setting
from offloaddoctor.config.printed import parse_printed
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.logs.line_pass import Line, LineHandler

# (a pasted block's first line may keep Markdown's quote marker: Megatron-LM#92)
_ARGS_START = lazy_compile(r"^(?:> )?-{3,} arguments -{3,}\s*$")
_ARGS_END = lazy_compile(r"^-{3,} end of arguments -{3,}\s*$")
_ARGS_ENTRY = lazy_compile(r"^\s+([A-Za-z_]\w*) (?:\.+ ?)?(.*)$")
# Environment variables a log's dump or `export` lines show that we read: these prefixes, and each one a literal.
_ENV_PREFIXES = ("PYTORCH_", "NCCL_", "CUDA_", "NVTE_", "TORCH_")
_ENV_LINE = lazy_compile(rf"^\s*(?:\+\s*)?(?:export\s+)?((?:{'|'.join(_ENV_PREFIXES)})[A-Z0-9_]*)=(\S*)\s*$")
_ANY_ENV_EXPORT = lazy_compile(r"^export\s+([A-Z][A-Z0-9_]*)=(\S*)\s*$")
# `NAME=value torchrun …`: the shell's assignments before a command word are that command's environment.
_ENV_ASSIGNMENT = lazy_compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")
_PROGRAM = lazy_compile(r"(?:^|\s)(?:\S*/)?(?:torchrun|python[\d.]*|\S+\.py)(?=\s)")
_DATACLASS_REPR = lazy_compile(r"\b(OptimizerConfig|DistributedDataParallelConfig)\((.*)\)\s*$")
_REPR_FIELD = lazy_compile(r"(\w+)=('[^']*'|\"[^\"]*\"|\[[^\]]*\]|\([^)]*\)|<[^>]*>|[^,()<>\[\]]+)")
_HYDRA_OVERRIDE = lazy_compile(r"^\+{0,2}([a-z_]\w*(?:\.\w+)+)=(.*)$")
# pip list / pip freeze lines pasted into a log or printed by a launch script
_VERSIONED_PACKAGES = ("megatron-bridge", "megatron_bridge", "megatron-core", "megatron_core")
_VERSION_LINE = lazy_compile(
    rf"^\s*({'|'.join(_VERSIONED_PACKAGES)})\s*(?:==\s*|\s+)(\d+\.\d+\.\d+(?:\.?(?:rc|a|b|dev|post)\d+)?)\s*$"
)
_REPR_SECTION = {"OptimizerConfig": "optimizer", "DistributedDataParallelConfig": "ddp"}
# Megatron-LM's start-up lines (`> PyTorch version ................ 2.11.0+cu130`): read as START_UP_LINE.
_HEADER_VERSIONS = {
    "> PyTorch version ": "runtime.torch_version",
    "> Megatron-Core version ": "runtime.megatron_core_version",
}
_HEADER_VERSION = lazy_compile(r"^> (?:PyTorch|Megatron-Core) version \.+ (\d+\.\d+\S*)\s*$")
# The tokenizer build (Megatron-LM's `_vocab_size_with_padding`, megatron-core's build_tokenizer), after the arguments
# block: the vocabulary the tokenizer gave (before padding), where the block says `vocab_size None` (a GPT-2 BPE or
# HuggingFace tokenizer's run).
PADDED_VOCAB = "> padded vocab (size: "
_PADDED_VOCAB_LINE = lazy_compile(r"> padded vocab \(size: (\d+)\) with \d+ dummy tokens \(new size: \d+\)")
# What one log may make us keep: Megatron's arguments block has ~900 entries, Bridge's summary about as many.
# Past this, config lines are counted, not kept (200 MB of repeated `NCCL_…=` lines kept 5 GB), and an arguments
# block this long that never ends is taken as ended (every line after it was read as config).
MAX_VALUES_PER_LOG = 8192
MAX_ARGUMENTS_PER_BLOCK = 4096
_UNSET = object()
# Lines MCore prints about what it could import: they settle a config question the config cannot.
_RUNTIME_FACTS = {
    "Falling back to Torch optimizers": ("runtime.te_fused_adam_available", False),
}
# Lines without one of these cannot carry config; the scanner uses them as a cheap gate. A command line
# counts only if _PROGRAM finds its program, hence the program names rather than " --" (a three-byte
# literal slows GNU grep's multi-pattern search down for the whole file). Not a bare "python": every Python
# warning names its `…/python3.12/site-packages/…` file, and recompute runs print one per step. A launch
# line names the interpreter followed by a blank (`python -m …`, `python3 …`), or a script followed by one
# (`python3.12 pretrain_gpt.py --…`: ".py "), or torchrun; `python3.12 -m torch.distributed.run` is the
# versioned interpreter with a module, hence its own literal.
LITERALS = (
    *_RUNTIME_FACTS,
    "arguments",
    BRIDGE_SUMMARY_TITLE,
    *_ENV_PREFIXES,
    "Config(",
    "torchrun",
    *(program + blank for program in ("python", "python3", ".py") for blank in " \t"),
    " -m torch.distributed",
    *_VERSIONED_PACKAGES,
    *_HEADER_VERSIONS,
    PADDED_VOCAB,
)


@dataclass
class LogConfigCollector:
    """Fed every candidate line of one log; collects values and splits the log into segments
    (one per arguments block) so a restarted job with new settings can be told apart."""

    path: str
    origin: str = "log"
    values: list[ConfigValue] = field(default_factory=list)
    segment_starts: list[int] = field(default_factory=lambda: [0])
    in_megatron_arguments: bool = False
    # Where notes go (the scan's warnings): values past MAX_VALUES_PER_LOG, an arguments block that never ends.
    warnings: list[str] | None = None
    not_kept: int = 0  # config values past MAX_VALUES_PER_LOG, or repeating the one kept for their key
    # The names an arguments block that reached its end line printed: every argument that Megatron-LM takes, so a
    # flag whose name is not among them is one this Megatron-LM does not have (report/engine.py).
    printed_arguments: frozenset[str] | None = None

    @property
    def segment(self) -> int:
        return len(self.segment_starts) - 1

    def segment_at(self, line: int) -> int:
        """The segment (one per arguments block) that holds `line` of this log."""
        return max(bisect_right(self.segment_starts, line) - 1, 0)

    def segment_values(self, segment: int) -> list[ConfigValue]:
        return self._by_segment.get(segment, [])

    def __post_init__(self) -> None:
        self._by_segment: dict[int, list[ConfigValue]] = {}
        self._bridge_summary: BridgeSummaryBlock | None = None
        self._arguments_in_block = 0
        self._block_names: list[str] = []
        self._environment: dict[tuple[int, str], object] = {}  # (segment, key) -> the value kept

    @property
    def in_arguments(self) -> bool:
        """Inside a config block whose lines carry no literal: the scanner must hand over every line."""
        return self.in_megatron_arguments or self._bridge_summary is not None

    def finish(self) -> None:
        """The log ended: a Bridge summary cut short still counts for what it listed."""
        if self._bridge_summary is not None:
            self._bridge_summary.finish()
            self._bridge_summary = None
        if self.not_kept and self.warnings is not None:
            self.warnings.append(
                f"{self.path}: {self.not_kept:,} config lines repeated a value already read or came past the first "
                f"{MAX_VALUES_PER_LOG:,} values; counted, not kept"
            )

    def feed(self, text: str, line: int) -> bool:
        """Consume a line; True when it was config (so nothing else needs to look at it)."""
        if self._bridge_summary is not None:
            if self._bridge_summary.feed(text, line):
                if not self._bridge_summary.open:
                    self._bridge_summary = None
                return True
            self._bridge_summary = None
        if BRIDGE_SUMMARY_TITLE in text:
            if any(v.source.detail.startswith("Bridge summary") for v in self._by_segment.get(self.segment, [])):
                self.segment_starts.append(line)
            self._bridge_summary = BridgeSummaryBlock(line, self._add)
            return True
        if self.in_megatron_arguments:
            if _ARGS_END.match(text):
                self.in_megatron_arguments = False
                self.printed_arguments = frozenset(self._block_names) | (self.printed_arguments or frozenset())
                return True
            entry = _ARGS_ENTRY.match(text)
            if entry and self._arguments_in_block < MAX_ARGUMENTS_PER_BLOCK:
                self._arguments_in_block += 1
                self._block_names.append(entry.group(1))
                self._add(entry.group(1), parse_printed(entry.group(2)), line, "arguments block")
                return True
            if entry and self.warnings is not None:
                self.warnings.append(
                    f"{self.path}:{line}: an arguments block of more than {MAX_ARGUMENTS_PER_BLOCK:,} entries without "
                    "its end line; read as ended here"
                )
            self.in_megatron_arguments = False  # a block cut short by a crash or interleaved output
        # Each regex behind a test its match implies (a dash first; an `=`): cheap for the lines most logs
        # deliver here (iteration lines: 11k -> 5k instructions).
        if (text[:1] == "-" or text[:2] == "> ") and _ARGS_START.match(text):
            if any(v.source.detail == "arguments block" for v in self._by_segment.get(self.segment, [])):
                self.segment_starts.append(line)
            self.in_megatron_arguments = True
            self._arguments_in_block = 0
            self._block_names = []
            return True
        env = _ENV_LINE.match(text) if "=" in text else None
        if env:
            printed = (self.segment, env.group(1))
            if self._environment.get(printed, _UNSET) == env.group(2):  # a process printing it again: nothing new
                self.not_kept += 1
            else:
                self._environment[printed] = env.group(2)
                self._add("env." + env.group(1), env.group(2), line, "environment")
            return True
        if PADDED_VOCAB in text:
            padded = _PADDED_VOCAB_LINE.search(text)
            if padded:
                given = self._by_segment.get(self.segment, [])
                if not any(v.key == "model.vocab_size" and v.value is not None for v in given):
                    self._add("vocab_size", int(padded.group(1)), line, EITHER_DIALECT)
                return True
        for literal, (key, value) in _RUNTIME_FACTS.items():
            if literal in text:
                self._add(key, value, line, "runtime message")
                return True
        for literal, key in _HEADER_VERSIONS.items():
            if literal in text and (version := _HEADER_VERSION.match(text.strip())):
                self._add(key, version.group(1), line, START_UP_LINE)
                return True
        # (a traceback's megatron/ paths are not version lines: no pattern compiled for them, start-up)
        if "megatron" in text and text.lstrip().startswith(_VERSIONED_PACKAGES):
            version = _VERSION_LINE.match(text)
            if version:
                package = version.group(1).replace("_", "-")
                self._add(f"runtime.{package.replace('-', '_')}_version", version.group(2), line, "version line")
                return True
        if " --" in text or "=" in text:
            # Each search only where its words are: both scan the whole line (an NCCL timeout line has `=`s).
            dataclass_repr = _DATACLASS_REPR.search(text) if "Config(" in text else None
            if dataclass_repr:
                section = _REPR_SECTION[dataclass_repr.group(1)]
                for name, raw in _REPR_FIELD.findall(dataclass_repr.group(2)):
                    self._add(f"{section}.{name}", parse_printed(raw), line, dataclass_repr.group(1))
                return True
            if ("torchrun" in text or "python" in text or ".py" in text) and _PROGRAM.search(text):
                return self._command_line(text, line)
        return False

    def feed_script_line(self, text: str, line: int) -> bool:
        """A line of a launch script: `export X=…`, or a (continued) command line with flags."""
        stripped = text.strip()
        # Slurm's job geometry: --nodes, --ntasks, --ntasks-per-node, --gpus-per-node.
        if stripped.startswith("#SBATCH"):
            return self._command_line(stripped[len("#SBATCH") :], line)
        if not stripped or stripped.startswith("#"):
            return False
        env = _ENV_LINE.match(stripped) or _ANY_ENV_EXPORT.match(stripped)
        if env:
            self._add("env." + env.group(1), env.group(2).strip("'\""), line, "environment")
            return True
        return self._command_line(stripped.rstrip("\\"), line)

    def _command_line(self, text: str, line: int) -> bool:
        import shlex  # only for launch lines, which most per-rank logs do not have

        try:
            tokens = shlex.split(text, posix=True)
        except ValueError:
            tokens = text.split()
        found = False
        for token in tokens[1 if tokens[:1] == ["env"] else 0 :]:
            assignment = _ENV_ASSIGNMENT.match(token)
            if not assignment:
                break
            self._add("env." + assignment.group(1), assignment.group(2), line, "environment")
            found = True
        for index, token in enumerate(tokens):
            if token.startswith("--") and len(token) > 2:
                name, sep, inline = token.partition("=")
                if sep:
                    value = parse_printed(inline)
                elif canonical_key(name) in LIST_KEYS:  # argparse's nargs: every word up to the next flag
                    words = list(takewhile(_list_word, tokens[index + 1 :]))
                    value = [parse_printed(w) for w in words]  # none: an empty list, as argparse's '*'
                elif index + 1 < len(tokens) and not tokens[index + 1].startswith(("--", *_SHELL_OPERATORS)):
                    value = parse_printed(tokens[index + 1])
                else:
                    value = True
                self._add(name, value, line, "command line")
                found = True
            else:
                override = _HYDRA_OVERRIDE.match(token)
                if override:
                    self._add(override.group(1), parse_printed(override.group(2)), line, "command-line override")
                    found = True
        return found

    def _add(self, name: str, value, line: int, detail: str) -> None:
        if len(self.values) >= MAX_VALUES_PER_LOG:
            self.not_kept += 1
            return
        legacy = legacy_setting(name, value)
        if legacy is not None:
            name, value = legacy
            detail = f"{detail}, as {legacy_name(name)}"
        key = canonical_key(name)
        written = name if "." in name and key != name else ""  # a Hydra override's path; never a printed argument's
        value = ConfigValue(key, value, Source(self.path, line, detail), self.origin, written)
        self.values.append(value)
        self._by_segment.setdefault(self.segment, []).append(value)


# What ends a command's words: `&&`, `|`, `;`, `>log`, `2>&1` (a flag before it takes no value from it: held-out
# megatron-deepspeed-v100-tp4-zero0-optimizer-state-oom's `--deepspeed 2>&1` read `deepspeed` as "2>&1").
_SHELL_OPERATORS = ("&", "|", ";", ">", "<", "2>", "1>")


def _list_word(token: str) -> bool:
    """A value of a list flag: not the next flag, a Hydra override or a shell operator (`&&`, `|`, `>log`)."""
    return not token.startswith(("--", *_SHELL_OPERATORS)) and not _HYDRA_OVERRIDE.match(token)


class ConfigLines(LineHandler):
    """The collector as a line handler: the lines that print config, and every line of an arguments block."""

    literals = LITERALS

    def __init__(self, collector: LogConfigCollector):
        self.collector = collector

    def feed(self, line: Line) -> bool:
        return self.collector.feed(line.text, line.number)

    def wants_every_line(self, number: int) -> bool:
        return self.collector.in_arguments

    def finish(self) -> None:
        self.collector.finish()


def config_handlers(collector: LogConfigCollector) -> list[LineHandler]:
    """Every reader of config a log prints, writing into `collector`. Another printed form (a start-up
    summary) is one more handler here: its own literals and a `feed` that adds values to the collector."""
    return [ConfigLines(collector)]
