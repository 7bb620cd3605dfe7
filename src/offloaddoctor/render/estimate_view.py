"""`estimate` output: plain text (also on a terminal), Markdown and JSON (docs/estimate.schema.json)."""

from __future__ import annotations


from offloaddoctor import __version__
from offloaddoctor.advice import EstimateReport, mib
from offloaddoctor.byte_units import GIB, MIB
from offloaddoctor.config.derived import flagscale_places
from offloaddoctor.config.dialect import dialect_of, render_lines
from offloaddoctor.memory.model import COMPONENTS, host_memory_sentence, why_most_loaded
from offloaddoctor.text_safety import json_document, safe_text as inert

SCHEMA_VERSION = 1
# A component as the tables name it, where that is not its name (memory/model.py COMPONENTS).
_LABELS = {"optimizer_states": "optimizer states", "logits": "logits and loss"}


def _components(report: EstimateReport):
    return sorted(report.estimate.most_loaded.components, key=lambda c: -c.bytes)


def _share(value: float, report: EstimateReport) -> str:
    budget = report.budget_bytes
    return f"{100 * value / budget:5.1f} %" if budget else "      -"


def _share_header(report: EstimateReport) -> str:
    """The share column is of the budget (the total row is the peak's share of it), not of the peak."""
    return "share of target" if report.target is not None else "share of GPU"


def _verdict(report: EstimateReport) -> str:
    if report.fits is None or report.headroom_bytes is None:  # (both are known once a budget is)
        return "no GPU given (--gpu or --gpu-memory): capacity not checked"
    verdict = report.verdict
    assert verdict is not None
    return verdict.sentence("target" if report.target is not None else "GPU")


def render_estimate_text(report: EstimateReport) -> str:
    est, shape, dialect = report.estimate, report.estimate.shape, dialect_of(report.store)
    places = flagscale_places(report.store)
    stage = est.most_loaded
    reserved, smi = est.reserved_bytes, est.nvidia_smi_bytes
    lines = [
        f"offloaddoctor {__version__}: memory estimate for {inert(', '.join(report.configs) or '--set')} "
        "(an estimate from the config, not a measurement)",
        "",
        f"Peak allocated  {est.peak_allocated_bytes / MIB:>10,.0f} MiB  (torch.cuda.max_memory_allocated, "
        f"pipeline stage {stage.stage} of {shape.pipeline_parallel}, during the {stage.phase})",
    ]
    if stage.uncollected_bytes:  # the peak allocated's figure: it goes under that line, not under nvidia-smi
        lines.append(
            f"                {est.peak_allocated_if_collected_bytes / MIB:>10,.0f} MiB  (the same once Python's garbage "
            "collector frees the optimizer's first build: --manual-gc frees it before training)"
        )
    lines += [
        f"Reserved        {reserved[0] / MIB:>10,.0f} MiB  (PyTorch's allocator; measured slack "
        f"{reserved[1] / MIB:,.0f}-{reserved[2] / MIB:,.0f})",
        f"nvidia-smi      {smi[0] / MIB:>10,.0f} MiB  (reserved + CUDA context and NCCL; "
        f"{smi[1] / MIB:,.0f}-{smi[2] / MIB:,.0f})",
    ]
    why = why_most_loaded(est)
    if why:
        lines.append(f"Most loaded     {why}")
    host = host_memory_sentence(est)
    if host:
        lines.append(f"Host memory     {host}")
    if report.host_verdict:
        lines.append(f"Host            {report.host_verdict.sentence()}")
    for signature, title in report.refused_by:
        lines.append(
            f"Refused         {signature}: {inert(title)} (as configured it stops before or at its first step; `offloaddoctor check`)"
        )
    if report.capacity:
        lines.append(f"GPU             {report.capacity.bytes / MIB:>10,.0f} MiB  ({inert(report.capacity.source)})")
    if report.target is not None:
        lines.append(f"Target          {report.target / MIB:>10,.0f} MiB")
    width = len(_share_header(report))
    lines += [f"Verdict         {_verdict(report)}", "", f"Component              MiB  {_share_header(report)}  how"]
    for component in _components(report):
        lines.append(
            f"  {_LABELS.get(component.name, component.name):<16} {component.bytes / MIB:>9,.0f}  {_share(component.bytes, report):>{width}}  "
            f"{inert(component.formula)}"
        )
    lines.append(
        f"  {'total (peak)':<16} {est.peak_allocated_bytes / MIB:>9,.0f}  {_share(est.peak_allocated_bytes, report):>{width}}"
    )
    largest = _components(report)[0]
    lines.append(f"Largest component: {_LABELS.get(largest.name, largest.name)}.")
    if report.suggestions:
        fitting = report.suggestions[0].fits
        lines += [
            "",
            (
                "It fits; changes that lower the peak further, cheapest first:"
                if report.fits
                else "Changes that make it fit, cheapest first:"
            )
            if fitting
            else "No single change makes it fit; the ones that help most:",
        ]
        for number, suggestion in enumerate(report.suggestions, start=1):
            on_host = suggestion.host_bytes_moved(est)  # the run's own is the `Host memory` line
            lines.append(
                f"  {number}. {inert(suggestion.change)}: peak {suggestion.peak_allocated_bytes / MIB:,.0f} MiB"
                f"{_too_much(suggestion.fits, suggestion.gpu_fits)}"
                f"{f', host memory about {on_host / GIB:,.0f} GiB a rank' if on_host else ''}; cost: {inert(suggestion.cost)}"
            )
            lines += [f"       {inert(line)}" for line in render_lines(suggestion.overrides, dialect, places)]
    assumptions = [*shape.assumptions, *report.notes]
    if assumptions:
        lines += ["", "Assumptions:"] + [f"  - {inert(text)}" for text in assumptions]
    lines += ["", "Inputs:"] + [f"  {inert(key)} = {inert(value)}" for key, value in shape.sources]
    return "\n".join(lines) + "\n"


