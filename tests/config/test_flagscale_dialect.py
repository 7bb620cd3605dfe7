"""FlagScale's dialect: a fix for a run launched through FlagScale's Hydra configs is printed as the overrides its
runner turns into Megatron-LM's arguments, at the path the user's config sets each setting (config/dialect.py),
and real Hydra composed every printed line (fixtures/flagscale-dialect)."""

from __future__ import annotations

import importlib.util
import shlex

import pytest
from hypothesis import given, strategies as st

from offloaddoctor.api import check, diagnose
from offloaddoctor.config.derived import flagscale_places
from offloaddoctor.config.dialect import BRIDGE, FLAGSCALE, dialect_of, parse_fix_line, render_changes
from offloaddoctor.config.loading import build_store, explicit_config
from offloaddoctor.policy import Policy

from tests.conftest import FIXTURES, REPO

RECORDED = FIXTURES / "flagscale-dialect" / "hydra-overrides.txt"
HELD_OUT = FIXTURES / "held-out"


def _tool():
    spec = importlib.util.spec_from_file_location("check", REPO / "tools" / "check_flagscale_overrides.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded_cases() -> dict[str, dict[str, list[str]]]:
    """hydra-overrides.txt's blocks: case -> {"printed": [...], "arguments": [...], ...}."""
    cases: dict[str, dict[str, list[str]]] = {}
    block: dict[str, list[str]] = {}
    for line in RECORDED.read_text().splitlines():
        if line.startswith("## "):
            block = cases.setdefault(line[3:].rsplit(" (", 1)[0], {})
        elif ": " in line and not line.startswith("#"):
            field, _, text = line.partition(": ")
            block.setdefault(field, []).append(text)
    return cases


def test_each_case_prints_the_lines_hydra_composed(tmp_path):
    tool = _tool()
    recorded = _recorded_cases()
    assert tool.printed(tool.write_configs(tmp_path)) == {case: recorded[case]["printed"] for case, _, _ in tool.CASES}
    assert not any("refused" in recorded[case] for case, _, _ in tool.CASES)


def _arguments(text: str) -> dict[str, list[str]]:
    """`--a 1; --b` -> {"--a": ["1"], "--b": []}."""
    if text == "(none)":
        return {}
    return {part.split()[0]: part.split()[1:] for part in text.split("; ")}


def test_each_composed_config_passes_megatron_lm_the_change():
    """What FlagScale's runner passed Megatron-LM after Hydra applied the printed lines: each change, as Megatron-LM
    reads its flags (a true switch present, a false one or a removed setting absent, a value as given)."""
    from offloaddoctor.config.dialect import flag_of

    tool = _tool()
    recorded = _recorded_cases()
    for case, _, changes in tool.CASES:
        block = recorded[case]
        arguments = _arguments(block["arguments"][0])
        for key, value in changes:
            if key.startswith("env."):
                envs = block["experiment.envs"][0]
                name = key[len("env.") :]
                assert (f"'{name}': '{value}'" in envs) if value is not None else (f"'{name}'" not in envs), case
            elif key == "model.add_bias_linear":  # Megatron-LM's --disable-bias-linear
                assert ("--disable-bias-linear" in arguments) is (value is False), case
            elif value is True:
                assert arguments[flag_of(key)] == [], case
            elif value is None or value is False:
                assert flag_of(key) not in arguments, case
            else:
                expected = (
                    [str(v) for v in value]
                    if isinstance(value, list)
                    else [f"{value:g}" if isinstance(value, float) else str(value)]
                )
                assert arguments[flag_of(key)] == expected, case


def test_what_was_printed_before_the_dialect_hydra_refuses():
    [before] = [block for case, block in _recorded_cases().items() if case.startswith("before the FlagScale dialect")]
    assert before["printed"] == ["model.recompute_granularity=selective"]
    assert before["refused"][0].startswith("ConfigCompositionException: Could not override")


@pytest.mark.parametrize(
    ("case", "config"),
    [
        ("flagscale-megatron-lora-long-seq-oom-capacity", "config.yaml"),  # the config FlagScale printed
        ("flagscale-megatron-lora-llama31-8b-oom-seq8704-just-over-limit", "config.sh"),  # run.py + Hydra overrides
    ],
)
def test_a_flagscale_config_gets_its_fixes_as_flagscale_overrides(case, config):
    directory = HELD_OUT / case
    report = diagnose([str(directory / "job.log")], [str(directory / config)], policy=Policy())
    assert report.fix_dialect == FLAGSCALE
    lines = [line for finding in report.findings for line in finding.overrides]
    assert lines and all(line.startswith(("++train.", "~train.", "++experiment.envs.")) for line in lines), lines


def test_a_setting_the_config_sets_is_changed_where_it_sets_it(tmp_path):
    """FlagScale's runner merges train.system, then train.model, then train.data: a fix set in another section than
    the config's own would lose to it, or be passed twice. Where the config does not set it: train.system."""
    train = tmp_path / "8b.yaml"  # FlagScale's train config layout: conf/train/8b.yaml, mounted under `train`
    train.write_text(
        "system:\n  tensor_model_parallel_size: 1\n  precision:\n    bf16: true\n"
        "model:\n  num_layers: 36\n  micro_batch_size: 4\n  recompute_granularity: full\ndata:\n  data_path: /d\n"
    )
    values = explicit_config([str(train)], [])
    assert dialect_of(values) == FLAGSCALE
    places = flagscale_places(values)
    changes = [
        ("train.micro_batch_size", 2),
        ("model.recompute_granularity", "selective"),
        ("model.bf16", False),
        ("optimizer.optimizer_cpu_offload", True),
    ]
    assert render_changes(changes, FLAGSCALE, places=places) == [
        "++train.model.micro_batch_size=2",
        "++train.model.recompute_granularity=selective",
        "++train.system.precision.bf16=false",
        "++train.system.optimizer_cpu_offload=true",
    ]


def test_hydra_overrides_on_the_launch_line_place_the_fix(tmp_path):
    script = tmp_path / "launch.sh"
    script.write_text("python run.py --config-name=train_8b action=run train.data.micro_batch_size=4\n")
    values = explicit_config([str(script)], [])
    assert dialect_of(values) == FLAGSCALE
    assert render_changes([("train.micro_batch_size", 1)], FLAGSCALE, places=flagscale_places(values)) == [
        "++train.data.micro_batch_size=1"
    ]


def test_a_bridge_config_is_not_flagscales():
    """Bridge's sections (model, train, optimizer, ddp …) have no `system` and no `train.model`."""
    config = FIXTURES / "oom-partial-optimizer-offload-bridge" / "run_config.yaml"
    values = explicit_config([str(config)], [])
    assert dialect_of(values) == BRIDGE
    assert flagscale_places(values) == {}


def test_flagscales_environment_section_is_read_as_the_environment(tmp_path):
    """The runner exports `experiment.envs` on every node: an allocator setting there is the run's."""
    config = tmp_path / "experiment.yaml"
    config.write_text(
        "experiment:\n  envs:\n    PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\n"
        "train:\n  system:\n    tensor_model_parallel_size: 2\n"
    )
    store = build_store(explicit_config([str(config)], []))
    assert store.value("env.PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True"


@pytest.mark.parametrize(
    "value",
    ["expandable_segments:True", "garbage_collection_threshold:0.6,expandable_segments:True", "a b", 'say "x"', "it's"],
)
def test_an_environment_value_is_one_shell_word_and_reads_back(value):
    [line] = render_changes([("env.PYTORCH_CUDA_ALLOC_CONF", value)], FLAGSCALE)
    [word] = shlex.split(line)
    assert word.startswith("++experiment.envs.PYTORCH_CUDA_ALLOC_CONF=")
    assert parse_fix_line(line) == [("env.PYTORCH_CUDA_ALLOC_CONF", value)]


@given(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1).filter(lambda v: v == v.strip()))
def test_any_environment_value_is_one_shell_word_that_reads_back(value):
    [line] = render_changes([("env.NCCL_ALGO", value)], FLAGSCALE)
    assert len(shlex.split(line)) == 1
    assert parse_fix_line(line) == [("env.NCCL_ALGO", value)]


def test_environment_values_hydra_or_the_shell_would_misread_arrived_as_written():
    tool = _tool()
    block = _recorded_cases()["environment values with characters Hydra or the shell read as their own"]
    assert "changed" not in block
    printed = [render_changes([("env.NCCL_DEBUG_SUBSYS", value)], FLAGSCALE)[0] for value in tool.AWKWARD_VALUES]
    assert [line.rsplit(" -> ", 1)[0] for line in block["arrived"]] == printed


@pytest.mark.parametrize(
    "case",
    [
        "flagscale-megatron-lora-long-seq-oom-capacity",  # its arguments block has FlagScale's own arguments
        "flagscale-lora-llama8b-seq9728-oom-output-layer",  # no arguments block; its traceback runs flagscale/train/
    ],
)
def test_a_flagscale_log_alone_gets_flagscale_overrides_and_says_where_they_go(case):
    report = diagnose([str(HELD_OUT / case / "job.log")], policy=Policy())
    assert report.fix_dialect == FLAGSCALE
    assert all(line.startswith("++train.system.") for f in report.findings for line in f.overrides)
    assert report.notes[0].startswith("a FlagScale run: its fix lines set each setting in `train.system`")


def test_a_megatron_lm_log_is_not_flagscales():
    report = diagnose([str(FIXTURES / "pp-cpu-offload" / "job.log")], policy=Policy())
    assert report.fix_dialect == "megatron-lm"
    assert not any("FlagScale" in note for note in report.notes)


def test_b81s_fix_as_flagscale_prints_passes_megatron_lm_what_b85_trained_with(tmp_path):
    """Run b81 (one H100 under a 39,500 MiB limit) ran out of memory; its fix, printed for its settings in a FlagScale
    train config and composed by Hydra, passes Megatron-LM the micro-batch b85 trained with (30,740 MiB)."""
    tool = _tool()
    (tmp_path / "train").mkdir()
    block = _recorded_cases()["b81's out-of-memory log, its settings in a FlagScale train config"]
    assert tool.b81_fix_lines(tmp_path) == block["printed"] == ["++train.model.micro_batch_size=2"]
    composed = _arguments(block["arguments"][0])
    assert block["b85 ran"][0].startswith(f"--micro-batch-size {composed['--micro-batch-size'][0]} ")


def test_a_config_that_passes_the_offloading_switch_gets_it_turned_off_with_the_layer_count(tmp_path):
    """Megatron-LM turns activation offloading on from the layer count, so its fix sets the count alone; a FlagScale
    config that also sets `cpu_offloading: true` passes `--cpu-offloading`, which the count does not turn off."""
    train = tmp_path / "7b.yaml"
    train.write_text(
        "system:\n  pipeline_model_parallel_size: 2\n  cpu_offloading: true\n  cpu_offloading_num_layers: 2\n"
        "model:\n  num_layers: 32\n  transformer_impl: transformer_engine\ndata:\n  data_path: /d\n"
    )
    report = check([str(train)])
    [finding] = [f for f in report.violations if f.id == "pp-cpu-offload"]
    assert finding.overrides[:2] == [
        "++train.system.cpu_offloading_num_layers=0",
        "++train.system.cpu_offloading=false",
    ]


def test_check_refuses_recompute_in_a_flagscale_peft_config_and_not_in_a_bridge_one(tmp_path):
    """FlagScale's post_validate_args asserts recompute is unset when peft_type is set ("PEFT will raise comfilcts
    with recompute currently"); Megatron-Bridge has no such rule."""
    flagscale = tmp_path / "train.yaml"
    flagscale.write_text(
        "system:\n  recompute_granularity: full\n  recompute_method: uniform\n  recompute_num_layers: 1\n"
        "model:\n  num_layers: 32\n  peft_type: lora\ndata:\n  data_path: /d\n"
    )
    [finding] = [f for f in check([str(flagscale)]).violations if f.id == "flagscale-peft-recompute"]
    assert finding.overrides == [
        "~train.system.recompute_granularity",
        "++train.system.recompute_activations=false",
        "~train.system.recompute_method",
        "~train.system.recompute_num_layers",
    ]
    bridge = tmp_path / "bridge.yaml"
    bridge.write_text("model:\n  num_layers: 32\n  recompute_granularity: full\npeft:\n  dim: 16\n")
    assert "flagscale-peft-recompute" not in {f.id for f in check([str(bridge)]).violations}


def test_a_flagscale_fix_of_the_environment_alone_says_nothing_of_train_system():
    """The placement note is about `train.*` lines: a fix that only sets the runner's environment needs none."""
    from offloaddoctor.api import diagnose_text

    frame = 'Traceback (most recent call last):\n  File "/x/flagscale/train/train_gpt.py", line 10, in <module>\n'
    refusal = (
        "[rank0]: AssertionError: For fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 "
        "should be set to 1 to avoid offloading weights."
    )
    report = diagnose_text(frame + "    main()\n" + refusal)
    assert report.fix_dialect == FLAGSCALE
    assert [f.overrides for f in report.findings] == [["++experiment.envs.NVTE_CPU_OFFLOAD_V1=1"]]
    assert not any("FlagScale run" in note for note in report.notes)


@pytest.mark.parametrize(
    ("defaults", "wins"), [("[_self_, {train: 8b}]", 4), ("[{train: 8b}, _self_]", 1), ("[{train: 8b}]", 1)]
)
def test_an_experiment_config_reads_the_train_config_its_hydra_defaults_name(tmp_path, defaults, wins):
    """FlagScale's experiment config (conf/train_8b.yaml) takes its training settings from conf/train/8b.yaml through
    Hydra's defaults list; checked alone it passed on megatron-core's defaults. The group is mounted under `train`, and
    the file's own values win unless `_self_` comes before the group (Hydra's order)."""
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "8b.yaml").write_text(
        "system:\n  pipeline_model_parallel_size: 4\n  cpu_offloading_num_layers: 2\n"
        "model:\n  num_layers: 32\n  transformer_impl: transformer_engine\n"
    )
    experiment = tmp_path / "train_8b.yaml"
    experiment.write_text(
        f"defaults: {defaults}\ntrain:\n  system:\n    pipeline_model_parallel_size: 1\n"
        "experiment:\n  exp_name: e\n  runner:\n    nproc_per_node: 8\n"
    )
    store = build_store(explicit_config([str(experiment)], []))
    assert store.value("model.pipeline_model_parallel_size") == wins
    assert flagscale_places(store)["model.cpu_offloading_num_layers"] == "train.system.cpu_offloading_num_layers"
    violations = {f.id for f in check([str(experiment)]).violations}
    assert ("pp-cpu-offload" in violations) is (wins > 1)


