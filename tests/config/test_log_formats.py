"""Logs as users really have them (issue 13): Megatron-Bridge's start-up summary and run_config.yaml, other
OOM wordings, pasted excerpts, known upstream bugs, and close-call OOMs on small GPUs."""

from __future__ import annotations

import json

import pytest

from offloaddoctor.scanning.oom import EXPANDABLE_SEGMENTS, parse_oom
from offloaddoctor.api import diagnose, diagnose_text
from offloaddoctor.api import load_catalog
from offloaddoctor.catalog.loader import CatalogError
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.yaml_config import load_yaml_config
from offloaddoctor.render.json_report import render_json

from tests.conftest import FIXTURES

BRIDGE = FIXTURES / "bridge-0.3.1"
SUMMARY_050 = (BRIDGE / "startup-summary-optimizer-offload-050.log").read_text()
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 GiB "
    "of which 680.19 MiB is free. Including non-PyTorch memory, this process has 78.51 GiB memory in use. Of the "
    "allocated memory 76.00 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
)
PP_ERROR = "[rank0]: ValueError: Currently there is no support for Pipeline parallelism with CPU offloading"


def collect(text: str) -> LogConfigCollector:
    collector = LogConfigCollector("job.log")
    for number, line in enumerate(text.splitlines(), start=1):
        collector.feed(line, number)
    collector.finish()
    return collector


def by_key(collector: LogConfigCollector) -> dict:
    return {v.key: v for v in collector.values}


# ---- 1. Megatron-Bridge start-up summary and run_config.yaml ------------------------------------------------


def test_real_bridge_summary_values_carry_their_log_lines():
    values = by_key(collect(SUMMARY_050))
    lines = SUMMARY_050.splitlines()
    offload = values["optimizer.optimizer_cpu_offload"]
    assert offload.value is True
    assert lines[offload.source.line - 1].strip() == "optimizer_cpu_offload: True  (Mcore default: False)"
    assert values["optimizer.optimizer_offload_fraction"].value == 0.5
    assert values["model.normalization"].value == "RMSNorm"  # a repr, quotes gone
    assert values["model.recompute_modules"].value == ["core_attn"]
    assert values["train.micro_batch_size"].value == 1  # the "Other Configuration Values" part
    assert values["checkpoint.ckpt_format"].value == "torch_dist"
    assert offload.source.detail == "Bridge summary, non-default"


def test_keys_the_summary_leaves_out_take_the_named_mcore_default():
    values = by_key(collect(SUMMARY_050))
    title_line = SUMMARY_050.splitlines().index("Configuration Summary (Non-Default Values vs Megatron Core)") + 1
    pp = values["model.pipeline_model_parallel_size"]
    assert pp.value == 1 and pp.source.line == title_line
    assert "TransformerConfig default" in pp.source.detail
    assert values["model.cpu_offloading"].value is False
    assert values["ddp.nccl_ub"].value is False
    assert "optimizer.offload_optimizer_states" not in values  # not a Megatron-Core class: stays unknown


def test_a_summary_cut_by_the_end_of_the_log_keeps_what_it_listed_and_assumes_no_defaults():
    cut = "\n".join(SUMMARY_050.splitlines()[:14])  # ends inside the [optimizer] section
    values = by_key(collect(cut))
    assert values["optimizer.optimizer_offload_fraction"].value == 0.5
    assert "model.cpu_offloading" not in values  # its line may be among the ones lost


def test_a_summary_cut_by_other_output_stops_there_and_assumes_no_defaults():
    lines = SUMMARY_050.splitlines()
    cut = lines.index("  optimizer_cpu_offload: True  (Mcore default: False)")
    text = "\n".join(lines[:cut] + ["[rank3]: WARNING: something else"] + lines[cut:])
    values = by_key(collect(text))
    assert "optimizer.optimizer_cpu_offload" not in values  # after the interruption: not read as the block
    assert "model.cpu_offloading" not in values
    assert values["optimizer.lr"].value == 0.0003  # before it: read


