"""Achievable GEMM time and TFLOPS by shape: (M, N, K, dtype, device), grounded in measurements.

One GEMM (or a grouped/batched GEMM of `batch` members, each with its own weights, as MoE
experts) costs

    main     = smooth_max(FLOPs / (ceiling x shape_efficiency), input bytes / bandwidth)
    time     = main + output bytes / bandwidth + launch

- **ceiling**: the device's maximum achievable matmul rate (MAMF, measured or published;
  ``roofline.achievable_matmul_tflops``), the best a kernel library reaches on its best shape.
- **shape_efficiency**: tile and wave quantization with the kernel library's choice among its
  CTA tile shapes (the best candidate, as cuBLAS/CUTLASS heuristics pick), split-K when there
  are fewer output tiles than SMs and K is long, stream-K on Hopper and newer.
- **input bytes**: A, B (and block scales) read once from HBM (L2 reuse across tiles, NVIDIA
  Matrix Multiplication Background guide §2.1): small-M GEMMs and grouped GEMMs with few tokens
  per expert are bound by reading their weights.
- **output bytes**: the epilogue writes C after a tile's main loop, so its store is not hidden
  under that tile's math; per FLOP it costs 1/K, which is why the rate rises with K.
- **smooth_max**: near the ridge point compute and memory traffic do not overlap perfectly (the
  inference planner's RIDGE_SMOOTHING_P, Williams et al. 2009).

When `Hardware.matmul_shape_tflops` holds measured shapes (``flopwise bench matmul``) for the
dtype, the model is corrected to them: the ratio measured/modelled time at each measured shape
is interpolated in log(M), log(N), log(K) (inverse-distance weights), so a measured shape is
reproduced exactly and nearby shapes move with it. A grouped GEMM (MoE experts) is corrected
to the measured grouped shapes instead when `Hardware.matmul_grouped_shape_tflops` holds any
for the dtype (``bench matmul --groups``): the ratio at each is against this model's grouped
estimate, interpolated in log(groups), log(M), log(N), log(K); without them it takes the dense
correction, the device's kernels being faster or slower than the model alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.binomial import binomial_pmfs
from flopwise.plan.efficiency import (
    GEMM_TILE,
    KERNEL_LAUNCH_S,
)
from flopwise.plan.gemm_ceiling import bandwidth_bytes_per_s, ceiling_tflops, gpu_family
from flopwise.plan.gemm_constants import (
    DATA_PARALLEL_DTYPES,
    GROUPED_GEMM_EFFICIENCY,
    K_STAGE,
    KERNEL_FILL_DRAIN_S,
    OUTPUT_BYTES,
    PARTIAL_SUM_BYTES,
    REFERENCE_TILE,
    RIDGE_SMOOTHING_P,
    SCALING_BLOCKS,
    SHAPE_INTERPOLATION_POWER,
    SMALL_M_TILES,
    SPLIT_K_MIN_STAGES,
    TILES_AMPERE,
    TILES_HOPPER,
)
from flopwise.units import TERA
from flopwise.workload.memory_bytes import DTYPE_BYTES, STORAGE_BYTES


@dataclass(frozen=True, slots=True)
class GemmEstimate:
    """One GEMM's predicted time and what bounds it (one device)."""

    time_s: float  # kernel + launch: what a step pays
    kernel_s: float  # the kernel alone: what a benchmark's events/profiler time
    tflops: float  # FLOPs / kernel_s, as bench matmul, mamf-finder and DeepGEMM report
    compute_s: float
    input_memory_s: float
    output_memory_s: float
    shape_efficiency: float
    tile: tuple[int, int] | None
    split_k: int
    correction: float  # measured/modelled time ratio applied (1.0 without a shape table)

    @property
    def bound(self) -> str:
        return "memory" if self.input_memory_s > self.compute_s else "compute"

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s,
            "kernel_s": self.kernel_s,
            "tflops": self.tflops,
            "compute_s": self.compute_s,
            "input_memory_s": self.input_memory_s,
            "output_memory_s": self.output_memory_s,
            "shape_efficiency": self.shape_efficiency,
            "tile": None if self.tile is None else list(self.tile),
            "split_k": self.split_k,
            "correction": self.correction,
            "bound": self.bound,
        }


def _reuse(tm: int, tn: int) -> float:
    ref = REFERENCE_TILE[0] * REFERENCE_TILE[1] / (REFERENCE_TILE[0] + REFERENCE_TILE[1])
    return min(1.0, tm * tn / (tm + tn) / ref)


