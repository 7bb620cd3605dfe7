"""Record Megatron-Bridge 0.3.1's real start-up configuration summary and run_config.yaml.

Needs a separate venv (never the test suite's):
    python3 -m venv /work/venv-bridge
    /work/venv-bridge/bin/pip install torch==2.13.0+cpu megatron-core==0.16.1 pyyaml
    /work/venv-bridge/bin/pip install --no-deps megatron-bridge==0.3.1
    /work/venv-bridge/bin/python tools/record_bridge_summary.py OUTDIR

Bridge's package `__init__` files import its Hugging Face conversion code (transformers, rich) and PEFT
(Transformer Engine). None of that is needed for the config classes, so this script registers
`megatron.bridge`, `megatron.bridge.models` and `megatron.bridge.peft` as bare packages (their `__init__`
is not run; `models` gets the two provider classes `training.config` imports from it) and gives
`transformers` and `rich` empty stand-ins. Everything that prints or writes is the real package code:
`ConfigContainer.validate()`, `log_non_default_values()` (captured from stdout: it uses print_rank_0)
and `to_yaml()`.

Each case writes OUTDIR/<case>/startup-summary.log and OUTDIR/<case>/run_config.yaml, or, for a config
that validate() rejects, OUTDIR/<case>/validate-error.log (the traceback). Paths under the temporary
directory are shown as /workspace, the venv's site-packages as /usr/local/lib/python3.11/dist-packages/.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import os
import sys
import sysconfig
import tempfile
import traceback
import types
from pathlib import Path


class _Absent(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty stand-ins for optional dependencies the config classes never call."""

    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Placeholder(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


class _Placeholder(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {"__init__": lambda self, *a, **k: None})
        setattr(self, name, value)
        return value


def _bare_package(name: str) -> types.ModuleType:
    spec = importlib.util.find_spec(name)
    module = types.ModuleType(name)
    module.__path__ = list(spec.submodule_search_locations)
    sys.modules[name] = module
    return module


def load_bridge_config():
    sys.meta_path.insert(0, _Absent(["transformers", "rich"]))
    import megatron  # noqa: F401  (the namespace package megatron.core lives in)

    _bare_package("megatron.bridge")
    models = _bare_package("megatron.bridge.models")
    _bare_package("megatron.bridge.peft")
    _bare_package("megatron.bridge.models.llama")
    models.GPTModelProvider = importlib.import_module("megatron.bridge.models.gpt_provider").GPTModelProvider
    models.T5ModelProvider = importlib.import_module("megatron.bridge.models.t5_provider").T5ModelProvider
    config = importlib.import_module("megatron.bridge.training.config")
    llama = importlib.import_module("megatron.bridge.models.llama.llama_provider")
    return config, llama


def build(config, llama, workdir: str, case: dict):
    """A Llama-3.2-1B pretraining config as Bridge's llama32_1b recipe sets it up, with the case's changes."""
    from megatron.bridge.training.config import (
        CheckpointConfig,
        ConfigContainer,
        DistributedDataParallelConfig,
        GPTDatasetConfig,
        LoggerConfig,
        OptimizerConfig,
        RNGConfig,
        SchedulerConfig,
        TokenizerConfig,
        TrainingConfig,
    )

    model = llama.Llama32ModelProvider1B(
        tensor_model_parallel_size=1,
        pipeline_model_parallel_size=1,
        context_parallel_size=1,
        sequence_parallel=False,
        seq_length=8192,
        apply_rope_fusion=False,
    )
    optimizer = OptimizerConfig(
        optimizer="adam",
        lr=3e-4,
        min_lr=3e-5,
        weight_decay=0.1,
        adam_beta1=0.9,
        adam_beta2=0.95,
        adam_eps=1e-8,
        bf16=True,
        use_distributed_optimizer=True,
        clip_grad=1.0,
    )
    ddp = DistributedDataParallelConfig(
        check_for_nan_in_grad=True,
        grad_reduce_in_fp32=True,
        overlap_grad_reduce=True,
        overlap_param_gather=True,
        average_in_collective=True,
        use_distributed_optimizer=True,
    )
    for key, value in case["set"].items():
        section, _, name = key.partition(".")
        setattr({"model": model, "optimizer": optimizer, "ddp": ddp}[section], name, value)
    return ConfigContainer(
        train=TrainingConfig(
            train_iters=1000, global_batch_size=32, micro_batch_size=1, eval_interval=2000, eval_iters=32
        ),
        model=model,
        optimizer=optimizer,
        ddp=ddp,
        scheduler=SchedulerConfig(lr_decay_style="cosine", lr_warmup_iters=100, lr_decay_iters=1000),
        dataset=GPTDatasetConfig(
            random_seed=1234,
            sequence_length=8192,
            reset_position_ids=False,
            reset_attention_mask=False,
            eod_mask_loss=False,
            split="9999,8,2",
        ),
        logger=LoggerConfig(log_interval=10, tensorboard_dir=os.path.join(workdir, "tb_logs")),
        tokenizer=TokenizerConfig(tokenizer_type="NullTokenizer", vocab_size=32000),
        checkpoint=CheckpointConfig(
            save_interval=500,
            save=os.path.join(workdir, "checkpoints"),
            load=os.path.join(workdir, "checkpoints"),
            ckpt_format="torch_dist",
        ),
        rng=RNGConfig(seed=1234),
    )


CASES = {
    # optimizer offloading at 0.5: an OOM after it is oom-partial-optimizer-offload, not a bare capacity OOM
    "optimizer-offload-050": {
        "set": {
            "optimizer.optimizer_cpu_offload": True,
            "optimizer.optimizer_offload_fraction": 0.5,
            "optimizer.overlap_cpu_optimizer_d2h_h2d": True,
        },
    },
    # plain run, no offloading: the summary must say so (keys absent = the Megatron-Core default)
    "no-offload": {"set": {}},
    # Megatron-Bridge#2992: `activation_offload_layers: 0` was taken as "on" (`is not None`), so the model got
    # cpu_offloading=True with cpu_offloading_num_layers=0; with PP 2 validate() raises. Records the traceback.
    "pp2-offload-layers-0": {
        "set": {
            "model.pipeline_model_parallel_size": 2,
            "model.pipeline_dtype": "bf16",
            "model.cpu_offloading": True,
            "model.cpu_offloading_num_layers": 0,
        },
        "fails": True,
    },
    # Fine-grained activation offloading: Bridge's own check refuses it without Transformer Engine's implementation.
    "fine-grained-local": {
        "set": {
            "model.transformer_impl": "local",
            "model.fine_grained_activation_offloading": True,
            "model.offload_modules": ["core_attn"],
        },
        "fails": True,
    },
    # ... and megatron-core's, run by validate() through the model's finalize(): no module listed, and attn_proj alone.
    "fine-grained-no-modules": {"set": {"model.fine_grained_activation_offloading": True}, "fails": True},
    "fine-grained-attn-proj": {
        "set": {"model.fine_grained_activation_offloading": True, "model.offload_modules": ["attn_proj"]},
        "fails": True,
    },
}


def _paths(text: str, workdir: str) -> str:
    site = sysconfig.get_paths()["purelib"].rstrip("/") + "/"
    return (
        text.replace(workdir, "/workspace")
        .replace(site, "/usr/local/lib/python3.11/dist-packages/")
        .replace(str(Path(__file__).resolve()), "/workspace/launch_bridge.py")
    )


def record(outdir: Path) -> None:
    config, llama = load_bridge_config()
    for name, case in CASES.items():
        with tempfile.TemporaryDirectory() as workdir:
            cfg = build(config, llama, workdir, case)
            os.environ.setdefault("WORLD_SIZE", "1")
            if case.get("fails"):
                try:
                    cfg.validate()
                except Exception:  # the error is what this case records
                    text = traceback.format_exc()
                else:
                    raise SystemExit(f"{name}: validate() did not fail")
                target = outdir / name
                target.mkdir(parents=True, exist_ok=True)
                (target / "validate-error.log").write_text(_paths(text, workdir))
                print(f"{target}: validate-error.log")
                continue
            cfg.validate()
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                cfg.log_non_default_values()
            yaml_path = os.path.join(workdir, "run_config.yaml")
            cfg.to_yaml(yaml_path)
            yaml_text = Path(yaml_path).read_text()
        target = outdir / name
        target.mkdir(parents=True, exist_ok=True)
        (target / "startup-summary.log").write_text(_paths(stdout.getvalue(), workdir))
        (target / "run_config.yaml").write_text(_paths(yaml_text, workdir))
        print(f"{target}: startup-summary.log, run_config.yaml")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: record_bridge_summary.py OUTDIR")
    record(Path(sys.argv[1]))