def test_a_title_followed_by_endless_blank_lines_stops_being_a_block():
    from offloaddoctor.config.bridge_summary import MAX_BLOCK_LINES

    collector = collect(
        "Configuration Summary (Non-Default Values vs Megatron Core)\n"
        + "\n" * (MAX_BLOCK_LINES + 10)
        + "  optimizer_cpu_offload: True\n"
    )
    assert collector.in_arguments is False
    assert collector.values == []


def test_the_line_after_the_summary_is_scanned_as_usual():
    report = diagnose_text(SUMMARY_050 + "[rank0]: " + OOM + "\n")
    assert [f.id for f in report.findings][:1] == ["oom-partial-optimizer-offload"]
    assert report.findings[0].config.verdict == "confirmed"


@pytest.mark.parametrize("prefix", ["[rank0]: ", "[default0]:", "0: ", "2026-11-22 10:00:00,123 "])
def test_the_summary_is_read_under_launcher_prefixes(prefix):
    text = "\n".join(prefix + line for line in SUMMARY_050.splitlines()) + "\n" + prefix + OOM
    finding = diagnose_text(text).findings[0]
    assert (finding.id, finding.config.verdict) == ("oom-partial-optimizer-offload", "confirmed")


def test_a_second_summary_starts_a_new_segment():
    collector = collect(SUMMARY_050 + "restarting\n" + SUMMARY_050)
    assert len(collector.segment_starts) == 2


def test_without_the_summary_the_same_oom_has_no_config():
    report = diagnose_text("[rank0]: " + OOM + "\n")
    assert [f.id for f in report.findings] == ["oom-capacity"]


def test_metrics_read_the_bridge_summary_too():
    from offloaddoctor.metrics import metrics_from_text

    run = metrics_from_text(SUMMARY_050)
    assert run.arguments["optimizer.optimizer_offload_fraction"] == 0.5


@pytest.mark.parametrize("name", ["run_config-optimizer-offload-050.yaml", "run_config-no-offload.yaml"])
def test_real_bridge_run_config_yaml_parses(name):
    values = {v.key: v for v in load_yaml_config(str(BRIDGE / name))}
    assert values["_target_"].value == "megatron.bridge.training.config.ConfigContainer"
    assert values["model._target_"].value.endswith("Llama32ModelProvider1B")
    assert values["optimizer.optimizer_cpu_offload"].value is ("050" in name)
    assert values["model.pipeline_model_parallel_size"].value == 1
    text = (BRIDGE / name).read_text().splitlines()
    line = values["optimizer.optimizer_cpu_offload"].source.line
    assert text[line - 1].strip().startswith("optimizer_cpu_offload:")


def test_bridge_run_config_confirms_the_oom_finding():
    report = diagnose(
        [str(FIXTURES / "oom-cuda-error-no-figures" / "job.log")],
        [str(BRIDGE / "run_config-optimizer-offload-050.yaml")],
    )
    assert report.findings[0].id == "oom-partial-optimizer-offload"
    assert report.findings[0].config.verdict == "confirmed"


# ---- 2. other failure wordings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: out of memory",
        "gpu-node-07:2150:2387 [3] include/alloc.h:228 NCCL WARN Cuda failure 2 'out of memory'",
        "gpu-node-07:2150:2387 [3] include/alloc.h:125 NCCL WARN Failed to CUDA calloc 6291456 bytes",
        "Cuda failure 'out of memory'",
        "RuntimeError: CUDA out of memory.",
    ],
)
def test_an_oom_without_figures_is_still_an_oom_and_says_what_to_collect(line):
    report = diagnose_text(line)
    assert [f.id for f in report.findings][:1] == ["oom-capacity"]
    missing = report.findings[0].facts["allocator_figures"]
    assert "torch.cuda.memory_summary()" in missing and "PYTORCH_CUDA_ALLOC_CONF" in missing
    assert "--log-memory-interval" in missing


def test_an_oom_with_figures_does_not_say_they_are_missing():
    assert "allocator_figures" not in diagnose_text(OOM).findings[0].facts


