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

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    def to_dict(self) -> dict[str, Any]:
        return {
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "status": self.status,
            "median_tflops": self.median_tflops,
            "max_tflops": self.max_tflops,
            "median_s": self.median_s,
            "min_s": self.min_s,
            "iterations": self.iterations,
            "error": self.error,
        }


class MatmulKernel:
    """Allocates, runs and times matmuls of one dtype on one device."""

    def __init__(self, torch: Any, info: DeviceInfo, dtype: DType, seed: int = 0) -> None:
        self.torch = torch
        self.info = info
        self.dtype = dtype
        self.seed = seed
        self.device = torch_device(torch, info)
        self.timer = IterationTimer(torch, info)
        self._flush: Any = None
        self.check_dtype()

    def check_dtype(self) -> None:
        """Fail with one line when the device cannot multiply in this dtype."""
        torch, dt, kind = self.torch, self.dtype, self.info.type
        if dt.name == "fp8" and kind == "cpu":
            raise FlopwiseError("dtype fp8 needs an accelerator with fp8 matmul (torch._scaled_mm)")
        if dt.name == "tf32" and kind not in ("cuda", "xpu"):
            raise FlopwiseError(f"dtype tf32 is a CUDA/XPU mode; {kind} has none (use fp32)")
        if not hasattr(torch, dt.torch_name):
            raise FlopwiseError(f"this torch build has no {dt.torch_name}; upgrade torch")
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
        torch = self.torch
        torch.manual_seed(self.seed)
        if self.dtype.name == "fp8":
            f8 = getattr(torch, self.dtype.torch_name)
            a = torch.randn(m, k, device=self.device, dtype=torch.bfloat16).to(f8)
            # _scaled_mm wants the second operand column-major.
            b = torch.randn(n, k, device=self.device, dtype=torch.bfloat16).to(f8).t()
            return a, b, None
        dt = getattr(torch, self.dtype.torch_name)
        a = torch.randn(m, k, device=self.device, dtype=dt)
        b = torch.randn(k, n, device=self.device, dtype=dt)
        c = torch.empty(m, n, device=self.device, dtype=dt)
        return a, b, c

    def run_once(self, a: Any, b: Any, c: Any) -> Any:
        torch = self.torch
        if c is None:  # fp8
            one = torch.ones((), device=self.device, dtype=torch.float32)
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return torch.mm(a, b, out=c)

    def flush_buffer(self) -> Any:
        if self._flush is None:
            n = self.info.flush_bytes // 4
            self._flush = self.torch.empty(n, dtype=self.torch.int32, device=self.device)
        return self._flush

    def fits(self, m: int, n: int, k: int) -> bool:
        mem = self.info.memory_bytes
        need = (m * k + k * n) * self.dtype.element_bytes + m * n * max(2, self.dtype.element_bytes)
        return mem is None or need <= MAX_MEMORY_SHARE * mem - self.info.flush_bytes

    def measure(self, shape: tuple[int, int, int], iterations: int, warmup: int) -> ShapeResult:
        """Median and max TFLOPS of one shape; out-of-memory and backend errors are recorded."""
        m, n, k = shape
        if not self.fits(m, n, k):
            return ShapeResult(m, n, k, "oom", error="larger than the device memory allows")
        tensors: tuple[Any, Any, Any] | None = None
        try:
            tensors = self.prepare(m, n, k)
            a, b, c = tensors
            flush = self.flush_buffer()

            def before_each() -> None:
                flush.zero_()
                if c is not None:
                    c.uniform_()  # re-randomise the output so no result is reused

            def run() -> None:
                self.run_once(a, b, c)

            for _ in range(warmup):
                run()
            times = self.timer.time(run, iterations, before_each)
        except Exception as exc:
            tensors = None
            if is_out_of_memory(exc):
                empty_cache(self.torch, self.info)
                return ShapeResult(m, n, k, "oom", error="out of memory")
            if isinstance(exc, RuntimeError):
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else "error"
                return ShapeResult(m, n, k, "error", error=text[:200])
            raise
        finally:
            del tensors
        flops = matmul_flops(m, n, k)
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
        )

    def warm_device(self, shape: tuple[int, int, int], seconds: float) -> None:
        """Keep the device busy for `seconds` so clocks and caches settle before measuring."""
        if seconds <= 0:
            return
        from flopwise.bench.timing import warm_up

        m, n, k = shape
        if not self.fits(m, n, k):
            return
        a, b, c = self.prepare(m, n, k)
        warm_up(lambda: self.run_once(a, b, c), seconds, self.timer.sync)
