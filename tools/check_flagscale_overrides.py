"""What FlagScale makes of the fixes offloaddoctor prints in its dialect: each printed line is split as a shell
would split it (shlex), given to real Hydra's compose() as a command-line override on a FlagScale config, and the
composed config is turned into Megatron-LM's arguments the way FlagScale's runner does (below). Prints one block
per case: the change, the line printed, then `refused: <Hydra's message>` or the arguments the change concerns.
Output kept as fixtures/flagscale-dialect/hydra-overrides.txt.

    python3 -m venv /tmp/hydra-venv && /tmp/hydra-venv/bin/pip install hydra-core==1.3.2 omegaconf==2.3.0 attrs pyyaml
    PYTHONPATH=src /tmp/hydra-venv/bin/python tools/check_flagscale_overrides.py > fixtures/flagscale-dialect/hydra-overrides.txt

The runner's conversion, as flagscale/runner/runner_train.py `_get_args_megatron` and utils.py
`flatten_dict_to_args` do it (read at FlagScale's repository, not copied): the `train` node's `system`, `model`,
`data` and `trainer` sections merged into one dict in that order (a later section's key replaces an earlier one's),
then every leaf, nested sections' too, as `--name-with-dashes value`; a list as `--name v1 v2`; true as a bare
`--name`, false left out.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

import yaml

from offloaddoctor.config.derived import flagscale_places
from offloaddoctor.config.dialect import BRIDGE, FLAGSCALE, render_changes
from offloaddoctor.config.loading import explicit_config, load_log_config

REPO = Path(__file__).resolve().parent.parent
# A FlagScale config as the runner saw it (train and experiment nodes), from a held-out run's own output.
RESOLVED = REPO / "fixtures" / "held-out" / "flagscale-megatron-lora-long-seq-oom-capacity" / "config.yaml"
# FlagScale's own layout of a train config (examples/qwen3/conf/train/8b.yaml's sections, fewer keys): mounted
# under `train` by the experiment config's defaults list.
TRAIN_YAML = """\
system:
  tensor_model_parallel_size: 1
  use_distributed_optimizer: true
  recompute_granularity: full
  recompute_method: uniform
  recompute_num_layers: 1
  precision:
    bf16: true
model:
  num_layers: 36
  hidden_size: 4096
  seq_length: 1024
  micro_batch_size: 4
  global_batch_size: 64
data:
  data_path: /path/to/dataset
"""
EXPERIMENT_YAML = """\
defaults:
  - _self_
  - train: 8b
experiment:
  envs:
    CUDA_DEVICE_MAX_CONNECTIONS: 1
    PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold:0.6
"""
CALIBRATION = REPO / "fixtures" / "memory-calibration"
B81 = "b81-gpt1b-cap39500-first-step-oom.log.gz"
B85 = "b85-gpt1b-cap39500-mbs2-advised.log.gz"
B81_SECTIONS = {
    "system": ["model.tensor_model_parallel_size", "optimizer.use_distributed_optimizer", "model.bf16"],
    "model": [
        "model.num_layers",
        "model.hidden_size",
        "model.ffn_hidden_size",
        "model.num_attention_heads",
        "model.seq_length",
        "train.micro_batch_size",
        "train.global_batch_size",
    ],
}
AWKWARD_VALUES = ["a\\b", 'say "x"', "it's", "a,b", 'x\\"y', "end\\", "a b", "$HOME*", '"q"', "ÄÖ<>=@!", "INIT,COLL"]
# (case, config, the changes a fix makes)
CASES = [
    ("recompute, to a config that has none", "resolved", [("model.recompute_granularity", "selective")]),
    (
        "optimizer offloading with its companions",
        "resolved",
        [
            ("optimizer.use_distributed_optimizer", True),
            ("optimizer.optimizer_cpu_offload", True),
            ("optimizer.optimizer_offload_fraction", 0.5),
            ("optimizer.use_precision_aware_optimizer", True),
        ],
    ),
    ("a smaller micro-batch, where the config sets it", "resolved", [("train.micro_batch_size", 2)]),
    ("a smaller micro-batch, in FlagScale's own layout", "layout", [("train.micro_batch_size", 2)]),
    ("recompute off (a setting removed)", "layout", [("model.recompute_granularity", None)]),
    (
        "selective recompute of two modules (a list)",
        "layout",
        [("model.recompute_granularity", "selective"), ("model.recompute_modules", ["core_attn", "mlp"])],
    ),
    ("bf16 off, set in a nested section", "layout", [("model.bf16", False)]),
    ("a bias switch Megatron-LM spells negatively", "resolved", [("model.add_bias_linear", True)]),
    ("expandable segments", "resolved", [("env.PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")]),
    (
        "expandable segments beside the options the run sets (a comma)",
        "layout",
        [("env.PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold:0.6,expandable_segments:True")],
    ),
    ("an environment variable unset", "layout", [("env.PYTORCH_CUDA_ALLOC_CONF", None)]),
]


def megatron_args(train: dict) -> list[str]:
    merged: dict = {}
    for section in ("system", "model", "data", "trainer"):
        merged.update(train.get(section) or {})
    return _flags(merged)


def _flags(section: dict) -> list[str]:
    out: list[str] = []
    for name, value in section.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, dict):
            out += _flags(value)
        elif isinstance(value, list):
            out += [flag, *map(str, value)]
        elif value is True:
            out.append(flag)
        elif value is not False:
            out += [flag, str(value)]
    return out


def concerned(args: list[str], flags: set[str]) -> str:
    """The arguments among `args` that are `flags`, each with its values, in order."""
    shown, index = [], 0
    while index < len(args):
        if args[index] in flags:
            values = []
            while index + 1 < len(args) and not args[index + 1].startswith("--"):
                index += 1
                values.append(args[index])
            shown.append(" ".join([args[index - len(values)], *values]))
        index += 1
    return "; ".join(shown) or "(none)"


def b81_fix_lines(directory: Path) -> list[str]:
    """diagnose's fix for run b81's out-of-memory log (one H100 under a 39,500 MiB limit) given its settings as a
    FlagScale train config (`train/b81.yaml`, the layout's sections; b81's arguments block gives the values)."""
    from offloaddoctor.api import diagnose

    printed = {v.key: v.value for v in load_log_config(str(CALIBRATION / "out-of-memory" / B81))}
    sections = {section: {k.rsplit(".", 1)[-1]: printed[k] for k in keys} for section, keys in B81_SECTIONS.items()}
    (directory / "train" / "b81.yaml").write_text(yaml.safe_dump(sections, sort_keys=False))
    (directory / "b81.yaml").write_text(EXPERIMENT_YAML.replace("train: 8b", "train: b81"))
    report = diagnose([str(CALIBRATION / "out-of-memory" / B81)], [str(directory / "train" / "b81.yaml")])
    return [line for finding in report.findings for line in finding.overrides]


def write_configs(directory: Path) -> dict[str, list]:
    """The cases' configs written into `directory` (Hydra's config directory), and what offloaddoctor reads of each
    as the user's config."""
    (directory / "resolved.yaml").write_text(RESOLVED.read_text())
    (directory / "train").mkdir()
    (directory / "train" / "8b.yaml").write_text(TRAIN_YAML)
    (directory / "layout.yaml").write_text(EXPERIMENT_YAML)
    return {
        "resolved": explicit_config([str(directory / "resolved.yaml")], []),
        "layout": explicit_config([str(directory / "layout.yaml")], []),  # with the train config its defaults name
    }


