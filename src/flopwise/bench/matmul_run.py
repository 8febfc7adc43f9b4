"""`flopwise bench matmul` as a library call: pick shapes, measure them, summarise the run.

A run that is interrupted (Ctrl-C) keeps every shape measured so far and says so in its
status; the caller stores and prints it like a complete one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flopwise.bench.device import (
    DeviceInfo,
    accelerator_id,
    activate,
    import_torch,
    resolve_device,
)
from flopwise.bench.matmul import DType, MatmulKernel, ShapeResult, default_dtype, parse_dtype
from flopwise.bench.matmul_budget import (
    ESTIMATE_SAFETY,
    WARMUP_BUDGET_SHARE,
    ShapeTimeEstimator,
    calibrate,
)
from flopwise.bench.matmul_grouped import GroupedMatmulKernel
from flopwise.bench.matmul_search import (
    SearchHints,
    SearchPolicy,
    SearchSpace,
    directed_search,
    grid_search,
    values_from_range,
)
from flopwise.errors import FlopwiseError

SEARCHES: tuple[str, ...] = ("auto", "grid")
#: The `search` a run records when it measured a given list of shapes (`shapes`), a job's.
SHAPES_SEARCH = "shapes"


@dataclass(frozen=True, slots=True)
class Defaults:
    """Per-device-type defaults: the CPU ones finish in well under a minute on 2 cores."""

    range: tuple[int, int, int]
    budget_s: float
    iterations: int
    warmup: int
    device_warmup_s: float


#: CPU: sizes up to 2048 (fp32 GEMMs saturate a few cores well before that); a 20 s budget.
CPU_DEFAULTS = Defaults(
    range=(256, 2048, 256), budget_s=20.0, iterations=5, warmup=2, device_warmup_s=0.5
)
#: Accelerators: mamf-finder's documented sweep range 0..20480 step 256, a 60 s budget (the
#: directed-search pull request to mamf-finder reports 40-60 s), 30 timed iterations per shape.
ACCELERATOR_DEFAULTS = Defaults(
    range=(256, 20480, 256), budget_s=60.0, iterations=30, warmup=5, device_warmup_s=5.0
)


def defaults_for(info: DeviceInfo) -> Defaults:
    return ACCELERATOR_DEFAULTS if info.is_accelerator else CPU_DEFAULTS


@dataclass(frozen=True, kw_only=True, slots=True)
class MatmulConfig:
    """What to measure. None = the device's default (see `defaults_for`)."""

    device: str = "auto"
    dtype: str | None = None
    search: str = "auto"
    m: tuple[int, ...] | None = None
    n: tuple[int, ...] | None = None
    k: tuple[int, ...] | None = None
    budget_s: float | None = None
    iterations: int | None = None
    warmup: int | None = None
    device_warmup_s: float | None = None
    seed: int = 0
    policy: SearchPolicy = field(default_factory=SearchPolicy)
    #: G > 1: time one grouped GEMM of G experts per shape (M = tokens per expert), the MoE
    #: kernel (bench/matmul_grouped.py), over the grid of the given M, N and K
    groups: int = 1
    #: an explicit list of (groups, m, n, k) to measure instead of a search: the GEMMs one job
    #: prices (plan/train/gemm_shapes.py, `bench matmul --model`); `label` names the job
    shapes: tuple[tuple[int, int, int, int], ...] | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise FlopwiseError(f"unknown search {self.search!r}; valid: {', '.join(SEARCHES)}")
        if self.groups < 1:
            raise FlopwiseError(f"--groups must be at least 1, got {self.groups}")
        if self.shapes is not None:
            if not self.shapes:
                raise FlopwiseError("no GEMM shapes to measure")
            if any(min(shape) < 1 for shape in self.shapes):
                raise FlopwiseError(f"GEMM shapes must be positive, got {self.shapes}")
        if self.groups > 1 and not (self.m and self.n and self.k):
            raise FlopwiseError(
                f"--groups {self.groups} times the expert GEMMs of a job: give their shapes "
                "with --m (tokens per expert), --n and --k (lists or ranges)"
            )
        if self.budget_s is not None and not self.budget_s > 0:
            raise FlopwiseError(f"--budget-s must be positive, got {self.budget_s}")
        if self.iterations is not None and self.iterations < 1:
            raise FlopwiseError(f"--iterations must be at least 1, got {self.iterations}")
        if self.warmup is not None and self.warmup < 0:
            raise FlopwiseError(f"--warmup must not be negative, got {self.warmup}")

    def space(self, d: Defaults) -> SearchSpace:
        if self.shapes:  # the sizes the listed shapes use (what the run's `ranges` report)
            return SearchSpace(
                m=tuple(sorted({s[1] for s in self.shapes})),
                n=tuple(sorted({s[2] for s in self.shapes})),
                k=tuple(sorted({s[3] for s in self.shapes})),
            )
        default = values_from_range(*d.range)
        return SearchSpace(m=self.m or default, n=self.n or default, k=self.k or default)


