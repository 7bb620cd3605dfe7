"""`compare --plot`: iteration time and peak memory against the offload fraction (needs matplotlib)."""

from __future__ import annotations

from offloaddoctor.errors import UserError
from offloaddoctor.metrics.compare import Comparison


def write_plot(comparison: Comparison, path: str) -> None:
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
    time_axis.plot(fractions, [r.median_iteration_ms for r in points], "o-", color="tab:red", label="median iteration (ms)")
    time_axis.set_xlabel("optimizer offload fraction")
    time_axis.set_ylabel("median iteration time (ms)", color="tab:red")
    memory_axis = time_axis.twinx()
    memory_axis.plot(fractions, [r.peak_allocated_mb for r in points], "s--", color="tab:blue", label="peak allocated (MB)")
    memory_axis.set_ylabel("peak allocated memory (MB)", color="tab:blue")
    time_axis.set_title("offloaddoctor compare")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120)
    except OSError as exc:
        raise UserError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(figure)
