from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.keys import canonical_key, legacy_setting
from offloaddoctor.config.printed import parse_printed
from offloaddoctor.config.loading import build_store, explicit_config, load_config_file
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.config.yaml_config import load_yaml_config
from offloaddoctor.errors import UserError

from tests.conftest import FIXTURES

BRIDGE = str(FIXTURES / "configs" / "bridge-run-config-optimizer-offload.yaml")
OVERRIDE = str(FIXTURES / "configs" / "bridge-override-pp2-activation-offload.yaml")
SCRIPT = str(FIXTURES / "configs" / "launch-megatron-lm.sh")


def test_every_spelling_maps_to_one_key():
    for spelling in ("optimizer_cpu_offload", "--optimizer-cpu-offload", "optimizer.optimizer_cpu_offload"):
        assert canonical_key(spelling) == "optimizer.optimizer_cpu_offload"
    assert canonical_key("ddp.use_distributed_optimizer") == "optimizer.use_distributed_optimizer"
    assert canonical_key("--use-nccl-ub") == "ddp.nccl_ub"
    assert canonical_key("+model.pipeline_model_parallel_size") == "model.pipeline_model_parallel_size"
    assert canonical_key("model_parallel.pipeline_model_parallel_size") == "model.pipeline_model_parallel_size"
    assert canonical_key("checkpoint.save_interval") == "checkpoint.save_interval"


def test_bridge_yaml_values_keep_file_and_line():
    store = build_store(load_yaml_config(BRIDGE))
    fraction = store.resolve("optimizer.optimizer_offload_fraction")
    assert fraction.value == 0.5
    assert str(fraction.source) == f"{BRIDGE}:348"
    assert store.resolve("model.cpu_offloading").value is False
    assert store.resolve("model.autocast_dtype._target_").value == "torch.bfloat16"
    assert store.resolve("model.virtual_pipeline_model_parallel_size").value is None


def test_override_file_then_set_precedence_and_disagreements():
    values = explicit_config([BRIDGE, OVERRIDE], ["model.pipeline_model_parallel_size=4"])
    store = build_store(values)
    pp = store.resolve("model.pipeline_model_parallel_size")
    assert pp.value == 4 and pp.origin == "set"
    assert {str(v.value) for v in pp.overridden} == {"1", "2"}
    assert store.resolve("model.cpu_offloading").value is True
    assert str(store.resolve("model.cpu_offloading").source) == f"{OVERRIDE}:4"


def test_explicit_config_beats_the_log_and_the_disagreement_is_noted():
    collector = LogConfigCollector("job.log")
    for number, line in enumerate(
        [
            "------------------------ arguments ------------------------",
            "  pipeline_model_parallel_size .................... 2",
            "-------------------- end of arguments ---------------------",
        ],
        start=1,
    ):
        collector.feed(line, number)
    store = build_store(collector.values, parse_overrides(["model.pipeline_model_parallel_size=1"]))
    assert store.resolve("model.pipeline_model_parallel_size").value == 1
    notes = store.disagreements()
    assert len(notes) == 1 and "job.log:2 (arguments block)" in notes[0]


def test_launch_script_flags_and_exports():
    store = build_store(load_config_file(SCRIPT))
    assert store.resolve("model.pipeline_model_parallel_size").value == 4
    assert store.resolve("optimizer.optimizer_cpu_offload").value is True
    assert store.resolve("optimizer.use_distributed_optimizer").value is True
    assert store.resolve("allocator.expandable_segments").value is True
    assert store.resolve("env.NCCL_GRAPH_REGISTER").value == "0"
    assert store.resolve("model.layers_per_pipeline_rank").value == 8
    assert str(store.resolve("optimizer.optimizer_offload_fraction").source) == f"{SCRIPT}:13 (command line)"


