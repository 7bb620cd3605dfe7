"""Fix lines in the dialect of the config the user edits: Megatron-LM `--flags`, Megatron-Bridge `a.b=c`
overrides, FlagScale's Hydra overrides (`++train.system.x=v`), `export` for the environment. Changes travel as
(canonical key, value) pairs; only printing picks the dialect, and `parse_fix_line` reads any printed line back
(tests apply printed fixes with it).

Megatron-LM's flags follow `megatron/training/arguments.py`: a store_true switch has no `--no-…` form, so
turning one off is "remove --x from the launch command"; `cpu_offloading` has no switch of its own there
(`validate_args` turns it on when `--cpu-offloading-num-layers` > 0), so it is turned off through the count.

FlagScale runs Megatron-LM's own training script: its runner (flagscale/runner/runner_train.py `_get_args_megatron`)
merges the `train.system`, `train.model`, `train.data` (and `train.trainer`) sections, in that order, into one dict
and turns it into Megatron-LM's flags (utils.py `flatten_dict_to_args`: a nested section's leaves too, `_` -> `-`,
a true boolean a bare switch, a false one left out). So a FlagScale fix is Megatron-LM's flag as a Hydra override
(`++` adds or replaces) at the path the user's config sets it, else in `train.system`; a valued flag removed is
`~path` (deleted: null would be passed as the word None); the environment is the runner's `experiment.envs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from offloaddoctor.config.derived import (
    FLAGSCALE_ARGUMENTS,
    NODES_KEYS,
    PROCESSES_PER_NODE_KEYS,
    TASKS_KEYS,
    flagscale_places,
)
from offloaddoctor.config.keys import FLAGSCALE_ENVS, LIST_KEYS, VALUE_KINDS, canonical_key, parse_value
from offloaddoctor.config.values import ConfigValue, format_value
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from offloaddoctor.config.values import ConfigStore, Resolved

    Change = tuple[str, Any]

MEGATRON_LM, BRIDGE, FLAGSCALE = "megatron-lm", "bridge", "flagscale"

# Canonical key -> Megatron-LM flag, where the flag is not `--` + the field name with dashes.
_FLAGS = {
    "model.virtual_pipeline_model_parallel_size": "--num-virtual-stages-per-pipeline-rank",
    "model.num_layers_in_first_pipeline_stage": "--decoder-first-pipeline-num-layers",
    "model.num_layers_in_last_pipeline_stage": "--decoder-last-pipeline-num-layers",
    "model.gated_linear_unit": "--swiglu",
    "model.num_moe_experts": "--num-experts",
    "ddp.nccl_ub": "--use-nccl-ub",
    "ddp.grad_reduce_in_fp32": "--accumulate-allreduce-grads-in-fp32",
}
# Switches Megatron-LM spells negatively (store_false): the flag turns the setting off.
_NEGATED = {"model.add_bias_linear": "--disable-bias-linear"}
_KEY_OF_NEGATED = {flag: key for key, flag in _NEGATED.items()}
# Other flags that set the same value: removing one means removing these too.
_ALSO_REMOVE = {"model.recompute_granularity": ("--recompute-activations",)}
# Settings Megatron-LM has no flag for (megatron-core dataclass fields the launch script cannot reach).
_NO_FLAG = {
    "optimizer.decoupled_weight_decay": "OptimizerConfig",
    # megatron-core 0.19.0's arguments block prints none of these (cpu-offload-nothing-to-offload's cause)
    "model.cpu_offloading_activations": "TransformerConfig",
    "model.cpu_offloading_weights": "TransformerConfig",
    "model.cpu_offloading_double_buffering": "TransformerConfig",
}
# Flags whose argument another name holds (Megatron-LM arguments.py `dest=`, megatron-core 0.19.0)
_FLAG_DESTS = {"--use-nccl-ub": "nccl_ub"}
# Bridge keeps one setting in two sections: an override must set both.
_BRIDGE_TWINS = {"optimizer.use_distributed_optimizer": ("ddp.use_distributed_optimizer",)}
# Settings Bridge takes from its `mixed_precision` recipe, which sets them in the model, optimizer and DDP configs at
# start-up over what an override set there: bf16 is the bf16 recipe, with or without one before (model.bf16 alone is
# refused with the precision-aware optimizer); fp32 gradients are the recipe's own field where a recipe is set
# (ddp.grad_reduce_in_fp32 is lost under fp16_mixed, and holds without one). Run through Bridge 0.3.1's config
# classes: fixtures/bridge-0.3.1/precision-fixes.txt.
_BRIDGE_BF16 = "mixed_precision=bf16_mixed"
_BRIDGE_RECIPE_FIELDS = {"ddp.grad_reduce_in_fp32": "mixed_precision.grad_reduce_in_fp32"}
_SWITCHES_ALSO_REMOVED = frozenset(flag for flags in _ALSO_REMOVE.values() for flag in flags)
_REMOVE, _SET = "remove ", "set "
_FLAGSCALE_DEFAULT = "train.system."  # where FlagScale's example configs keep parallelism, recompute, offloading
FLAGSCALE_PLACES_UNKNOWN = (
    "a FlagScale run: its fix lines set each setting in `train.system` (`++` adds or replaces it there); where your "
    "config sets one in `train.model` or `train.data`, set it there instead (FlagScale's runner lets the later "
    "section win), or give the config with --config to have each line placed where it sets it"
)
# What Hydra's override grammar (hydra/grammar/OverrideLexer.g4) reads as one bare string: ID, INT, FLOAT, BOOL,
# UNQUOTED_CHAR and COLON tokens
_HYDRA_PLAIN = lazy_compile(r"[A-Za-z0-9_./+:%*-]+")
_BACKSLASHES_BEFORE_QUOTE = lazy_compile(r'(\\*)("|$)')
_ESCAPED_BEFORE_QUOTE = lazy_compile(r'((?:\\\\)*)(\\"|$)')
_SHELL_SPECIAL = frozenset(" \t[]*?$'\"\\;&|<>(){}!#`")
_FROM_LAUNCH = " from the launch command"
_SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".cmd")


def flag_of(key: str) -> str:
    """The Megatron-LM flag that sets a canonical key (`optimizer.optimizer_cpu_offload` -> `--optimizer-cpu-offload`)."""
    if key in _FLAGS:
        return _FLAGS[key]
    return "--" + key.partition(".")[2].replace("_", "-") if "." in key else "--" + key.replace("_", "-")


def render_changes(
    changes: Iterable[Change],
    dialect: str,
    together_with: Iterable[str] = (),
    recipe: bool = True,
    places: Mapping[str, str] | None = None,
) -> list[str]:
    """One printed line per change (a few take two, a few none), in `dialect` (MEGATRON_LM, BRIDGE or FLAGSCALE).
    The environment is `export NAME=value` (`unset NAME` for None) but in FlagScale's. `together_with`: keys
    the same fix changes on other lines (Megatron-LM's layer count already turns activation offloading on).
    `recipe`: whether a Bridge config may set `mixed_precision` (False where it is known to be null).
    `places`: where a FlagScale config sets each key (flagscale_places)."""
    changes = list(changes)
    keys = {key for key, _ in changes} | set(together_with)
    lines: list[str] = []
    for key, value in changes:
        if key.startswith("env.") and dialect == FLAGSCALE:
            path = FLAGSCALE_ENVS + key[len("env.") :]
            rendered = [f"~{path}"] if value is None else [_hydra(path, _value_text(value))]
        elif key.startswith("env."):
            name = key[len("env.") :]
            rendered = [f"unset {name}"] if value is None else [f"export {name}={_value_text(value)}"]
        elif dialect == FLAGSCALE:
            rendered = [text for line in _megatron_lines(key, value, keys) for text in _flagscale(line, places)]
            if key == "model.cpu_offloading" and places and key in places:  # the config passes `--cpu-offloading`
                rendered.append(_hydra(places[key], "true" if value else "false"))
        elif dialect == MEGATRON_LM:
            rendered = _megatron_lines(key, value, keys)
        elif key == "model.bf16" and value is True:
            rendered = [_BRIDGE_BF16]
        elif recipe and key in _BRIDGE_RECIPE_FIELDS:
            rendered = [f"{_BRIDGE_RECIPE_FIELDS[key]}={_value_text(value)}"]
        else:
            rendered = [f"{twin}={_value_text(value)}" for twin in (key, *_BRIDGE_TWINS.get(key, ()))]
        lines += [line for line in rendered if line not in lines]
    return lines


def flags_it_lacks(lines: Iterable[str], printed_arguments: frozenset[str] | None) -> list[str]:
    """The Megatron-LM flags among fix `lines` that a run's arguments block does not print: the block prints every
    argument its Megatron-LM takes (a flag's name with `_` for `-`; `--no-X` and `--disable-bias-linear` store into
    another name), so that Megatron-LM would refuse them as unrecognized arguments."""
    if printed_arguments is None:
        return []
    lacking = []
    for line in lines:
        if not line.startswith("--"):
            continue
        flag = line.split(" ", 1)[0]
        name = flag[2:].replace("-", "_")
        names = {
            name,
            name.removeprefix("no_"),
            _KEY_OF_NEGATED.get(flag, "").rpartition(".")[2],
            _FLAG_DESTS.get(flag),
        }
        if not names & printed_arguments:
            lacking.append(flag)
    return lacking


def render_lines(lines: Iterable[str], dialect: str, places: Mapping[str, str] | None = None) -> list[str]:
    """Fix lines written as Bridge overrides / exports (signature templates, the memory model's advice), in
    `dialect`; a line that is not a change (free text) stays as it is, in its place."""
    parsed = [(line, parse_fix_line(line)) for line in lines]
    keys = {key for _, changes in parsed for key, _ in changes}
    out: list[str] = []
    for line, changes in parsed:
        rendered = render_changes(changes, dialect, keys, places=places) if changes else [line]
        out += [text for text in rendered if text not in out]
    return out


def _megatron_lines(key: str, value: Any, keys: set[str]) -> list[str]:
    if key == "model.cpu_offloading":
        if value:  # the layer count turns it on; older releases also take the switch alone
            return [] if "model.cpu_offloading_num_layers" in keys else ["--cpu-offloading"]
        return [] if "model.cpu_offloading_num_layers" in keys else ["--cpu-offloading-num-layers 0"]
    if key in _NO_FLAG:
        field = key.partition(".")[2]
        return [
            f"{_SET}{field}={_value_text(value)} where the script builds {_NO_FLAG[key]} (Megatron-LM has no flag for it)"
        ]
    if key in _NEGATED:
        flag = _NEGATED[key]
        return [f"{_REMOVE}{flag}{_FROM_LAUNCH}"] if value else [flag]
    flag = flag_of(key)
    if VALUE_KINDS.get(key) == "bool" and isinstance(value, bool):
        return [flag] if value else [f"{_REMOVE}{flag}{_FROM_LAUNCH}"]
    if value is None:
        return [f"{_REMOVE}{' and '.join((flag, *_ALSO_REMOVE.get(key, ())))}{_FROM_LAUNCH}"]
    if isinstance(value, (list, tuple)):
        return [" ".join([flag, *map(_value_text, value)])]
    return [f"{flag} {_value_text(value)}"]


def _flagscale(line: str, places: Mapping[str, str] | None) -> list[str]:
    """A Megatron-LM fix line as FlagScale overrides: `--flag v` -> `++path=v`, a switch `++path=true`, a removed
    switch `++path=false`, a removed valued flag `~path`; a line with no flag (a setting only code reaches) stays."""
    if line.startswith(_REMOVE) and line.endswith(_FROM_LAUNCH):
        flags = line[len(_REMOVE) : -len(_FROM_LAUNCH)].split(" and ")
        return [
            _hydra(_place(flag, places), "false") if _is_switch(flag) else f"~{_place(flag, places)}" for flag in flags
        ]
    if not line.startswith("--"):
        return [line]
    flag, _, raw = line.partition(" ")
    parts = raw.split()
    listed = len(parts) > 1 or _key_of_flag(flag) in LIST_KEYS
    value = "true" if not parts else "[" + ",".join(parts) + "]" if listed else parts[0]
    return [_hydra(_place(flag, places), value)]


def _place(flag: str, places: Mapping[str, str] | None) -> str:
    """Where the user's FlagScale config sets the flag's setting, else `train.system.<its argument name>`."""
    name = flag[2:].replace("-", "_")
    return (places or {}).get(_key_of_flag(flag)) or (places or {}).get(name) or f"{_FLAGSCALE_DEFAULT}{name}"


def _is_switch(flag: str) -> bool:
    return flag in _KEY_OF_NEGATED or VALUE_KINDS.get(_key_of_flag(flag)) == "bool" or flag in _SWITCHES_ALSO_REMOVED


def _hydra(path: str, value: str) -> str:
    """`++path=value` as one shell word: the value in double quotes unless Hydra's grammar takes it bare (a `,` is
    a sweep; only ASCII letters, digits and a few signs stand unquoted), the whole in single quotes where the
    shell would read a character as its own (a glob's `[`, a space)."""
    if not value.startswith("[") and not _HYDRA_PLAIN.fullmatch(value):
        # Hydra reads a backslash as an escape only before a quote or at the end (other ones stay as written)
        value = '"' + _BACKSLASHES_BEFORE_QUOTE.sub(lambda m: m[1] * 2 + ('\\"' if m[2] else ""), value) + '"'
    override = f"++{path}={value}"
    return "'" + override.replace("'", "'\\''") + "'" if any(char in override for char in _SHELL_SPECIAL) else override


def _value_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(_value_text, value)) + "]"
    return format_value(value)


def parse_fix_line(line: str) -> list[Change]:
    """The changes a printed fix line makes, in any dialect (`a.b=c`, `--flag value`, `remove --x from the
    launch command`, `export X=v`, `unset X`); [] for a line that is not a change."""
    text = line.strip()
    if len(text) > 1 and text[0] == text[-1] == "'":  # a FlagScale override quoted for the shell
        text = text[1:-1].replace("'\\''", "'")
    if text.startswith("~") and "=" not in text:  # a FlagScale (Hydra) key deleted
        return [(canonical_key(text[1:]), None)]
    if text.startswith(("export ", "unset ")):
        verb, _, rest = text.partition(" ")
        name, sep, value = rest.partition("=")
        if verb == "unset":
            return [("env." + rest.strip(), None)]
        return [("env." + name.strip(), value.strip().strip("'\""))] if sep else []
    if text.startswith(_SET) and " where " in text:  # a setting with no flag: `set field=value where …`
        text = text[len(_SET) : text.index(" where ")]
    elif text.startswith(_REMOVE + "--") and text.endswith(_FROM_LAUNCH):
        flags = text[len(_REMOVE) : -len(_FROM_LAUNCH)].split(" and ")
        return list(dict.fromkeys(_removed(flag.strip()) for flag in flags))
    elif text.startswith("--"):
        flag, _, raw = text.partition(" ")
        if flag in _KEY_OF_NEGATED:
            return [(_KEY_OF_NEGATED[flag], False)]
        key = _key_of_flag(flag)
        if not raw:
            return [(key, True)]
        parts = raw.split()
        given = [parse_value(key, p) for p in parts] if len(parts) > 1 or key in LIST_KEYS else parse_value(key, raw)
        return [(key, given)]
    key, sep, raw = text.partition("=")
    if not sep or not key or " " in key.strip():
        return []
    if len(raw) > 1 and raw[0] == raw[-1] == '"':  # a value quoted for Hydra
        raw = _ESCAPED_BEFORE_QUOTE.sub(lambda m: m[1][: len(m[1]) // 2] + ('"' if m[2] else ""), raw[1:-1])
    flag = "--" + key.rsplit(".", 1)[-1].lstrip("+").replace("_", "-")
    if "." in key and flag in _KEY_OF_NEGATED:  # FlagScale's `disable_bias_linear=true`
        return [(_KEY_OF_NEGATED[flag], parse_value("", raw) is not True)]
    if "." in key and flag in _SWITCHES_ALSO_REMOVED and parse_value("", raw) is False:
        return [_removed(flag)]  # FlagScale's `recompute_activations=false`, beside the setting it also sets
    if canonical_key(key).startswith("env."):  # an environment variable's value is text, as an export's is
        return [(canonical_key(key), raw)]
    return [(canonical_key(key), parse_value(canonical_key(key), raw))]


def _removed(flag: str) -> Change:
    """A removed flag: the value Megatron-LM takes without it (off for a switch, unset for the rest)."""
    if flag in _KEY_OF_NEGATED:
        return _KEY_OF_NEGATED[flag], True
    for key, others in _ALSO_REMOVE.items():
        if flag in others:
            return key, None
    key = _key_of_flag(flag)
    return key, (False if VALUE_KINDS.get(key) == "bool" else None)


def _key_of_flag(flag: str) -> str:
    return next((key for key, name in _FLAGS.items() if name == flag), None) or canonical_key(flag)


# Lines both Megatron-LM and Megatron-Bridge print (megatron-core's tokenizer build): they tell no dialect.
EITHER_DIALECT = "megatron-core's tokenizer line"
# ... and megatron-core's `OptimizerConfig(...)` / `DistributedDataParallelConfig(...)` lines (config/from_log.py),
# which outnumbered a Megatron-LM log's frames where its arguments block was cut (run b81's log without it).
_EITHER_DETAILS = frozenset({EITHER_DIALECT, "OptimizerConfig", "DistributedDataParallelConfig"})
# The options of the launcher (torchrun's, Slurm's) on a command line, before the training script's own flags: both
# launch either (held-out megatron-bridge-llama32-1b-pretrain-healthy: `torchrun --standalone --nproc_per_node=8`).
_LAUNCHER_KEYS = frozenset(
    {
        *PROCESSES_PER_NODE_KEYS,  # the job geometry the world size is derived from
        *NODES_KEYS,
        *TASKS_KEYS,
        *("standalone", "node_rank", "master_addr", "master_port", "max_restarts", "monitor_interval"),
        *("rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "start_method", "no_python"),
        *("cpus_per_task", "gres", "partition", "time"),
    }
)


def dialect_of(values: ConfigStore | Iterable[ConfigValue], fallback: str = BRIDGE) -> str:
    """The dialect of the config the user edits. Config files given with --config (and --set) win over
    what the log prints: FlagScale's where one sets a FlagScale path (flagscale_places), else a launch script's
    `--flags` are Megatron-LM, a YAML file, Hydra overrides and --set are Bridge. From the log alone: FlagScale's
    where its arguments block has FlagScale's own arguments; Megatron-LM's arguments block and launch flags
    (FlagScale's where `fallback`, the training code its tracebacks ran, is); else `fallback` (else Bridge)."""
    values = values if hasattr(values, "given_values") else list(values)
    if flagscale_places(values):
        return FLAGSCALE
    values = _listed(values)
    for origins in (("config", "set"), ("log",)):
        if origins == ("log",) and any(v.key in FLAGSCALE_ARGUMENTS and v.origin == "log" for v in values):
            return FLAGSCALE
        tally = {MEGATRON_LM: 0, BRIDGE: 0}
        for value in values:
            if value.origin in origins and not value.key.startswith(("env.", "runtime.")) and not _either(value):
                tally[_dialect_of_value(value)] += 1
        if any(tally.values()):
            found = MEGATRON_LM if tally[MEGATRON_LM] > tally[BRIDGE] else BRIDGE
            # FlagScale passes Megatron-LM's arguments: a log of them from a run of FlagScale's code is FlagScale's
            return FLAGSCALE if found == MEGATRON_LM and origins == ("log",) and fallback == FLAGSCALE else found
    return fallback


def _listed(values: ConfigStore | Iterable[ConfigValue]) -> list[ConfigValue]:
    return list(values.all_values() if hasattr(values, "all_values") else values)


def _either(value: ConfigValue) -> bool:
    detail = value.source.detail
    return detail in _EITHER_DETAILS or (detail == "command line" and value.key in _LAUNCHER_KEYS)


def set_by_megatron_flags(value: ConfigValue | Resolved) -> bool:
    """Whether a value came from Megatron-LM's own arguments: a launch command's flags or the arguments block."""
    return _dialect_of_value(value) == MEGATRON_LM


def _dialect_of_value(value: ConfigValue | Resolved) -> str:
    detail = value.source.detail
    if detail in ("arguments block", "command line"):
        return MEGATRON_LM
    if value.origin == "config" and detail.startswith("--"):  # diagnose_text's config given by flag name
        return MEGATRON_LM
    if value.origin == "config" and Path(value.source.path).suffix.lower() in _SCRIPT_SUFFIXES and not detail:
        return MEGATRON_LM
    return BRIDGE
