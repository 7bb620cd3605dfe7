"""Property-based tests for the parsers that lacked them: the log-line normaliser (decorations stripped in any
stack, idempotent, never raising), the CUDA OOM message in every wording PyTorch has printed, diagnose's fast
iteration parser against the full one, the arguments block and launch scripts, --set values, config YAML
(mutated real files, wrong-typed values) and rank sets. Round trips of the metrics parsers and of --set scalars
live in test_metrics.py and test_config.py."""

from __future__ import annotations

import math
import os
import re
import sys

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from offloaddoctor.scanning.oom import parse_oom
from offloaddoctor.report.preflight import check_store
from offloaddoctor.scanning.ranks import format_ranks, parse_ranks
from offloaddoctor.scanning.scanner import build_matchers
from offloaddoctor.scanning.units import parse_quantity
from offloaddoctor.api import diagnose_text
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.keys import KNOWN_KEYS, canonical_key
from offloaddoctor.config.loading import build_store, parse_config_text
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.config.yaml_config import parse_yaml_config
from offloaddoctor.errors import UserError
from offloaddoctor.logs import normalize, sources
from offloaddoctor.logs.normalize import normalize_line, strip_terminal_codes
from offloaddoctor.metrics.iteration_lines import (
    ELAPSED_MS,
    THROUGHPUT,
    parse_iteration_line,
    iteration_found,
    parse_iteration_metrics,
    speed_record,
)
from offloaddoctor.metrics.memory_lines import parse_memory_report

from tests.conftest import FIXTURES, builtin_catalog
from tests.metrics.test_metrics import memory_line, mlm_line

CATALOG = builtin_catalog()
MESSAGE = "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading"

# ---- log-line normaliser ------------------------------------------------------------------------------------

_SGR = st.sampled_from(["", "\x1b[0m", "\x1b[32m", "\x1b[1;31m", "\x1b]0;title\x07", "\x1b]8;;http://x\x1b\\"])
_TIMESTAMP = st.sampled_from(
    [
        "2026-11-20 10:00:05,123 ",
        "[2026-11-20T10:00:05.123Z] ",
        "2026-11-20 10:00:05 ",
        "[2026-11-22 10:50:38.665846] ",
        "2026-11-20T10:00:05+01:00 ",
    ]
)
# What a training process prints: not itself starting with something that looks like a decoration.
_MESSAGES = (
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=60)
    .filter(lambda m: m == m.strip() and m and not m[0].isdigit() and m[0] != "[")
    .map(lambda m: m + " " + MESSAGE[:10])
)


@st.composite
def decorated(draw):
    """(raw line, message, expected rank): srun's `N: ` label outermost, then torchrun's `[rankN]:` and a
    logger timestamp in either order, each optional, with colour codes around the pieces."""
    message = draw(_MESSAGES)
    slurm = draw(st.none() | st.integers(0, 999_999))
    torchrun = draw(st.none() | st.integers(0, 999_999))
    inner = []
    if torchrun is not None:
        inner.append(draw(_SGR) + draw(st.sampled_from(["[rank{}]: ", "[default{}]:", "[rank{}]:"])).format(torchrun))
    if draw(st.booleans()):
        inner.append(draw(_SGR) + draw(_TIMESTAMP))
    inner = draw(st.permutations(inner))
    prefix = (f"{slurm}: " if slurm is not None else "") + "".join(inner)
    raw = prefix + draw(_SGR) + message + draw(_SGR) + draw(st.sampled_from(["", "\r"]))
    expected = torchrun if torchrun is not None else slurm
    return raw, message, expected


@given(decorated(), st.none() | st.integers(0, 64))
def test_decorations_are_stripped_in_any_stack(case, default_rank):
    raw, message, rank = case
    assert normalize_line(raw, default_rank) == (message, rank if rank is not None else default_rank)


def _starts_with_decoration(text: str) -> bool:
    return bool(normalize._DECORATION.match(text.lstrip()))