@pytest.mark.parametrize("prefix", ["", "env "])
def test_assignments_before_a_launch_command_are_its_environment(tmp_path, prefix):
    script = tmp_path / "launch.sh"
    script.write_text(
        f"{prefix}PYTORCH_CUDA_ALLOC_CONF='garbage_collection_threshold:0.9' NCCL_DEBUG=INFO torchrun "
        "--nproc-per-node 2 pretrain_gpt.py --micro-batch-size 2 TAIL=1 model.seed=3\n"
    )
    store = build_store(load_config_file(str(script)))
    assert store.resolve("env.PYTORCH_CUDA_ALLOC_CONF").value == "garbage_collection_threshold:0.9"
    assert str(store.resolve("env.PYTORCH_CUDA_ALLOC_CONF").source) == f"{script}:1 (environment)"
    assert store.resolve("env.NCCL_DEBUG").value == "INFO"
    assert store.resolve("allocator.expandable_segments").value is False
    assert store.resolve("train.micro_batch_size").value == 2
    assert store.resolve("env.TAIL") is None  # after the command word: an argument, not the environment
    assert store.resolve("model.seed").value == 3


def test_megatron_lm_turns_offloading_on_from_the_layer_count_but_zero_is_not_on():
    on = build_store(parse_overrides(["cpu_offloading_num_layers=2"]))
    assert on.resolve("model.cpu_offloading").value is True
    assert "derived from" in str(on.resolve("model.cpu_offloading").source)
    off = build_store(parse_overrides(["activation_offload_layers=0"]))
    assert off.resolve("model.cpu_offloading") is None  # Bridge bug #2992: 0 must not mean "on"
    explicit = build_store(parse_overrides(["cpu_offloading_num_layers=2", "model.cpu_offloading=false"]))
    assert explicit.resolve("model.cpu_offloading").value is False


def _launch_store(tmp_path, flags: str):
    script = tmp_path / "launch.sh"
    script.write_text(f"torchrun pretrain_gpt.py --num-layers 24 --pipeline-model-parallel-size 2 {flags}\n")
    return build_store(load_config_file(str(script)))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("--num-layers-per-virtual-pipeline-stage 6", 2),  # 24 layers / PP 2 = 12 a stage, 6 a chunk
        ("--num-layers-per-virtual-pipeline-stage 4", 3),
        ("--num-layers-per-virtual-pipeline-stage 12", None),  # one chunk a stage: Megatron-LM sets None
        ("--num-layers-per-virtual-pipeline-stage 5", None),  # uneven: Megatron-LM's own assertion rejects it
        ("--num-virtual-stages-per-pipeline-rank 3", 3),
    ],
)
def test_megatron_lm_vpp_flags_set_the_virtual_pipeline_size_as_validate_args_does(tmp_path, flags, expected):
    vpp = _launch_store(tmp_path, flags).resolve("model.virtual_pipeline_model_parallel_size")
    assert (vpp.value if vpp else None) == expected


def test_a_derived_vpp_names_the_flag_it_comes_from_and_never_replaces_a_given_one(tmp_path):
    derived = _launch_store(tmp_path, "--num-layers-per-virtual-pipeline-stage 6")
    source = str(derived.resolve("model.virtual_pipeline_model_parallel_size").source)
    assert "derived from model.num_layers_per_virtual_pipeline_stage=6" in source
    given = build_store(
        load_config_file(str(tmp_path / "launch.sh")), parse_overrides(["model.virtual_pipeline_model_parallel_size=4"])
    )
    assert given.resolve("model.virtual_pipeline_model_parallel_size").value == 4


