"""The run as the memory model sees it: model shape, parallel layout, precision and optimizer settings,
read from the config store (Bridge YAML, overrides, Megatron-LM flags, the arguments block of a log).

Every value keeps where it came from; a value the model had to assume is listed in `assumptions`; a value it
cannot do without is named in `MissingKeys`.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import NamedTuple

from offloaddoctor.coerce import boolean, is_none, names, number
from offloaddoctor.config.dialect import BRIDGE, dialect_of, set_by_megatron_flags
from offloaddoctor.config.keys import VALUE_CHOICES
from offloaddoctor.config.values import ConfigStore
from offloaddoctor.errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

REQUIRED = (
    "model.num_layers",
    "model.hidden_size",
    "model.num_attention_heads",
    "model.seq_length",
    "train.micro_batch_size",
    "model.vocab_size",
)


class MissingKeys(UserError):
    """Keys the memory model needs and cannot default; the message says how to give them with `--set`."""

    def __init__(self, keys: list[str]):
        self.keys = keys
        super().__init__(
            f"the memory estimate needs {', '.join(keys)} (not found in the config; pass it with --set {keys[0]}=VALUE)"
        )


class RunShape(NamedTuple):
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int
    micro_batch_size: int
    vocab_size: int  # as configured; padded in `padded_vocab_size`
    global_batch_size: int | None = None
    num_query_groups: int | None = None
    kv_channels: int | None = None
    ffn_hidden_size: int | None = None
    gated_linear_unit: bool = False
    normalization: str = "LayerNorm"
    add_bias_linear: bool = True
    tied_embeddings: bool = True
    learned_position_embeddings: bool = True
    rotary_position_embeddings: bool = False
    max_position_embeddings: int | None = None
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    make_vocab_size_divisible_by: int = 128
    # Mixture of experts (weights, gradients, optimizer state; activations of the routed tokens).
    num_experts: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_router_topk: int = 2
    moe_shared_expert_intermediate_size: int | None = None
    expert_model_parallel_size: int = 1
    expert_tensor_parallel_size: int | None = None
    moe_router_pre_softmax: bool = False
    moe_token_dispatcher_type: str = "allgather"  # Megatron-LM's default (megatron-core 0.19.0)
    moe_expert_capacity_factor: float | None = None  # None: dropless (Megatron reads a negative one so too)
    moe_pad_expert_input_to_capacity: bool = False
    # A fused activation takes the router's probabilities inside its kernel; only gated ones can (mlp.py).
    bias_activation_fusion: bool = True
    # Parallel layout.
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    virtual_pipeline: int | None = None
    first_stage_layers: int | None = None  # uneven pipeline split (num_layers_in_first/last_pipeline_stage)
    last_stage_layers: int | None = None
    context_parallel: int = 1
    sequence_parallel: bool = False
    data_parallel: int = 1
    # Precision and implementation.
    precision: str = "bf16"  # bf16, fp16 or fp32
    grad_reduce_in_fp32: bool = True
    flash_attention: bool = False  # TE/flash: attention scores never materialised
    te_fused_adam: bool = False  # False: torch's foreach Adam, which takes a temporary of the state's size
    # Optimizer.
    distributed_optimizer: bool = False
    optimizer_cpu_offload: bool = False
    # Gradients handed to the optimizer as the DDP buffer's shard (decoupled_grad), not as an fp32 copy: Megatron-LM
    # requires it with optimizer offloading (validate_args), megatron-core and Bridge take offloading without it.
    precision_aware_optimizer: bool = False
    optimizer_offload_fraction: float = 0.0
    offload_optimizer_states: bool = False
    clip_grad: float = 1.0  # gradient clipping's norm (0: off)
    manual_gc: bool = False  # Megatron-LM --manual-gc / Bridge train.manual_gc: gc.collect() before training
    # Data-loader workers (--num-workers / dataset.num_workers; Megatron-LM's default 2, Bridge's 8): forked by the ranks
    # that load data (tensor-parallel rank 0 of the first and last stages), they keep the parent's pages as they were.
    data_loader_workers: int = 2
    # When they fork (Megatron-LM and Bridge build_train_valid_test_data_iterators): a cyclic or batch training loader's
    # at the first step, after Megatron's collection; a cyclic validation loader's (Bridge's for any GPT dataset) at
    # the first evaluation, once Adam's moments exist.
    training_loader_forks_late: bool = False
    training_loader_reforks: bool = False  # ... and again at each pass over its data (workers not persistent: Bridge's)
    validation_forks_in_training: bool = False
    omp_threads_set: bool = False  # OMP_NUM_THREADS given: torchrun keeps it (its default is 1 a process)
    expandable_segments: bool = False  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, as far as the config says
    transformer_impl: str | None = None  # "local" or "transformer_engine"; None when the config does not say
    master_param_bytes: int = 4
    exp_avg_bytes: int = 4
    exp_avg_sq_bytes: int = 4
    # Activation memory savers.
    recompute_granularity: str | None = None  # None, "selective" or "full"
    recompute_method: str | None = None
    recompute_num_layers: int | None = None
    recompute_modules: tuple[str, ...] = ("core_attn",)
    cpu_offloading_num_layers: int = 0
    # The share of the parameters that train (a LoRA run's adapters): only those have gradients and optimizer state.
    # 1 unless a log's gradient buckets say most are frozen (metrics/parameter_lines.py trainable_share).
    trained_share: float = 1.0
    # What was assumed and where each value came from: the last two fields, left out of == and hash (two reads
    # of one run are one shape).
    assumptions: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()  # (key, where it came from)

    def __eq__(self, other: object) -> bool:
        return self[:-2] == other[:-2] if type(other) is RunShape else NotImplemented

    def __ne__(self, other: object) -> bool:
        return self[:-2] != other[:-2] if type(other) is RunShape else NotImplemented

    def __hash__(self) -> int:
        return hash(self[:-2])

    @property
    def heads_kv(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def padded_vocab_size(self) -> int:
        multiple = self.make_vocab_size_divisible_by * self.tensor_parallel
        return int(math.ceil(self.vocab_size / multiple) * multiple)

    @property
    def world_size(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel * self.context_parallel

    @property
    def expert_grid_divides_world(self) -> bool:
        """Megatron refuses a MoE run whose expert TP x EP x PP does not divide the world size ("world_size (4) is
        not divisible by expert_tensor_model_pipeline_parallel size (8)": megatron-core 0.19.0 parallel_state.py
        initialize_model_parallel; expert TP defaults to TP)."""
        expert_tp = self.expert_tensor_parallel_size or self.tensor_parallel
        return self.world_size % (expert_tp * self.expert_model_parallel_size * self.pipeline_parallel) == 0

    @property
    def num_microbatches(self) -> int | None:
        if not self.global_batch_size:
            return None
        return max(1, self.global_batch_size // (self.micro_batch_size * self.data_parallel))

    @property
    def tokens_per_rank(self) -> int | None:
        """Tokens a data-parallel rank steps over (global batch x sequence / DP); None when the batch is not known."""
        return self.global_batch_size * self.seq_length // self.data_parallel if self.global_batch_size else None

    @property
    def optimizer_shards(self) -> int:
        """Ranks the distributed optimizer shards the dense optimizer state over (DP x CP)."""
        return self.data_parallel * self.context_parallel if self.distributed_optimizer else 1

    @property
    def gpu_offload_fraction(self) -> float:
        return min(1.0, max(0.0, self.optimizer_offload_fraction)) if self.optimizer_cpu_offload else 0.0

    @property
    def routed_token_share(self) -> float:
        """The routed tokens a rank's experts process over top-k x its tokens (their share when the router
        balances them). With a capacity factor c each expert takes at most c x its balanced share from each rank
        (moe_utils.py `get_capacity`, `apply_router_token_dropping`), and padded to capacity exactly that, or
        every token when c x top-k / experts is over 1 (the capacity mask is then all ones)."""
        c = self.moe_expert_capacity_factor
        if not self.num_experts or c is None:
            return 1.0
        if self.padded_to_capacity:
            return min(c, self.num_experts / self.moe_router_topk)
        return min(1.0, c)

    @property
    def padded_to_capacity(self) -> bool:
        """Every expert's tokens padded to its capacity: the routed tensors' sizes are the same every step."""
        padded = self.moe_pad_expert_input_to_capacity
        return bool(self.num_experts and padded and self.moe_expert_capacity_factor is not None)

    def with_changes(self, **changes: Any) -> RunShape:
        return self._replace(**changes)


# What the model divides by: 0 (from a config, --set or a log's arguments) would raise ZeroDivisionError.
_DIVISORS = frozenset(
    (
        "model.num_attention_heads",
        "model.num_query_groups",
        "model.hidden_size",  # selective recompute's cost is read by sequence / hidden (advice/slowdown.py)
        "model.tensor_model_parallel_size",
        "model.pipeline_model_parallel_size",
        "model.context_parallel_size",
        "model.expert_model_parallel_size",
        "model.expert_tensor_parallel_size",
        "model.make_vocab_size_divisible_by",
        "train.micro_batch_size",
    )
)


def read_shape(store: ConfigStore, world_size: int | None = None) -> RunShape:
    """The run's shape from every config the store holds; `world_size` (GPUs) overrides what the run says."""
    reader = _Reader(store)
    missing = [key for key in REQUIRED if reader.value(key) is None]
    if missing:
        raise MissingKeys(missing)
    precision = _precision(reader)
    tp = reader.integer("model.tensor_model_parallel_size", 1)
    pp = reader.integer("model.pipeline_model_parallel_size", 1)
    cp = reader.integer("model.context_parallel_size", 1)
    dp = _data_parallel(reader, tp * pp * cp, world_size)
    groups = reader.integer("model.num_query_groups", None)
    if reader.flag("group_query_attention") is False:
        groups = None  # Megatron-LM prints num_query_groups even when GQA is off
    impl = reader.choice("model.transformer_impl") or "transformer_engine"
    if reader.value("model.transformer_impl") is None:
        reader.assume("model.transformer_impl: transformer_engine (Megatron's default): flash attention, TE FusedAdam")
    flash = impl != "local"
    if reader.choice("model.cuda_graph_impl") in ("local", "transformer_engine") or reader.flag(
        "model.enable_cuda_graph"
    ):
        reader.assume(
            "CUDA graphs' memory pools are not counted: with megatron-core's own graphs a 0.1B GPT peaked 1 % under "
            "to 11 % over the estimate (fixtures/memory-calibration b51, b58 at TP 2, b59, b63)"
        )
    fused_adam = reader.flag("runtime.te_fused_adam_available")
    distributed = bool(reader.flag("optimizer.use_distributed_optimizer"))
    tied = reader.flag("model.share_embeddings_and_output_weights")
    untie = reader.flag("untie_embeddings_and_output_weights")
    grad_fp32 = reader.flag("ddp.grad_reduce_in_fp32")
    if reader.flag("grad_reduce_in_bf16") and precision == "bf16":
        grad_fp32 = False  # Megatron-LM's --grad-reduce-in-bf16 wins over --accumulate-allreduce-grads-in-fp32
    if grad_fp32 is None:
        grad_fp32 = precision != "fp16"
        reader.assume(
            f"gradients reduced in {'fp32' if grad_fp32 else precision} (Megatron-LM's rule for "
            f"{precision}; set ddp.grad_reduce_in_fp32 to say otherwise)"
        )
    bias = reader.flag("model.add_bias_linear")
    if reader.flag("disable_bias_linear"):
        bias = False
    position = str(reader.value("model.position_embedding_type") or "learned_absolute")
    shape = RunShape(
        num_layers=reader.integer("model.num_layers"),
        hidden_size=reader.integer("model.hidden_size"),
        num_attention_heads=reader.integer("model.num_attention_heads"),
        seq_length=reader.integer("model.seq_length"),
        micro_batch_size=reader.integer("train.micro_batch_size"),
        vocab_size=reader.integer("model.vocab_size"),
        global_batch_size=reader.integer("train.global_batch_size", None),
        num_query_groups=groups,
        kv_channels=reader.integer("model.kv_channels", None),
        ffn_hidden_size=reader.integer("model.ffn_hidden_size", None),
        gated_linear_unit=bool(reader.flag("model.gated_linear_unit")),
        normalization=str(reader.value("model.normalization") or "LayerNorm").strip("'\""),
        add_bias_linear=True if bias is None else bias,
        tied_embeddings=not untie if tied is None else tied,
        learned_position_embeddings=position.strip("'\"") == "learned_absolute",
        rotary_position_embeddings=position.strip("'\"") in ("rope", "mrope"),
        max_position_embeddings=reader.integer("model.max_position_embeddings", None),
        hidden_dropout=reader.real("model.hidden_dropout", 0.1),
        attention_dropout=reader.real("model.attention_dropout", 0.1),
        make_vocab_size_divisible_by=reader.integer("model.make_vocab_size_divisible_by", 128),
        num_experts=reader.integer("model.num_moe_experts", None),
        moe_ffn_hidden_size=reader.integer("model.moe_ffn_hidden_size", None),
        moe_router_topk=reader.integer("model.moe_router_topk", 2),
        moe_shared_expert_intermediate_size=reader.integer("model.moe_shared_expert_intermediate_size", None),
        expert_model_parallel_size=reader.integer("model.expert_model_parallel_size", 1),
        expert_tensor_parallel_size=reader.integer("model.expert_tensor_parallel_size", None),
        moe_router_pre_softmax=bool(reader.flag("model.moe_router_pre_softmax")),
        moe_token_dispatcher_type=str(reader.value("model.moe_token_dispatcher_type") or "allgather").strip("'\""),
        moe_expert_capacity_factor=_capacity_factor(reader),
        moe_pad_expert_input_to_capacity=bool(reader.flag("model.moe_pad_expert_input_to_capacity")),
        bias_activation_fusion=_bias_activation_fusion(reader),
        tensor_parallel=tp,
        pipeline_parallel=pp,
        virtual_pipeline=reader.integer("model.virtual_pipeline_model_parallel_size", None),
        first_stage_layers=reader.integer("model.num_layers_in_first_pipeline_stage", None),
        last_stage_layers=reader.integer("model.num_layers_in_last_pipeline_stage", None),
        context_parallel=cp,
        sequence_parallel=bool(reader.flag("model.sequence_parallel")),
        data_parallel=dp,
        precision=precision,
        grad_reduce_in_fp32=grad_fp32,
        flash_attention=flash,
        te_fused_adam=flash if fused_adam is None else fused_adam,
        distributed_optimizer=distributed,
        optimizer_cpu_offload=bool(reader.flag("optimizer.optimizer_cpu_offload")),
        precision_aware_optimizer=bool(reader.flag("optimizer.use_precision_aware_optimizer")),
        optimizer_offload_fraction=reader.real("optimizer.optimizer_offload_fraction", 0.0),
        offload_optimizer_states=bool(reader.flag("optimizer.offload_optimizer_states")),
        clip_grad=reader.real("optimizer.clip_grad", 1.0),
        manual_gc=bool(reader.flag("train.manual_gc")),
        trained_share=_trained_share(reader.value("runtime.trained_parameter_share")),
        data_loader_workers=_data_loader_workers(reader),
        omp_threads_set=reader.value("env.OMP_NUM_THREADS") is not None,
        expandable_segments=bool(reader.flag("allocator.expandable_segments")),
        transformer_impl=impl,
        master_param_bytes=_dtype_bytes(reader.value("optimizer.main_params_dtype"), 4),
        exp_avg_bytes=_dtype_bytes(reader.value("optimizer.exp_avg_dtype"), 4),
        exp_avg_sq_bytes=_dtype_bytes(reader.value("optimizer.exp_avg_sq_dtype"), 4),
        recompute_granularity=_none_or_text(reader.value("model.recompute_granularity")),
        recompute_method=_none_or_text(reader.value("model.recompute_method")),
        recompute_num_layers=reader.integer("model.recompute_num_layers", None),
        recompute_modules=_modules(reader.value("model.recompute_modules")),
        cpu_offloading_num_layers=_offloaded_layers(reader),
    )
    forks = _loader_forks(reader)
    shape = shape._replace(
        training_loader_forks_late=forks.training_late,
        training_loader_reforks=forks.training_again,
        validation_forks_in_training=forks.validation_in_training,
    )
    if shape.num_experts and (
        impl != "local" or reader.flag("model.moe_grouped_gemm") or reader.flag("model.moe_permute_fusion")
    ):
        reader.assume(
            "MoE activations as megatron-core 0.19.0 saves them with local experts (SequentialMLP, unfused "
            "permutation), measured on H100s; Transformer Engine's grouped GEMM and permute fusion were not measured"
        )
    if reader.flag("model.fine_grained_activation_offloading"):
        reader.assume(
            "fine-grained activation offloading is not modelled: the offloaded modules' inputs are counted as kept "
            "on the GPU, an upper bound (it needs Transformer Engine, which the recorded runs had not)"
        )
    if shape.global_batch_size is None and shape.pipeline_parallel > 1:
        reader.assume(
            f"global batch size unknown: {shape.pipeline_parallel} micro-batches in flight on the first "
            "pipeline stage (the most 1F1B holds)"
        )
    return shape._replace(assumptions=tuple(reader.assumptions), sources=tuple(reader.sources.items()))


