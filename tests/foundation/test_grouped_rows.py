"""Grouped MoE GEMMs whose experts receive different row counts (plan/gemm.py expected_row_tiles).

Under uniform top-k routing each of T tokens joins a given expert with probability k / E, so
the expert's rows are Binomial(T, k / E); a grouped kernel pads each expert's last row tile, so
a spread of counts costs about half a tile per expert even where the mean is a whole number of
tiles. Golden values: the exact sum over every count (math.comb), and a seeded simulation of
routing itself.
"""

from __future__ import annotations

import math
import random

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.gemm import compute_efficiency, expected_row_tiles


def _exact(trials: int, p: float, tile: int) -> float:
    """E[ceil(X / tile) | X > 0] summed over every count 0..trials."""
    pmf = [math.comb(trials, x) * p**x * (1 - p) ** (trials - x) for x in range(trials + 1)]
    nonzero = 1.0 - pmf[0]
    return sum(pmf[x] * math.ceil(x / tile) for x in range(1, trials + 1)) / nonzero


@pytest.mark.parametrize(
    ("trials", "p", "tile"), [(300, 0.1, 16), (400, 0.25, 64), (60, 0.02, 128), (1000, 0.5, 128)]
)
def test_the_windowed_sum_matches_the_exact_one(trials: int, p: float, tile: int) -> None:
    assert expected_row_tiles(trials, p, tile) == pytest.approx(_exact(trials, p, tile), rel=1e-9)


def test_routing_simulated_token_by_token_pads_as_predicted() -> None:
    # 2,048 tokens, 64 experts, top-4, 128-row tiles: the mean (128 rows) is exactly one tile
    rng = random.Random(7)
    tokens, experts, top_k, tile = 2048, 64, 4, 128
    total = 0
    trials = 100
    for _ in range(trials):
        counts = [0] * experts
        for _ in range(tokens):
            for e in rng.sample(range(experts), top_k):
                counts[e] += 1
        total += sum(math.ceil(c / tile) for c in counts if c)
    simulated = total / (trials * experts)  # every expert is touched at this load
    predicted = expected_row_tiles(tokens, top_k / experts, tile)
    assert predicted == pytest.approx(simulated, rel=0.02)
    assert predicted > 1.4  # about half the experts need a second tile, not none


def test_a_fixed_count_pays_no_spread() -> None:
    assert expected_row_tiles(1024, 1.0, 128) == 8.0
    assert expected_row_tiles(0, 0.5, 128) == 0.0


def test_spread_counts_lower_a_grouped_gemms_efficiency() -> None:
    # Qwen3-30B-A3B's prefill: 8,192 tokens, 128 experts, top-8: 512 rows per expert on average
    hw = hardware_from_catalog("h100-sxm")
    even = compute_efficiency(512, 1536, 2048, hw, "fp8", 128)
    spread = compute_efficiency(512, 1536, 2048, hw, "fp8", 128, row_draws=(8192, 8 / 128))
    assert spread < even
    # at most the half tile per expert the spread costs on the best 128-row tile (512 / 576)
    assert spread > even * 512 / 576 * 0.97