def test_log_lines_that_carry_config():
    collector = LogConfigCollector("job.log")
    lines = [
        "+ export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        "torchrun --nproc-per-node 8 pretrain_gpt.py --pipeline-model-parallel-size 4 --cpu-offloading-num-layers=2",
        "uv run python scripts/training/run_recipe.py --recipe qwen3 optimizer.optimizer_cpu_offload=True optimizer.optimizer_offload_fraction=0.5",
        "INFO:megatron.core.optimizer:Setting up optimizer with config OptimizerConfig(lr=0.0001, optimizer='adam', "
        "use_distributed_optimizer=True, optimizer_cpu_offload=True, optimizer_offload_fraction=0.5, timers=<x.Timers object at 0x7f>, config_logger_dir='')",
        "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        "UserWarning: Transformer Engine and Apex are not installed. Falling back to Torch optimizers.",
    ]
    for number, line in enumerate(lines, start=1):
        collector.feed(line, number)
    by_key = {}
    for value in collector.values:
        by_key.setdefault(value.key, []).append((value.value, value.source.line))
    assert by_key["env.PYTORCH_CUDA_ALLOC_CONF"] == [("expandable_segments:True", 1)]  # not line 5's advice
    assert by_key["model.pipeline_model_parallel_size"] == [(4, 2)]
    assert by_key["model.cpu_offloading_num_layers"] == [(2, 2)]
    assert by_key["optimizer.optimizer_offload_fraction"] == [(0.5, 3), (0.5, 4)]
    assert by_key["optimizer.optimizer"] == [("adam", 4)]
    assert by_key["runtime.te_fused_adam_available"] == [(False, 6)]


def test_a_second_arguments_block_starts_a_new_segment():
    collector = LogConfigCollector("job.log")
    block = [
        "------------------------ arguments ------------------------",
        "  optimizer_cpu_offload ........................... {}",
        "-------------------- end of arguments ---------------------",
    ]
    for number, line in enumerate(
        [*block[:1], block[1].format(False), block[2], "restart", block[0], block[1].format(True), block[2]], start=1
    ):
        collector.feed(line, number)
    assert collector.segment == 1
    assert [v.value for v in collector.segment_values(0)] == [False]
    assert [v.value for v in collector.segment_values(1)] == [True]


def test_an_arguments_block_of_a_megatron_lm_before_2022_reads_checkpoint_activations_as_full_recompute():
    """Megatron-LM#92 (held-out batch 5): a 2021 block, its first line pasted behind Markdown's quote marker, with
    `checkpoint_activations True`. Unread, the report printed Bridge overrides for a Megatron-LM run and offered
    selective recompute to a run that recomputed every layer."""
    collector = LogConfigCollector("job.log")
    for number, line in enumerate(
        [
            "> ------------------------ arguments ------------------------",
            "  checkpoint_activations .......................... True",
            "  data_parallel_size .............................. 1",
            "-------------------- end of arguments ---------------------",
            "python pretrain_gpt.py --checkpoint-activations",
            "python pretrain_gpt.py --checkpoint_activations false",
        ],
        start=1,
    ):
        collector.feed(line, number)
    read = [(v.key, v.value, v.source.line) for v in collector.values if v.key == "model.recompute_granularity"]
    assert read == [("model.recompute_granularity", "full", 2), ("model.recompute_granularity", "full", 5)] + [
        ("model.recompute_granularity", None, 6)
    ]
    assert "checkpoint_activations (Megatron-LM before 2022)" in collector.values[0].source.detail
    assert legacy_setting("checkpoint_activations", "yes") is None  # a value it never took: read as printed


def test_yaml_tags_are_read_as_data_never_executed(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text(
        "model:\n  init: !!python/object/apply:os.system ['touch pwned']\n  hook: !!python/name:os.system\n"
    )
    store = build_store(load_yaml_config(str(path)))
    assert store.resolve("model.init").value == ["touch pwned"]
    assert store.resolve("model.hook").value == "!!python/name:os.system"
    assert not (tmp_path / "pwned").exists()


def test_alias_bomb_is_bounded(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
        for i in range(1, 9)
    ]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match="alias bomb"):
        load_yaml_config(str(path))