def _data_loader_workers(reader: _Reader) -> int:
    """The workers a data-loading rank forks: read where the host figure needs it (optimizer offloading). Bridge's
    default is 8 (DataloaderConfig.num_workers), and its log does not print it."""
    if not reader.flag("optimizer.optimizer_cpu_offload"):
        return 2
    workers = reader.integer("dataset.num_workers", None)
    if workers is None and reader.bridge:
        reader.assume("dataset.num_workers: 8, Bridge's default (its log does not print it)")
        return 8
    return 2 if workers is None else workers


class _LoaderForks(NamedTuple):
    training_late: bool = False
    training_again: bool = False
    validation_in_training: bool = False


def _loader_forks(reader: _Reader) -> _LoaderForks:
    """When the data loaders fork their workers (RunShape.training_loader_forks_late and the two after it): read where
    the host figure needs it (optimizer offloading)."""
    if not reader.flag("optimizer.optimizer_cpu_offload"):
        return _LoaderForks()
    kind = reader.choice("dataset.dataloader_type") or "single"  # Megatron-LM's default; Bridge's recipes set it
    cycles = kind in ("cyclic", "batch")  # iter(cyclic_iter(loader)): a generator, whose workers fork at first use
    bridge = reader.bridge
    dataset = str(reader.value("dataset._target_") or "")
    # Bridge iterates validation cyclically for any GPT dataset, whatever dataloader_type says. Its log does not name
    # the dataset's class: its language-model recipes use GPTDatasetConfig (or fine-tuning's cyclic "batch" loader).
    validation_cycles = cycles or "GPTDatasetConfig" in dataset or bool(reader.flag("dataset.full_validation"))
    assumed = bridge and not dataset and not validation_cycles
    validation = (validation_cycles or assumed) and _evaluates_in_training(reader)
    if validation and assumed:
        reader.assume("the dataset's class unknown: Bridge's validation loader taken as cyclic, as for a GPT dataset")
    persistent = reader.flag("dataset.persistent_workers")
    return _LoaderForks(
        cycles,
        cycles and (persistent is False or (persistent is None and bridge)),  # Bridge's default: not persistent
        validation,
    )