def test_an_experiment_config_whose_train_config_is_not_beside_it_is_refused_in_one_line(tmp_path):
    from offloaddoctor.errors import UserError

    experiment = tmp_path / "train_8b.yaml"
    experiment.write_text("defaults:\n  - _self_\n  - train: 8b\nexperiment:\n  exp_name: e\n")
    with pytest.raises(UserError, match=r"its Hydra defaults take the training settings from train/8b\.yaml"):
        explicit_config([str(experiment)], [])


def test_the_job_geometry_of_flagscales_runner_gives_the_world_size(tmp_path):
    config = tmp_path / "experiment.yaml"
    config.write_text(
        "experiment:\n  runner:\n    nnodes: 2\n    nproc_per_node: 8\ntrain:\n  system:\n    tensor_model_parallel_size: 2\n"
    )
    assert build_store(explicit_config([str(config)], [])).value("parallel.run_world_size") == 16


def test_check_of_a_hydra_launch_says_the_config_it_names_was_not_given(tmp_path):
    """FlagScale's `python run.py --config-name X train.…=…` takes its settings from X: checked without it, the
    verdict stands on megatron-core's defaults, and the report says so."""
    launch = HELD_OUT / "flagscale-memrift-llama8b-seq10496-oom-cross-entropy" / "config.sh"
    [note] = check([str(launch)]).notes
    assert (
        "the launch takes its settings from Hydra's config 'train_llama31_8b_mock' (in examples/memrift/conf)" in note
    )
    named = tmp_path / "train_llama31_8b_mock.yaml"
    named.write_text("train:\n  system:\n    tensor_model_parallel_size: 1\n")
    assert check([str(launch), str(named)]).notes == []


def test_a_flagscale_lora_log_alone_is_not_offered_the_recompute_flagscale_refuses():
    """Its traceback runs FlagScale's training code and its LoRA adapter (flagscale/train/peft/lora.py): no config
    says so, but FlagScale's post_validate_args would refuse the template's recompute all the same."""
    log = HELD_OUT / "flagscale-memrift-lora-llama8b-64k-context-oom-metax" / "job.log"
    [finding] = diagnose([str(log)], policy=Policy()).findings
    assert finding.overrides == []
    assert "`++train.system.recompute_granularity=selective` left out: the run would stop" in finding.fix_note
    assert "its traceback runs" in finding.fix_note  # the adapter frame, cited as before


@pytest.mark.parametrize("key", ["model.recompute_granularity", "++train.system.recompute_granularity"])
def test_a_recompute_granularity_megatron_does_not_take_is_refused_in_one_line(key):
    """Megatron-LM takes full or selective (arguments.py choices); `sometimes` was read, matched no constraint, and
    `check` said "no violation"."""
    from offloaddoctor.errors import UserError

    with pytest.raises(UserError, match="takes one of full, selective, not 'sometimes'"):
        check([], [f"{key}=sometimes", "model.cpu_offloading=True"])
