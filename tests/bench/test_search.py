"""Shape selection: the grid visits exactly the ranges; the directed search stays inside them."""

from __future__ import annotations

import itertools

import pytest

from flopwise.bench.matmul_search import (
    SearchHints,
    SearchPolicy,
    SearchSpace,
    best_wave_efficiency,
    directed_search,
    grid_search,
    values_from_range,
    wave_efficiency,
)
from flopwise.errors import FlopwiseError


def test_range_is_inclusive_and_drops_zero() -> None:
    assert values_from_range(0, 1024, 256) == (256, 512, 768, 1024)
    assert values_from_range(100, 350, 100) == (100, 200, 300)
    assert values_from_range(64, 64, 1) == (64,)


@pytest.mark.parametrize("bad", [(10, 5, 1), (0, 0, 1), (0, 100, 0), (-1, 10, 1)])
def test_bad_ranges_are_one_line_errors(bad: tuple[int, int, int]) -> None:
    with pytest.raises(FlopwiseError) as err:
        values_from_range(*bad, what="--m-range")
    assert "\n" not in str(err.value)


def test_space_rejects_non_positive_sizes() -> None:
    with pytest.raises(FlopwiseError, match="positive"):
        SearchSpace(m=(0, 64), n=(64,), k=(64,))


def test_grid_visits_exactly_the_requested_shapes() -> None:
    space = SearchSpace(m=(64, 128, 192), n=(32, 96), k=(16, 48, 80, 112))
    seen: list[tuple[int, int, int]] = []

    def measure(shape: tuple[int, int, int]) -> float:
        seen.append(shape)
        return 1.0

    trace = grid_search(space, measure)
    expected = list(itertools.product(space.m, space.n, space.k))
    assert seen == expected  # every shape once, M outermost, K innermost
    assert trace.stop_reason == "exhausted"


def test_wave_efficiency_counts_whole_waves() -> None:
    # 1280x1280 with 128x128 tiles = 100 tiles on 108 SMs: one wave, 100/108 busy.
    assert wave_efficiency(1280, 1280, 108, 128) == pytest.approx(100 / 108)
    # 216 tiles on 108 SMs: exactly two full waves.
    assert wave_efficiency(128 * 12, 128 * 18, 108, 128) == 1.0
    # 109 tiles: a second wave with one tile in it.
    assert wave_efficiency(128 * 109, 128, 108, 128) == pytest.approx(109 / 216)
    # No wave model on a CPU.
    assert best_wave_efficiency(100, 100, SearchHints(compute_units=2, element_bytes=4)) == 1.0


def _landscape(shape: tuple[int, int, int]) -> float:
    """Synthetic TFLOPS: grows with size, saturates, penalises unaligned and partial waves."""
    m, n, k = shape
    size = (m * n * k) ** (1 / 3)
    score = 100 * size / (size + 1500)
    if m % 64 or n % 64 or k % 64:
        score *= 0.7
    score *= wave_efficiency(m, n, 132, 128) ** 0.5
    return score


def test_directed_search_stays_inside_and_finds_the_synthetic_peak() -> None:
    space = SearchSpace(
        m=values_from_range(256, 8192, 128),
        n=values_from_range(256, 8192, 128),
        k=values_from_range(256, 8192, 256),
    )
    hints = SearchHints(compute_units=132, element_bytes=2)
    trace = directed_search(space, hints, _landscape, budget_s=None)
    assert trace.visited and all(space.contains(s) for s, _ in trace.visited)
    assert len({s for s, _ in trace.visited}) == len(trace.visited)  # no shape twice
    assert len(trace.visited) < space.size / 50
    best = trace.best()
    assert best is not None
    grid_best = max(_landscape(s) for s in space.grid())
    assert best[1] >= 0.98 * grid_best
    assert trace.stop_reason == "converged"


