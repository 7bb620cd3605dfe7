"""Issue 26: fixes in the dialect of the config the user edits, one consistent change set, and a verdict and
fix that follow the OOM message's numbers in every output format."""

from __future__ import annotations

import functools
import gzip
import json

import pytest

from offloaddoctor.catalog.predicates import names_in
from offloaddoctor.report.preflight import check_store
from offloaddoctor.api import diagnose, diagnose_text, estimate, load_catalog
from offloaddoctor.config.defaults import add_defaults
from offloaddoctor.config.dialect import (
    BRIDGE,
    FLAGSCALE,
    MEGATRON_LM,
    parse_fix_line,
    render_changes,
    render_lines,
)
from offloaddoctor.config.loading import build_store, explicit_config, load_log_config
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.errors import UserError
from offloaddoctor.policy import Policy
from offloaddoctor.render.github import render_github
from offloaddoctor.render.json_report import render_json
from offloaddoctor.render.markdown import render_markdown
from offloaddoctor.render.plain import render_plain

from tests.conftest import FIXTURES, builtin_catalog

PP_AND_STATE_LOG = (
    "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading\n"
    "AssertionError: --offload-optimizer-states cannot be used with --optimizer-cpu-offload"
)

# Values Megatron-LM's validate_args computes from others at start-up (and prints in the arguments block).
_RECOMPUTED_FROM = {"model.cpu_offloading": "model.cpu_offloading_num_layers"}


def apply_changes(values, changes, dialect: str) -> list[ConfigValue]:
    """The config after a fix: `changes` win over every value given. For a Megatron-LM run, a value the
    arguments block printed after validate_args derived it is dropped when its input changes (start-up
    derives it again)."""
    changes = list(changes)
    changed = {key for key, _ in changes}
    kept = list(values)
    if dialect == MEGATRON_LM:
        recomputed = {key for key, source in _RECOMPUTED_FROM.items() if source in changed and key not in changed}
        kept = [v for v in kept if not (v.key in recomputed and v.source.detail == "arguments block")]
    return kept + [
        ConfigValue(key, value, Source("fix", None, f"#{number}"), "set")
        for number, (key, value) in enumerate(changes, 1)
    ]


def merged_changes(findings) -> dict:
    """Every finding's changes as one mapping key -> value (print_fixes has made them agree)."""
    merged: dict = {}
    for finding in findings:
        merged.update(finding.changes)
    return merged


SAME_REPORTS = pytest.mark.xdist_group("fix-dialect-reports")  # _diagnose once a fixture for both tests


def _fixtures_with_findings():
    return sorted(d.name for d in FIXTURES.iterdir() if (d / "job.log").is_file())


@functools.cache
def _diagnose(name: str):
    """The fixture's report with its configs, once a process for the two tests that read it (never changed)."""
    directory = FIXTURES / name
    configs = [str(p) for p in sorted(directory.glob("*.yaml")) if p.name != "expected.yaml"]
    configs += [str(p) for p in sorted(directory.glob("*.sh"))]
    report = diagnose([str(directory / "job.log")], config_paths=configs, policy=Policy(), catalog=builtin_catalog())
    return report, configs


def test_a_megatron_lm_log_gets_flags_and_a_switch_is_turned_off_by_removing_it():
    report = diagnose([str(FIXTURES / "pp-cpu-offload" / "job.log")], policy=Policy())
    (finding,) = [f for f in report.findings if f.id == "pp-cpu-offload"]
    assert report.fix_dialect == MEGATRON_LM
    # Megatron-LM turns activation offloading on from the layer count: the count turns it off. No
    # --use-distributed-optimizer: the run has it (a fix does not repeat what the run sets).
    assert finding.overrides == [
        "--cpu-offloading-num-layers 0",
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction 0.5",
        "--use-precision-aware-optimizer",
    ]
    report = diagnose([str(FIXTURES / "state-offload-conflict" / "job.log")], policy=Policy())
    lines = {f.id: f.overrides for f in report.findings}
    # A store_true switch has no --no- form in Megatron-LM. The conflict's fix drops state offloading, not CPU
    # offloading: the run has no Transformer Engine, so state offloading would be refused next (report/fixes.py).
    assert lines["state-offload-conflict"] == ["remove --offload-optimizer-states from the launch command"]
    assert not any("=" in line and not line.startswith("export") for f in report.findings for line in f.overrides)


