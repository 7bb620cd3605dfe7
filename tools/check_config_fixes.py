"""What megatron-core does with the fixes `offloaddoctor check` prints for the catalogue's confirmed refusals: each
confirming example's config built as the real `TransformerConfig` / `OptimizerConfig` /
`DistributedDataParallelConfig` (CPU, no GPU needed), then again with the fix's changes applied as printed.

Prints one line per example: `signature | example | before: <refusal or accepted> | fix: <lines> | after: <accepted or
the refusal>`. A refusal raised elsewhere (at model build, by Megatron-LM's validate_args or Bridge's validate(), or
by initialize_model_parallel) is not one these classes make: such examples say `before: accepted` and are only
listed. Output kept as fixtures/fix-acceptance/megatron-core-0.16.1.txt, which tests/config/test_fix_acceptance.py
holds offloaddoctor's printed fixes to.

    PYTHONPATH=src /work/venv-bridge/bin/python tools/check_config_fixes.py > fixtures/fix-acceptance/megatron-core-0.16.1.txt
"""

from __future__ import annotations

import warnings
from importlib.metadata import version
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from megatron.core.distributed import DistributedDataParallelConfig  # noqa: E402
from megatron.core.optimizer import OptimizerConfig  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402

from offloaddoctor.api import check, diagnose_text, load_catalog  # noqa: E402
from offloaddoctor.config.keys import canonical_key  # noqa: E402
from offloaddoctor.report.preflight import MEMORY_KEYS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLASSES = {"model": TransformerConfig, "optimizer": OptimizerConfig, "ddp": DistributedDataParallelConfig}
# The smallest model TransformerConfig takes, where the example does not say.
MODEL = {"num_layers": 8, "hidden_size": 64, "num_attention_heads": 4}
NO_MESSAGE = "(no message)"


def context(settings: dict) -> dict:
    """What an example leaves out that the config classes refuse on their own account first (each a setting a run
    of that kind has): printed with the example, applied under it."""
    added: dict = {}
    if any(key.startswith("model.moe_") or key == "model.num_moe_experts" for key in settings):
        added["model.num_moe_experts"] = 8
        added["model.add_bias_linear"] = False  # "Bias in Moe is only supported when ETP==1"
    balancing = settings.get("model.moe_router_load_balancing_type")
    if isinstance(balancing, list):
        added["model.moe_aux_loss_coeff"] = [0.0] * len(balancing)  # a list of types takes a list of coefficients
    if settings.get("model.sequence_parallel") is True:
        added["model.tensor_model_parallel_size"] = 2
    stages = ("model.virtual_pipeline_model_parallel_size", "model.num_layers_per_virtual_pipeline_stage")
    if any(key in settings for key in stages) and "model.pipeline_model_parallel_size" not in settings:
        added["model.pipeline_model_parallel_size"] = 4
        added["model.num_layers"] = 12
    if settings.get("model.fine_grained_activation_offloading") is True and "model.offload_modules" not in settings:
        added["model.offload_modules"] = ["core_attn"]  # 0.16.1's bare assert refuses an empty list
    if settings.get("optimizer.use_precision_aware_optimizer") is True:
        added["optimizer.use_distributed_optimizer"] = True  # the precision-aware optimizer needs it
    return {key: value for key, value in added.items() if key not in settings}


def build(settings: dict) -> str:
    """`accepted`, or the refusal of the first config class that raises; a setting that is no field of the
    megatron-core classes (Megatron-LM's, Bridge's, the environment) is named, not applied."""
    sections: dict[str, dict] = {name: {} for name in CLASSES}
    elsewhere = []
    for key, value in settings.items():
        section, _, field = key.partition(".")
        if section in CLASSES and field in CLASSES[section].__dataclass_fields__:
            sections[section][field] = value
        elif value not in (None, False):
            elsewhere.append(key)
    model = {**MODEL, **sections["model"]}
    if (model.get("pipeline_model_parallel_size") or 1) > 1:
        model.setdefault("pipeline_dtype", torch.bfloat16)
    try:
        TransformerConfig(**model)
        OptimizerConfig(**sections["optimizer"])
        DistributedDataParallelConfig(**sections["ddp"])
    except Exception as error:  # the refusal is what is recorded
        outcome = f"refused: {type(error).__name__}: {' '.join(str(error).split()) or NO_MESSAGE}"
        if "'Version'" in outcome:  # is_te_min_version without Transformer Engine: not checkable on this machine
            outcome = f"needs Transformer Engine ({outcome})"
    else:
        outcome = "accepted"
    return outcome + (f" (not megatron-core fields: {', '.join(elsewhere)})" if elsewhere else "")


def main() -> None:
    catalog = load_catalog()
    print(f"# megatron-core {version('megatron-core')}, torch {torch.__version__}: tools/check_config_fixes.py")
    for signature in catalog.signatures:
        if not signature.preflight or set(MEMORY_KEYS) & {k for e in signature.examples for k in e.config}:
            continue
        for example in signature.examples:
            if example.expect != "match" or example.verdict != "confirmed" or not example.config:
                continue
            settings = {canonical_key(key): value for key, value in example.config.items()}
            added = context(settings)
            overrides = [f"{key}={_printed(value)}" for key, value in {**added, **settings}.items()]
            violations = [v for v in check([], overrides, catalog=catalog).violations if v.id == signature.id]
            if not violations:
                continue
            [violation] = violations
            before = build({**added, **settings})
            if before.startswith("refused") and not _its_own(before, signature.id, example.log):
                before = f"another refusal first: {before}"
            fixed = {**added, **settings, **dict(violation.changes)}
            after = build(fixed) if before.startswith("refused") else "-"
            given = "; ".join(f"{key}={_printed(value)}" for key, value in added.items()) or "-"
            print(
                f"{signature.id} | {example.name} | context: {given} | before: {before} | "
                f"fix: {'; '.join(violation.overrides)} | after: {after}"
            )


def _its_own(refusal: str, signature_id: str, log: str) -> bool:
    """The refusal is the one the signature is for: it matches it, or the example's recorded log holds its message,
    or, for a bare `AssertionError`, the `assert` statement that raised it (megatron-core 0.16.1's for an empty
    offload_modules)."""
    message = refusal.removeprefix("refused: ")
    if signature_id in {finding.id for finding in diagnose_text(message).findings}:
        return True
    kind, _, text = message.partition(": ")
    if text == NO_MESSAGE:
        return kind in log or (kind == "AssertionError" and "assert " in log)
    return text in log


def _printed(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return "null" if value is None else str(value)


if __name__ == "__main__":
    main()