def test_directed_search_prefers_128_byte_aligned_sizes() -> None:
    space = SearchSpace(m=tuple(range(1000, 1200, 8)), n=(1024, 1030), k=(512, 520))
    trace = directed_search(
        space, SearchHints(compute_units=None, element_bytes=2), lambda s: 1.0, budget_s=None
    )
    for (m, n, k), _ in trace.visited:
        assert m % 64 == 0 and n % 64 == 0 and k % 64 == 0


def test_directed_search_respects_time_budget_and_shape_cap() -> None:
    space = SearchSpace(m=values_from_range(64, 4096, 64), n=(1024, 2048), k=(512, 1024))
    now = [0.0]

    def clock() -> float:
        return now[0]

    def measure(shape: tuple[int, int, int]) -> float:
        now[0] += 1.0  # every shape costs one "second"
        return float(shape[0])

    trace = directed_search(space, SearchHints(None, 4), measure, budget_s=5.0, clock=clock)
    assert trace.stop_reason == "budget"
    assert len(trace.visited) == 5  # stops once the budget is spent
    capped = directed_search(
        space,
        SearchHints(None, 4),
        lambda s: 1.0,
        budget_s=None,
        policy=SearchPolicy(max_shapes=3),
    )
    assert len(capped.visited) == 3 and capped.stop_reason == "max_shapes"


@pytest.mark.parametrize("search", ["grid", "auto"])
def test_a_shape_that_cannot_finish_in_the_budget_is_not_started(search: str) -> None:
    space = SearchSpace(m=(64, 4096), n=(64, 4096), k=(64, 4096))
    now = [0.0]

    def cost(shape: tuple[int, int, int]) -> float:
        return 30.0 if max(shape) == 4096 else 1.0  # big shapes take 30 "seconds"

    def measure(shape: tuple[int, int, int]) -> float:
        now[0] += cost(shape)
        return float(sum(shape))

    kw = {"budget_s": 10.0, "clock": lambda: now[0], "estimate_s": cost}
    if search == "grid":
        trace = grid_search(space, measure, **kw)  # type: ignore[arg-type]
    else:
        trace = directed_search(space, SearchHints(None, 4), measure, **kw)  # type: ignore[arg-type]
    measured = [s for s, _ in trace.visited]
    assert measured == [(64, 64, 64)]  # the only shape that fits; the old code started a big one
    assert now[0] <= 10.0 and trace.stop_reason == "budget"
    assert len(trace.skipped_for_budget) == 7


def test_directed_search_on_a_tiny_space_measures_it_all_once() -> None:
    space = SearchSpace(m=(32, 64), n=(32,), k=(32, 64))
    trace = directed_search(space, SearchHints(None, 4), lambda s: float(sum(s)), budget_s=None)
    assert sorted(s for s, _ in trace.visited) == sorted(space.grid())
    assert trace.stop_reason == "exhausted"


def test_failed_shapes_are_skipped_not_fatal() -> None:
    space = SearchSpace(m=(256, 512, 768, 1024), n=(256, 512), k=(256,))

    def measure(shape: tuple[int, int, int]) -> float | None:
        return None if shape[0] == 1024 else float(shape[0])  # the largest "runs out of memory"

    trace = directed_search(space, SearchHints(None, 4), measure, budget_s=None)
    best = trace.best()
    assert best is not None and best[0][0] == 768


def test_shape_time_estimate_scales_with_flops_and_counts_flush_and_setup() -> None:
    from flopwise.bench.matmul_budget import ESTIMATE_SAFETY, ShapeTimeEstimator

    est = ShapeTimeEstimator(iterations=3, warmup=1, flush_s=0.5, alloc_s_per_element=0.0)
    assert est((128, 128, 128)) is None  # no rate observed yet: nothing to go on
    est.observe_rate(2 * 1000**3, 1.0)  # 2 GFLOP/s at 1000^3
    expected = ESTIMATE_SAFETY * (4 * 2 * 2000**3 / 2e9 + 3 * 0.5)
    assert est((2000, 2000, 2000)) == pytest.approx(expected)