def test_the_config_file_given_with_config_decides_the_dialect_over_the_log():
    directory = FIXTURES / "oom-partial-optimizer-offload-bridge"
    report = diagnose([str(directory / "job.log")], config_paths=[str(directory / "run_config.yaml")], policy=Policy())
    assert report.fix_dialect == BRIDGE
    assert all(line.startswith(("model.", "optimizer.")) for line in report.findings[0].overrides)
    # the same log's arguments block alone is Megatron-LM's
    alone = diagnose([str(directory / "job.log")], policy=Policy())
    assert alone.fix_dialect == MEGATRON_LM
    assert all(line.startswith("--") for f in alone.findings for line in f.overrides)


def test_the_signature_written_in_flags_prints_overrides_for_a_bridge_config():
    report = diagnose_text(
        "AssertionError: --use-precision-aware-optimizer only supported with adam",
        {"optimizer.optimizer": "sgd", "optimizer.use_precision_aware_optimizer": True},
    )
    (finding,) = report.findings
    # use_precision_aware_optimizer=True: the config has it (a fix does not repeat what the run sets)
    assert finding.overrides == ["optimizer.optimizer=adam"]


@pytest.mark.parametrize(
    "changes",
    [
        [("model.cpu_offloading_num_layers", 0)],
        [("optimizer.optimizer_cpu_offload", False), ("optimizer.use_distributed_optimizer", True)],
        [("optimizer.optimizer_offload_fraction", 0.75), ("train.micro_batch_size", 1)],
        [("model.recompute_granularity", None), ("model.virtual_pipeline_model_parallel_size", None)],
        [("model.recompute_granularity", "selective"), ("model.recompute_modules", ["core_attn"])],
        [
            ("model.add_bias_linear", False),
            ("ddp.nccl_ub", False),
            ("env.PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        ],
        [("env.NCCL_GRAPH_REGISTER", None)],
    ],
)
@pytest.mark.parametrize("dialect", [MEGATRON_LM, BRIDGE, FLAGSCALE])
def test_printed_changes_read_back_as_the_same_changes(changes, dialect):
    lines = render_changes(changes, dialect)
    read = dict(change for line in lines for change in parse_fix_line(line))
    assert read == dict(changes), lines


def test_environment_is_an_export_in_every_dialect():
    for dialect in (MEGATRON_LM, BRIDGE):
        assert render_lines(["export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"], dialect) == [
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
        ]


def _run_config(name: str, configs: list[str]):
    """What the user edits: the --config files, else the config the log prints."""
    values = explicit_config(configs, [])
    try:
        values = load_log_config(str(FIXTURES / name / "job.log")) + values
    except UserError:
        pass
    return values


@SAME_REPORTS
@pytest.mark.parametrize("name", _fixtures_with_findings())
def test_applying_every_printed_fix_leaves_no_violation_of_its_finding(name):
    report, configs = _diagnose(name)
    catalog = builtin_catalog()
    preflight = {s.id for s in catalog.signatures if s.preflight and s.config is not None}
    values = _run_config(name, configs)
    before = build_store(values)
    add_defaults(before)
    changes = [c for f in report.findings for line in f.overrides for c in parse_fix_line(line)]
    store = build_store(apply_changes(values, changes, report.fix_dialect))
    add_defaults(store)
    remaining = {f.id for f in check_store(catalog, store).violations}
    assert not remaining & {f.id for f in report.findings if f.id in preflight and f.changes}
    assert remaining <= {f.id for f in check_store(catalog, before).violations}  # and breaks no other


@SAME_REPORTS
@pytest.mark.parametrize("name", _fixtures_with_findings())
def test_no_key_gets_two_values_from_two_findings(name):
    report, _ = _diagnose(name)
    seen: dict[str, object] = {}
    for finding in report.findings:
        for key, value in finding.changes:
            assert seen.setdefault(key, value) == value, (key, finding.id)


@pytest.mark.parametrize(
    "config",
    [
        {
            "model.cpu_offloading": True,
            "model.pipeline_model_parallel_size": 4,
            "optimizer.offload_optimizer_states": True,
            "optimizer.optimizer_cpu_offload": True,
        },
        {
            "--cpu-offloading-num-layers": 2,
            "--pipeline-model-parallel-size": 4,
            "--offload-optimizer-states": True,
            "--optimizer-cpu-offload": True,
        },
    ],
)
def test_pp_offload_and_state_offload_fixes_agree_on_optimizer_offloading(config):
    """pp-cpu-offload suggested optimizer offloading on while state-offload-conflict turns it off: the
    finding whose constraint is about the key keeps it; the other leaves it (and its fraction) out, saying why."""
    report = diagnose_text(PP_AND_STATE_LOG, config)
    fixes = {f.id: f for f in report.findings}
    assert dict(fixes["state-offload-conflict"].changes) == {"optimizer.optimizer_cpu_offload": False}
    pp = dict(fixes["pp-cpu-offload"].changes)
    assert "optimizer.optimizer_cpu_offload" not in pp and "optimizer.optimizer_offload_fraction" not in pp
    assert "left out of this fix: state-offload-conflict's fix says" in fixes["pp-cpu-offload"].fix_note
    assert merged_changes(report.findings)["optimizer.optimizer_cpu_offload"] is False
    store = build_store(apply_changes([], merged_changes(report.findings).items(), report.fix_dialect))
    assert store.resolve("optimizer.optimizer_cpu_offload").value is False


BRIDGE_EXAMPLE = FIXTURES / "oom-partial-optimizer-offload-bridge"
CAVEATS = (
    "the memory model disagrees with the message's figures (6.6x its peak allocated): more is on the GPU than the config explains",
    "optimizer offloading alone cannot free enough",
)


def _bridge_example_outputs() -> dict[str, str]:
    report = diagnose(
        [str(BRIDGE_EXAMPLE / "job.log")], config_paths=[str(BRIDGE_EXAMPLE / "run_config.yaml")], policy=Policy()
    )
    annotations, summary = render_github(report)
    document = json.loads(render_json(report))
    finding = document["findings"][0]
    return {
        "text": render_plain(report),
        "github": annotations,
        "github summary": summary,
        "markdown": render_markdown(report),
        "json": " ".join([finding["config"]["explanation"], *finding["fix"]["sentences"]]),
    }


def test_the_bridge_example_oom_verdict_and_fix_follow_the_numbers_in_every_format():
    for name, text in _bridge_example_outputs().items():
        flat = " ".join(text.replace("%25", "%").split())
        for caveat in CAVEATS:
            assert caveat in flat, (name, caveat)
        assert "Raise the offload fraction by a step" not in flat, name


def test_estimate_advice_in_the_dialect_of_its_config():
    report = estimate([str(FIXTURES / "estimate" / "llama3-8b-launch.sh")], gpu="H100-80GB")
    from offloaddoctor.render.estimate_view import estimate_json, render_estimate_text

    text = render_estimate_text(report)
    assert "--micro-batch-size 1" in text and "train.micro_batch_size=" not in text
    assert "--cpu-offloading\n" not in text  # the layer count turns it on in Megatron-LM
    advice = estimate_json(report)["advice"]
    assert all(line.startswith("--") for item in advice for line in item["overrides"])
    bridge = estimate(
        [str(BRIDGE_EXAMPLE / "run_config.yaml")],
        ["model.seq_length=4096", "model.vocab_size=32000"],
        gpu_memory="8GiB",
    )
    advice = estimate_json(bridge)["advice"]
    assert advice and all(line.split("=")[0].count(".") == 1 for item in advice for line in item["overrides"])


@pytest.mark.parametrize(
    ("layers", "chunk", "fix", "vpp"),
    [
        (24, 5, ["--num-virtual-stages-per-pipeline-rank 2"], 2),  # 12 a stage: asked for 2 chunks of 5
        (14, 3, ["remove --num-virtual-stages-per-pipeline-rank from the launch command"], None),  # 7: no VPP
    ],
)
def test_megatron_lm_layers_per_virtual_stage_that_do_not_divide_a_stage_get_a_fix_that_clears_the_flag(
    tmp_path, layers, chunk, fix, vpp
):
    """Megatron-LM asserts that the layers per virtual stage divide a stage, and accepts at most one of its two
    VPP flags: the fix sets (or turns off) VPP and removes this one, and applied, leaves no violation."""
    from offloaddoctor.api import check

    script = tmp_path / "launch.sh"
    script.write_text(
        f"torchrun --nproc-per-node 2 pretrain_gpt.py --num-layers {layers} --pipeline-model-parallel-size 2 "
        f"--num-layers-per-virtual-pipeline-stage {chunk}\n"
    )
    (violation,) = [v for v in check([str(script)]).violations if v.id == "vpp-layer-divisibility"]
    assert violation.overrides == [*fix, "remove --num-layers-per-virtual-pipeline-stage from the launch command"]
    values = explicit_config([str(script)], [])
    store = build_store(
        apply_changes(values, [c for line in violation.overrides for c in parse_fix_line(line)], MEGATRON_LM)
    )
    add_defaults(store)
    assert store.resolve("model.virtual_pipeline_model_parallel_size").value == vpp
    assert not [v for v in check_store(load_catalog(), store).violations if v.id == "vpp-layer-divisibility"]


def _confirmed_preflight_examples():
    from offloaddoctor.report.preflight import MEMORY_KEYS

    catalog = builtin_catalog()
    for signature in catalog.signatures:
        # memory-exceeds-capacity's fix is the memory model's cheapest change that fits (advice tests, GPU runs)
        if set(MEMORY_KEYS) & set(names_in(signature.config, "key")):
            continue
        for example in signature.examples if signature.preflight else ():
            if example.expect == "match" and example.verdict == "confirmed" and example.config:
                yield pytest.param(signature.id, example, id=f"{signature.id}:{example.name}")


@pytest.mark.parametrize("config_file", ["cfg.yaml", "launch.sh", "flagscale.yaml"])  # Bridge, Megatron-LM, FlagScale
@pytest.mark.parametrize(("signature_id", "example"), list(_confirmed_preflight_examples()))
def test_a_printed_fix_pasted_into_the_config_it_is_for_breaks_no_other_constraint(signature_id, example, config_file):
    """`check` on a signature's own confirming config, its fixes printed and applied as printed: the violation is
    gone and no constraint is broken that held before. pp-cpu-offload's optimizer offloading, pasted into a config
    without the distributed optimizer, was refused by optimizer-offload-requires-distributed-optimizer; and
    `cuda_graph_impl=none` left CUDA graphs on where the config used the deprecated `enable_cuda_graph`
    (TransformerConfig turns that into cuda_graph_impl=local)."""
    from offloaddoctor.config.from_log import LogConfigCollector
    from offloaddoctor.config.keys import canonical_key
    from offloaddoctor.report import print_fixes

    catalog = builtin_catalog()
    collector = LogConfigCollector("<example>")
    for number, line in enumerate(example.log.splitlines(), start=1):
        collector.feed(line, number)
    config = dict(example.config)
    megatron_lm = config_file != "cfg.yaml"  # FlagScale passes its config to Megatron-LM's own arguments
    if megatron_lm and "model.cpu_offloading" in config:
        # Megatron-LM has no --cpu-offloading: the layer count turns it on (validate_args)
        config.setdefault("model.cpu_offloading_num_layers", 1 if config.pop("model.cpu_offloading") else 0)
    given = [
        ConfigValue(canonical_key(k), v, Source(config_file, 1), "config", _flagscale_path(k, config_file))
        for k, v in config.items()
    ]
    values = [*collector.values, *given]

    def violations(values) -> list:
        store = build_store(values)
        add_defaults(store)
        return check_store(catalog, store).violations, store

    before, store = violations(values)
    dialect = print_fixes(before, store)
    found = [v for v in before if v.id == signature_id]
    if not found:  # `--cpu-offloading-num-layers -1`: Megatron-LM reads it as offloading off, nothing to fix
        assert megatron_lm
        return
    assert dialect == {"cfg.yaml": BRIDGE, "launch.sh": MEGATRON_LM, "flagscale.yaml": FLAGSCALE}[config_file]
    # every line the report prints: a fix may sit on another finding that settles this one (report/fixes.py)
    lines = [line for finding in before for line in finding.overrides]
    changes = [change for line in lines for change in parse_fix_line(line)]
    after, _ = violations(apply_changes(values, changes, dialect))
    ids = {v.id for v in after}
    assert signature_id not in ids and ids <= {v.id for v in before}, (lines, ids)


def _flagscale_path(key: str, config_file: str) -> str:
    """Where a FlagScale train config keeps a setting: its Megatron-LM argument's name, in `train.system`."""
    from offloaddoctor.config.dialect import flag_of
    from offloaddoctor.config.keys import canonical_key

    return (
        "" if config_file != "flagscale.yaml" else "train.system." + flag_of(canonical_key(key))[2:].replace("-", "_")
    )


def test_a_word_among_a_keys_choices_stays_that_word_in_every_dialect():
    """`model.cuda_graph_impl=none` was read back as null and printed `model.cuda_graph_impl=null` for Bridge:
    megatron-core asserts cuda_graph_impl is one of its four words, so that fix stopped the run."""
    assert parse_fix_line("model.cuda_graph_impl=none") == [("model.cuda_graph_impl", "none")]
    assert render_changes([("model.cuda_graph_impl", "none")], BRIDGE) == ["model.cuda_graph_impl=none"]
    assert parse_fix_line("--cuda-graph-impl none") == [("model.cuda_graph_impl", "none")]
    assert parse_fix_line("model.recompute_granularity=none") == [("model.recompute_granularity", None)]


def test_a_template_change_the_runs_gpus_cannot_hold_is_left_out_and_said():
    """oom-activation-offload's fix template moves to PP 2; the run had one GPU (data_parallel_size 1):
    Megatron asserts TP x PP x CP divides the world, so that line is left out and the fix says why."""
    report = diagnose([str(FIXTURES / "oom-activation-offload" / "job.log")], policy=Policy())
    [finding] = [f for f in report.findings if f.id == "oom-activation-offload"]
    assert not any("pipeline-model-parallel-size" in line for line in finding.overrides)
    assert "`--pipeline-model-parallel-size 2` left out of this fix" in finding.fix_note
    assert "does not divide the run's 1 GPU." in finding.fix_note
    assert "--optimizer-cpu-offload" in finding.overrides


@pytest.mark.parametrize("variable", ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"])
def test_the_expandable_segments_fix_keeps_the_allocator_options_the_run_sets(tmp_path, variable):
    """`export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, pasted, dropped the run's other allocator
    options; and where the run sets PYTORCH_ALLOC_CONF it set another variable than the one the run reads."""
    log = tmp_path / "job.log"
    text = (FIXTURES / "oom-fragmentation-multirank" / "job.log").read_text()
    log.write_text(f"{variable}=garbage_collection_threshold:0.6,max_split_size_mb:512\n" + text)
    report = diagnose([str(log)], policy=Policy())
    [finding] = [f for f in report.findings if f.id == "oom-fragmentation"]
    assert finding.overrides[0] == (
        f"export {variable}=garbage_collection_threshold:0.6,max_split_size_mb:512,expandable_segments:True"
    )
    plain = diagnose([str(FIXTURES / "oom-fragmentation-multirank" / "job.log")], policy=Policy())
    assert plain.findings[0].overrides[0] == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def test_a_fix_does_not_repeat_what_the_run_already_sets():
    """The Bridge summary prints overlap_cpu_optimizer_d2h_h2d: True; the fix printed
    `optimizer.overlap_cpu_optimizer_d2h_h2d=True` beside the new fraction, as if the run did not overlap."""
    finding = diagnose([str(FIXTURES / "bridge-summary-oom-partial-offload" / "job.log")]).findings[0]
    assert finding.config.verdict == "confirmed"
    assert finding.overrides == ["optimizer.optimizer_offload_fraction=0.75"]
    assert finding.changes == [("optimizer.optimizer_offload_fraction", 0.75)]
    # the same signature on a run that does not overlap still gets the line
    off = diagnose(
        [str(FIXTURES / "bridge-summary-oom-partial-offload" / "job.log")],
        overrides=["optimizer.overlap_cpu_optimizer_d2h_h2d=False"],
    ).findings[0]
    assert "optimizer.overlap_cpu_optimizer_d2h_h2d=True" in off.overrides


BRIDGE_PRECISION = dict(
    line.split(": ", 1)
    for line in (FIXTURES / "bridge-0.3.1" / "precision-fixes.txt").read_text().splitlines()
    if line.strip()
)


def test_the_precision_aware_change_holds_under_bridges_bf16_recipe():
    """Offloading without the precision-aware optimizer is Bridge's default and validates; the change printed for
    it, optimizer.use_precision_aware_optimizer=True, is kept at start-up (fixtures/bridge-0.3.1/precision-fixes.txt)."""
    before = BRIDGE_PRECISION["bf16 recipe, offloading without the precision-aware optimizer (Bridge's default)"]
    after = BRIDGE_PRECISION[
        "bf16 recipe + optimizer.use_precision_aware_optimizer=True (printed for offloading without it)"
    ]
    assert before.endswith("optimizer.use_precision_aware_optimizer=False") and not before.startswith("refused")
    assert after.endswith("optimizer.use_precision_aware_optimizer=True") and "optimizer.bf16=True" in after
    change = [("optimizer.use_precision_aware_optimizer", True)]
    assert render_changes(change, BRIDGE) == ["optimizer.use_precision_aware_optimizer=True"]
    assert render_changes(change, MEGATRON_LM) == ["--use-precision-aware-optimizer"]


def test_the_precision_fixes_print_for_bridge_what_its_config_classes_keep():
    """Run through Bridge 0.3.1's config classes (fixtures/bridge-0.3.1/precision-fixes.txt): its `mixed_precision`
    recipe sets the precision in the model, optimizer and DDP configs at start-up, over what an override set there.
    An fp32 model given model.bf16=True alone is refused with the precision-aware optimizer; the bf16 recipe gives
    bf16 with fp32 gradients. Under fp16_mixed an override of ddp.grad_reduce_in_fp32 is lost and the recipe's own
    field holds. Megatron-LM's flags are the switches themselves."""
    assert render_changes([("model.bf16", True)], BRIDGE) == ["mixed_precision=bf16_mixed"]
    assert BRIDGE_PRECISION["fp32 model + model.bf16=True alone (printed at first)"].startswith("refused: ")
    kept = BRIDGE_PRECISION["fp32 model + mixed_precision=bf16_mixed (printed)"]
    assert "model.bf16=True" in kept and "optimizer.bf16=True" in kept and "ddp.grad_reduce_in_fp32=True" in kept
    fp32_gradients = [("ddp.grad_reduce_in_fp32", True)]
    assert render_changes(fp32_gradients, BRIDGE) == ["mixed_precision.grad_reduce_in_fp32=True"]
    lost = BRIDGE_PRECISION["fp16 recipe + ddp.grad_reduce_in_fp32=True (printed until this check)"]
    held = BRIDGE_PRECISION["fp16 recipe + mixed_precision.grad_reduce_in_fp32=True (printed)"]
    assert "ddp.grad_reduce_in_fp32=False " in lost and "ddp.grad_reduce_in_fp32=True " in held
    without = BRIDGE_PRECISION["fp16 without a recipe + ddp.grad_reduce_in_fp32=True (the summary's other case)"]
    assert "ddp.grad_reduce_in_fp32=True " in without
    assert render_changes(fp32_gradients, BRIDGE, recipe=False) == ["ddp.grad_reduce_in_fp32=True"]
    assert render_changes([("model.bf16", True)], MEGATRON_LM) == ["--bf16"]
    assert render_changes(fp32_gradients, MEGATRON_LM) == ["--accumulate-allreduce-grads-in-fp32"]
    assert render_changes([("model.bf16", False)], BRIDGE) == ["model.bf16=False"]


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ('  File "/workspace/Megatron-LM/megatron/training/arguments.py", line 714, in validate_args', MEGATRON_LM),
        ('  File "/opt/Megatron-Bridge/src/megatron/bridge/training/config.py", line 900, in validate', BRIDGE),
        (
            '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/model_parallel_config.py", line 9, in f',
            BRIDGE,
        ),
    ],
)
def test_without_a_config_the_fix_speaks_the_training_code_the_traceback_ran(frame, expected):
    """ROCm/Megatron-LM#85's paste (fixtures/held-out/rocm-moe-tp-sp-assert) was given Bridge's lines."""
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            frame,
            "    assert args.sequence_parallel, \\",
            "AssertionError: When using MoE and tensor parallelism, sequence parallelism must be used.",
        ]
    )
    report = diagnose_text(log)
    assert report.fix_dialect == expected
    (finding,) = report.findings
    assert finding.overrides[-1] == (
        "--sequence-parallel" if expected == MEGATRON_LM else "model.sequence_parallel=True"
    )