_TORCHRUN_PREFIX = re.compile(r"\s*\[(?:rank|default)(\d{1,6})\]:\s?")
_SLURM_LABEL = re.compile(r"\s*(\d{1,6}): ")
_LOG_TIMESTAMP = re.compile(r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?\s+")
_PDSH_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}: ")
_PDSH_HOST = re.compile(r"[A-Za-z][\w.-]{0,62}: (?=\[(?:rank|default)\d{1,6}\]:)")


def _normalize_three_searches(raw: str, default_rank: int | None) -> tuple[str, int | None]:
    """normalize_line as it was before its three decoration searches became one (_DECORATION), with pdsh's node
    prefix since: a host name with a digit before torchrun's prefix, or an IPv4 address among the decorations."""
    text = strip_terminal_codes(raw)
    torchrun_rank = slurm_rank = None
    host = _PDSH_HOST.match(text)
    if host is not None and any(char.isdigit() for char in host.group()):
        text = text[host.end() :]
    for _ in range(4):
        stripped = text.lstrip()
        match = _TORCHRUN_PREFIX.match(text)
        if match:
            torchrun_rank = int(match.group(1))
            text = text[match.end() :]
            continue
        match = _SLURM_LABEL.match(text)
        if match and slurm_rank is None and torchrun_rank is None:
            slurm_rank = int(match.group(1))
            text = text[match.end() :]
            continue
        match = _PDSH_IP.match(stripped) or _LOG_TIMESTAMP.match(stripped)
        if match:
            text = stripped[match.end() :]
            continue
        break
    rank = torchrun_rank if torchrun_rank is not None else slurm_rank
    return text, rank if rank is not None else default_rank


_DECORATION_SOUP = st.lists(
    st.sampled_from(
        [
            "[rank3]:",
            "[default12]: ",
            "7: ",
            "1234567: ",
            " ",
            "\t",
            "\u2003",
            "[2026-11-22 10:50:42.731213] ",
            "2026-11-22T10:50:42Z ",
            "2026-11-22 10:50:42,5+01:00: ",
            "[",
            "]",
            "12",
            ":",
            "-",
            "iteration 10/ 100 |",
            "192.168.0.12: ",
            "node-7: ",
            "\x1b[1m",
            "\r",
            "x",
        ]
    ),
    max_size=12,
).map("".join)


@given(_DECORATION_SOUP | st.text(max_size=80), st.none() | st.integers(0, 64))
def test_one_decoration_search_strips_what_three_did(raw, default_rank):
    assert normalize_line(raw, default_rank) == _normalize_three_searches(raw, default_rank)


@given(st.text(max_size=300))
def test_normalising_twice_changes_nothing_more(raw):
    """Idempotent, except where the program's own text starts like a decoration after four were stripped
    (`0: 1: 2: …` is one srun label and then what the program printed): that text is kept, not eaten."""
    text, _ = normalize_line(raw)
    again, again_rank = normalize_line(text)
    assert again == text or _starts_with_decoration(text)
    if again == text:
        assert again_rank is None
    assert strip_terminal_codes(strip_terminal_codes(raw)) == strip_terminal_codes(raw)


@given(
    st.text(
        alphabet=st.sampled_from(["\x1b", "[", "]", "0", "1", ";", "m", "\x07", "\\", "\r", "\n", "a", "8", ":"]),
        max_size=80,
    )
)
def test_escape_soup_never_leaves_an_escape(raw):
    text, _ = normalize_line(raw)
    assert "\x1b" not in text and "\r" not in text and "\n" not in text and "\x07" not in text


# ---- CUDA OOM messages ----------------------------------------------------------------------------------------