def test_the_oldest_cached_wording_gives_its_figures():
    facts = parse_oom(
        "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
        "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)"
    )
    # torch <= 1.3 printed amount_cached - amount_allocated as "cached" (THCCachingAllocator.cpp)
    assert facts["reserved_unallocated_bytes"] == round(4.68 * 2**20)
    assert facts["reserved_bytes"] == round(4.68 * 2**20) + round(8.57 * 2**20)
    assert facts["reserved_bytes"] >= facts["allocated_bytes"]
    # the sum covers the 12.50 MiB asked, but 9.28 GiB free alone is over twice it: not the cache's pieces
    assert facts["fragmentation_suspected"] is False


def test_ub_registration_failure_needs_user_buffers_on():
    line = "gpu-node-03:88412:89120 [2] misc/ibvwrap.cc:178 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Bad address"
    assert [f.id for f in diagnose_text(line, {"ddp.nccl_ub": True}).findings] == ["nccl-ub-registration"]
    assert diagnose_text(line).findings == []  # unknown: not claimed; the line is shown instead
    assert "ibv_reg_mr_iova2" in diagnose_text(line).unmatched.text


# ---- 3. the failure line when no signature applies ----------------------------------------------------------


def test_a_raise_in_an_earlier_frame_is_not_the_failure():
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in <module>',
            "    raise wrap(error)",
            '  File "a.py", line 9, in wrap',
            "    return build(error)",
        ]
    )
    assert diagnose_text(text).unmatched is None


def test_an_exception_that_names_only_its_class_is_shown_with_the_assert_that_raised_it():
    """n108 (one H100: an offloaded run resumed from its checkpoint) stopped on `assert len(steps) == 1`, which Python
    reports as a bare `AssertionError`: the failure line says which assert, in which file and function."""
    report = diagnose([str(FIXTURES / "memory-calibration" / "refused" / "n108-gpt1b-f050-resume.log.gz")])
    assert (report.unmatched.line, report.unmatched.rank) == (1117, 0)
    assert report.unmatched.text == (
        "AssertionError, raised by `assert len(steps) == 1` "
        "(megatron/core/optimizer/distrib_optimizer.py:839, in state_dict)"
    )


@pytest.mark.parametrize(
    ("frames", "exception", "shown"),
    [
        # the raise a bare class came from, without a path ending in site- or dist-packages
        (
            ['  File "train.py", line 7, in step', "    raise RuntimeError"],
            "RuntimeError",
            "RuntimeError, raised by `raise RuntimeError` (train.py:7, in step)",
        ),
        # a message says what failed: nothing added
        (['  File "a.py", line 2, in f', "    assert x == 1, 'x'"], "AssertionError: x", "AssertionError: x"),
        # the last frame raised nothing itself (a C extension did): nothing to add
        (
            ['  File "a.py", line 2, in f', "    assert ok", '  File "b.py", line 5, in g', "    torch.ops.x()"],
            "RuntimeError",
            "RuntimeError",
        ),
    ],
)
def test_a_bare_exception_line_gains_only_the_statement_of_its_own_frame(frames, exception, shown):
    text = "\n".join(["Traceback (most recent call last):", *frames, exception])
    assert diagnose_text(text).unmatched.text == shown


def test_a_signature_knows_a_bare_assertion_error_by_the_assert_that_raised_it():
    """The source line sits inside the traceback, where signatures are not matched line by line: the exception line,
    shown with its frame's assert, is what they are matched on."""
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/site-packages/megatron/core/optimizer/clip_grads.py", line 169, in clip',
            "    assert param.decoupled_grad.dtype in [torch.float32, torch.bfloat16]",
            "AssertionError",
        ]
    )
    report = diagnose_text(text)
    assert [f.id for f in report.findings] == ["precision-aware-fp16-gradients"] and report.unmatched is None


def test_a_cut_traceback_loses_to_a_complete_one_after_it():
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in <module>',
            '    raise ValueError("first")',
            "Traceback (most recent call last):",
            '  File "b.py", line 3, in <module>',
            "    f()",
            "KeyError: 'second'",
        ]
    )
    assert diagnose_text(text).unmatched.text == "KeyError: 'second'"