@pytest.mark.parametrize(
    "text,message",
    [
        ("model: [unclosed\n", "invalid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("", "config is empty"),
    ],
)
def test_bad_yaml_is_one_clear_line(tmp_path, text, message):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as caught:
        load_yaml_config(str(path))
    assert "\n" not in str(caught.value)


def test_duplicate_keys_are_an_error_as_in_omegaconf(tmp_path):
    # Bridge loads configs with OmegaConf, which refuses duplicate keys; PyYAML would silently keep the last.
    path = tmp_path / "dup.yaml"
    path.write_text("model:\n  pipeline_model_parallel_size: 2\n  pipeline_model_parallel_size: 4\n")
    with pytest.raises(
        UserError, match=r"dup.yaml:3: duplicate key 'pipeline_model_parallel_size' \(first at line 2\)"
    ):
        load_yaml_config(str(path))


@pytest.mark.parametrize("item", ["no-equals-sign", "=5", "a b=1"])
def test_bad_overrides(item):
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        parse_overrides([item])


def test_override_values_are_typed_like_hydra():
    values = {
        v.key: v.value
        for v in parse_overrides(
            [
                "a.b=True",
                "a.c=null",
                "a.d=0.5",
                "a.e=[1,2]",
                "a.f=none",
                "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ]
        )
    }
    assert values == {
        "a.b": True,
        "a.c": None,
        "a.d": 0.5,
        "a.e": [1, 2],
        "a.f": None,
        "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }


@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=5),
    )
)
def test_printed_python_values_parse_back(value):
    assert parse_printed(repr(value)) == value


@given(st.text(max_size=200))
def test_printed_parser_never_raises(text):
    parse_printed(text)


_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n not in ("y", "n", "on", "off", "yes", "no", "null", "true", "false")
)
_LEAF = st.one_of(
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.none(),
    st.text(alphabet="abc xyz:=,", max_size=12),
    st.floats(-1e6, 1e6, allow_nan=False),
)
_TREE = st.recursive(
    st.dictionaries(_NAME, _LEAF, min_size=1, max_size=4),
    lambda inner: st.dictionaries(_NAME, inner, min_size=1, max_size=3),
    max_leaves=12,
)


def _leaves(tree, prefix=""):
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _leaves(value, dotted)
        else:
            yield dotted, value


@given(_TREE)
def test_generated_yaml_configs_load_every_leaf_with_its_line(tmp_path_factory, tree):
    import yaml

    path = tmp_path_factory.mktemp("cfg") / "generated.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    loaded = {(v.source.path, v.key): v for v in load_yaml_config(str(path))}
    lines = path.read_text().splitlines()
    for dotted, value in _leaves(tree):
        entry = loaded[(str(path), canonical_key(dotted))]
        assert entry.value == value
        assert dotted.rsplit(".", 1)[-1] in lines[entry.source.line - 1]


@given(st.text(max_size=60))
def test_overrides_parse_or_refuse_in_one_line(item):
    try:
        values = parse_overrides([item])
    except UserError as exc:
        # "expected KEY=VALUE", or for a key with an empty part between dots "expected e.g. a.b=c"
        assert str(exc).startswith("--set ") and "expected" in str(exc)
        assert "\n" not in str(exc).replace(repr(item), "")
    else:
        assert len(values) == 1 and values[0].origin == "set"


@given(_NAME, st.one_of(st.integers(-(10**9), 10**9), st.booleans(), st.floats(-1e6, 1e6, allow_nan=False)))
def test_override_scalars_round_trip(name, value):
    text = str(value).lower() if isinstance(value, bool) else repr(value)
    (parsed,) = parse_overrides([f"optimizer.{name}={text}"])
    assert parsed.value == value


_PLAIN_WORD = st.sampled_from(
    ["core_attn", "selective", "full", "uniform", "yes", "No", "on", "OFF", "y", "_x", "TRUE"]
)
_PLAIN_NUMBER = st.from_regex(r"[-+]?(0|[1-9][0-9]{0,5})(\.[0-9]{1,4})?", fullmatch=True)
_PLAIN_SCALAR = st.one_of(_PLAIN_WORD, _PLAIN_NUMBER)