def torch_size(count: int) -> str:
    """c10's format_size: whole bytes up to 1 KiB, then two decimals of the largest unit."""
    if count <= 1024:
        return f"{count} bytes"
    for unit, factor in (("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3)):
        if count <= factor * 1024 or unit == "GiB":
            return f"{count / factor:.2f} {unit}"
    raise AssertionError


_BYTES = st.integers(0, 200 * 1024**3)
_PREFIX = st.sampled_from(
    [
        "torch.OutOfMemoryError: ",
        "torch.cuda.OutOfMemoryError: ",
        "RuntimeError: ",
        "[rank3]: torch.OutOfMemoryError: ",
        "  ",
    ]
)


@st.composite
def oom_message(draw):
    """A message as some PyTorch release printed it, and the figures it prints (as printed strings)."""
    wording = draw(st.sampled_from(["2.2+", "2.2+ private pools", "2.1", "1.x-2.0", "1.0-1.4 cached", "truncated"]))
    gpu = draw(st.integers(0, 15))
    printed = {
        name: torch_size(draw(_BYTES))
        for name in ("requested", "capacity", "free", "in_use", "allocated", "slack", "reserved")
    }
    tail = "Tried to allocate {requested}".format(**printed)
    if wording.startswith("2.2+"):
        pools = " with 1.00 GiB allocated in private pools (e.g., CUDA Graphs)," if "private" in wording else ""
        tail += (
            f". GPU {gpu} has a total capacity of {printed['capacity']} of which {printed['free']} is free. "
            f"Including non-PyTorch memory, this process has {printed['in_use']} memory in use. Of the allocated "
            f"memory {printed['allocated']} is allocated by PyTorch,{pools} and {printed['slack']} is reserved by "
            "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
        fields = {"requested", "capacity", "free", "in_use", "allocated", "slack"}
    elif wording == "2.1":
        tail += (
            f". GPU {gpu} has a total capacty of {printed['capacity']} of which {printed['free']} is free. "
            f"Process 2313 has {printed['in_use']} memory in use. Of the allocated memory {printed['allocated']} "
            f"is allocated by PyTorch, and {printed['slack']} is reserved by PyTorch but unallocated."
        )
        fields = {"requested", "capacity", "free", "allocated", "slack"}  # another process's use is not ours
    elif wording == "1.x-2.0":
        tail += (
            f" (GPU {gpu}; {printed['capacity']} total capacity; {printed['allocated']} already allocated; "
            f"{printed['free']} free; {printed['reserved']} reserved in total by PyTorch) If reserved memory is >> "
            "allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
            "Management and PYTORCH_CUDA_ALLOC_CONF"
        )
        fields = {"requested", "capacity", "free", "allocated", "reserved"}
    elif wording == "1.0-1.4 cached":  # "cached" was amount_cached - amount_allocated: reserved but unallocated
        tail += (
            f" (GPU {gpu}; {printed['capacity']} total capacity; {printed['allocated']} already allocated; "
            f"{printed['free']} free; {printed['slack']} cached)"
        )
        fields = {"requested", "capacity", "free", "allocated", "slack"}
    else:
        tail += "."
        fields = {"requested"}
    text = draw(_PREFIX) + "CUDA out of memory. " + tail
    return text, {name: printed[name] for name in fields}, (gpu if fields != {"requested"} else None)


_FACT = {
    "requested": "requested_bytes",
    "capacity": "total_capacity_bytes",
    "free": "free_bytes",
    "in_use": "in_use_bytes",
    "allocated": "allocated_bytes",
    "slack": "reserved_unallocated_bytes",
    "reserved": "reserved_bytes",
}


@given(oom_message())
def test_every_oom_wording_gives_back_the_figures_it_printed(case):
    text, printed, gpu = case
    facts = parse_oom(text)
    for name, shown in printed.items():
        assert facts[_FACT[name]] == parse_quantity(shown), (name, shown)
    assert facts.get("gpu") == gpu
    slack = facts.get("reserved_unallocated_bytes")
    if "reserved" in printed:  # the old wording: slack is what is reserved beyond what is allocated
        assert slack == max(0, facts["reserved_bytes"] - facts["allocated_bytes"])
    if "slack" in printed:
        assert facts["reserved_bytes"] == facts["allocated_bytes"] + slack
    if slack is None:
        assert "fragmentation_suspected" not in facts
    else:  # the rule of docs/oom.md, on the printed figures (no wording here prints a per-process limit)
        free, requested = facts.get("free_bytes", 0), facts["requested_bytes"]
        assert facts["fragmentation_suspected"] == (slack > 0 and free + slack >= requested and free < 2 * requested)


@settings(max_examples=40, deadline=None)
@given(oom_message())
def test_diagnose_calls_it_fragmentation_exactly_when_the_figures_say_so(case):
    text, _, _ = case
    ids = [f.id for f in diagnose_text(text).findings]
    facts = parse_oom(text)
    if facts.get("not_a_shortage"):  # the memory was free (scanning/oom.py memory_was_free): no memory cause
        assert ids == []
        return
    assert ids in (["oom-fragmentation"], ["oom-capacity"])
    assert (ids == ["oom-fragmentation"]) == bool(facts.get("fragmentation_suspected"))


@given(oom_message(), st.data())
def test_damaged_oom_messages_never_raise_and_give_only_real_figures(case, data):
    text, _, _ = case
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    junk = data.draw(st.sampled_from(["", "1e400", "99999999999999999999999.99", "-5", "nan", "\x00", "GiB", "é"]))
    facts = parse_oom(text[:start] + junk + text[end:])
    for name, value in facts.items():
        if name.endswith("_bytes"):
            assert isinstance(value, int) and value >= 0, (name, value)
        elif name == "reserved_unallocated_share":
            assert math.isfinite(value)


# ---- iteration lines: one parser for diagnose and metrics ------------------------------------------------------


_FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=1e-3, max_value=1e7)


@given(st.integers(1, 10**7), _FINITE, st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_iteration_record_carries_the_printed_speed_fields(iteration, ms, loss):
    line = mlm_line(iteration, ms, loss=loss)
    full = parse_iteration_line(line)
    record = parse_iteration_metrics(line, "x", 1, None, 0, keep_text=True)
    assert record.iteration == full[0] == iteration
    assert (record.elapsed_ms, record.tflops_per_gpu) == (full[2][ELAPSED_MS], full[2][THROUGHPUT])
    assert record.text == line.strip()
    speed = speed_record(iteration_found(line), "x", 1, None, 0)  # diagnose's two searches read the same numbers
    assert (speed.iteration, speed.train_iters, speed.elapsed_ms, speed.tflops_per_gpu, speed.text) == (
        record.iteration,
        record.train_iters,
        record.elapsed_ms,
        record.tflops_per_gpu,
        record.text,
    )


@given(st.data())
def test_damaged_iteration_and_memory_lines_never_raise(data):
    line = data.draw(st.sampled_from([mlm_line(12, 480.25), memory_line(3, 12, 8269.31, 13800.1, 14388.0, 14388.0)]))
    start = data.draw(st.integers(0, len(line)))
    end = data.draw(st.integers(start, len(line)))
    junk = data.draw(st.text(alphabet="|:0123456789.eE+-naif ()/", max_size=12) | st.sampled_from(["1e999", "|", ""]))
    damaged = line[:start] + junk + line[end:]
    full = parse_iteration_line(damaged)
    record = parse_iteration_metrics(damaged, "x", 1, None, 0)
    assert (record is None) == (full is None) == (iteration_found(damaged) is None)
    if record is not None:
        assert record.iteration >= 0
    parse_memory_report(damaged, "x", 1, None, 0)


# ---- the arguments block, launch scripts, --set values ---------------------------------------------------------

_ARG_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,30}", fullmatch=True)
_ARG_VALUE = st.one_of(
    st.integers(-(10**12), 10**12),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(0, 100), max_size=4),
    st.from_regex(r"[A-Za-z_][A-Za-z_.]{0,20}", fullmatch=True).filter(
        lambda s: s.lower() not in ("true", "false", "none", "null", "nan", "inf", "infinity")
    ),
)


@given(st.dictionaries(_ARG_NAME, _ARG_VALUE, min_size=1, max_size=8))
def test_arguments_block_values_read_back_as_megatron_printed_them(arguments):
    """Megatron prints `  name ..... str(value)` (dots to column 48); each value comes back typed."""
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {name} {'.' * max(1, 48 - len(name))} {value}" for name, value in arguments.items()]
    lines += ["-------------------- end of arguments ---------------------"]
    collector = LogConfigCollector("job.log")
    for number, line in enumerate(lines, start=1):
        assert collector.feed(line, number)
    got = {v.key: v.value for v in collector.values}
    for name, value in arguments.items():
        assert got[canonical_key(name)] == value, (name, value)


@given(st.lists(st.text(max_size=120), max_size=12))
def test_the_log_config_collector_never_raises(lines):
    collector = LogConfigCollector("job.log")
    for number, line in enumerate(["------------------------ arguments ------------------------", *lines], start=1):
        collector.feed(line, number)


@given(st.text(max_size=600))
def test_a_launch_script_is_read_or_refused_in_one_line(text):
    try:
        values = parse_config_text(text, "launch.sh", "launch.sh")
    except UserError as exc:
        assert "\n" not in str(exc)
    else:
        assert values and all(v.source.path == "launch.sh" for v in values)


_OVERRIDE_KEY = st.from_regex(r"\+{0,2}[a-z_][a-z0-9_]{0,10}(\.[a-z_][a-z0-9_]{0,10}){0,2}", fullmatch=True)


@given(_OVERRIDE_KEY, st.text(max_size=80))
def test_any_value_of_a_valid_override_is_read(key, value):
    (parsed,) = parse_overrides([f"{key}={value}"])
    assert parsed.key == canonical_key(key.lstrip("+")) and parsed.origin == "set"
    assert parsed.value is None or isinstance(parsed.value, (str, int, float, bool, list))


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "[&a [1,1,1,1,1,1,1,1,1], [*a,*a,*a,*a,*a,*a,*a,*a,*a]]"])
def test_override_values_that_would_expand_or_recurse_stay_text(value):
    # a key without a declared type: a list or number where a whole number belongs is refused (test_first_screen)
    (parsed,) = parse_overrides([f"model.position_embedding_type={value}"])
    assert parsed.value == value


