"""GH100 attention rates: the constants against the H100 measurements they were fitted to and
the held-out lease, and their use in the step (plan/efficiency.py GH100_ATTENTION)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from flopwise.plan.efficiency import GH100_ATTENTION, gh100_attention_fraction

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks/device/results/h100-2026-11-23"
PEAK_BF16_TFLOPS = 989.4  # H100 SXM dense bf16, the denominator the fit used
KERNEL_OF_BACKEND = {"cudnn": "flash", "flash": "flash2"}


def _points(name: str) -> list[tuple[str, str, int, float]]:
    rows = []
    with (RESULTS / name).open() as fh:
        for r in csv.DictReader(fh):
            kernel = KERNEL_OF_BACKEND.get(r["backend"])
            if kernel is None:
                continue
            for direction in ("fwd", "bwd"):
                frac = float(r[f"{direction}_tflops"]) / PEAK_BF16_TFLOPS
                rows.append((kernel, direction, int(r["seq_len"]), frac))
    return rows


@pytest.mark.parametrize(
    ("name", "mean_tol", "worst_tol"),
    [("attention.csv", 0.04, 0.10), ("attention_round1.csv", 0.04, 0.10)],
)
def test_fit_reproduces_the_measured_rates(name: str, mean_tol: float, worst_tol: float) -> None:
    """Within 4% on average and 10% at worst, on the fit's own lease and on the held-out one."""
    points = _points(name)
    assert len(points) == 24
    errors = [abs(math.log(gh100_attention_fraction(k, d, s) / frac)) for k, d, s, frac in points]
    assert sum(errors) / len(errors) < mean_tol
    assert max(errors) < worst_tol


def test_short_sequences_run_below_long_ones_and_backward_below_forward() -> None:
    for kernel in ("flash", "flash2"):
        for direction in ("fwd", "bwd"):
            rates = [gh100_attention_fraction(kernel, direction, s) for s in (512, 2048, 32768)]
            assert rates == sorted(rates)
            assert rates[-1] < GH100_ATTENTION[(kernel, direction)][0]
        assert gh100_attention_fraction(kernel, "bwd", 2048) < gh100_attention_fraction(
            kernel, "fwd", 2048
        )
    # the best fused kernel (cuDNN, FA3 class) is well above FlashAttention-2 on Hopper
    assert gh100_attention_fraction("flash", "fwd", 4096) > 1.5 * gh100_attention_fraction(
        "flash2", "fwd", 4096
    )