@dataclass(frozen=True, kw_only=True, slots=True)
class MatmulRun:
    """The outcome of one matmul benchmark run on one device."""

    device: str
    device_name: str
    accelerator: str | None
    dtype: str
    search: str
    status: str  # complete | interrupted | failed (no shape measured)
    stop_reason: str
    results: tuple[ShapeResult, ...]
    space: SearchSpace
    elapsed_s: float
    spec_tflops: float | None
    budget_s: float | None
    iterations: int
    warmup: int
    timing_method: str
    device_info: dict[str, Any]
    provenance: dict[str, Any]
    skipped_for_budget: int = 0
    torch_dtype: str | None = None
    groups: int = 1
    grouped_kernel: str | None = None  # the kernel a grouped run timed (bench/matmul_grouped.py)
    label: str | None = None  # the job whose GEMMs a `shapes` run measured

    def _best(self) -> ShapeResult | None:
        """The shape with the highest median rate over its timed iterations (a run that also
        timed grouped GEMMs: the best dense one, the device's GEMM rate)."""
        ok = [r for r in self.results if r.status == "ok" and r.median_tflops is not None]
        dense = [r for r in ok if r.groups == 1]
        return max(dense or ok, key=lambda r: r.median_tflops or 0.0) if ok else None

    @property
    def best_tflops(self) -> float | None:
        """Headline: the best shape's median over timed iterations (mamf-finder reports a
        central value over iterations, not the single fastest one)."""
        best = self._best()
        return None if best is None else best.median_tflops

    @property
    def efficiency(self) -> float | None:
        best = self.best_tflops
        return None if best is None or not self.spec_tflops else best / self.spec_tflops

    def summary(self) -> dict[str, Any]:
        """The headline numbers (stored as the result's summary; read by --measured)."""
        best = self._best()
        return {
            "device": self.device,
            "device_name": self.device_name,
            "dtype": self.dtype,
            "search": self.search,
            "best_tflops": self.best_tflops,
            "best_tflops_basis": "median over timed iterations of the best shape (NT layout)",
            "best_shape": None if best is None else list(best.shape),
            "median_tflops_at_best": None if best is None else best.median_tflops,
            "best_max_tflops": None if best is None else best.max_tflops,
            "best_spread": None if best is None else best.spread,
            "max_tflops_any_shape": max(
                (r.max_tflops for r in self.results if r.max_tflops is not None), default=None
            ),
            "layout": "NT",
            "shapes_tried": len(self.results),
            "shapes_skipped_for_budget": self.skipped_for_budget,
            "elapsed_s": self.elapsed_s,
            "spec_tflops": self.spec_tflops,
            "efficiency": self.efficiency,
            "status": self.status,
            "groups": self.groups,
            "grouped_kernel": self.grouped_kernel,
            "label": self.label,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "accelerator": self.accelerator,
            "torch_dtype": self.torch_dtype,
            "stop_reason": self.stop_reason,
            "budget_s": self.budget_s,
            "iterations": self.iterations,
            "warmup": self.warmup,
            "timing": self.timing_method,
            "ranges": self.space.to_dict(),
            "device_info": self.device_info,
            "provenance": self.provenance,
            "results": [r.to_dict() for r in self.results],
        }


def spec_tflops_for(accelerator: str | None, dtype: DType) -> float | None:
    """Dense peak of the catalog accelerator for the dtype, or None when unknown."""
    if accelerator is None or accelerator == "cpu":
        return None
    from flopwise.catalog import get_accelerator

    return get_accelerator(accelerator).peak_tflops(dtype.name)