# ---- config YAML: mutated real files, wrong-typed values ---------------------------------------------------

_CONFIG_TEXTS = [p.read_text() for p in sorted((FIXTURES / "configs").glob("*.yaml"))]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=150)
@given(st.sampled_from(_CONFIG_TEXTS), st.data())
def test_a_mutated_real_config_is_read_or_refused_in_one_line(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 200)))
    junk = data.draw(
        st.text(alphabet=":-[]{}&*!|>'\"#\n ?,%@`\t", max_size=20)
        | st.sampled_from(
            ["!!python/object/apply:os.system ['touch PWNED']", "<<: *x", "&a", "*a", "\x00", "\ufeff", "---\n", "..."]
        )
    )
    mutated = text[:start] + junk + text[end:]
    try:
        values = parse_yaml_config(mutated, "cfg.yaml")
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("cfg.yaml")
    else:
        lines = mutated.count("\n") + 1
        assert all(1 <= v.source.line <= lines for v in values)


_ANY_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(deadline=None, max_examples=80)
@given(st.dictionaries(st.sampled_from([k.canonical for k in KNOWN_KEYS]), _ANY_VALUE, max_size=12))
def test_values_of_any_type_leave_constraints_decided_or_unknown_never_crash(config):
    given_values = [ConfigValue(k, v, Source("cfg.yaml", 1), "config") for k, v in config.items()]
    report = check_store(CATALOG, build_store(given_values))
    decided = [v.id for v in report.violations] + report.passed + [u.id for u in report.unchecked]
    # The memory constraints are checked only when the memory model made their value (check --gpu, --host-memory).
    made_by_the_model = {"memory-exceeds-capacity": "memory.fits", "host-memory-exceeds-capacity": "memory.host_fits"}
    expected = [
        s.id
        for s in CATALOG.signatures
        if s.preflight and (s.id not in made_by_the_model or made_by_the_model[s.id] in config)
    ]
    assert sorted(decided) == sorted(expected)
    diagnose_text(MESSAGE, config, CATALOG)


