"""`flopwise bench attention`: fused causal attention, forward and backward, by sequence length.

What the attention core of a training step runs at on this device: PyTorch's
``scaled_dot_product_attention`` with ``is_causal=True`` (the kernel PyTorch picks, or one
backend asked for with ``--backend``), at a fixed number of tokens per call so every sequence
length does the same work per token of context. Forward and forward + backward are timed with
device events (median of the timed runs after warm-up); the backward is their difference.

FLOPs are counted as the planner counts them (plan/train/step_time.py): the causal half of the
square, 2 x 2 x b x h x s^2 x d / 2 forward, and the backward as ATTENTION_BWD_FLOP_FACTOR
(2.5) times the forward (FlashAttention-2 paper §4.1).

Each direction's rates are fitted to rate(s) = rate_inf x s / (s + s_half): a query block pays a
fixed cost against work in proportion to the keys it reads, so short sequences run below the
long-sequence rate (docs/measured-h100.md). `--measured` hands that curve to the training
planner in place of the catalog's attention fractions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from flopwise.bench.device import (
    DeviceInfo,
    accelerator_id,
    activate,
    empty_cache,
    import_torch,
    is_out_of_memory,
    resolve_device,
    torch_device,
)
from flopwise.bench.timing import IterationTimer
from flopwise.errors import FlopwiseError
from flopwise.plan.efficiency import ATTENTION_BWD_FLOP_FACTOR, rate_at_length

ATTENTION_DTYPES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

#: ``--backend``: PyTorch's own choice, or one SDPA backend (torch.nn.attention.SDPBackend).
BACKENDS: dict[str, str | None] = {
    "auto": None,
    "flash": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}


@dataclass(frozen=True, slots=True)
class AttentionDefaults:
    seq_lens: tuple[int, ...]
    tokens: int  # tokens per call: batch = tokens // seq_len
    heads: int
    iterations: int
    warmup: int


#: Accelerators: the shape of benchmarks/device/attention_sdpa.py (Llama's head_dim 128,
#: 32 heads, 32,768 tokens per call, 1K-32K tokens).
ACCELERATOR_ATTENTION_DEFAULTS = AttentionDefaults(
    seq_lens=(1024, 2048, 4096, 8192, 16384, 32768),
    tokens=32768,
    heads=32,
    iterations=20,
    warmup=5,
)
#: CPUs: the same kernel shape, a few seconds of work.
CPU_ATTENTION_DEFAULTS = AttentionDefaults(
    seq_lens=(256, 512, 1024, 2048), tokens=2048, heads=4, iterations=3, warmup=1
)

#: Largest head dimension the fused kernels take (FlashAttention-2/3, cuDNN: 256).
MAX_HEAD_DIM = 256

#: s_half values tried by the fit (tokens): 0 and a geometric grid from 1 to 1M.
_S_HALF_GRID: tuple[float, ...] = (0.0, *(10 ** (i / 50) for i in range(301)))


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionConfig:
    device: str = "auto"
    dtype: str | None = None  # bf16 on accelerators, fp32 on CPUs (whose plans run in fp32)
    seq_lens: tuple[int, ...] | None = None
    heads: int | None = None
    head_dim: int = 128
    tokens: int | None = None
    backend: str = "auto"
    iterations: int | None = None
    warmup: int | None = None

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in ATTENTION_DTYPES:
            raise FlopwiseError(
                f"unknown attention dtype {self.dtype!r}; valid: {', '.join(ATTENTION_DTYPES)}"
            )
        if self.backend not in BACKENDS:
            raise FlopwiseError(
                f"unknown attention backend {self.backend!r}; valid: {', '.join(BACKENDS)}"
            )
        if not 8 <= self.head_dim <= MAX_HEAD_DIM or self.head_dim % 8:
            raise FlopwiseError(
                f"--head-dim {self.head_dim}: use a multiple of 8 from 8 to {MAX_HEAD_DIM}"
            )
        if self.seq_lens is not None and (not self.seq_lens or any(s < 2 for s in self.seq_lens)):
            raise FlopwiseError(f"--seq-lens must be lengths of 2 or more, got {self.seq_lens}")
        for name, value, low in (
            ("--heads", self.heads, 1),
            ("--tokens", self.tokens, 2),
            ("--iterations", self.iterations, 1),
            ("--warmup", self.warmup, 0),
        ):
            if value is not None and value < low:
                raise FlopwiseError(f"{name} must be at least {low}, got {value}")


def causal_fwd_flops(batch: int, heads: int, seq_len: int, head_dim: int) -> float:
    """Forward FLOPs of causal attention as the planner counts them: Q.K^T and P.V over the
    causal half of the square, 2 x 2 x b x h x s^2 x d / 2."""
    return 2.0 * batch * heads * float(seq_len) * seq_len * head_dim


@dataclass(frozen=True, slots=True)
class SeqResult:
    """One sequence length: median seconds per call and the TFLOPS they imply."""

    seq_len: int
    batch: int
    fwd_s: float
    bwd_s: float
    fwd_tflops: float
    bwd_tflops: float
    runs: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "batch": self.batch,
            "fwd_ms": self.fwd_s * 1e3,
            "bwd_ms": self.bwd_s * 1e3,
            "fwd_tflops": self.fwd_tflops,
            "bwd_tflops": self.bwd_tflops,
            "runs": self.runs,
        }


@dataclass(frozen=True, slots=True)
class CurveFit:
    """rate(s) = rate_inf_tflops x s / (s + s_half); `log_error`: mean |log(fit / measured)|."""

    rate_inf_tflops: float
    s_half: float
    log_error: float

    def rate(self, seq_len: float) -> float:
        return rate_at_length(self.rate_inf_tflops, self.s_half, seq_len)

    def to_dict(self) -> dict[str, float]:
        return {
            "tflops_inf": self.rate_inf_tflops,
            "s_half": self.s_half,
            "mean_abs_log_error": self.log_error,
        }


def fit_curve(points: Sequence[tuple[float, float]]) -> CurveFit | None:
    """Least squares in log space of rate_inf x s / (s + s_half) through (s, TFLOPS) points;
    None with fewer than two distinct lengths. For each s_half on a grid the best rate_inf is
    the geometric mean of rate / (s / (s + s_half)); the s_half with the least squared log
    error wins."""
    pts = [(float(s), float(r)) for s, r in points if s > 0 and r > 0]
    if len({s for s, _ in pts}) < 2:
        return None
    best: tuple[float, float, float] | None = None
    for s_half in _S_HALF_GRID:
        logs = [math.log(r) - math.log(s / (s + s_half)) for s, r in pts]
        log_inf = sum(logs) / len(logs)
        sq = sum((x - log_inf) ** 2 for x in logs)
        if best is None or sq < best[0] - 1e-15:
            best = (sq, math.exp(log_inf), s_half)
    assert best is not None
    _, rate_inf, s_half = best
    fit = CurveFit(rate_inf, s_half, 0.0)
    err = sum(abs(math.log(fit.rate(s) / r)) for s, r in pts) / len(pts)
    return CurveFit(rate_inf, s_half, err)


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionRun:
    device: str
    device_name: str
    accelerator: str | None
    dtype: str
    backend: str
    heads: int
    head_dim: int
    tokens: int
    status: str
    results: tuple[SeqResult, ...]
    skipped: dict[int, str]
    fwd_fit: CurveFit | None
    bwd_fit: CurveFit | None
    peak_tflops: float | None  # catalog dense peak for the dtype (None: unknown or CPU)
    iterations: int
    elapsed_s: float
    device_info: dict[str, Any]
    provenance: dict[str, Any]

    def _fraction(self, fit: CurveFit | None) -> float | None:
        if fit is None or not self.peak_tflops:
            return None
        return fit.rate_inf_tflops / self.peak_tflops

    def summary(self) -> dict[str, Any]:
        """Headline numbers; the fitted curves are what `--measured` reads (results.measured)."""
        return {
            "device": self.device,
            "device_name": self.device_name,
            "dtype": self.dtype,
            "backend": self.backend,
            "heads": self.heads,
            "head_dim": self.head_dim,
            "seq_lens": [r.seq_len for r in self.results],
            "fwd_tflops_inf": None if self.fwd_fit is None else self.fwd_fit.rate_inf_tflops,
            "fwd_s_half": None if self.fwd_fit is None else self.fwd_fit.s_half,
            "bwd_tflops_inf": None if self.bwd_fit is None else self.bwd_fit.rate_inf_tflops,
            "bwd_s_half": None if self.bwd_fit is None else self.bwd_fit.s_half,
            "fwd_fraction_inf": self._fraction(self.fwd_fit),
            "bwd_fraction_inf": self._fraction(self.bwd_fit),
            "peak_tflops": self.peak_tflops,
            "status": self.status,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "accelerator": self.accelerator,
            "tokens_per_call": self.tokens,
            "iterations": self.iterations,
            "elapsed_s": self.elapsed_s,
            "flops_counted": "causal half of the square; backward 2.5x the forward",
            "results": [r.to_dict() for r in self.results],
            "skipped": {str(k): v for k, v in self.skipped.items()},
            "fwd_fit": None if self.fwd_fit is None else self.fwd_fit.to_dict(),
            "bwd_fit": None if self.bwd_fit is None else self.bwd_fit.to_dict(),
            "device_info": self.device_info,
            "provenance": self.provenance,
        }


def _backend_context(torch: Any, backend: str) -> Callable[[], AbstractContextManager[Any]]:
    name = BACKENDS[backend]
    if name is None:
        return nullcontext
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        raise FlopwiseError(
            f"--backend {backend} needs torch.nn.attention (PyTorch 2.3 or newer); "
            f"this is {torch.__version__}"
        ) from None
    member = getattr(SDPBackend, name, None)
    if member is None:
        raise FlopwiseError(f"PyTorch {torch.__version__} has no SDPA backend {name}")
    return lambda: sdpa_kernel(member)


def measure_seq(
    torch: Any,
    timer: IterationTimer,
    dev: Any,
    dtype: Any,
    config: AttentionConfig,
    seq_len: int,
    heads: int,
    tokens: int,
    iterations: int,
    warmup: int,
) -> SeqResult:
    """Time causal SDPA forward and forward + backward at one sequence length."""
    f = torch.nn.functional
    batch = max(1, tokens // seq_len)
    shape = (batch, heads, seq_len, config.head_dim)
    q, k, v = (torch.randn(shape, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device=dev, dtype=dtype)
    context = _backend_context(torch, config.backend)

    def fwd() -> Any:
        with context():
            return f.scaled_dot_product_attention(q, k, v, is_causal=True)

    def fwd_bwd() -> Any:
        with context():
            out = f.scaled_dot_product_attention(q, k, v, is_causal=True)
        return torch.autograd.grad(out, (q, k, v), grad)

    with torch.no_grad():
        for _ in range(warmup):
            fwd()
    for _ in range(warmup):
        fwd_bwd()
    with torch.no_grad():
        t_fwd = timer.time(fwd, iterations).median_s
    t_both = timer.time(fwd_bwd, iterations).median_s
    t_bwd = max(t_both - t_fwd, 1e-9)
    flops = causal_fwd_flops(batch, heads, seq_len, config.head_dim)
    return SeqResult(
        seq_len=seq_len,
        batch=batch,
        fwd_s=t_fwd,
        bwd_s=t_bwd,
        fwd_tflops=flops / t_fwd / 1e12,
        bwd_tflops=ATTENTION_BWD_FLOP_FACTOR * flops / t_bwd / 1e12,
        runs=iterations,
    )


def run_attention(
    config: AttentionConfig,
    on_round: Callable[[int, int], None] | None = None,
    *,
    info: DeviceInfo | None = None,
    measure: Callable[..., SeqResult] = measure_seq,
) -> AttentionRun:
    """Measure causal attention at each sequence length; Ctrl-C keeps what was measured, and a
    length that runs out of memory (or that the backend refuses) is skipped with its reason."""
    torch = import_torch()
    info = info or resolve_device(config.device)
    activate(torch, info)
    d = ACCELERATOR_ATTENTION_DEFAULTS if info.is_accelerator else CPU_ATTENTION_DEFAULTS
    seq_lens = config.seq_lens or d.seq_lens
    heads = config.heads or d.heads
    tokens = config.tokens or d.tokens
    iterations = config.iterations or d.iterations
    warmup = d.warmup if config.warmup is None else config.warmup
    dtype_name = config.dtype or ("bf16" if info.is_accelerator else "fp32")
    dtype = getattr(torch, ATTENTION_DTYPES[dtype_name])
    dev = torch_device(torch, info)
    timer = IterationTimer(torch, info)
    from flopwise.bench.provenance import provenance

    prov = provenance(torch, info)
    results: list[SeqResult] = []
    skipped: dict[int, str] = {}
    status = "complete"
    t0 = time.monotonic()
    try:
        for i, s in enumerate(seq_lens):
            try:
                results.append(
                    measure(torch, timer, dev, dtype, config, s, heads, tokens, iterations, warmup)
                )
            except (RuntimeError, MemoryError) as exc:
                if is_out_of_memory(exc):
                    skipped[s] = "out of memory"
                    empty_cache(torch, info)
                else:
                    skipped[s] = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            if on_round is not None:
                on_round(i + 1, len(seq_lens))
    except KeyboardInterrupt:
        status = "interrupted"
    if not results and status == "complete":
        reasons = "; ".join(f"{s}: {why}" for s, why in skipped.items())
        raise FlopwiseError(f"no sequence length could be measured on {info.spec} ({reasons})")
    acc = accelerator_id(info)
    return AttentionRun(
        device=info.spec,
        device_name=info.name,
        accelerator=acc,
        dtype=dtype_name,
        backend=config.backend,
        heads=heads,
        head_dim=config.head_dim,
        tokens=tokens,
        status=status,
        results=tuple(results),
        skipped=skipped,
        fwd_fit=fit_curve([(r.seq_len, r.fwd_tflops) for r in results]),
        bwd_fit=fit_curve([(r.seq_len, r.bwd_tflops) for r in results]),
        peak_tflops=_peak_tflops(acc, dtype_name),
        iterations=iterations,
        elapsed_s=time.monotonic() - t0,
        device_info=info.to_dict(),
        provenance=prov,
    )


def _peak_tflops(accelerator: str | None, dtype: str) -> float | None:
    if accelerator is None or accelerator == "cpu":
        return None
    from flopwise.catalog import get_accelerator

    return get_accelerator(accelerator).peak_tflops(dtype)
