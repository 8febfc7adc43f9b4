"""Which matmul shapes to measure: the full grid, or a directed search inside the same ranges.

No torch here: the search sees the device only through `SearchHints` (compute units, element
size) and a `measure(shape) -> score` callable, so it is tested with real or synthetic scores.

Directed search (tile/wave quantization, NVIDIA "Matrix Multiplication Background User's
Guide"; FORMULAS.md):
1. candidates per dimension are the range values aligned to 128 bytes (64 bf16 elements, 32
   fp32, 128 fp8); unaligned values are used only when a range has no aligned one;
2. a coarse set: a Latin square over a few levels per dimension, spread on a log scale over
   each range (16 shapes for 4 levels, not 64) plus the largest shape, each (M, N) pair nudged to the
   nearby values whose tile count fills whole waves on the device's compute units; measured
   in order of that prior (wave efficiency, then size);
3. refinement: a pattern search around the best shape, halving the step when no neighbour
   gains more than `min_gain`;
4. repeat 2-3 with twice as many levels per dimension; stop when a round gains less than
   `min_gain` (improvement stalls), the budget is spent, or every candidate was measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from flopwise.errors import FlopwiseError

Shape = tuple[int, int, int]

#: Alignment rule: every dimension a multiple of 128 bytes (NVIDIA Matrix Multiplication
#: Background User's Guide, "Tensor Core Requirements"; stas00/ml-engineering performance).
ALIGN_BYTES = 128

#: Output tile edges (elements) the GEMM libraries commonly use for large problems; a shape is
#: scored by the best wave fill over these (cuBLAS/CUTLASS 128x128, 128x256, 256x128 tiles).
DEFAULT_TILES: tuple[int, ...] = (128, 256)


def values_from_range(start: int, stop: int, step: int, what: str = "range") -> tuple[int, ...]:
    """START..STOP inclusive every STEP, as mamf-finder's `--m_range 0 20480 256`; 0 is dropped."""
    if step < 1:
        raise FlopwiseError(f"{what} step must be a positive integer, got {step}")
    if start < 0 or stop < 1 or stop < start:
        raise FlopwiseError(
            f"{what} {start} {stop} {step} is empty; need 0 <= START <= STOP and STOP >= 1"
        )
    values = tuple(v for v in range(start, stop + 1, step) if v > 0)
    if not values:
        raise FlopwiseError(f"{what} {start} {stop} {step} holds no positive size")
    return values


def _check_values(values: Sequence[int], what: str) -> tuple[int, ...]:
    if not values:
        raise FlopwiseError(f"{what} needs at least one size")
    bad = [v for v in values if int(v) != v or v < 1]
    if bad:
        raise FlopwiseError(f"{what} sizes must be positive integers, got {bad[0]!r}")
    return tuple(sorted({int(v) for v in values}))


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """The M, N and K sizes allowed; the grid is their product."""

    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            object.__setattr__(self, name, _check_values(getattr(self, name), f"--{name}"))

    @property
    def size(self) -> int:
        return len(self.m) * len(self.n) * len(self.k)

    def contains(self, shape: Shape) -> bool:
        m, n, k = shape
        return m in self.m and n in self.n and k in self.k

    def grid(self) -> Iterator[Shape]:
        """Every shape, M outermost and K innermost (mamf-finder's loop order)."""
        for m in self.m:
            for n in self.n:
                for k in self.k:
                    yield (m, n, k)

    def to_dict(self) -> dict[str, list[int]]:
        return {"m": list(self.m), "n": list(self.n), "k": list(self.k)}