def _evaluates_in_training(reader: _Reader) -> bool:
    """Megatron evaluates at every eval_interval-th step (defaults: 100 iterations each 1,000, Megatron-LM's and
    Bridge's); one at the last step or after it leaves no step to write what its workers keep."""
    given = reader.store.resolve("train.eval_interval")
    if given is not None and is_none(given.value):  # Bridge's `eval_interval: null`: no evaluation in the loop
        return False
    interval = reader.integer("train.eval_interval", 1000)
    if reader.flag("train.skip_train") or not reader.integer("train.eval_iters", 100) or not interval:
        return False
    separate = reader.value("valid_data_path") or reader.value("dataset.blend_per_split")  # a validation set of its own
    if not separate and _no_validation_split(reader.value("dataset.split")):
        return False
    iterations = reader.integer("train.train_iters", None)
    if iterations is None:
        reader.assume("training iterations unknown: an evaluation comes during training (the host figure's larger)")
        return True
    return interval < iterations


def _no_validation_split(split: object) -> bool:
    """`--split 100,0,0`: no validation dataset, so no validation loader (a split the model cannot read says nothing)."""
    weights = [number(part) for part in str(split or "").strip("'\"").replace("/", ",").split(",")]
    return len(weights) >= 2 and all(w is not None for w in weights) and weights[1] == 0