@given(st.dictionaries(st.text(max_size=12), _ANY_VALUE, min_size=1, max_size=6))
def test_any_yaml_mapping_loads(document):
    text = yaml.safe_dump(document, allow_unicode=True)
    # PyYAML's own round trip can merge two keys (' ' and NEL, which a quoted scalar folds to a space): such a
    # document has a duplicate key, which the loader refuses by design
    assume(yaml.safe_load(text) == document)
    values = parse_yaml_config(text, "generated.yaml")
    assert all(v.source.path == "generated.yaml" for v in values)


# ---- rank sets ------------------------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 10**6), max_size=300))
def test_rank_set_text_is_canonical(ranks):
    shown = format_ranks(ranks)
    assert parse_ranks(shown) == sorted(set(ranks))
    assert format_ranks(parse_ranks(shown)) == shown
    assert shown == "" or all(part and part[0].isdigit() for part in shown.split(","))


# --- pyproject.toml: the cheap check never skips a file that defines [tool.offloaddoctor] ---------------------

_WS = st.sampled_from(["", " ", "\t", "  "])
_QUOTE = st.sampled_from(["", '"', "'"])


@st.composite
def _pyproject_defining_our_table(draw):
    ws, q, q2 = draw(_WS), draw(_QUOTE), draw(_QUOTE)
    tool, ours = f"{q}tool{q}", f"{q2}offloaddoctor{q2}"
    root, tables = "", []
    form = draw(
        st.sampled_from(
            ["header", "subheader", "array", "tool-table", "tool-table-dotted", "root-dotted", "root-inline"]
        )
    )
    if form == "header":
        tables.append(f"{ws}[{ws}{tool}{ws}.{ws}{ours}{ws}]\nfail_on = 'never'\n")
    elif form == "subheader":
        tables.append(f"[{tool}.{ours}.extra]\nx = 1\n")
    elif form == "array":
        tables.append(f"[[{ws}{tool}{ws}.{ours}.ignore]]\nid = 'a'\n")
    elif form == "tool-table":
        tables.append(f"[{ws}{tool}{ws}]\n{ws}{ours}{ws}={ws}{{ fail_on = 'never' }}\n")
    elif form == "tool-table-dotted":
        tables.append(f"[{tool}]\n{ours}{ws}.{ws}fail_on = 'never'\n")
    elif form == "root-dotted":
        root = f"{ws}{tool}{ws}.{ws}{ours}.fail_on = 'never'\n"
    else:
        root = f"{tool}{ws}={ws}{{ {ours} = {{ fail_on = 'never' }} }}\n"
    noise = draw(
        st.lists(
            st.sampled_from(
                [
                    "[project]\nname = 'offloaddoctor'\ndependencies = ['offloaddoctor>=0.1']\n",
                    "[tool.hatch.build]\npackages = ['src/offloaddoctor']\n",
                    "[other]\ndescription = '''\n[tool]\n'''\n",
                    "# [tool.offloaddoctor] only in a comment\n[x]\ny = 2\n",
                ]
            ),
            max_size=3,
            unique=True,
        )
    )
    order = draw(st.permutations(tables + noise))
    return root + "".join(order)