def printed(given: dict[str, list]) -> dict[str, list[str]]:
    """Each case's fix lines as offloaddoctor prints them for its config."""
    return {
        case: render_changes(changes, FLAGSCALE, places=flagscale_places(given[config_name]))
        for case, config_name, changes in CASES
    }


def main() -> None:
    import hydra
    import omegaconf
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        lines_of = printed(write_configs(directory))
        print(f"# hydra-core {hydra.__version__}, omegaconf {omegaconf.__version__}")
        with initialize_config_dir(config_dir=str(directory), version_base=None):
            for case, config_name, changes in CASES:
                lines = lines_of[case]
                overrides = [word for line in lines for word in shlex.split(line)]
                print(f"\n## {case} ({config_name})")
                print("changes: " + "; ".join(f"{key}={value!r}" for key, value in changes))
                for line in lines:
                    print(f"printed: {line}")
                try:
                    composed = compose(config_name=config_name, overrides=overrides)
                except Exception as exc:  # Hydra's own refusal is the finding
                    print(f"refused: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    continue
                names = {line.split("=")[0].lstrip("'+~").rsplit(".", 1)[-1] for line in lines}
                flags = {"--" + name.replace("_", "-") for name in names}
                train = OmegaConf.to_container(composed.train, resolve=True)
                print(f"arguments: {concerned(megatron_args(train), flags)}")
                if any(key.startswith("env.") for key, _ in changes):
                    envs = OmegaConf.to_container(composed.experiment, resolve=True).get("envs") or {}
                    print(f"experiment.envs: {envs}")
            # environment values with characters Hydra or the shell read as their own: each must arrive as written
            print("\n## environment values with characters Hydra or the shell read as their own (layout)")
            for value in AWKWARD_VALUES:
                [line] = render_changes([("env.NCCL_DEBUG_SUBSYS", value)], FLAGSCALE)
                arrived = compose(config_name="layout", overrides=shlex.split(line)).experiment.envs.NCCL_DEBUG_SUBSYS
                print(f"{'arrived' if arrived == value else 'changed'}: {line} -> {arrived!r}")
            # a fix proven on the GPU: b81's OOM with its settings in a FlagScale train config
            lines = b81_fix_lines(directory)
            args = megatron_args(
                OmegaConf.to_container(
                    compose(config_name="b81", overrides=[w for line in lines for w in shlex.split(line)]).train,
                    resolve=True,
                )
            )
            b85 = {v.key: v.value for v in load_log_config(str(CALIBRATION / B85))}
            print("\n## b81's out-of-memory log, its settings in a FlagScale train config (b81)")
            for line in lines:
                print(f"printed: {line}")
            print(f"arguments: {concerned(args, {'--micro-batch-size', '--global-batch-size'})}")
            print(
                f"b85 ran: --micro-batch-size {b85['train.micro_batch_size']} --global-batch-size "
                f"{b85['train.global_batch_size']} (trained at 30,740 MiB under the 39,500 MiB limit)"
            )
            # what was printed for a FlagScale config before its dialect: Bridge's overrides
            case, config_name, changes = CASES[0]
            print(f"\n## before the FlagScale dialect: {case}, in Bridge's form ({config_name})")
            for line in render_changes(changes, BRIDGE):
                print(f"printed: {line}")
                try:
                    compose(config_name=config_name, overrides=shlex.split(line))
                    print("accepted")
                except Exception as exc:
                    print(f"refused: {type(exc).__name__}: {str(exc).splitlines()[0]}")


if __name__ == "__main__":
    sys.exit(main())