def run_matmul(
    config: MatmulConfig,
    on_shape: Callable[[ShapeResult, float], None] | None = None,
    *,
    info: DeviceInfo | None = None,
) -> MatmulRun:
    """Measure matmul throughput on one device; Ctrl-C returns the partial run.

    The budget bounds the whole run from this call on: the device warm-up takes at most a tenth
    of it, no shape starts that the estimate says cannot finish inside it, and the search stops
    when it is spent (stop_reason "budget"); what was measured is returned either way.
    """
    t_start = time.monotonic()
    torch = import_torch()
    info = info or resolve_device(config.device)
    activate(torch, info)
    d = defaults_for(info)
    dtype = parse_dtype(config.dtype) if config.dtype else default_dtype(info)
    space = config.space(d)
    iterations = config.iterations or d.iterations
    warmup = d.warmup if config.warmup is None else config.warmup
    search = "grid" if config.groups > 1 else config.search  # a grouped run measures its shapes
    if config.shapes:
        search = SHAPES_SEARCH
    if search in ("grid", SHAPES_SEARCH):
        budget = config.budget_s
    else:
        budget = config.budget_s if config.budget_s is not None else d.budget_s
    kernel: MatmulKernel
    if config.groups > 1:
        kernel = GroupedMatmulKernel(torch, info, dtype, config.groups, seed=config.seed)
    else:
        kernel = MatmulKernel(torch, info, dtype, seed=config.seed)
    from flopwise.bench.provenance import provenance

    prov = provenance(torch, info)
    results: list[ShapeResult] = []
    estimator = ShapeTimeEstimator(iterations=iterations, warmup=warmup, groups=config.groups)

    def measure(shape: tuple[int, int, int]) -> float | None:
        r = kernel.measure(shape, iterations, warmup)
        results.append(r)
        estimator.observe(r)
        if on_shape is not None:
            on_shape(r, time.monotonic() - t_start)
        return r.median_tflops

    status, reason = "complete", ""
    skipped: list[tuple[int, int, int]] = []
    grouped_names = kernel.kernel_name if isinstance(kernel, GroupedMatmulKernel) else None
    try:
        mid = (space.m[len(space.m) // 2], space.n[len(space.n) // 2], space.k[len(space.k) // 2])
        dws = d.device_warmup_s if config.device_warmup_s is None else config.device_warmup_s
        if budget is not None:
            dws = min(dws, WARMUP_BUDGET_SHARE * budget)
        calibrate(kernel, mid, dws, estimator)
        if config.shapes:
            listed = _ListedShapes(kernel, config.seed, iterations, warmup, estimator)
            for shape in config.shapes:
                left = None if budget is None else budget - (time.monotonic() - t_start)
                r = listed.measure(shape, left)
                if r is None:
                    skipped.append(shape[1:])
                    continue
                results.append(r)
                if on_shape is not None:
                    on_shape(r, time.monotonic() - t_start)
            reason = "budget" if skipped else "exhausted"
            grouped_names = listed.grouped_kernel_names()
        elif search == "grid":
            trace = grid_search(space, measure, budget_s=budget, estimate_s=estimator, t0=t_start)
        else:
            hints = SearchHints(
                compute_units=info.compute_units if info.is_accelerator else None,
                element_bytes=dtype.element_bytes,
            )
            trace = directed_search(
                space,
                hints,
                measure,
                budget_s=budget,
                policy=config.policy,
                estimate_s=estimator,
                t0=t_start,
            )
        if not config.shapes:
            reason = trace.stop_reason
            skipped = trace.skipped_for_budget
    except KeyboardInterrupt:
        status, reason = "interrupted", "interrupted"
    if status == "complete" and not any(r.status == "ok" for r in results):
        # Nothing measured (e.g. every shape ran out of memory): not a measurement of the device.
        status = "failed"
        reason = f"no shape could be measured ({_failures(results)})"
    acc = accelerator_id(info)
    return MatmulRun(
        device=info.spec,
        device_name=info.name,
        accelerator=acc,
        dtype=dtype.name,
        search=search,
        status=status,
        stop_reason=reason,
        results=tuple(results),
        space=space,
        elapsed_s=time.monotonic() - t_start,
        spec_tflops=spec_tflops_for(acc, dtype),
        budget_s=budget,
        iterations=iterations,
        warmup=warmup,
        timing_method=kernel.timer.method,
        device_info=info.to_dict(),
        provenance=prov,
        skipped_for_budget=len(skipped),
        torch_dtype=kernel.torch_dtype,
        groups=config.groups,
        grouped_kernel=grouped_names,
        label=config.label,
    )


class _ListedShapes:
    """Measures a list of (groups, m, n, k): dense ones with the run's kernel, grouped ones with
    one grouped kernel per group count (made on first use), within what is left of a budget."""

    def __init__(
        self,
        dense: MatmulKernel,
        seed: int,
        iterations: int,
        warmup: int,
        estimator: ShapeTimeEstimator,
    ) -> None:
        self.dense, self.seed = dense, seed
        self.iterations, self.warmup, self.estimator = iterations, warmup, estimator
        self.grouped: dict[int, GroupedMatmulKernel | str] = {}  # a str: why it cannot run

    def _kernel(self, groups: int) -> MatmulKernel | str:
        if groups == 1:
            return self.dense
        if groups not in self.grouped:
            d = self.dense
            try:
                self.grouped[groups] = GroupedMatmulKernel(
                    d.torch, d.info, d.dtype, groups, seed=self.seed
                )
            except FlopwiseError as exc:
                self.grouped[groups] = str(exc)
        return self.grouped[groups]

    def measure(self, shape: tuple[int, int, int, int], left_s: float | None) -> ShapeResult | None:
        """The shape's result, or None when the budget left cannot fit it."""
        groups, m, n, k = shape
        kernel = self._kernel(groups)
        if isinstance(kernel, str):
            return ShapeResult(m, n, k, "error", error=kernel[:200], groups=groups)
        flops = kernel.flops(m, n, k)
        rate = self.estimator.rate_for(flops)
        if left_s is not None and rate:
            need = (self.warmup + self.iterations) * flops / rate
            if ESTIMATE_SAFETY * need > left_s:
                return None
        r = kernel.measure((m, n, k), self.iterations, self.warmup)
        if r.status == "ok" and r.median_s:
            self.estimator.observe_rate(flops, r.median_s)
        return r

    def grouped_kernel_names(self) -> str | None:
        names = {k.kernel_name for k in self.grouped.values() if not isinstance(k, str)}
        return ", ".join(sorted(names)) or None


def _failures(results: list[ShapeResult]) -> str:
    """'12 out of memory, 1 error' for the shapes that did not run."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in counts.items()) or "no shape tried"