class _Reader:
    def __init__(self, store: ConfigStore) -> None:
        self.store = store
        self.assumptions: list[str] = []
        self.sources: dict[str, str] = {}

    @cached_property
    def bridge(self) -> bool:
        """The run is Megatron-Bridge's (its config or log), whose defaults differ from Megatron-LM's."""
        return dialect_of(self.store) == BRIDGE

    def value(self, key: str) -> Any:
        resolved = self.store.resolve(key)
        if resolved is None or is_none(resolved.value):
            return None
        self.sources[key] = f"{resolved.value} ({resolved.source})"
        return resolved.value

    def integer(self, key: str, default: Any = ...) -> Any:
        raw = self.value(key)
        value = number(raw)
        if value is not None and value < 1 and key in _DIVISORS:
            raise self.refused(key, raw, "must be at least 1, the memory estimate divides by it")
        if value is None or not math.isfinite(value) or value != int(value) or value < 0:
            if raw is not None:
                raise self.refused(key, raw, "the memory estimate needs a whole number here")
            return default
        return int(value)

    def real(self, key: str, default: float) -> float:
        raw = self.value(key)
        value = number(raw)
        if raw is not None and (value is None or not math.isfinite(value)):
            raise self.refused(key, raw, "the memory estimate needs a number here")
        return default if value is None else value

    def choice(self, key: str) -> str | None:
        """A key with a fixed list of values (config/keys.py): anything else is refused, never read as the default."""
        raw = self.value(key)
        if raw is None:
            return None
        text = str(raw).strip("'\"")
        if text not in VALUE_CHOICES[key]:
            raise self.refused(key, raw, f"takes one of {', '.join(VALUE_CHOICES[key])}")
        return text

    def flag(self, key: str) -> bool | None:
        raw = self.value(key)
        if raw is None:
            return None
        value = boolean(raw.strip("'\"") if isinstance(raw, str) else raw)
        if value is None:  # `maybe` read as off would estimate a run that was never configured
            raise self.refused(key, raw, "the memory estimate needs true or false here")
        return value

    def refused(self, key: str, raw: Any, why: str) -> UserError:
        """One line naming the value and where it came from (file:line, --set, a log's arguments block)."""
        resolved = self.store.resolve(key)
        return UserError(f"{key} = {raw!r}{f' ({resolved.source})' if resolved is not None else ''}: {why}")

    def assume(self, text: str) -> None:
        self.assumptions.append(text)