def test_nccl_last_error_header_is_not_the_failure_line():
    report = diagnose_text("ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n")
    assert report.unmatched is None or report.unmatched.text != "Last error:"


CHILD_FAILED_NO_TRACEBACK = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
pretrain_gpt.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_10:55:42
  host      : h100-node-001
  rank      : 5 (local_rank: 5)
  exitcode  : 1 (pid: 1911)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_torchrun_exit_status_is_the_failure_line_only_when_nothing_explains_it():
    assert diagnose_text(CHILD_FAILED_NO_TRACEBACK).unmatched.text == "exitcode  : 1 (pid: 1911)"
    report = diagnose_text("[rank5]: " + OOM + "\n" + CHILD_FAILED_NO_TRACEBACK)
    assert [f.id for f in report.findings] == ["oom-capacity"]
    assert report.unmatched is None


def test_validate_args_assertion_with_its_message_is_the_failure_not_a_vpp_finding():
    text = "\n".join(
        [
            "[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/workspace/Megatron-LM/megatron/training/arguments.py", line 412, in validate_args',
            "[rank0]:     assert num_layers % args.transformer_pipeline_model_parallel_size == 0, \\",
            "[rank0]: AssertionError: Number of layers should be divisible by the pipeline-model-parallel size",
        ]
    )
    report = diagnose_text(
        text,
        {
            "model.num_layers": 30,
            "model.pipeline_model_parallel_size": 4,
            "model.virtual_pipeline_model_parallel_size": 2,
        },
    )
    assert report.findings == []
    assert report.unmatched.text.startswith("AssertionError: Number of layers should be divisible")


def test_validate_args_pp_split_is_not_a_vpp_finding():
    report = diagnose_text(
        "ok",
        {
            "model.num_layers": 30,
            "model.pipeline_model_parallel_size": 4,
            "model.virtual_pipeline_model_parallel_size": 2,
        },
    )
    assert "vpp-layer-divisibility" not in [f.id for f in report.findings]
    report = diagnose_text(
        "ok",
        {
            "model.num_layers": 36,
            "model.pipeline_model_parallel_size": 4,
            "model.virtual_pipeline_model_parallel_size": 2,
        },
    )
    assert "vpp-layer-divisibility" in [f.id for f in report.findings]  # 9 per stage: a real VPP violation


# ---- 4. known upstream bugs ---------------------------------------------------------------------------------


def test_config_with_the_bug_shape_contradicts_the_error_and_names_the_bug():
    finding = diagnose_text(
        PP_ERROR, {"model.cpu_offloading_num_layers": 0, "model.pipeline_model_parallel_size": 2}
    ).findings[0]
    assert finding.id == "pp-cpu-offload"
    assert finding.config.verdict == "contradicted"
    assert "Megatron-Bridge#2992" in finding.config.explanation
    assert "https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3144" in finding.config.explanation
    assert [k.issue.id for k in finding.known_issues] == ["Megatron-Bridge#2992"]
    # the bug's workaround, not the signature's "offload the optimizer instead": offloading was never meant to be on
    assert finding.overrides == [] and finding.changes == []
    assert finding.fix_note.startswith("Offloading was not meant to be on") and finding.fix_note_replaces_summary


def test_a_version_line_alone_keeps_the_signatures_fix():
    """The log's version shows the bug could be there; only the config's shape shows it is: the fix stays."""
    finding = diagnose_text("megatron-bridge            0.3.1\n" + PP_ERROR).findings[0]
    assert finding.known_issues and "model.cpu_offloading" in [key for key, _ in finding.changes]


@pytest.mark.parametrize("line", ["megatron-bridge            0.3.1", "megatron_bridge==0.4.0rc0"])
def test_an_affected_version_line_names_the_bug(line):
    finding = diagnose_text(line + "\n" + PP_ERROR).findings[0]
    assert finding.config.verdict == "unknown"
    assert "Megatron-Bridge#2992" in finding.config.explanation
    assert finding.known_issues[0].version == line.split()[-1].split("==")[-1]


