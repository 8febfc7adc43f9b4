"""What the user wants to run, independent of where: the job half of a comparison."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.units import check_fraction

#: Global batch when none is given: 4Mi tokens, as `flopwise plan train` (Llama 2's 4M batch).
DEFAULT_BATCH_TOKENS = 4 * 2**20

#: Layout choices the training planner accepts as constraints (the rest are searched).
LAYOUT_KEYS: tuple[str, ...] = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vpp",
    "microbatch",
    "recompute",
    "recompute_layers",
    "zero",
    "sequence_parallel",
    "hsdp",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompareTrainJob:
    """Train on `tokens` tokens using `gpus` accelerators (whole instances are billed).

    With `mfu` set the comparison uses the first-order estimate (time = FLOPs / (GPUs x peak x
    MFU)), as `flopwise plan train --mfu` does; otherwise the training planner searches the
    layouts `layout` leaves free.
    """

    tokens: float
    gpus: int
    seq_len: int | None = None  # default: min(context, 4096)
    global_batch_seqs: int | None = None  # default: DEFAULT_BATCH_TOKENS / seq_len
    dtype: str = "bf16"
    recipe: str | None = None
    # TrainJob keywords of the framework profile and its overrides (framework, attention,
    # *_comm_overlap, pp_scatter_gather), as `flopwise plan train --framework ...` takes them
    framework_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    objective: str = "time"
    gpus_per_node: int | None = None  # default: the node type's
    scaleup_domain: int | None = None  # default: the node type's
    mfu: float | None = None
    layout: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.tokens <= 0:
            raise FlopwiseError(f"--tokens must be positive, got {self.tokens}")
        if self.gpus < 1:
            raise FlopwiseError(f"--gpus must be at least 1, got {self.gpus}")
        if self.mfu is not None and not 0 < self.mfu <= 1:
            raise FlopwiseError(f"--mfu must be in (0, 1], got {self.mfu}")
        unknown = sorted(set(self.layout) - set(LAYOUT_KEYS))
        if unknown:
            raise FlopwiseError(
                f"unknown layout choice(s) {', '.join(unknown)}; valid: {', '.join(LAYOUT_KEYS)}"
            )

    def seq_len_for(self, max_seq_len: int) -> int:
        return self.seq_len or min(max_seq_len, 4096)

    def batch_seqs_for(self, seq_len: int) -> int:
        return self.global_batch_seqs or max(DEFAULT_BATCH_TOKENS // seq_len, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "train",
            "tokens": self.tokens,
            "gpus": self.gpus,
            "seq_len": self.seq_len,
            "global_batch_seqs": self.global_batch_seqs,
            "dtype": self.dtype,
            "recipe": self.recipe,
            **dict(self.framework_options),
            "objective": self.objective,
            "gpus_per_node": self.gpus_per_node,
            "scaleup_domain": self.scaleup_domain,
            "mfu": self.mfu,
            "layout": dict(self.layout),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class CompareInferJob:
    """Serve requests of input_len prompt and output_len generated tokens.

    `batch` is the static batch per replica, or None for the steady-state maximum (continuous
    batching, `--batch max`). A replica is `tp` x `pp` GPUs inside one instance; `tp=None` lets
    the comparison pick the smallest that fits. An instance runs as many replicas as it holds.
    """

    batch: int | None = 1
    input_len: int = 1024
    output_len: int = 256
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None  # planner default: 16-bit
    act_dtype: str | None = None  # planner default: see flopwise.plan.infer.Precision
    engine: str = "generic"
    tp: int | None = None
    pp: int = 1
    #: With a latency target each offer runs at its largest batch within it (batch is ignored).
    target_tpot_ms: float | None = None
    target_ttft_ms: float | None = None
    #: An offline batch of this many requests per instance (split over its replicas); `batch`
    #: then caps how many run at once per replica (None: as many as fit).
    num_requests: int | None = None
    #: Online serving: this many requests in flight per instance (split over its replicas), a
    #: new one sent as one finishes; `batch` then caps how many run at once per replica.
    concurrency: int | None = None
    #: Online serving: requests arriving at this many per second per instance (Poisson, split
    #: over its replicas); an offer that cannot sustain it is excluded with its highest rate.
    request_rate: float | None = None
    #: The engine's memory knob (see plan.infer.InferJob.memory_fraction); None: its default.
    memory_fraction: float | None = None
    #: Plan sequences past the model's context (see plan.infer.InferJob.allow_long_context).
    allow_long_context: bool = False
    #: FP8 prefill attention with FP8 quantization (see plan.infer.InferJob); None: the engine's
    fp8_context_attention: bool | None = None
    #: Whether prompt passes replay CUDA graphs (see plan.infer.InferJob.prefill_cuda_graphs).
    prefill_cuda_graphs: bool | None = None
    #: The decode-attention kernel (see plan.infer.InferJob.decode_kernel); None: the engine's
    decode_kernel: str | None = None
    #: CUDA-graph batch sizes with padding (see plan.infer.InferJob.cuda_graph_batch_sizes)
    cuda_graph_batch_sizes: tuple[int, ...] = ()
    #: The engine's build sizes (see plan.infer.InferJob.engine_max_batch); None: its default.
    engine_max_batch: int | None = None
    engine_max_tokens: int | None = None
    #: Output lengths spread over (1 +/- this) x output_len (see plan.infer.InferJob).
    output_spread: float = 0.0
    #: Decode steps between the scheduler's looks at new requests (see
    #: plan.infer.InferJob.scheduler_poll_steps).
    scheduler_poll_steps: int = 1

    @property
    def batch_rule(self) -> str:
        """How every row's batch was chosen, stated in the output."""
        if self.num_requests is not None:
            running = "as many as fit" if self.batch is None else f"at most {self.batch}"
            return (
                f"an offline batch of {self.num_requests:,} requests per instance, split over "
                f"its replicas; {running} running at once per replica"
            )
        if self.request_rate is not None:
            return (
                f"online serving: {self.request_rate:g} requests/s arriving per instance "
                "(Poisson), split over its replicas"
            )
        if self.concurrency is not None:
            running = "as many as fit" if self.batch is None else f"at most {self.batch}"
            return (
                f"online serving: {self.concurrency:,} requests in flight per instance, split "
                f"over its replicas; {running} running at once per replica"
            )
        targets = [
            f"{name} <= {value:g} ms"
            for name, value in (("TPOT", self.target_tpot_ms), ("TTFT", self.target_ttft_ms))
            if value is not None
        ]
        if targets:
            return "each offer at its largest batch per replica with " + " and ".join(targets)
        if self.batch is None:
            return "each offer at its own largest batch that fits (--batch max): batches differ"
        return f"every offer at the same batch per replica: {self.batch}"

    def __post_init__(self) -> None:
        for name in ("input_len", "output_len", "pp", "scheduler_poll_steps"):
            value = getattr(self, name)
            if value < 1:
                raise FlopwiseError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.batch is not None and self.batch < 1:
            raise FlopwiseError(f"--batch must be at least 1 or 'max', got {self.batch}")
        if self.tp is not None and self.tp < 1:
            raise FlopwiseError(f"--tp must be at least 1, got {self.tp}")
        if self.num_requests is not None and self.num_requests < 1:
            raise FlopwiseError(f"--num-requests must be at least 1, got {self.num_requests}")
        if self.concurrency is not None:
            if self.concurrency < 1:
                raise FlopwiseError(f"--concurrency must be at least 1, got {self.concurrency}")
            if self.num_requests is not None and self.num_requests < self.concurrency:
                raise FlopwiseError(
                    f"--num-requests {self.num_requests} with --concurrency {self.concurrency} is "
                    "a benchmark run of that many requests: give at least as many as in flight"
                )
            if self.target_tpot_ms is not None or self.target_ttft_ms is not None:
                raise FlopwiseError(
                    "--concurrency fixes the load; a latency target picks it: give one of them"
                )
        if self.request_rate is not None:
            if not self.request_rate > 0:
                raise FlopwiseError(f"--request-rate must be positive, got {self.request_rate}")
            others = (self.num_requests, self.concurrency, self.target_tpot_ms, self.target_ttft_ms)
            if any(o is not None for o in others):
                raise FlopwiseError(
                    "--request-rate fixes the load: give it without --num-requests, "
                    "--concurrency or a latency target"
                )
        if self.memory_fraction is not None:
            check_fraction(self.memory_fraction, "--memory-fraction")
        if self.output_spread and self.num_requests is None:
            raise FlopwiseError("--output-spread varies a run's lengths: give --num-requests too")
        for name in ("target_tpot_ms", "target_ttft_ms"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise FlopwiseError(f"--{name.replace('_', '-')} must be positive, got {value}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "infer",
            "batch": "max" if self.batch is None else self.batch,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "act_dtype": self.act_dtype,
            "engine": self.engine,
            "tp": self.tp,
            "pp": self.pp,
            "target_tpot_ms": self.target_tpot_ms,
            "target_ttft_ms": self.target_ttft_ms,
            "num_requests": self.num_requests,
            "concurrency": self.concurrency,
            "request_rate": self.request_rate,
            "memory_fraction": self.memory_fraction,
            "allow_long_context": self.allow_long_context,
            "fp8_context_attention": self.fp8_context_attention,
            "prefill_cuda_graphs": self.prefill_cuda_graphs,
            "decode_kernel": self.decode_kernel,
            "cuda_graph_batch_sizes": list(self.cuda_graph_batch_sizes),
            "engine_max_batch": self.engine_max_batch,
            "engine_max_tokens": self.engine_max_tokens,
            "scheduler_poll_steps": self.scheduler_poll_steps,
            "batch_rule": self.batch_rule,
        }