@settings(max_examples=300, deadline=None)
@given(text=_pyproject_defining_our_table())
def test_pyproject_precheck_never_skips_our_table(text):
    import tomllib

    from offloaddoctor.policy import may_define_our_table

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assume(False)
    assert data.get("tool", {}).get("offloaddoctor") is not None  # the generator defines it
    assert may_define_our_table(text)


def test_pyproject_that_only_names_offloaddoctor_is_not_parsed(tmp_path, monkeypatch):
    from offloaddoctor.policy import load_policy

    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\ndependencies = ['offloaddoctor>=0.1']\n[tool.black]\nline-length = 100\n"
    )
    monkeypatch.setitem(sys.modules, "tomllib", None)  # importing it would fail
    assert load_policy(tmp_path).source is None


@given(
    st.lists(
        st.sampled_from(
            ["rank", "RANK", "Rank", "\u212a", "r", "a", "n", "k", "-", "_", ".", "3", "٣", "0", "İ", "x", "/"]
        ),
        max_size=10,
    ).map("".join)
)
def test_the_rank_in_a_file_name_is_found_as_a_case_insensitive_search_finds_it(name):
    from offloaddoctor.logs.sources import LogSource

    found = re.search(r"rank[-_.]?(\d{1,6})", os.path.basename(name), re.IGNORECASE)
    assert LogSource(name + ".log").rank_from_name == (int(found.group(1)) if found else None)