def _capacity_factor(reader: _Reader) -> float | None:
    """A negative capacity factor is dropless: TransformerConfig.__post_init__ sets it to None."""
    if reader.value("model.moe_expert_capacity_factor") is None:
        return None
    factor = reader.real("model.moe_expert_capacity_factor", 0.0)
    return None if factor < 0 else factor


def _bias_activation_fusion(reader: _Reader) -> bool:
    """Megatron-LM sets bias_activation_fusion from --bias-swiglu-fusion with SwiGLU (on unless
    --no-bias-swiglu-fusion), else from --bias-gelu-fusion (training/argument_utils.py); a Bridge config says it."""
    fused = reader.flag("model.bias_activation_fusion")
    if fused is not None:
        return fused
    if reader.flag("model.gated_linear_unit"):
        return not reader.flag("no_bias_swiglu_fusion") and reader.flag("bias_swiglu_fusion") is not False
    return not reader.flag("no_bias_gelu_fusion") and reader.flag("bias_gelu_fusion") is not False


def _precision(reader: _Reader) -> str:
    mixed = str(reader.value("mixed_precision") or "").lower()
    if reader.flag("model.fp16") or "fp16" in mixed:
        return "fp16"
    if reader.flag("model.bf16") or "bf16" in mixed or "fp8" in mixed:
        return "bf16"
    if reader.flag("model.bf16") is False and reader.flag("model.fp16") is False:
        return "fp32"
    layers = reader.store.resolve("model.num_layers")
    if layers is not None and set_by_megatron_flags(layers):  # the model from Megatron-LM's flags: --bf16 a switch
        reader.assume(
            "precision: fp32, Megatron-LM's default: the launch command has neither --bf16 nor --fp16 (pass --set "
            "model.bf16=true if another file adds one)"
        )
        return "fp32"
    reader.assume("precision: bf16 mixed precision (no bf16/fp16 setting found)")
    return "bf16"