def render_estimate_markdown(report: EstimateReport) -> str:
    est, dialect = report.estimate, dialect_of(report.store)
    places = flagscale_places(report.store)
    rows = [f"| component | MiB | {_share_header(report)} | how |", "|---|---:|---:|---|"]
    for component in _components(report):
        rows.append(
            f"| {_LABELS.get(component.name, component.name)} | {component.bytes / MIB:,.0f} | {_share(component.bytes, report).strip()} | "
            f"{_md(component.formula)} |"
        )
    rows.append(f"| **peak allocated** | **{est.peak_allocated_bytes / MIB:,.0f}** | | |")
    out = [
        f"### Memory estimate: {_md(', '.join(report.configs) or '--set')}",
        "",
        f"**{_md(_verdict(report))}** (nvidia-smi ≈ {est.nvidia_smi_bytes[0] / MIB:,.0f} MiB; an estimate)",
        "",
        *rows,
    ]
    host = host_memory_sentence(est)
    if host:
        out += ["", f"Host memory: {_md(host)}."]
    if report.host_verdict:
        out += ["", f"**{_md(report.host_verdict.sentence())}**"]
    if report.refused_by:
        out += [
            "",
            *(f"**Refused: {_md(sig)}**: {_md(title)} (`offloaddoctor check`)" for sig, title in report.refused_by),
        ]
    if report.suggestions:
        out += ["", "| change | peak MiB | fits | cost | overrides |", "|---|---:|---|---|---|"]
        for s in report.suggestions:
            out.append(
                f"| {_md(s.change)} | {s.peak_allocated_bytes / MIB:,.0f} | {'yes' if s.fits else 'no'} | "
                f"{_md(s.cost)} | `{_md(' '.join(render_lines(s.overrides, dialect, places)))}` |"
            )
    return "\n".join(out) + "\n"