@dataclass(frozen=True, slots=True)
class SearchHints:
    """What the search knows about the device."""

    compute_units: int | None  # SMs / CUs; None or 1..2 CPU threads: no wave model
    element_bytes: float
    tiles: tuple[int, ...] = DEFAULT_TILES

    @property
    def align_elements(self) -> int:
        return max(1, int(ALIGN_BYTES // self.element_bytes))

    @property
    def waves_matter(self) -> bool:
        return bool(self.compute_units and self.compute_units >= 4)


def wave_efficiency(m: int, n: int, units: int, tile: int) -> float:
    """Fraction of the scheduled waves doing useful tiles: C / (ceil(C/S) * S), C = tile count."""
    tiles = math.ceil(m / tile) * math.ceil(n / tile)
    return tiles / (math.ceil(tiles / units) * units)


def best_wave_efficiency(m: int, n: int, hints: SearchHints) -> float:
    if not hints.waves_matter or hints.compute_units is None:
        return 1.0
    return max(wave_efficiency(m, n, hints.compute_units, t) for t in hints.tiles)


@dataclass(frozen=True, slots=True)
class SearchPolicy:
    """Knobs of the directed search (defaults suit GPUs and CPUs alike)."""

    coarse_levels: int = 4  # levels per dimension in the first round (doubled each round)
    min_gain: float = 0.005  # a move must gain 0.5% (more than timing noise) to be taken
    wave_window: int = 3  # how many candidates either side a level may move to fill waves
    max_shapes: int | None = None


@dataclass(slots=True)
class SearchTrace:
    """What a search visited, in order, and why it stopped."""

    visited: list[tuple[Shape, float | None]] = field(default_factory=list)
    stop_reason: str = ""
    skipped_for_budget: list[Shape] = field(default_factory=list)

    def best(self) -> tuple[Shape, float] | None:
        scored = [(s, v) for s, v in self.visited if v is not None]
        return max(scored, key=lambda sv: sv[1]) if scored else None


class _Budget(Exception):
    """Raised inside the search when time or shape count is used up."""


class _Runner:
    """Measures shapes once each, keeps the trace, enforces the budget."""

    def __init__(
        self,
        measure: Callable[[Shape], float | None],
        budget_s: float | None,
        clock: Callable[[], float],
        max_shapes: int | None,
        estimate_s: Callable[[Shape], float | None] | None = None,
        t0: float | None = None,
    ) -> None:
        self.measure = measure
        self.budget_s = budget_s
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.estimate_s = estimate_s
        self.max_shapes = max_shapes
        self.trace = SearchTrace()
        self.scores: dict[Shape, float | None] = {}

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def run(self, shape: Shape) -> float | None:
        if shape in self.scores:
            return self.scores[shape]
        if self.budget_s is not None and self.elapsed() >= self.budget_s:
            raise _Budget("budget")
        if self.max_shapes is not None and len(self.scores) >= self.max_shapes:
            raise _Budget("max_shapes")
        if self.budget_s is not None and self.estimate_s is not None:
            need = self.estimate_s(shape)
            if need is not None and self.elapsed() + need > self.budget_s:
                # it could not finish in what is left: do not start it (smaller shapes may fit)
                if shape not in self.trace.skipped_for_budget:
                    self.trace.skipped_for_budget.append(shape)
                return None
        score = self.measure(shape)
        self.scores[shape] = score
        self.trace.visited.append((shape, score))
        return score


def grid_search(
    space: SearchSpace,
    measure: Callable[[Shape], float | None],
    *,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    estimate_s: Callable[[Shape], float | None] | None = None,
    t0: float | None = None,
) -> SearchTrace:
    """Measure every shape of the space (stopping early only if a budget is given).

    With a budget, `t0` is when it started (default: now) and `estimate_s(shape)` says how long
    a shape would take: one that cannot finish inside the budget is not started."""
    runner = _Runner(measure, budget_s, clock, None, estimate_s, t0)
    try:
        for shape in space.grid():
            runner.run(shape)
        runner.trace.stop_reason = "budget" if runner.trace.skipped_for_budget else "exhausted"
    except _Budget as exc:
        runner.trace.stop_reason = str(exc)
    return runner.trace


def _aligned(values: tuple[int, ...], align: int) -> tuple[int, ...]:
    aligned = tuple(v for v in values if v % align == 0)
    return aligned or values


def _levels(values: tuple[int, ...], levels: int) -> list[int]:
    """Indices of `levels` sizes spread evenly on a log scale from the smallest to the largest
    value: cheap small shapes are covered too, and the large end gets as many levels."""
    count = len(values)
    if count <= levels:
        return list(range(count))
    if levels <= 1:
        return [count - 1]
    lo, hi = math.log(values[0]), math.log(values[-1])
    picked = set()
    for i in range(levels):
        target = lo + (hi - lo) * i / (levels - 1)
        picked.add(min(range(count), key=lambda j: abs(math.log(values[j]) - target)))
    return sorted(picked)


class _Directed:
    def __init__(
        self, space: SearchSpace, hints: SearchHints, policy: SearchPolicy, runner: _Runner
    ) -> None:
        align = hints.align_elements
        self.dims = (
            _aligned(space.m, align),
            _aligned(space.n, align),
            _aligned(space.k, align),
        )
        self.hints = hints
        self.policy = policy
        self.runner = runner
        self.scored_index: dict[tuple[int, int, int], float | None] = {}

    def shape(self, idx: tuple[int, int, int]) -> Shape:
        return (self.dims[0][idx[0]], self.dims[1][idx[1]], self.dims[2][idx[2]])

    def prior(self, idx: tuple[int, int, int]) -> tuple[float, int]:
        m, n, k = self.shape(idx)
        return (best_wave_efficiency(m, n, self.hints), m * n * k)

    def snap(self, i: int, j: int) -> tuple[int, int]:
        """Move (M, N) indices within the window to the best wave fill, nearest first."""
        if not self.hints.waves_matter:
            return i, j
        w = self.policy.wave_window
        best = (-1.0, 0, i, j)
        for di in range(-w, w + 1):
            for dj in range(-w, w + 1):
                a, b = i + di, j + dj
                if 0 <= a < len(self.dims[0]) and 0 <= b < len(self.dims[1]):
                    eff = best_wave_efficiency(self.dims[0][a], self.dims[1][b], self.hints)
                    key = (round(eff, 3), -(abs(di) + abs(dj)), a, b)
                    if key[:2] > best[:2]:
                        best = key
        return best[2], best[3]

    def coarse(self, n_levels: int) -> list[tuple[int, int, int]]:
        """A Latin-square design over the levels (every pair of levels of any two dimensions
        appears once: L*L shapes, not L**3) plus the all-largest corner."""
        levels = [_levels(d, n_levels) for d in self.dims]
        count = max(len(lv) for lv in levels)

        def pick(d: int, i: int) -> int:
            return levels[d][min(i, len(levels[d]) - 1)]

        design = {(i, j, (i + j) % count) for i in range(count) for j in range(count)}
        design.add((count - 1, count - 1, count - 1))
        cands = {(*self.snap(pick(0, i), pick(1, j)), pick(2, kk)) for i, j, kk in design}
        return sorted(cands, key=self.prior, reverse=True)

    def measure_all(self, cands: list[tuple[int, int, int]]) -> None:
        for idx in sorted(cands, key=self.prior, reverse=True):
            self.scored_index[idx] = self.runner.run(self.shape(idx))

    def score(self, idx: tuple[int, int, int]) -> float:
        value = self.runner.scores.get(self.shape(idx))
        return -1.0 if value is None else value

    def refine(self, start: tuple[int, int, int], steps: list[int]) -> None:
        current = start
        while True:
            neighbours: set[tuple[int, int, int]] = set()
            for d in range(3):
                for sign in (-1, 1):
                    pos = list(current)
                    pos[d] = min(max(pos[d] + sign * steps[d], 0), len(self.dims[d]) - 1)
                    cand = (pos[0], pos[1], pos[2])
                    neighbours.add(cand)
                    if d < 2:
                        neighbours.add((*self.snap(cand[0], cand[1]), cand[2]))
            neighbours.discard(current)
            if not neighbours:
                return
            self.measure_all(sorted(neighbours))
            best = max(neighbours, key=self.score)
            if self.score(best) > self.score(current) * (1 + self.policy.min_gain):
                current = best
                continue
            if max(steps) == 1:
                return
            steps[:] = [max(1, s // 2) for s in steps]

    def best_index(self) -> tuple[int, int, int] | None:
        scored = [(v, i) for i, v in self.scored_index.items() if v is not None]
        return max(scored)[1] if scored else None

    def run(self) -> None:
        """Rounds of coarse design + refinement, each at twice the previous resolution, until a
        round gains less than `min_gain` (stall), the budget runs out or nothing is left."""
        n_levels = max(1, self.policy.coarse_levels)
        finest = max(len(d) for d in self.dims)
        previous = -1.0
        while True:
            self.measure_all(self.coarse(n_levels))
            start = self.best_index()
            if start is not None:
                self.refine(start, [max(1, len(d) // (2 * n_levels)) for d in self.dims])
            best = self.best_index()
            now = -1.0 if best is None else self.score(best)
            if previous > 0 and now <= previous * (1 + self.policy.min_gain):
                return
            if n_levels >= finest:
                return
            previous, n_levels = now, n_levels * 2


def directed_search(
    space: SearchSpace,
    hints: SearchHints,
    measure: Callable[[Shape], float | None],
    *,
    budget_s: float | None,
    policy: SearchPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
    estimate_s: Callable[[Shape], float | None] | None = None,
    t0: float | None = None,
) -> SearchTrace:
    """Find the shape with the highest score inside `space`, measuring as few as it can.

    `budget_s` counts from `t0` (default: now); shapes `estimate_s` says cannot finish inside
    it are not started, and the search ends when the budget is spent."""
    policy = policy or SearchPolicy()
    runner = _Runner(measure, budget_s, clock, policy.max_shapes, estimate_s, t0)
    search = _Directed(space, hints, policy, runner)
    try:
        search.run()
        runner.trace.stop_reason = "budget" if runner.trace.skipped_for_budget else "converged"
    except _Budget as exc:
        runner.trace.stop_reason = str(exc)
    if len(runner.scores) == space.size:
        runner.trace.stop_reason = "exhausted"
    return runner.trace
