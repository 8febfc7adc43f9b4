"""`flopwise bench sustained`: the share of its burst GEMM rate a device keeps under load.

A large square GEMM is timed briefly first (the burst rate, as a MAMF search times its best
shape), then run back to back for ``seconds`` in windows of ``window_s``; each window's rate is
recorded with the SM clock and board power where the backend reports them. A GPU at its power
cap drops its clocks within seconds (an H100 SXM at 700 W keeps 0.79 of its burst bf16 rate:
benchmarks/device/results/h100-2026-11-23/sustained.txt). The sustained rate is the mean of the
run's second half (steady state), and ``gemm_share`` = sustained / burst is what plans of this
device run their GEMMs at with ``--measured`` (plan/sustained.py ``serving_compute_share``,
``training_compute_fraction``), in place of the catalog's per-die share or the training
fraction. ``--dtype fp8`` times a per-tensor scaled FP8 GEMM (``torch._scaled_mm``, bf16 out, as
``bench matmul`` does): its share prices FP8 GEMMs, the 16-bit one everything else, since a
GEMM's draw per clock, and so how far the cap pulls its clock, depends on its dtype.
Ctrl-C or SIGTERM keeps the windows measured so far.
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
    synchronize,
    torch_device,
)
from flopwise.errors import FlopwiseError

#: GEMM input dtypes the run takes, and their torch names (fp8: the device's e4m3 variant,
#: bench.matmul.fp8_torch_name).
SUSTAINED_DTYPES: dict[str, str] = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp32": "float32",
    "fp8": "float8_e4m3fn",
}


@dataclass(frozen=True, slots=True)
class SustainedDefaults:
    size: int
    seconds: float
    window_s: float
    dtype: str


#: An accelerator: 8192^3 bf16 for 30 s in 2 s windows (the H100 measurement's settings).
ACCELERATOR_SUSTAINED_DEFAULTS = SustainedDefaults(8192, 30.0, 2.0, "bf16")
#: A CPU: a GEMM of about a tenth of a second, fp32, for 6 s in 1 s windows.
CPU_SUSTAINED_DEFAULTS = SustainedDefaults(1024, 6.0, 1.0, "fp32")

#: Timed calls of the burst measurement (after as many untimed ones): the best of them.
BURST_CALLS = 5


@dataclass(frozen=True, kw_only=True, slots=True)
class SustainedConfig:
    device: str = "auto"
    dtype: str | None = None
    size: int | None = None
    seconds: float | None = None
    window_s: float | None = None

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in SUSTAINED_DTYPES:
            raise FlopwiseError(
                f"unknown dtype {self.dtype!r} for bench sustained; valid: "
                + ", ".join(SUSTAINED_DTYPES)
            )
        if self.size is not None and self.size < 64:
            raise FlopwiseError(f"--size must be at least 64, got {self.size}")
        if self.seconds is not None and self.seconds <= 0:
            raise FlopwiseError(f"--seconds must be positive, got {self.seconds}")
        if self.window_s is not None and self.window_s <= 0:
            raise FlopwiseError(f"--window must be positive, got {self.window_s}")
        if self.seconds is not None and self.window_s is not None:
            check_windows(self.window_s, self.seconds)


def check_windows(window_s: float, seconds: float) -> None:
    """Refuse a window longer than half the run: the steady state is the second half."""
    if window_s * 2 > seconds:
        raise FlopwiseError(
            f"--window {window_s:g} s leaves fewer than two windows in --seconds {seconds:g}; "
            "give a window at most half the run"
        )


@dataclass(frozen=True, slots=True)
class Window:
    """One window of the sustained run."""

    t_s: float  # seconds since the sustained run began, at the window's end
    tflops: float
    calls: int
    sm_clock_mhz: float | None
    power_w: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "tflops": self.tflops,
            "calls": self.calls,
            "sm_clock_mhz": self.sm_clock_mhz,
            "power_w": self.power_w,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SustainedRun:
    device: str
    device_name: str
    accelerator: str | None
    dtype: str
    size: int
    status: str
    burst_tflops: float | None
    windows: tuple[Window, ...]
    seconds: float
    window_s: float
    elapsed_s: float
    device_info: dict[str, Any]
    provenance: dict[str, Any]

    @property
    def sustained_tflops(self) -> float | None:
        """Mean rate over the run's second half (its steady state); None without windows."""
        return steady_state_tflops(self.windows)

    @property
    def gemm_share(self) -> float | None:
        sustained = self.sustained_tflops
        if sustained is None or not self.burst_tflops:
            return None
        return sustained / self.burst_tflops

    def summary(self) -> dict[str, Any]:
        """Headline numbers; `gemm_share` is what serving plans use (results.measured)."""
        return {
            "device": self.device,
            "device_name": self.device_name,
            "dtype": self.dtype,
            "size": self.size,
            "burst_tflops": self.burst_tflops,
            "sustained_tflops": self.sustained_tflops,
            "gemm_share": self.gemm_share,
            "seconds": self.seconds,
            "status": self.status,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "accelerator": self.accelerator,
            "window_s": self.window_s,
            "elapsed_s": self.elapsed_s,
            "windows": [w.to_dict() for w in self.windows],
            "device_info": self.device_info,
            "provenance": self.provenance,
        }


