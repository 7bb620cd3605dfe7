"""What offloading the optimizer costs in iteration time: two measured curves, a 0.47B GPT on one H100
(fixtures/compare-family) and Qwen3-30B-A3B from the CPU-offloading guide, interpolated between their points.
The OOM fix (fix_numbers.py) and the memory model's changes (changes.py) both quote them."""

from __future__ import annotations

# (fraction, iteration-time ratio) measured: small dense model on an H100, and the guide's MoE model.
SMALL_MODEL = ((0.0, 1.0), (0.25, 1.21), (0.5, 1.42), (1.0, 2.07))
GUIDE_MODEL = ((0.0, 1.0), (0.25, 1.9), (1.0, 4.2))


def measured_slowdown(fraction: float) -> float:
    """Iteration-time ratio at an offload fraction on the measured H100 curve (the smaller model's)."""
    return _interpolate(SMALL_MODEL, fraction)


def expected_slowdown(fraction: float) -> str:
    small, large = measured_slowdown(fraction), _interpolate(GUIDE_MODEL, fraction)
    return f"~{small:.1f}x (0.47B GPT, H100) to ~{large:.1f}x (Qwen3-30B-A3B, the CPU-offloading guide) at fraction {fraction:g}"


def _interpolate(points, x: float) -> float:
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]