@pytest.mark.parametrize(
    "text,config",
    [
        ("megatron-bridge 0.4.0\n" + PP_ERROR, {}),  # fixed release
        (PP_ERROR, {"model.cpu_offloading": True, "model.pipeline_model_parallel_size": 2}),  # really asked for
        (
            "megatron-bridge==0.3.1\n" + PP_ERROR,
            {
                "model.cpu_offloading": True,
                "model.cpu_offloading_num_layers": 0,
                "model.pipeline_model_parallel_size": 2,
            },
        ),
    ],
)
def test_no_known_bug_where_nothing_points_at_it(text, config):
    finding = diagnose_text(text, config).findings[0]
    assert finding.known_issues == []
    assert "2992" not in finding.config.explanation


def test_known_issues_reach_the_json_report():
    report = diagnose(
        [str(FIXTURES / "bridge-2992-pp-offload-layers-0" / "job.log")],
        [str(FIXTURES / "configs" / "bridge-override-pp2-offload-layers-0.yaml")],
    )
    entry = json.loads(render_json(report))["findings"][0]["known_issues"][0]
    assert entry["id"] == "Megatron-Bridge#2992" and entry["matched_by"] == ["config"]
    assert entry["versions"] == ["0.3.1", "0.4.0rc0"]


def test_json_has_no_known_issues_key_when_there_are_none():
    assert "known_issues" not in json.loads(render_json(diagnose_text(OOM)))["findings"][0]


def test_a_broken_known_issue_entry_is_a_catalogue_problem(tmp_path):
    text = (FIXTURES.parent / "signatures" / "pp-cpu-offload.yaml").read_text()
    text = (
        text.replace("id: pp-cpu-offload", "id: my-pp")
        .replace("package: megatron-bridge", "package: nemo")
        .replace("model.cpu_offloading_num_layers, eq: 0", "model.no_such_key, eq: 0")
        .replace("    workaround: >", "    workaround: [a list]\n    unused: >")
    )
    (tmp_path / "my-pp.yaml").write_text(text)
    with pytest.raises(CatalogError) as error:
        load_catalog([tmp_path], include_builtin=False)
    message = str(error.value)
    assert "known_issues[0].package" in message and "known_issues[0].when" in message
    assert "known_issues[0].workaround: must be a non-empty string" in message


# ---- 5. fragmentation on small GPUs (the close call of issue 13, decided by the sum since issue 27) ----------------


def small_gpu_message(capacity: str, requested: str, slack: str) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {requested}. GPU 0 has a total capacity of "
        f"{capacity} of which 312.81 MiB is free. Including non-PyTorch memory, this process has 15.46 GiB memory "
        f"in use. Of the allocated memory 14.04 GiB is allocated by PyTorch, and {slack} is reserved by PyTorch "
        "but unallocated."
    )


@pytest.mark.parametrize(
    "capacity,requested,slack",
    [
        ("15.77 GiB", "546.00 MiB", "736.86 MiB"),  # 16 GB card, expandable segments fixed it in that thread
        ("31.75 GiB", "786.00 MiB", "1.15 GiB"),  # 32 GB V100
    ],
)
def test_real_small_gpu_ooms_are_fragmentation_with_the_zero_cost_fix_first(capacity, requested, slack):
    finding = diagnose_text(small_gpu_message(capacity, requested, slack)).findings[0]
    assert finding.id == "oom-fragmentation"
    assert finding.overrides[0] == EXPANDABLE_SEGMENTS
    assert "→ fragmentation" in finding.facts["fragmentation_arithmetic"]


def test_expandable_segments_already_on_is_capacity_without_the_allocator_fix():
    finding = diagnose_text(
        small_gpu_message("15.77 GiB", "546.00 MiB", "736.86 MiB"),
        {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    ).findings[0]
    assert finding.id == "oom-capacity"
    assert EXPANDABLE_SEGMENTS not in finding.overrides


def test_the_old_16gb_message_with_tiny_slack_is_fragmentation_by_the_sum():
    facts = parse_oom(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.56 GiB already allocated; 3.44 MiB free; 14.68 GiB reserved in total by PyTorch)"
    )
    assert facts["fragmentation_suspected"] is True  # 120 MiB is 0.8 % of the GPU, but six times the request