def test_megatron_cores_own_config_lines_and_the_launchers_options_tell_no_dialect():
    """Run b81's log with its arguments block cut (fixtures/memory-calibration/out-of-memory): megatron-core's
    `OptimizerConfig(...)` and `DistributedDataParallelConfig(...)` lines, which Megatron-LM and Bridge both print,
    outnumbered its frames in megatron/training/ and gave Bridge's lines; torchrun's `--standalone --nproc_per_node`
    before a Bridge script (held-out megatron-bridge-llama32-1b-pretrain-healthy) are the launcher's, not Megatron-LM's."""
    path = FIXTURES / "memory-calibration" / "out-of-memory" / "b81-gpt1b-cap39500-first-step-oom.log.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    start = lines.index("------------------------ arguments ------------------------")
    end = lines.index("-------------------- end of arguments ---------------------")
    report = diagnose_text("\n".join(lines[:start] + lines[end + 1 :]))
    assert report.fix_dialect == MEGATRON_LM
    assert "--optimizer-cpu-offload" in report.findings[0].overrides
    launched = "torchrun --standalone --nproc_per_node=8 /tmp/train.py\n" + "\n".join(lines[end + 1 :])
    assert diagnose_text(launched.replace("megatron/training/", "megatron/bridge/training/")).fix_dialect == BRIDGE


