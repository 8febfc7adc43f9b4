"""`flopwise bench memory`: BabelStream's five kernels through PyTorch on one device.

Kernels and bytes moved per element as BabelStream counts them (UoB-HPC/BabelStream):
copy c = a (2), mul b = s·c (2), add c = a + b (3), triad a = b + s·c (3), dot sum(a·b) (2).
Arrays are several times the last-level cache; each kernel is timed on its own, the first
round is a warm-up, and the fastest run is reported (BabelStream's "max" bandwidth). Where
there is an accelerator, pinned host↔device copies are measured too.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flopwise.bench.device import (
    DeviceInfo,
    accelerator_id,
    activate,
    import_torch,
    resolve_device,
    torch_device,
)
from flopwise.bench.timing import IterationTimer
from flopwise.errors import FlopwiseError
from flopwise.units import GB, MIB

KERNELS: tuple[str, ...] = ("copy", "mul", "add", "triad", "dot")
#: Arrays of one element each a kernel reads or writes (BabelStream's byte counts).
BYTES_PER_ELEMENT_MOVED: dict[str, int] = {"copy": 2, "mul": 2, "add": 3, "triad": 3, "dot": 2}
#: BabelStream's initial values and scalar.
INIT_A, INIT_B, INIT_C, SCALAR = 0.1, 0.2, 0.0, 0.4

#: Each array is at least this many times the last-level cache ...
ARRAY_LLC_MULTIPLE = 4
#: ... and at least BabelStream's default 2**25 doubles (256 MiB).
MIN_ARRAY_BYTES = 256 * MIB
#: The three arrays may take at most this share of the device memory.
MAX_MEMORY_SHARE = 0.375

MEMORY_DTYPES: dict[str, str] = {"fp32": "float32", "fp64": "float64"}


@dataclass(frozen=True, slots=True)
class MemoryDefaults:
    iterations: int
    warmup: int


CPU_MEMORY_DEFAULTS = MemoryDefaults(iterations=10, warmup=1)
#: BabelStream's default is 100 timed runs.
ACCELERATOR_MEMORY_DEFAULTS = MemoryDefaults(iterations=100, warmup=1)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryConfig:
    device: str = "auto"
    dtype: str = "fp32"
    array_bytes: int | None = None
    iterations: int | None = None
    warmup: int | None = None
    host_copies: bool = True

    def __post_init__(self) -> None:
        if self.dtype not in MEMORY_DTYPES:
            raise FlopwiseError(
                f"unknown memory dtype {self.dtype!r}; valid: {', '.join(MEMORY_DTYPES)}"
            )
        if self.iterations is not None and self.iterations < 1:
            raise FlopwiseError(f"--iterations must be at least 1, got {self.iterations}")
        if self.warmup is not None and self.warmup < 0:
            raise FlopwiseError(f"--warmup must not be negative, got {self.warmup}")
        if self.array_bytes is not None and self.array_bytes < 4096:
            raise FlopwiseError(f"--array-size must be at least 4 KiB, got {self.array_bytes}")


@dataclass(frozen=True, slots=True)
class KernelResult:
    name: str
    bytes_moved: int
    min_s: float
    median_s: float
    runs: int

    @property
    def gbps(self) -> float:
        return self.bytes_moved / self.min_s / GB

    def to_dict(self) -> dict[str, Any]:
        return {
            "gbps": self.gbps,
            "bytes_moved": self.bytes_moved,
            "min_s": self.min_s,
            "median_s": self.median_s,
            "median_gbps": self.bytes_moved / self.median_s / GB,
            "runs": self.runs,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryRun:
    device: str
    device_name: str
    accelerator: str | None
    dtype: str
    array_bytes: int
    status: str
    kernels: dict[str, KernelResult]
    h2d_gbps: float | None
    d2h_gbps: float | None
    spec_gbps: float | None
    iterations: int
    elapsed_s: float
    device_info: dict[str, Any]
    provenance: dict[str, Any]

    def gbps(self, kernel: str) -> float | None:
        r = self.kernels.get(kernel)
        return None if r is None else r.gbps

    @property
    def efficiency(self) -> float | None:
        triad = self.gbps("triad")
        return None if triad is None or not self.spec_gbps else triad / self.spec_gbps

    def summary(self) -> dict[str, Any]:
        """Headline numbers; `triad_gbps` is what planners use (results.measured)."""
        return {
            "device": self.device,
            "device_name": self.device_name,
            "dtype": self.dtype,
            "array_bytes": self.array_bytes,
            **{f"{k}_gbps": self.gbps(k) for k in KERNELS},
            "h2d_gbps": self.h2d_gbps,
            "d2h_gbps": self.d2h_gbps,
            "spec_gbps": self.spec_gbps,
            "efficiency": self.efficiency,
            "status": self.status,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "accelerator": self.accelerator,
            "iterations": self.iterations,
            "elapsed_s": self.elapsed_s,
            "kernels": {k: v.to_dict() for k, v in self.kernels.items()},
            "device_info": self.device_info,
            "provenance": self.provenance,
        }


def default_array_bytes(info: DeviceInfo) -> int:
    """Several times the last-level cache, at least 256 MiB, within the device memory."""
    size = max(MIN_ARRAY_BYTES, ARRAY_LLC_MULTIPLE * (info.llc_bytes or 0))
    if info.memory_bytes:
        size = min(size, int(info.memory_bytes * MAX_MEMORY_SHARE / 3))
    return size


def _kernels(torch: Any, a: Any, b: Any, c: Any) -> dict[str, Callable[[], Any]]:
    return {
        "copy": lambda: c.copy_(a),
        "mul": lambda: torch.mul(c, SCALAR, out=b),
        "add": lambda: torch.add(a, b, out=c),
        "triad": lambda: torch.add(b, c, alpha=SCALAR, out=a),
        "dot": lambda: torch.dot(a, b),
    }


def run_memory(
    config: MemoryConfig,
    on_round: Callable[[int, int], None] | None = None,
    *,
    info: DeviceInfo | None = None,
) -> MemoryRun:
    """Measure BabelStream bandwidths on one device; Ctrl-C returns what was measured."""
    torch = import_torch()
    info = info or resolve_device(config.device)
    activate(torch, info)  # events and allocations must belong to the measured device
    d = ACCELERATOR_MEMORY_DEFAULTS if info.is_accelerator else CPU_MEMORY_DEFAULTS
    iterations = config.iterations or d.iterations
    warmup = d.warmup if config.warmup is None else config.warmup
    dt = getattr(torch, MEMORY_DTYPES[config.dtype])
    elem = torch.empty((), dtype=dt).element_size()
    array_bytes = config.array_bytes or default_array_bytes(info)
    n = max(1, array_bytes // elem)
    dev = torch_device(torch, info)
    timer = IterationTimer(torch, info)
    from flopwise.bench.provenance import provenance

    prov = provenance(torch, info)
    try:
        a = torch.full((n,), INIT_A, dtype=dt, device=dev)
        b = torch.full((n,), INIT_B, dtype=dt, device=dev)
        c = torch.full((n,), INIT_C, dtype=dt, device=dev)
    except (RuntimeError, MemoryError) as exc:
        raise FlopwiseError(
            f"cannot allocate three {n * elem / MIB:,.0f} MiB arrays on {info.spec}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; use --array-size"
        ) from None
    fns = _kernels(torch, a, b, c)
    times: dict[str, list[float]] = {k: [] for k in KERNELS}
    status = "complete"
    h2d = d2h = None
    t0 = time.monotonic()
    try:
        total = warmup + iterations
        for i in range(total):
            for name in KERNELS:
                seconds = timer.time(fns[name], 1).seconds[0]
                if i >= warmup:
                    times[name].append(seconds)
            if on_round is not None:
                on_round(i + 1, total)
        if info.is_accelerator and config.host_copies:
            h2d, d2h = _host_copies(torch, timer, a, n, dt, iterations, warmup)
    except KeyboardInterrupt:
        status = "interrupted"
    kernels = {
        k: KernelResult(
            k,
            BYTES_PER_ELEMENT_MOVED[k] * n * elem,
            min(v),
            float(statistics.median(v)),
            len(v),
        )
        for k, v in times.items()
        if v
    }
    acc = accelerator_id(info)
    return MemoryRun(
        device=info.spec,
        device_name=info.name,
        accelerator=acc,
        dtype=config.dtype,
        array_bytes=n * elem,
        status=status,
        kernels=kernels,
        h2d_gbps=h2d,
        d2h_gbps=d2h,
        spec_gbps=_spec_gbps(acc),
        iterations=iterations,
        elapsed_s=time.monotonic() - t0,
        device_info=info.to_dict(),
        provenance=prov,
    )


def _host_copies(
    torch: Any, timer: IterationTimer, dev_array: Any, n: int, dt: Any, iterations: int, warmup: int
) -> tuple[float | None, float | None]:
    """Pinned host→device and device→host copy bandwidth (GB/s), None when pinning fails."""
    try:
        host = torch.empty((n,), dtype=dt, pin_memory=True)
    except RuntimeError:
        return None, None
    nbytes = n * host.element_size()
    runs = max(1, min(iterations, 20))
    for _ in range(warmup):
        dev_array.copy_(host, non_blocking=True)
    up = timer.time(lambda: dev_array.copy_(host, non_blocking=True), runs).min_s
    down = timer.time(lambda: host.copy_(dev_array, non_blocking=True), runs).min_s
    return nbytes / up / GB, nbytes / down / GB


def _spec_gbps(accelerator: str | None) -> float | None:
    if accelerator is None or accelerator == "cpu":
        return None
    from flopwise.catalog import get_accelerator

    return get_accelerator(accelerator).memory_bw_gbps
