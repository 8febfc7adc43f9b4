"""One matmul shape, measured properly: seeded inputs, cache flush, fresh output, events.

`C = A @ B` with A (M x K), B (K x N): 2·M·N·K floating-point operations (one multiply and
one add per term of each of the M·N dot products of length K).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.bench.device import DeviceInfo, empty_cache, is_out_of_memory, torch_device
from flopwise.bench.timing import IterationTimer
from flopwise.errors import FlopwiseError
from flopwise.units import TERA

#: A shape is skipped (recorded as out of memory) when its three matrices would take more than
#: this share of the device memory; the rest is left for the flush buffer and the allocator.
MAX_MEMORY_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class DType:
    """A GEMM dtype: canonical short name (as the catalog uses), torch name, element size."""

    name: str
    torch_name: str
    element_bytes: float
    aliases: tuple[str, ...]


DTYPES: tuple[DType, ...] = (
    DType("bf16", "bfloat16", 2, ("bf16", "bfloat16")),
    DType("fp16", "float16", 2, ("fp16", "float16", "half")),
    DType("fp32", "float32", 4, ("fp32", "float32", "float")),
    DType("tf32", "float32", 4, ("tf32", "tensorfloat32")),
    DType("fp8", "float8_e4m3fn", 1, ("fp8", "float8", "float8_e4m3fn", "e4m3")),
)


#: ROCm architectures whose fp8 is the FNUZ variant (no negative zero, bias 8): MI300A/MI300X/
#: MI325X are gfx942 (gfx940/941 were MI300 pre-production parts). MI350/MI355X (gfx950) and
#: NVIDIA use the OCP e4m3fn format (PyTorch float8 docs; AMD ROCm "Precision support").
FNUZ_FP8_ARCHS: tuple[str, ...] = ("gfx940", "gfx941", "gfx942")
FNUZ_FP8_NAMES: tuple[str, ...] = ("MI300", "MI325")


def fp8_torch_name(info: DeviceInfo) -> str:
    """The torch fp8 e4m3 dtype this device multiplies in: e4m3fnuz on MI300-class, else e4m3fn."""
    if info.is_rocm:
        if info.arch is not None:
            if info.arch in FNUZ_FP8_ARCHS:
                return "float8_e4m3fnuz"
        elif any(tag in info.name.upper() for tag in FNUZ_FP8_NAMES):
            return "float8_e4m3fnuz"
    return "float8_e4m3fn"


def torch_dtype_name(dtype: DType, info: DeviceInfo) -> str:
    """The torch dtype attribute for a GEMM dtype on this device (fp8 depends on the vendor)."""
    return fp8_torch_name(info) if dtype.name == "fp8" else dtype.torch_name


def parse_dtype(text: str) -> DType:
    key = text.strip().lower()
    for dt in DTYPES:
        if key in dt.aliases:
            return dt
    valid = ", ".join(a for dt in DTYPES for a in dt.aliases[:2])
    raise FlopwiseError(f"unknown dtype {text!r}; valid: {valid}")


def default_dtype(info: DeviceInfo) -> DType:
    """bfloat16 on accelerators, float32 on the CPU."""
    return parse_dtype("bf16" if info.is_accelerator else "fp32")


def matmul_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one (M x K) @ (K x N) product: 2·M·N·K."""
    return 2 * m * n * k


@dataclass(frozen=True, slots=True)
class ShapeResult:
    """One measured shape. `status` is ok, oom (skipped) or error (skipped, with the message)."""

    m: int
    n: int
    k: int
    status: str
    median_tflops: float | None = None
    max_tflops: float | None = None
    median_s: float | None = None
    min_s: float | None = None
    iterations: int = 0
    error: str | None = None
    dtype: str | None = None
    spread: float | None = None  # (slowest - fastest) / median iteration time
    groups: int = 1  # G > 1: one grouped GEMM of G such products (bench/matmul_grouped.py)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def tflops(self) -> float | None:
        """The shape's rate: the median over its timed iterations."""
        return self.median_tflops

    def to_dict(self) -> dict[str, Any]:
        return {
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "dtype": self.dtype,
            "tflops": self.median_tflops,
            "tflops_max": self.max_tflops,
            "spread": self.spread,
            "status": self.status,
            "median_tflops": self.median_tflops,
            "max_tflops": self.max_tflops,
            "median_s": self.median_s,
            "min_s": self.min_s,
            "iterations": self.iterations,
            "error": self.error,
            "groups": self.groups,
        }