def _data_parallel(reader: _Reader, model_parallel: int, world_size: int | None) -> int:
    if world_size:
        return _divide_world(world_size, model_parallel, "--world-size")
    # The run's GPUs as config/derived.py reads them (world_size; a data-parallel size given with --set or without
    # a world size, x TP x PP x CP; the launch command's processes): Megatron derives DP from them, so a DP a log
    # printed is stale once --set changes TP, PP or CP.
    gpus = reader.integer("parallel.run_world_size", None)
    if gpus:
        return _divide_world(gpus, model_parallel, "the run's GPUs")
    reader.assume(
        "data-parallel size 1: no world size found (torchrun --nproc-per-node/--nnodes, Slurm "
        "--ntasks, world_size); pass --world-size N"
    )
    return 1


def _divide_world(world: int, model_parallel: int, where: str) -> int:
    if world % model_parallel:
        raise UserError(f"{where} = {world} GPUs is not a multiple of TP x PP x CP = {model_parallel}")
    return world // model_parallel


def _dtype_bytes(value: Any, default: int) -> int:
    text = str(value or "").lower()
    if any(name in text for name in ("bfloat16", "float16", "bf16", "fp16", "half")):
        return 2
    if "uint8" in text or "fp8" in text:
        return 1
    return default


def _none_or_text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().strip("'\"").lower()
    return None if text in ("", "none", "null", "false") else text


def _modules(value: Any) -> tuple[str, ...]:
    return ("core_attn",) if value is None else names(value)


def _offloaded_layers(reader: _Reader) -> int:
    layers = reader.integer("model.cpu_offloading_num_layers", 0)
    enabled = reader.flag("model.cpu_offloading")
    activations = reader.flag("model.cpu_offloading_activations")
    if enabled is False or activations is False:
        return 0
    return layers


def _trained_share(value: Any) -> float:
    """The share of the parameters that train: a number in (0, 1], else every parameter trains."""
    share = number(value)
    return share if share is not None and 0 < share <= 1 else 1.0