def test_a_config_decides_the_dialect_over_the_traceback():
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/workspace/Megatron-LM/megatron/training/arguments.py", line 714, in validate_args',
            "AssertionError: When using MoE and tensor parallelism, sequence parallelism must be used.",
        ]
    )
    report = diagnose_text(log, {"model.num_moe_experts": 8, "model.tensor_model_parallel_size": 2})
    assert report.fix_dialect == BRIDGE  # diagnose_text's config is a Bridge-keyed mapping


def test_a_megatron_deepspeed_run_is_not_given_megatron_cores_optimizer_flags():
    """Held-out megatron-deepspeed-summit-moe-oom-…: `deepspeed True` in the arguments block. Megatron-DeepSpeed
    takes no --use-distributed-optimizer or --optimizer-cpu-offload (DeepSpeed's ZeRO config does that work): the
    lines are left out, and the note says why and where instead."""
    log = FIXTURES / "held-out" / "megatron-deepspeed-summit-moe-oom-optimizer-step-nccl-noise" / "job.log"
    finding = next(f for f in diagnose([str(log)]).findings if f.id == "oom-capacity")
    assert not any("optimizer" in line for line in finding.overrides)
    assert "uses DeepSpeed (`deepspeed True` in its arguments)" in finding.fix_note
    assert "zero_optimization.stage" in finding.fix_note
