"""Binomial probabilities over a range of counts, for the planners' routing statistics.

MoE routing under uniform top-k choice makes two counts Binomial: the rows one expert receives
(each token joins it with probability k / E; plan/gemm.py ``expected_row_tiles``) and the
experts one expert-parallel rank sees touched (plan/infer/shard.py ``busiest_group_experts``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator


def binomial_pmfs(trials: int, p: float, lo: int, hi: int) -> Iterator[tuple[int, float]]:
    """(x, P(X = x)) for x = lo..hi, X ~ Binomial(trials, p) with 0 < p < 1 and
    0 <= lo <= hi <= trials: the first from log-gammas (no overflow at large `trials`), the
    rest by the ratio P(x + 1) / P(x) = (trials - x) / (x + 1) x p / (1 - p)."""
    pmf = math.exp(
        math.lgamma(trials + 1)
        - math.lgamma(lo + 1)
        - math.lgamma(trials - lo + 1)
        + lo * math.log(p)
        + (trials - lo) * math.log1p(-p)
    )
    odds = p / (1.0 - p)
    for x in range(lo, hi + 1):
        yield x, pmf
        pmf *= (trials - x) / (x + 1) * odds
