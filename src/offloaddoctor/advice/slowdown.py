"""What offloading the optimizer costs in iteration time: measured curves, interpolated between their points.
Dense runs: a 0.47B GPT on one H100 (fixtures/compare-family) to Qwen3-30B-A3B (the CPU-offloading guide). MoE
runs: Qwen3-30B-A3B to a MoE whose parameters, not its compute, set the step (fixtures/memory-calibration e52,
e55, e58: the CPU's Adam over the offloaded share grows with the parameters, the step's compute with the active
ones). The OOM fix (fix_numbers.py) and the memory model's changes (changes.py) both quote them."""

from __future__ import annotations

# (fraction, iteration-time ratio) measured.
SMALL_MODEL = ((0.0, 1.0), (0.25, 1.21), (0.5, 1.42), (1.0, 2.07))
GUIDE_MODEL = ((0.0, 1.0), (0.25, 1.9), (1.0, 4.2))
# 5.6B parameters, 40 experts of which 2 active, 1,024 tokens a GPU a step, two H200: median of iterations 4-12
# (402 ms without offloading, 1,120 ms at 0.15, 3,844 ms at 0.5); measured up to 0.5.
PARAMETER_BOUND_MOE = ((0.0, 1.0), (0.15, 2.78), (0.5, 9.56))


def measured_slowdown(fraction: float, moe: bool = False) -> float:
    """Iteration-time ratio at an offload fraction for ordering changes: the gentler measured curve of the run's
    kind (the 0.47B GPT's for dense runs, the guide's Qwen3-30B-A3B for MoE)."""
    return _interpolate(GUIDE_MODEL if moe else SMALL_MODEL, fraction)


def expected_slowdown(fraction: float, moe: bool = False) -> str:
    if not moe:
        small, large = measured_slowdown(fraction), _interpolate(GUIDE_MODEL, fraction)
        return (
            f"~{small:.1f}x (0.47B GPT, H100) to ~{large:.1f}x (Qwen3-30B-A3B, the CPU-offloading guide) "
            f"at fraction {fraction:g}"
        )
    guide, heavy = _interpolate(GUIDE_MODEL, fraction), _interpolate(PARAMETER_BOUND_MOE, fraction)
    beyond = fraction > PARAMETER_BOUND_MOE[-1][0]
    return (
        f"~{guide:.1f}x (Qwen3-30B-A3B, the CPU-offloading guide) to {'over ' if beyond else ''}~{heavy:.1f}x "
        f"(a 5.6B-parameter MoE at 1,024 tokens a GPU a step, two H200{', measured to 0.5' if beyond else ''}) "
        f"at fraction {fraction:g}"
    )


def _interpolate(points, x: float) -> float:
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]