@given(
    st.one_of(
        _PLAIN_SCALAR,
        st.lists(_PLAIN_SCALAR, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(_PLAIN_SCALAR, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
    )
)
def test_plain_override_values_read_as_yaml_reads_them(text):
    """Plain override values (numbers, bare words, flow lists of them) are read without PyYAML, which costs
    start-up on diagnose's road (dialect's fix lines are parsed back on every report): the same value as YAML's."""
    import yaml

    from offloaddoctor.config.printed import parse_override

    expected = yaml.safe_load(text)
    if isinstance(expected, str) and expected.lower() in ("true", "false", "none", "null"):
        return  # parse_override's own words (`None` is None), as before
    value = parse_override(text)
    assert repr(value) == repr(expected)  # types too: 1 and 1.0, True and 1


def test_a_plain_number_past_the_int_digit_limit_stays_text():
    """The plain-value road (no PyYAML) reads numbers as YAML would, and past Python's 4,300-digit int() limit
    gives the text back as the YAML road does (issue 27.6): never a ValueError."""
    from offloaddoctor.config.printed import parse_override

    huge = "7" * 5000
    assert parse_override(huge) == huge
    assert parse_override(f"[1, {huge}]") == f"[1, {huge}]"
    assert parse_override("9" * 45) == int("9" * 45)


def test_the_tokenizers_vocabulary_is_read_where_the_arguments_block_says_none_and_tells_no_dialect():
    """A GPT-2 BPE run's block says `vocab_size None`; the tokenizer build prints what it gave (held-out
    megatron-legacy-gpt2-mbs10: without it the memory model had no vocabulary, and its OOM got the optimizer's lines)."""
    from offloaddoctor.config.dialect import BRIDGE, MEGATRON_LM, dialect_of

    padded = " > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)"
    block = [
        "------------------------ arguments ------------------------",
        "  vocab_size ..... {}",
        "-- end of arguments --",
    ]
    for printed, expected in (("None", 50257), ("32000", 32000)):
        collector = LogConfigCollector("job.log")
        lines = [
            block[0],
            block[1].format(printed),
            "-------------------- end of arguments ---------------------",
            padded,
        ]
        for number, line in enumerate(lines, start=1):
            collector.feed(line, number)
        assert build_store(collector.values).resolve("model.vocab_size").value == expected
    alone = LogConfigCollector("job.log")
    alone.feed("INFO:megatron.core.tokenizers.utils.build_tokenizer:" + padded, 1)
    assert [v.value for v in alone.values] == [50257]
    assert dialect_of(alone.values, MEGATRON_LM) == MEGATRON_LM and dialect_of(alone.values) == BRIDGE  # the fallback


def test_a_list_of_overrides_given_as_the_config_is_refused_naming_what_it_is(tmp_path):
    """Held-out Pai-Megatron-Patch run (batch 5): its config.yaml is Hydra's overrides.yaml, a list of KEY=VALUE."""
    listed = tmp_path / "overrides.yaml"
    listed.write_text(
        "- algorithm.adv_estimator=grpo\n- actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2\n"
    )
    with pytest.raises(UserError, match=r"top level; this is a list of KEY=VALUE overrides \(Hydra's overrides.yaml\)"):
        load_yaml_config(str(listed))
    numbers = tmp_path / "numbers.yaml"
    numbers.write_text("- 1\n- 2\n")
    with pytest.raises(UserError, match=r"at the top level$"):
        load_yaml_config(str(numbers))


@pytest.mark.parametrize("operator", ["2>&1", "> train.log", "| tee train.log", "&& echo done", "; echo done"])
def test_a_flag_before_a_shell_operator_takes_no_value_from_it(tmp_path, operator):
    """held-out megatron-deepspeed-v100-tp4-zero0-optimizer-state-oom: `--deepspeed 2>&1` read `deepspeed` as "2>&1",
    which then won over the arguments block's True (and the DeepSpeed run got Megatron-Core's optimizer flags)."""
    script = tmp_path / "launch.sh"
    script.write_text(f"torchrun pretrain_gpt.py --num-layers 8 --deepspeed {operator}\n")
    store = build_store(load_config_file(script))
    assert store.resolve("deepspeed").value is True and store.resolve("model.num_layers").value == 8


def test_numbers_equal_as_numbers_are_the_same_value():
    """`0` on a command line and `0.0` in the arguments block are one value (no disagreement note); a fix line that
    sets 1 where the log says 1.0 is in effect already."""
    from offloaddoctor.config.values import same_value

    assert same_value(0, 0.0) and same_value(1, 1.0) and not same_value(1, 1.5)
    assert not same_value(True, 1) and same_value(True, "true")
