"""`compare --plot`: iteration time and peak memory against the offload fraction (needs matplotlib)."""

from __future__ import annotations

from pathlib import Path

from offloaddoctor.errors import UserError
from offloaddoctor.metrics.compare import FAIL, Comparison


def build_figure(comparison: Comparison):
    """Iteration time (left axis) and peak memory (right) against the offload fraction, one legend for both,
    failing runs marked FAIL."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'offloaddoctor[plot]'") from None
    points = [r for r in [comparison.baseline, *comparison.runs] if r.offload_fraction is not None]
    points.sort(key=lambda r: r.offload_fraction or 0.0)  # None was filtered out above
    fractions = [r.offload_fraction for r in points]
    figure, time_axis = plt.subplots(figsize=(6, 4))
    time_line = time_axis.plot(
        fractions, [r.median_iteration_ms for r in points], "o-", color="tab:red", label="median iteration (ms)"
    )
    time_axis.set_xlabel("optimizer offload fraction")
    time_axis.set_ylabel("median iteration time (ms)", color="tab:red")
    memory_axis = time_axis.twinx()
    memory_line = memory_axis.plot(
        fractions, [r.peak_allocated_mb for r in points], "s--", color="tab:blue", label="peak allocated (MB)"
    )
    memory_axis.set_ylabel("peak allocated memory (MB)", color="tab:blue")
    handles = time_line + memory_line
    failing = [
        r for r in points if r is not comparison.baseline and r.verdict == FAIL and r.median_iteration_ms is not None
    ]
    if failing:
        handles += time_axis.plot(
            [r.offload_fraction for r in failing],
            [r.median_iteration_ms for r in failing],
            "x",
            color="black",
            markersize=12,
            markeredgewidth=2,
            linestyle="none",
            label="failed a criterion",
        )
        for run in failing:
            time_axis.annotate(
                f"FAIL {Path(run.path).name}",
                (run.offload_fraction, run.median_iteration_ms),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=8,
            )
    time_axis.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    time_axis.set_title("offloaddoctor compare")
    figure.tight_layout()
    return figure


def write_plot(comparison: Comparison, path: str) -> None:
    figure = build_figure(comparison)
    import matplotlib.pyplot as plt

    try:
        figure.savefig(path, dpi=120)
    except OSError as exc:
        raise UserError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(figure)