def _too_much(fits: bool, gpu_fits: bool) -> str:
    if fits:
        return ""
    return " (still too much)" if not gpu_fits else " (too much for the host)"


def _md(text: str) -> str:
    return inert(text).replace("|", "\\|").replace("`", "'")


def estimate_json(report: EstimateReport) -> dict:
    est, shape, dialect = report.estimate, report.estimate.shape, dialect_of(report.store)
    places = flagscale_places(report.store)
    stage = est.most_loaded
    components = {f"{c.name}_mb": mib(c.bytes) for c in stage.components}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "offloaddoctor", "version": __version__},
        "configs": report.configs,
        "peak_allocated_mb": mib(est.peak_allocated_bytes),
        "peak_phase": stage.phase,
        "components": {f"{name}_mb": components[f"{name}_mb"] for name in COMPONENTS},
        "formulas": {c.name: c.formula for c in stage.components},
        "most_loaded_rank": {
            "pipeline_stage": stage.stage,
            "pipeline_stages": shape.pipeline_parallel,
            "parameters": stage.parameters.total,
            "layers": stage.parameters.layers,
            "why": why_most_loaded(est),
        },
        "peak_allocated_if_collected_mb": mib(est.peak_allocated_if_collected_bytes),
        "stages": [
            {"pipeline_stage": s.stage, "peak_allocated_mb": mib(s.peak_bytes), "phase": s.phase} for s in est.stages
        ],
        "reserved_mb": dict(zip(("estimate", "low", "high"), map(mib, est.reserved_bytes))),
        "nvidia_smi_mb": dict(zip(("estimate", "low", "high"), map(mib, est.nvidia_smi_bytes))),
        "host_offload_mb": mib(est.host_bytes),
        "host_offload_other_ranks_mb": mib(est.host_bytes_other_ranks),
        "host_memory_mb": mib(report.host_memory) if report.host_memory is not None else None,
        "host_verdict": report.host_verdict.status if report.host_verdict else None,
        "host_needed_mb": mib(report.host_verdict.needed_bytes) if report.host_verdict else None,
        "ranks_per_node": report.ranks_per_node,
        "gpu_memory_mb": mib(report.capacity.bytes) if report.capacity else None,
        "gpu_source": report.capacity.source if report.capacity else None,
        "target_mb": mib(report.target) if report.target is not None else None,
        "fits": report.fits,
        "refused_by": [signature for signature, _ in report.refused_by],
        "verdict": report.verdict.status if report.verdict else None,
        "verdict_reasons": list(report.verdict.reasons) if report.verdict else [],
        "pytorch_limit_mb": mib(report.verdict.limit_bytes) if report.verdict else None,
        "allocator_slack": report.verdict.slack if report.verdict else None,
        "headroom_mb": mib(report.headroom_bytes) if report.headroom_bytes is not None else None,
        "fix_dialect": dialect,
        "advice": [
            {
                "change": s.change,
                "overrides": render_lines(s.overrides, dialect, places),
                "peak_allocated_mb": mib(s.peak_allocated_bytes),
                "nvidia_smi_mb": mib(s.estimate.nvidia_smi_bytes[0]),
                "host_offload_mb": mib(s.estimate.host_bytes),
                "fits": s.fits,
                "fits_gpu": s.gpu_fits,
                "fits_host": s.host_fits,
                "cost": s.cost,
            }
            for s in report.suggestions
        ],
        "assumptions": [*shape.assumptions, *report.notes],
        "inputs": dict(shape.sources),
        "layout": {
            "tensor_parallel": shape.tensor_parallel,
            "pipeline_parallel": shape.pipeline_parallel,
            "context_parallel": shape.context_parallel,
            "data_parallel": shape.data_parallel,
            "world_size": shape.world_size,
        },
    }


def render_estimate_json(report: EstimateReport) -> str:
    return json_document(estimate_json(report))
