"""Read `--config` files (Bridge YAML, flat YAML, or a launch script with `--flags`) and `--set` items."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from offloaddoctor.config.derived import add_derived_values
from offloaddoctor.config.keys import is_known
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.config.values import ConfigStore, ConfigValue
from offloaddoctor.errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from offloaddoctor.logs.line_pass import LineHandler

SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".cmd")


# yaml_config is imported where it is used: PyYAML is a sizeable share of start-up, and most runs have no --config.


def load_config_file(path: str) -> list[ConfigValue]:
    if Path(path).suffix.lower() in SCRIPT_SUFFIXES:
        from offloaddoctor.config.files import read_config_text

        return _parse_launch_script(read_config_text(path, errors="replace"), path)
    from offloaddoctor.config.yaml_config import load_yaml_config

    return _with_the_train_group(path, load_yaml_config(path))


_TRAIN_GROUP = "train"  # FlagScale's config group of training settings (conf/train/*.yaml)


def _with_the_train_group(path: str, values: list[ConfigValue]) -> list[ConfigValue]:
    """A FlagScale experiment config names its training settings in Hydra's defaults list (`- train: 8b`): they are in
    train/8b.yaml beside it, mounted under `train`, and read with it (checked alone, the experiment config passed on
    megatron-core's defaults). Hydra's order: the group after `_self_` wins over the file's own values, and a file
    without `_self_` in its list wins over the group."""
    from offloaddoctor.config.yaml_config import load_yaml_config

    listed = next((v.value for v in values if v.key == "defaults" and isinstance(v.value, list)), [])
    at = next((i for i, item in enumerate(listed) if isinstance(item, dict) and _TRAIN_GROUP in item), None)
    if at is None or not isinstance(listed[at][_TRAIN_GROUP], str):
        return values
    name = listed[at][_TRAIN_GROUP]
    group = Path(path).parent / _TRAIN_GROUP / f"{name}.yaml"
    if not group.is_file():
        raise UserError(
            f"{path}: its Hydra defaults take the training settings from {_TRAIN_GROUP}/{name}.yaml, not found beside "
            f"it ({group}): give that file with --config"
        )
    mounted = [_mounted(value) for value in load_yaml_config(str(group))]
    group_wins = "_self_" in listed and listed.index("_self_") < at
    return values + mounted if group_wins else mounted + values


def _mounted(value: ConfigValue) -> ConfigValue:
    """A value of the train group's file as Hydra mounts it: under `train.` (a known setting keeps its key)."""
    written = f"{_TRAIN_GROUP}.{value.written or value.key}"
    known = is_known(value.key) or value.key.startswith("env.")
    return value._replace(key=value.key if known else written, written=written)


def parse_config_text(text: str, label: str, name: str) -> list[ConfigValue]:
    """Config held in memory (a git object): `name` picks the format, `label` names the source."""
    if Path(name).suffix.lower() in SCRIPT_SUFFIXES:
        return _parse_launch_script(text, label)
    from offloaddoctor.config.yaml_config import parse_yaml_config

    return parse_yaml_config(text, label)


def load_log_config(
    path: str, also: Sequence[LineHandler] = (), printed_arguments: list[frozenset[str]] | None = None
) -> list[ConfigValue]:
    """What a training log prints about its own config (arguments block, Bridge's start-up summary, launch line,
    config reprs), read by the same line pass and config handlers as `diagnose`: gzip, rank prefixes and all.
    `also`: other handlers that read the same pass (the log is read once). `printed_arguments`: gets the names a
    complete arguments block printed, where one did (LogConfigCollector.printed_arguments)."""
    from offloaddoctor.config.from_log import LogConfigCollector, config_handlers
    from offloaddoctor.logs.line_pass import LinePass, pass_literals
    from offloaddoctor.logs.sources import resolve_sources

    collector = LogConfigCollector(path, origin="log")
    handlers = [*config_handlers(collector), *also]
    for source in resolve_sources([path]):
        LinePass(pass_literals(handlers), []).read_source(source, handlers)
    if not collector.values:
        raise UserError(f"{path}: no arguments block or config lines found in this log")
    if printed_arguments is not None and collector.printed_arguments is not None:
        printed_arguments.append(collector.printed_arguments)
    return collector.values


def _parse_launch_script(text: str, path: str) -> list[ConfigValue]:
    from offloaddoctor.config.from_log import LogConfigCollector  # the log readers: not for a YAML config

    collector = LogConfigCollector(path, origin="config")
    for number, line in enumerate(text.splitlines(), start=1):
        collector.feed_script_line(line, number)
    if not collector.values:
        raise UserError(f"{path}: no --flags, KEY=VALUE overrides or exports found in this launch script")
    return collector.values


def explicit_config(config_paths: Sequence[str], overrides: Sequence[str]) -> list[ConfigValue]:
    values: list[ConfigValue] = []
    for path in config_paths:
        loaded = load_config_file(path)
        # a launch script's flags may all be the launcher's (torchrun's --nproc-per-node: a Bridge launch)
        values.extend(loaded if Path(path).suffix.lower() in SCRIPT_SUFFIXES else _with_a_known_setting(loaded, path))
    values.extend(parse_overrides(overrides))
    return values


def _with_a_known_setting(values: list[ConfigValue], path: str) -> list[ConfigValue]:
    """A YAML config none of whose settings offloaddoctor knows is refused: checked, it would pass on defaults alone
    (a NeMo-Run launcher YAML, held-out Megatron-Bridge#771, read as `no violation`)."""
    if values and not any(is_known(value.key) or value.key.startswith("env.") for value in values):
        found = ", ".join(dict.fromkeys(value.key for value in values[:6]))
        raise UserError(
            f"{path}: no setting offloaddoctor knows (it has {found}): give the run's Bridge YAML, a launch script "
            "with Megatron-LM --flags, or --set KEY=VALUE"
        )
    return values


def build_store(*groups: Iterable[ConfigValue]) -> ConfigStore:
    store = ConfigStore()
    for group in groups:
        store.extend(group)
    add_derived_values(store)
    return store