def steady_state_tflops(windows: tuple[Window, ...]) -> float | None:
    """Mean rate of the second half of the windows (the last one when there is only one)."""
    if not windows:
        return None
    tail = windows[len(windows) // 2 :]
    return float(statistics.fmean(w.tflops for w in tail))


def _telemetry(torch: Any, info: DeviceInfo) -> tuple[float | None, float | None]:
    """(SM clock MHz, board power W) where the backend reports them (CUDA through NVML)."""
    if info.type != "cuda":
        return None, None
    try:
        clock: float | None = float(torch.cuda.clock_rate(info.index))
    except Exception:  # telemetry is optional (no NVML, ROCm, ...)
        clock = None
    try:
        power: float | None = float(torch.cuda.power_draw(info.index)) / 1000.0  # milliwatts
    except Exception:
        power = None
    return clock, power


def _gemm_call(torch: Any, info: DeviceInfo, dtype: str, size: int, dev: Any) -> Callable[[], Any]:
    """One size^3 GEMM in `dtype` on the device, as a call to repeat; a one-line error when the
    matrices do not fit or the device cannot multiply in `dtype` (tried once at 64^3)."""
    from flopwise.bench.matmul import fp8_torch_name

    fp8 = dtype == "fp8"
    name = fp8_torch_name(info) if fp8 else SUSTAINED_DTYPES[dtype]
    if not hasattr(torch, name):
        raise FlopwiseError(f"this torch build has no {name}; upgrade torch")
    dt = getattr(torch, name)

    def make(n: int) -> Callable[[], Any]:
        if fp8:
            a = torch.randn(n, n, device=dev, dtype=torch.bfloat16).to(dt)
            # B stored as its transpose (the NT layout _scaled_mm takes, as bench matmul)
            b = torch.randn(n, n, device=dev, dtype=torch.bfloat16).to(dt).t()
            scale = torch.ones((), device=dev, dtype=torch.float32)
            # the call bench matmul times on devices (no out= variant relied on)
            return lambda: torch._scaled_mm(
                a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16
            )
        a = torch.randn(n, n, device=dev).to(dt)
        b = torch.randn(n, n, device=dev).to(dt)
        c = torch.empty(n, n, device=dev, dtype=dt)
        return lambda: torch.matmul(a, b, out=c)

    try:
        make(64)()
        synchronize(torch, info)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FlopwiseError(
            f"{info.spec} ({info.name}) cannot multiply in {dtype}: {first}"
        ) from None
    try:
        return make(size)
    except (RuntimeError, MemoryError) as exc:
        raise FlopwiseError(
            f"cannot allocate three {size}x{size} {dtype} matrices on {info.spec}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; use --size"
        ) from None


def run_sustained(
    config: SustainedConfig,
    on_round: Callable[[int, int], None] | None = None,
    *,
    info: DeviceInfo | None = None,
) -> SustainedRun:
    """Time a GEMM's burst rate, then its rate under `seconds` of back-to-back load; Ctrl-C
    returns the windows measured so far (status "interrupted")."""
    torch = import_torch()
    info = info or resolve_device(config.device)
    activate(torch, info)
    d = ACCELERATOR_SUSTAINED_DEFAULTS if info.is_accelerator else CPU_SUSTAINED_DEFAULTS
    dtype = config.dtype or d.dtype
    size = config.size or d.size
    seconds = config.seconds or d.seconds
    window_s = config.window_s or min(d.window_s, seconds / 2)
    check_windows(window_s, seconds)  # a given window against a default run length
    dev = torch_device(torch, info)
    from flopwise.bench.provenance import provenance

    prov = provenance(torch, info)
    call = _gemm_call(torch, info, dtype, size, dev)
    flops = 2.0 * size**3

    def sync() -> None:
        synchronize(torch, info)

    windows: list[Window] = []
    burst: float | None = None
    status = "complete"
    t0 = time.monotonic()
    expected = max(2, round(seconds / window_s))
    try:
        for _ in range(BURST_CALLS):
            call()
        sync()
        best = float("inf")
        for _ in range(BURST_CALLS):
            start = time.perf_counter()
            call()
            sync()
            best = min(best, time.perf_counter() - start)
        burst = flops / best / 1e12
        run_start = time.perf_counter()
        deadline = run_start + seconds
        while time.perf_counter() < deadline - 1e-9:
            w_start = time.perf_counter()
            calls = 0
            while True:
                call()
                calls += 1
                if calls % 4 == 0 or not info.is_accelerator:
                    sync()
                    if time.perf_counter() - w_start >= window_s:
                        break
            sync()
            now = time.perf_counter()
            clock, power = _telemetry(torch, info)
            windows.append(
                Window(now - run_start, flops * calls / (now - w_start) / 1e12, calls, clock, power)
            )
            if on_round is not None:
                on_round(min(len(windows), expected), expected)
    except KeyboardInterrupt:
        status = "interrupted"
    return SustainedRun(
        device=info.spec,
        device_name=info.name,
        accelerator=accelerator_id(info),
        dtype=dtype,
        size=size,
        status=status,
        burst_tflops=burst,
        windows=tuple(windows),
        seconds=seconds,
        window_s=window_s,
        elapsed_s=time.monotonic() - t0,
        device_info=info.to_dict(),
        provenance=prov,
    )