@dataclass(frozen=True, slots=True)
class _Plan:
    compute_s: float
    input_s: float
    output_s: float
    efficiency: float
    tile: tuple[int, int] | None
    split_k: int


def _candidates(m: int, family: str) -> tuple[tuple[int, int], ...]:
    if family == "other":
        return ((GEMM_TILE, GEMM_TILE),)
    tiles = TILES_HOPPER if family == "hopper" else TILES_AMPERE
    if m <= 128:
        # skinny GEMMs: narrow tiles so that enough CTAs stream the weights (DeepGEMM README:
        # BLOCK_N down to 16 "to fully utilize the SMs"; cublasLtMatmulTile_t 16x.., 32x..)
        tm = next(t for t in (*SMALL_M_TILES, 128) if t >= m)
        tiles = tuple((tm, tn) for tn in (32, 64, 128, 256)) + tiles
    return tiles


def _split_options(tiles: int, k: int, units: int) -> tuple[int, ...]:
    if tiles >= units:
        return (1,)
    top = max(1, min(units // tiles, k // (SPLIT_K_MIN_STAGES * K_STAGE)))
    opts = {1, top}
    s = 2
    while s < top:
        opts.add(s)
        s *= 2
    return tuple(sorted(opts))


def _smooth_max(x: float, y: float) -> float:
    hi, lo = max(x, y), min(x, y)
    if hi <= 0:
        return 0.0
    return hi * (1.0 + (lo / hi) ** RIDGE_SMOOTHING_P) ** (1.0 / RIDGE_SMOOTHING_P)


@lru_cache(maxsize=1 << 14)
def expected_row_tiles(trials: int, p: float, tile: int) -> float:
    """E[ceil(X / tile) | X > 0] for X ~ Binomial(trials, p): the row tiles one group of a
    grouped GEMM schedules when each of `trials` tokens joins it with probability `p` (an
    expert under uniform top-k routing: p = k / experts), counting only groups with rows.

    A group pads its own last tile, so a spread of counts around a mean that is a whole number
    of tiles still pays about half a tile per group (wherever the spread spans a tile); a fixed
    count pays nothing. Summed over the count's distribution within 10 standard deviations."""
    if trials <= 0 or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return float(math.ceil(trials / tile))
    mean = trials * p
    sd = math.sqrt(mean * (1.0 - p))
    lo = max(1, math.floor(mean - 10.0 * sd))
    hi = min(trials, math.ceil(mean + 10.0 * sd) + 1)
    mass = tiles = 0.0
    for x, pmf in binomial_pmfs(trials, p, lo, hi):
        mass += pmf
        tiles += pmf * ((x + tile - 1) // tile)
    return tiles / mass if mass > 0 else float(math.ceil(mean / tile))


@lru_cache(maxsize=1 << 16)
def _shape_plan(
    m: int,
    n: int,
    k: int,
    batch: int,
    units: int,
    family: str,
    flops_per_s: float,
    bytes_per_s: float,
    in_bytes: float,
    out_bytes: float,
    data_parallel: bool = False,
    row_draws: tuple[int, float] | None = None,
) -> _Plan:
    """The library's best candidate (tile, split-K or stream-K) for one GEMM shape; whole
    tiles only when `data_parallel` (the kernel's scheduler splits no K: DATA_PARALLEL_DTYPES).

    Per candidate: efficiency = useful MN area / scheduled area x used SM-slots / scheduled
    SM-slots x tile reuse (NVIDIA Matrix Multiplication Background guide §3: tile and wave
    quantization); HBM bandwidth scales with the CTAs in flight up to one per SM (Little's law:
    bytes in flight per SM are bounded by its shared-memory stages); split-K and stream-K pay
    their fp32 partial sums. The candidate with the least time wins, as a tuned library does.

    `row_draws` (trials, p): each group's rows vary as Binomial(trials, p) about `m` (MoE
    experts under routing that is not forced to balance): each group pads its own last row
    tile, ``expected_row_tiles``; None: every group has exactly `m` rows.
    """
    flops = 2.0 * m * n * k * batch
    if family in ("none", "other"):
        # no CTA epilogue phase: matrix engines (Gaudi MME, TPU MXU) and CPU GEMMs stream their
        # results out while computing, so output traffic overlaps the math like the inputs
        if family == "none" or not units:
            return _Plan(
                flops / flops_per_s, (in_bytes + out_bytes) / bytes_per_s, 0.0, 1.0, None, 1
            )
        in_bytes, out_bytes = in_bytes + out_bytes, 0.0
    best: _Plan | None = None
    best_t = math.inf
    whole_tiles = family == "other" or data_parallel
    for tm, tn in _candidates(m, family):
        gn = math.ceil(n / tn)
        gm = expected_row_tiles(*row_draws, tm) if row_draws else float(math.ceil(m / tm))
        pad = (m * n) / (gm * tm * gn * tn)
        # skinny row tiles (M < 64) are charged their padding only: such GEMMs are bound by
        # reading the weights, and the rows they lack could not be reused anyway
        reuse = 1.0 if family == "other" or tm < 64 else _reuse(tm, tn)
        tiles = max(1, round(gm * gn * batch))
        options: list[tuple[float, int, float, int]] = []  # (eff, splits, partial elems, ctas)
        for splits in (1,) if whole_tiles else _split_options(tiles, k, units):
            work = tiles * splits
            eff = pad * reuse * work / (math.ceil(work / units) * units)
            options.append((eff, splits, float(tiles * tm * tn * (splits - 1)), work))
        if family == "hopper" and not data_parallel and tiles % units and tiles > units:
            # stream-K: the tail wave's K iterations are shared by every SM; at most one tile
            # per SM is split and exchanges fp32 partial sums
            iters = tiles * max(1, math.ceil(k / K_STAGE))
            eff = pad * reuse * iters / (math.ceil(iters / units) * units)
            options.append((eff, 1, float(units * tm * tn), units))
        for eff, splits, partial, ctas in options:
            share = 1.0 if family == "other" else min(1.0, ctas / units)
            compute = flops / (flops_per_s * eff)
            inp = in_bytes / (bytes_per_s * share)
            out = (out_bytes + 2.0 * partial * PARTIAL_SUM_BYTES) / bytes_per_s
            t = _smooth_max(compute, inp) + out
            if t < best_t:
                best_t = t
                best = _Plan(compute, inp, out, eff, (tm, tn), splits)
    assert best is not None
    return best


def _scale_bytes(m: int, n: int, k: int, scaling: str | None) -> float:
    if not scaling:
        return 0.0
    spec = SCALING_BLOCKS.get(scaling)
    if spec is None:
        raise FlopwiseError(
            f"unknown GEMM scaling {scaling!r}; valid: {', '.join(sorted(SCALING_BLOCKS))}"
        )
    act, blk_k, blk_n, nbytes = spec
    if not act:
        return 0.0
    return (m * math.ceil(k / act) + math.ceil(k / blk_k) * math.ceil(n / blk_n)) * nbytes


def roof_fraction(grouped: bool, grouped_efficiency: float | None = None) -> float:
    """Share of the dense FLOP roof a GEMM kernel reaches: `grouped_efficiency` (default
    GROUPED_GEMM_EFFICIENCY) for one grouped MoE kernel, the whole roof otherwise."""
    if not grouped:
        return 1.0
    return GROUPED_GEMM_EFFICIENCY if grouped_efficiency is None else grouped_efficiency


def gemm_estimate(
    m: int,
    n: int,
    k: int,
    hw: Hardware,
    dtype: str = "bf16",
    batch: int = 1,
    weight_dtype: str | None = None,
    scaling: str | None = None,
    grouped: bool = False,
    grouped_efficiency: float | None = None,
    row_draws: tuple[int, float] | None = None,
) -> GemmEstimate:
    """Predicted time of `batch` GEMMs (m x k) @ (k x n), each with its own (k x n) weights.

    `grouped`: the members run as one grouped kernel (MoE experts), whose FLOP roof is
    `grouped_efficiency` of the dense one (default GROUPED_GEMM_EFFICIENCY, ``roof_fraction``);
    otherwise a batched or single GEMM at the dense roof. `row_draws` (trials, p): the members' rows are Binomial
    draws about `m` (``_shape_plan``), not all exactly `m`."""
    if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
        raise FlopwiseError(f"GEMM dimensions must be positive, got m={m} n={n} k={k} b={batch}")
    flops = 2.0 * m * n * k * batch
    # block scales ride with their elements (STORAGE_BYTES) unless `scaling` names them apart
    per_elt = DTYPE_BYTES if scaling else STORAGE_BYTES
    a = per_elt[dtype]
    w = per_elt[weight_dtype or dtype]
    o = OUTPUT_BYTES.get(dtype, a)
    inputs = batch * (m * k * a + k * n * w + _scale_bytes(m, n, k, scaling))
    plan = _shape_plan(
        m,
        n,
        k,
        batch,
        hw.compute_units or 0,
        gpu_family(hw),
        ceiling_tflops(hw, dtype) * TERA * roof_fraction(grouped, grouped_efficiency),
        bandwidth_bytes_per_s(hw),
        inputs,
        batch * m * n * o,
        data_parallel=dtype in DATA_PARALLEL_DTYPES,
        row_draws=row_draws,
    )
    kernel_s = _smooth_max(plan.compute_s, plan.input_s) + plan.output_s + KERNEL_FILL_DRAIN_S
    corr = 1.0
    if hw.matmul_shape_tflops or hw.matmul_grouped_shape_tflops:
        corr = gemm_correction(m, n, k, hw, dtype, batch, grouped)
        kernel_s *= corr
    return GemmEstimate(
        time_s=kernel_s + KERNEL_LAUNCH_S,
        kernel_s=kernel_s,
        tflops=flops / kernel_s / TERA,
        compute_s=plan.compute_s,
        input_memory_s=plan.input_s,
        output_memory_s=plan.output_s,
        shape_efficiency=plan.efficiency,
        tile=plan.tile,
        split_k=plan.split_k,
        correction=corr,
    )


def gemm_time_s(
    m: int,
    n: int,
    k: int,
    hw: Hardware,
    dtype: str = "bf16",
    batch: int = 1,
    weight_dtype: str | None = None,
    scaling: str | None = None,
    grouped: bool = False,
) -> float:
    """Seconds of `batch` GEMMs (m x k) @ (k x n), one grouped kernel when `grouped`: see the
    module docstring (memoised per hardware object, which is frozen, so the layout search pays
    a dict lookup per repeat)."""
    memo = _memo_for(_TIME_CACHE, hw)
    key = (m, n, k, batch, dtype, weight_dtype, scaling, grouped)
    hit = memo.get(key)
    if hit is None:
        hit = gemm_estimate(m, n, k, hw, dtype, batch, weight_dtype, scaling, grouped).time_s
        memo[key] = hit
    return hit


_Memo = dict[int, tuple[Hardware, dict[tuple[Any, ...], float]]]
#: id(hardware) -> (hardware, {shape key: seconds}); the hardware is kept so its id stays unique.
_TIME_CACHE: _Memo = {}
#: the same for compute_efficiency (the inference planner asks it for every GEMM of every pass).
_EFFICIENCY_CACHE: _Memo = {}


def _memo_for(cache: _Memo, hw: Hardware) -> dict[tuple[Any, ...], float]:
    """The memo of one (frozen) hardware object; at most 64 are kept."""
    entry = cache.get(id(hw))
    if entry is None or entry[0] is not hw:
        if len(cache) > 64:
            cache.clear()
        entry = (hw, {})
        cache[id(hw)] = entry
    return entry[1]


def compute_efficiency(
    m: int,
    n: int,
    k: int,
    hw: Hardware,
    dtype: str = "bf16",
    batch: int = 1,
    row_draws: tuple[int, float] | None = None,
) -> float:
    """Tile/wave/split-K efficiency of the candidate the library picks for this shape, the
    members' rows Binomial draws when `row_draws` is given (memoised per hardware object, as
    gemm_time_s)."""
    memo = _memo_for(_EFFICIENCY_CACHE, hw)
    key = (m, n, k, dtype, batch, row_draws)
    hit = memo.get(key)
    if hit is None:
        hit = gemm_estimate(m, n, k, hw, dtype, batch, row_draws=row_draws).shape_efficiency
        memo[key] = hit
    return hit


def gemm_tflops(
    m: int, n: int, k: int, hw: Hardware, dtype: str = "bf16", batch: int = 1, **kw: Any
) -> float:
    """Achieved TFLOPS of the GEMM (2*M*N*K*batch over its predicted time)."""
    return gemm_estimate(m, n, k, hw, dtype, batch, **kw).tflops


def gemm_correction(
    m: int, n: int, k: int, hw: Hardware, dtype: str, groups: int = 1, grouped: bool = False
) -> float:
    """Measured/modelled kernel-time ratio of a GEMM: a grouped kernel's from the measured
    grouped shapes of its dtype where there are any (``grouped_shape_correction``), else (and
    for every other GEMM) from the measured dense shapes (``shape_correction``); 1 without
    measurements."""
    if grouped and _grouped_table(hw, dtype):
        return grouped_shape_correction(groups, m, n, k, hw, dtype)
    return shape_correction(m, n, k, hw, dtype) if hw.matmul_shape_tflops else 1.0


def _grouped_table(hw: Hardware, dtype: str) -> list[tuple[str, int, int, int, int, float]]:
    """The measured grouped shapes of `dtype` (fp16 runs on bf16's tensor cores)."""
    table = [row for row in hw.matmul_grouped_shape_tflops if row[0] == dtype]
    if not table and dtype == "fp16":
        table = [row for row in hw.matmul_grouped_shape_tflops if row[0] == "bf16"]
    return table


def grouped_shape_correction(
    groups: int, m: int, n: int, k: int, hw: Hardware, dtype: str
) -> float:
    """Measured/modelled time ratio of a grouped GEMM of `groups` (m x k) @ (k x n) products,
    interpolated over the measured grouped shapes in (log2 groups, log2 M, log2 N, log2 K)."""
    hit = _CORRECTION_CACHE.get((id(hw), f"grouped:{dtype}"))
    if hit is not None and hit[0] is hw:
        points = hit[1]
    else:
        bare = replace(hw, matmul_shape_tflops=(), matmul_grouped_shape_tflops=())
        found = []
        for _, g, gm, gn, gk, tflops in _grouped_table(hw, dtype):
            if tflops <= 0 or min(g, gm, gn, gk) <= 0:
                continue
            model = gemm_estimate(gm, gn, gk, bare, dtype, g, grouped=True).kernel_s
            measured = 2.0 * g * gm * gn * gk / (tflops * TERA)
            logs = (math.log2(g), math.log2(gm), math.log2(gn), math.log2(gk))
            found.append((*logs, math.log(measured / model)))
        points = tuple(found)
        if len(_CORRECTION_CACHE) > 256:
            _CORRECTION_CACHE.clear()
        _CORRECTION_CACHE[(id(hw), f"grouped:{dtype}")] = (hw, points)
    if not points:
        return 1.0
    return _interpolate(points, math.log2(max(groups, 1)), math.log2(m), math.log2(n), math.log2(k))


def shape_correction(m: int, n: int, k: int, hw: Hardware, dtype: str) -> float:
    """Measured/modelled kernel-time ratio at (m, n, k), interpolated over measured shapes."""
    points = _corrections(hw, dtype)
    if not points:
        return 1.0
    return _interpolate(points, math.log2(m), math.log2(n), math.log2(k))


def _corrections(hw: Hardware, dtype: str) -> _Points:
    """(log2 M, log2 N, log2 K, log(measured/modelled time)) per measured shape of `dtype`."""
    hit = _CORRECTION_CACHE.get((id(hw), dtype))
    if hit is not None and hit[0] is hw:
        return hit[1]
    table = [row for row in hw.matmul_shape_tflops if row[0] == dtype]
    if not table and dtype == "fp16":
        table = [row for row in hw.matmul_shape_tflops if row[0] == "bf16"]
    bare = replace(hw, matmul_shape_tflops=(), matmul_grouped_shape_tflops=())
    points = []
    for _, m, n, k, tflops in table:
        if tflops <= 0 or min(m, n, k) <= 0:
            continue
        model = gemm_estimate(m, n, k, bare, dtype).kernel_s
        measured = 2.0 * m * n * k / (tflops * TERA)
        points.append((math.log2(m), math.log2(n), math.log2(k), math.log(measured / model)))
    if len(_CORRECTION_CACHE) > 256:
        _CORRECTION_CACHE.clear()
    _CORRECTION_CACHE[(id(hw), dtype)] = (hw, tuple(points))
    return tuple(points)


#: (id(hardware), dtype or "grouped:<dtype>") -> (hardware, points: the coordinates in log2,
#: then the log ratio); the hardware is kept so its id is not reused.
_Points = tuple[tuple[float, ...], ...]
_CORRECTION_CACHE: dict[tuple[int, str], tuple[Hardware, _Points]] = {}


def _interpolate(points: _Points, *at: float) -> float:
    """Inverse-distance (Shepard) weighting of log ratios in log2 coordinates ((M, N, K), or
    (groups, M, N, K) for grouped shapes): each point is its coordinates, then its log ratio."""
    num = den = 0.0
    for point in points:
        log_ratio = point[-1]
        d2 = sum((p - x) ** 2 for p, x in zip(point[:-1], at, strict=True))
        if d2 < 1e-12:
            return math.exp(log_ratio)
        wgt = 1.0 / d2 ** (SHAPE_INTERPOLATION_POWER / 2)
        num += wgt * log_ratio
        den += wgt
    return math.exp(num / den)