def _not_text_reason_format_by_format(block: bytes) -> str | None:
    """sources.not_text_reason as it was before its first-byte test: every format's magic asked in turn (after a
    leading run of NUL bytes, which is not judged)."""
    if block[:1] == b"\x00":
        block = block[sources.leading_nul_bytes(block) :]
    for magic, reason in sources._COMPRESSED:
        if block.startswith(magic) and (magic != b"BZh" or sources.looks_binary(block) or block[3:4].isdigit()):
            return reason
    return "looks like a binary file, not a text log" if sources.looks_binary(block) else None


_MAGIC_HEADS = st.sampled_from([magic for magic, _ in sources._COMPRESSED])


@given(st.one_of(st.binary(max_size=40), st.tuples(_MAGIC_HEADS, st.binary(max_size=40)).map(b"".join)))
def test_the_first_byte_test_names_what_every_magic_did(block):
    assert sources.not_text_reason(block) == _not_text_reason_format_by_format(block)


_MATCHER_LITERAL_SOUP = st.lists(
    st.sampled_from(
        [
            "Watchdog caught collective operation timeout",
            "NCCL_GRAPH_REGISTER=0 to avoid illegal memory access",
            "NCCL_GRAPH_REGISTER=1 to avoid illegal memory access",
            "out of memory",
            "ncclSystemError",
            "[Rank 12] ",
            "SeqNum=1213, ",
            "0",
            "7",
            "é",
            " ",
            "CUDA",
            "offload_optimizer_states",
        ]
    ),
    max_size=10,
).map("".join)


# Frozen dataclasses, built once: a catalogue loaded and its matchers built per example was 3 s of this test.
_CATALOG_MATCHERS = tuple(build_matchers(CATALOG))


@settings(max_examples=300, deadline=None)
@given(st.lists(_MATCHER_LITERAL_SOUP | st.text(max_size=40), min_size=1, max_size=6))
def test_the_literals_remembered_by_a_lines_shape_are_the_literals_it_holds(lines):
    """Lines alike but for their digits share a shape; a literal with a digit is still tested on the line."""
    from offloaddoctor.scanning.scanner import FailureMatcher, ScanResult

    failures = FailureMatcher(list(_CATALOG_MATCHERS), ScanResult())  # a new one, its shapes unknown, each example
    for line in lines + [line.translate(str.maketrans("0123456789", "9876543210")) for line in lines]:
        assert sorted(failures._present(line)) == sorted(lit for lit in failures._matcher_literals if lit in line)


@given(st.lists(st.integers(0, 1000), min_size=2, max_size=4), st.sampled_from([",", ", ", "/"]))
def test_a_split_without_a_validation_weight_is_read_as_no_validation_set(weights, separator):
    from offloaddoctor.memory.shape import _no_validation_split

    assert _no_validation_split(separator.join(map(str, weights))) is (weights[1] == 0)


@given(st.text(max_size=40) | st.none() | st.integers() | st.floats())
def test_a_split_of_any_shape_never_raises(split):
    from offloaddoctor.memory.shape import _no_validation_split

    assert _no_validation_split(split) in (True, False)