class MatmulKernel:
    """Allocates, runs and times matmuls of one dtype on one device."""

    #: products per timed call (a grouped kernel runs several: bench/matmul_grouped.py)
    groups: int = 1

    def __init__(self, torch: Any, info: DeviceInfo, dtype: DType, seed: int = 0) -> None:
        self.torch = torch
        self.info = info
        self.dtype = dtype
        self.seed = seed
        self.device = torch_device(torch, info)
        self.timer = IterationTimer(torch, info)
        self.torch_dtype = torch_dtype_name(dtype, info)
        self._flush: Any = None
        self.check_dtype()

    def check_dtype(self) -> None:
        """Fail with one line when the device cannot multiply in this dtype."""
        torch, dt, kind = self.torch, self.dtype, self.info.type
        if dt.name == "tf32" and kind not in ("cuda", "xpu"):
            raise FlopwiseError(f"dtype tf32 is a CUDA/XPU mode; {kind} has none (use fp32)")
        if not hasattr(torch, self.torch_dtype):
            raise FlopwiseError(f"this torch build has no {self.torch_dtype}; upgrade torch")
        if kind == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = dt.name == "tf32"
        try:
            self.run_once(*self.prepare(64, 64, 64))
            self.timer.sync()
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise FlopwiseError(
                f"{self.info.spec} ({self.info.name}) cannot multiply in {dt.name}: {first}"
            ) from None

    def prepare(self, m: int, n: int, k: int) -> tuple[Any, Any, Any]:
        """A (M x K) row-major and B (K x N) stored as its (N x K) transpose: the NT layout of
        a training linear layer (y = x W^T, W stored out x in) and of mamf-finder."""
        torch = self.torch
        torch.manual_seed(self.seed)
        dt = getattr(torch, self.torch_dtype)
        if self.dtype.name == "fp8":
            a = torch.randn(m, k, device=self.device, dtype=torch.bfloat16).to(dt)
            b = torch.randn(n, k, device=self.device, dtype=torch.bfloat16).to(dt).t()
            # the per-tensor scale is made here: made inside the timed call, its fill kernel
            # would be timed with every product
            return a, b, torch.ones((), device=self.device, dtype=torch.float32)
        a = torch.randn(m, k, device=self.device, dtype=dt)
        b = torch.randn(n, k, device=self.device, dtype=dt).t()
        c = torch.empty(m, n, device=self.device, dtype=dt)
        return a, b, c

    def run_once(self, a: Any, b: Any, c: Any) -> Any:
        torch = self.torch
        if self.dtype.name == "fp8":  # c is the scale
            return torch._scaled_mm(a, b, scale_a=c, scale_b=c, out_dtype=torch.bfloat16)
        return torch.mm(a, b, out=c)

    def refresh_output(self, c: Any) -> None:
        """Re-randomise the output before a timed call, so no result is reused (fp8: `c` is
        the scale, left as it is)."""
        if self.dtype.name != "fp8":
            c.uniform_()

    def flops(self, m: int, n: int, k: int) -> int:
        """Floating-point operations of one timed call."""
        return matmul_flops(m, n, k)

    def flush_buffer(self) -> Any:
        if self._flush is None:
            n = self.info.flush_bytes // 4
            self._flush = self.torch.zeros(n, dtype=self.torch.int32, device=self.device)
        return self._flush

    def flush(self) -> None:
        """Evict A and B from the last-level cache by reading a buffer larger than it.

        A read, not mamf-finder's write (`zero_()`): a write leaves the cache full of dirty
        lines, and the next kernel pays their write-back (a 50 MB L2 at 3 TB/s is ~17 us),
        which doubled the time of microsecond decode-shape GEMMs on an H100 (2026-11-23,
        docs/bench.md); a read leaves clean lines that are evicted for free. Large shapes
        (milliseconds) are unaffected either way."""
        self.flush_buffer().sum()

    def fits(self, m: int, n: int, k: int) -> bool:
        mem = self.info.memory_bytes
        need = (m * k + k * n) * self.dtype.element_bytes + m * n * max(2, self.dtype.element_bytes)
        return mem is None or need <= MAX_MEMORY_SHARE * mem - self.info.flush_bytes

    def measure(self, shape: tuple[int, int, int], iterations: int, warmup: int) -> ShapeResult:
        """Median and max TFLOPS of one shape; out-of-memory and backend errors are recorded."""
        m, n, k = shape
        if not self.fits(m, n, k):
            return ShapeResult(
                m,
                n,
                k,
                "oom",
                error="larger than the device memory allows",
                dtype=self.dtype.name,
                groups=self.groups,
            )
        tensors: tuple[Any, Any, Any] | None = None
        try:
            tensors = self.prepare(m, n, k)
            a, b, c = tensors

            def before_each() -> None:
                self.flush()
                self.refresh_output(c)

            def run() -> None:
                self.run_once(a, b, c)

            for _ in range(warmup):
                run()
            times = self.timer.time(run, iterations, before_each)
        except Exception as exc:
            tensors = None
            if is_out_of_memory(exc):
                empty_cache(self.torch, self.info)
                return ShapeResult(
                    m, n, k, "oom", error="out of memory", dtype=self.dtype.name, groups=self.groups
                )
            if isinstance(exc, RuntimeError):
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else "error"
                return ShapeResult(
                    m, n, k, "error", error=text[:200], dtype=self.dtype.name, groups=self.groups
                )
            raise
        finally:
            del tensors
        flops = self.flops(m, n, k)
        return ShapeResult(
            m,
            n,
            k,
            "ok",
            median_tflops=flops / times.median_s / TERA,
            max_tflops=flops / times.min_s / TERA,
            median_s=times.median_s,
            min_s=times.min_s,
            iterations=iterations,
            dtype=self.dtype.name,
            spread=(max(times.seconds) - times.min_s) / times.median_s,
            groups=self.groups,
        )