def test_composed_fixtures_are_current():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(FIXTURES.parent / "tools" / "compose_log_formats.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


# ---- the summary reader on generated blocks ----------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_FIELD = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)
_VALUE = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=12),
    st.lists(st.integers(0, 9), max_size=3),
)


def _render(compared: dict, other: dict) -> str:
    """The block as Bridge 0.3.1's log_non_default_values() builds it."""
    lines = ["", "=" * 70, "Configuration Summary (Non-Default Values vs Megatron Core)", "=" * 70]
    for section, values in compared.items():
        if values:
            lines.append(f"\n[{section}] Non-default values (vs Mcore {section.title()}Config):")
            lines += [f"  {k}: {v!r}  (Mcore default: {None!r})" for k, v in sorted(values.items())]
    lines += ["\n" + "-" * 70, "Other Configuration Values:", "-" * 70]
    for section, values in other.items():
        if values:
            lines.append(f"\n[{section}]:")
            lines += [f"  {k}: {v!r}" for k, v in sorted(values.items())]
    lines.append("\n" + "=" * 70)
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_FIELD, _VALUE, max_size=6), st.dictionaries(_FIELD, _VALUE, max_size=6))
def test_every_printed_value_reads_back(optimizer, train):
    collector = collect(_render({"optimizer": optimizer}, {"train": train}))
    read = {
        (v.key, v.source.line): v.value
        for v in collector.values
        if v.source.detail.startswith("Bridge summary,") or v.source.detail == "Bridge summary"
    }
    from offloaddoctor.config.keys import canonical_key

    expected = [(canonical_key(f"optimizer.{k}"), v) for k, v in optimizer.items()]
    expected += [(canonical_key(f"train.{k}"), v) for k, v in train.items()]
    got = sorted((k, repr(v)) for (k, _), v in read.items())
    assert got == sorted((k, repr(v)) for k, v in expected)
    # the block closed: the defaults for keys it left out were added, and nothing after it is read as the block
    assert any("not listed" in v.source.detail for v in collector.values)
    assert collector.in_arguments is False


def test_explain_lists_known_upstream_bugs():
    from offloaddoctor.render.catalog_view import render_explain

    text = render_explain(load_catalog().get("pp-cpu-offload"))
    assert "Known upstream bugs" in text and "Megatron-Bridge#2992" in text and "pull/3144" in text


def test_known_issues_survive_the_catalogue_cache(tmp_path, monkeypatch):
    from offloaddoctor.catalog import loader

    monkeypatch.setenv("OFFLOADDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(loader, "_BUILT", {})
    first = load_catalog()
    monkeypatch.setattr(loader, "_BUILT", {})
    cached = load_catalog()  # read from the JSON cache: the process's memo is empty again
    assert list(tmp_path.iterdir())
    for catalog in (first, cached):
        issue = catalog.get("pp-cpu-offload").known_issues[0]
        assert issue.id == "Megatron-Bridge#2992" and issue.versions == ("0.3.1", "0.4.0rc0")


def test_a_finding_the_config_contradicts_is_not_settled_by_another_fix():
    """pp-cpu-offload's fix turns activation offloading off; recompute-cpu-offload's error with no recompute in the
    config is contradicted (not a constraint this config violates), so no fix 'settles' it: its lines stay."""
    text = PP_ERROR + "\n[rank0]: ValueError: CPU offloading does not work when activation recomputation is enabled\n"
    config = {
        "model.cpu_offloading": True,
        "model.pipeline_model_parallel_size": 2,
        "model.recompute_granularity": None,
    }
    by_id = {f.id: f for f in diagnose_text(text, config).findings}
    recompute = by_id["recompute-cpu-offload"]
    assert recompute.config.verdict == "contradicted"
    assert "settles this one" not in recompute.fix_note
