"""What to plan: the serving job (lengths, batch, layout, precision, engine) and its resolution.

``InferJob`` is the frozen input of ``plan_inference``. ``Precision`` resolves the three dtypes a
deployment uses: weights (stored and read), KV cache, and the GEMM input dtype. Weight-only
quantization (int4/int8 weights, 16-bit activations) reads fewer bytes but computes in 16 bit;
weight+activation quantization (fp8 on hardware with fp8 tensor cores, or int8 SmoothQuant when
asked) also computes at the lower precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.gemm_constants import GROUPED_GEMM_EFFICIENCY
from flopwise.plan.infer.constants import DECODE_KERNELS
from flopwise.units import check_fraction
from flopwise.workload.memory_bytes import normalize_dtype
from flopwise.workload.spec import ModelSpec

WEIGHT_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "mxfp8", "int8", "int4", "fp4", "mxfp4")
KV_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8")
ACT_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "mxfp8", "int8", "fp32", "fp4", "mxfp4")

#: Block-scaled (microscaling) formats: NVFP4 (`fp4`), MXFP4 and MXFP8 run on tensor cores from
#: NVIDIA Blackwell on (Hopper's fp8 has per-tensor scales only; NVIDIA Blackwell architecture
#: technical brief; TensorRT-LLM's B200/GB200 NVFP4 tables). A device whose catalog entry has an
#: fp4 rate is taken to have them; elsewhere they are refused.
BLOCK_SCALED: tuple[str, ...] = ("fp4", "mxfp4", "mxfp8")


def supports_block_scaled(hw: Hardware) -> bool:
    return "fp4" in hw.peak_tflops or "fp4" in hw.matmul_tflops


def _check_block_scaled(hw: Hardware, dtype: str, what: str) -> None:
    if dtype in BLOCK_SCALED and not supports_block_scaled(hw):
        raise FlopwiseError(
            f"{what} {dtype} is a block-scaled format (NVFP4/MXFP4/MXFP8) that needs "
            f"Blackwell-class tensor cores; {hw.id} has none (fp4 rate unknown): use fp8 or "
            "int8, or int4 for 4-bit weight-only"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class InferJob:
    """A serving job. ``batch=None`` asks for the steady-state maximum (continuous batching)."""

    input_len: int = 1024
    output_len: int = 256
    batch: int | None = 1
    tp: int = 1
    pp: int = 1
    replicas: int = 1  # data-parallel copies of the tp x pp group
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None  # default: 16-bit (fp16 with fp16 weights, else bf16)
    act_dtype: str | None = None  # default: see Precision.resolve
    engine: str = "generic"
    price_per_gpu_hour: float | None = None
    ep: int = 1  # expert-parallel degree inside the TP group (MoE); must divide tp
    attention_dp: bool = False  # attention data-parallel over the TP group (MoE serving)
    #: an offline batch of this many requests arriving at once (``offline.py``); ``batch`` then
    #: caps how many run at once (None: as many as fit)
    num_requests: int | None = None
    #: online serving: this many requests in flight over the deployment, a new one sent as one
    #: finishes (``online.py``); ``batch`` then caps how many the engine runs at once (None:
    #: as many as fit, as with ``num_requests``)
    concurrency: int | None = None
    #: online serving: requests arriving at this many per second over the deployment (Poisson,
    #: an open loop; ``arrivals.py``); ``batch`` then caps how many the engine runs at once
    request_rate: float | None = None
    #: the engine's memory knob (TensorRT-LLM kv_cache_free_gpu_mem_fraction, vLLM
    #: gpu_memory_utilization, SGLang mem_fraction_static); None: the engine's default
    memory_fraction: float | None = None
    #: the engine's build-time sequence slots and per-pass token budget (TensorRT-LLM
    #: max_batch_size / max_num_tokens of trtllm-build, vLLM --max-num-seqs /
    #: --max-num-batched-tokens); None: the engine's default, or for TensorRT-LLM what
    #: ``trtllm-bench build --dataset`` picks (``trtllm_build.py``)
    engine_max_batch: int | None = None
    engine_max_tokens: int | None = None
    #: run past the model's trained context (max_position_embeddings), as TensorRT-LLM does when
    #: built with a larger --max_seq_len and vLLM with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; rotary
    #: and ALiBi models run, a learned position table cannot
    allow_long_context: bool = False
    #: prefill attention in FP8 when the model is FP8-quantized (TensorRT-LLM
    #: use_fp8_context_fmha); None: the engine profile's (EngineProfile.fp8_context_attention)
    fp8_context_attention: bool | None = None
    #: the decode-attention kernel (constants.DECODE_KERNELS): "grouped" (XQA, FlashInfer,
    #: FlashDecoding: KV read once per KV head) or "per-head" (TensorRT-LLM's masked MHA: a
    #: CUDA-core pass per query head); None: the engine profile's (EngineProfile.decode_kernel)
    decode_kernel: str | None = None
    #: with ``num_requests``: the requests' output lengths spread evenly over (1 +/- this) x
    #: output_len, mean unchanged (random-length benchmarks; ``offline.simulate``); 0: all equal
    output_spread: float = 0.0
    #: the batch sizes the engine captured CUDA graphs for, with padding on (TensorRT-LLM's
    #: ``cuda_graph_config: {enable_padding: true, batch_sizes: [...]}``): a decode-only pass
    #: of n sequences per executor runs the smallest captured batch >= n, its GEMMs and LM head
    #: over the padded rows (the dummy requests' attention reads next to no KV); empty: none
    cuda_graph_batch_sizes: tuple[int, ...] = ()
    #: decode steps between the scheduler's looks at newly arrived requests (SGLang
    #: ``--scheduler-recv-interval`` or ``--num-continuous-decode-steps``, vLLM V0
    #: ``--num-scheduler-steps``): online, a request arriving while the engine decodes waits
    #: for the next look (``online.poll_wait_s``); 1: every step
    scheduler_poll_steps: int = 1
    #: whether passes carrying prompt tokens replay (piecewise) CUDA graphs: SGLang
    #: ``--enable-piecewise-cuda-graph`` / ``--disable-piecewise-cuda-graph``, TensorRT-LLM
    #: ``torch_compile_config.enable_piecewise_cuda_graph``; None: the engine's default for this
    #: deployment (plan/infer/prefill_graphs.py). An eager pass pays its ops' host dispatch.
    prefill_cuda_graphs: bool | None = None

    def __post_init__(self) -> None:
        if self.decode_kernel is not None and self.decode_kernel not in DECODE_KERNELS:
            raise FlopwiseError(
                f"decode kernel must be one of {', '.join(DECODE_KERNELS)}, "
                f"got {self.decode_kernel!r}"
            )
        sizes = self.cuda_graph_batch_sizes
        if any(not isinstance(b, int) or b < 1 for b in sizes) or list(sizes) != sorted(set(sizes)):
            raise FlopwiseError(
                "cuda_graph_batch_sizes must be positive integers in increasing order, got "
                f"{list(sizes)!r}"
            )
        positive = ("input_len", "output_len", "tp", "pp", "replicas", "ep", "scheduler_poll_steps")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise FlopwiseError(f"{name} must be a positive integer, got {value!r}")
        if self.prefill_cuda_graphs not in (None, True, False):
            raise FlopwiseError(
                f"prefill_cuda_graphs must be true, false or unset, got {self.prefill_cuda_graphs!r}"
            )
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise FlopwiseError(f"batch must be a positive integer or 'max', got {self.batch!r}")
        if self.num_requests is not None and (
            not isinstance(self.num_requests, int) or self.num_requests < 1
        ):
            raise FlopwiseError(
                f"num_requests must be a positive integer, got {self.num_requests!r}"
            )
        if self.concurrency is not None:
            if not isinstance(self.concurrency, int) or self.concurrency < 1:
                raise FlopwiseError(
                    f"concurrency must be a positive integer, got {self.concurrency!r}"
                )
            if self.num_requests is not None and self.num_requests < self.concurrency:
                raise FlopwiseError(
                    f"num_requests ({self.num_requests}) with concurrency ({self.concurrency}) is "
                    "a closed-loop run of that many requests: give at least as many requests as "
                    "are in flight"
                )
        if self.request_rate is not None:
            rate = self.request_rate
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
                raise FlopwiseError(f"request_rate must be a positive number, got {rate!r}")
            if self.num_requests is not None or self.concurrency is not None:
                raise FlopwiseError(
                    "request_rate (arrivals per second), concurrency (requests in flight) and "
                    "num_requests (an offline batch) are separate modes: give one of them"
                )
        if self.memory_fraction is not None:
            check_fraction(self.memory_fraction, "memory fraction")
        spread = self.output_spread
        if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not 0 <= spread < 1:
            raise FlopwiseError(f"output spread must be in [0, 1), got {spread!r}")
        if spread and self.num_requests is None:
            raise FlopwiseError(
                "output spread varies the lengths of a run of requests: give num_requests "
                "(an offline batch, or with concurrency a closed-loop run)"
            )
        for name in ("engine_max_batch", "engine_max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise FlopwiseError(f"{name} must be a positive integer, got {value!r}")
        if (
            self.engine_max_batch is not None
            and self.batch is not None
            and self.batch > self.engine_max_batch
        ):
            raise FlopwiseError(
                f"--batch {self.batch} exceeds the engine's --engine-max-batch "
                f"{self.engine_max_batch} (its sequence slots): give a batch <= "
                f"{self.engine_max_batch} or a larger engine"
            )
        if self.tp % self.ep:
            raise FlopwiseError(
                f"--ep {self.ep} must divide --tp {self.tp} (experts are split over ep groups "
                "of the tensor-parallel ranks)"
            )
        normalize_dtype(self.weight_dtype, WEIGHT_DTYPES)
        if self.kv_dtype is not None:
            normalize_dtype(self.kv_dtype, KV_DTYPES)
        if self.act_dtype is not None:
            normalize_dtype(self.act_dtype, ACT_DTYPES)
        if self.price_per_gpu_hour is not None and self.price_per_gpu_hour < 0:
            raise FlopwiseError(f"price per GPU-hour must be >= 0, got {self.price_per_gpu_hour}")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.replicas

    def moe_layout_note(self) -> str:
        """How a mixture-of-experts model is split (the plan's assumptions line)."""
        split = (
            f"experts split over {self.ep} expert-parallel groups of {self.tp // self.ep} "
            "tensor-parallel ranks (the step waits for the group that touched the most "
            "experts: at a small batch more than the mean share)"
            if self.ep > 1
            else "experts split by tensor parallelism"
        )
        attn = (
            f"attention data-parallel over {self.tp} ranks (whole heads, 1/{self.tp} of the "
            "sequences each)"
            if self.attention_dp
            else "attention split by heads"
        )
        return (
            f"MoE: {split}; {attn}; decode reads the expected distinct experts of the batch, "
            "prefill all of them; each layer's experts run as one grouped GEMM at "
            f"{GROUPED_GEMM_EFFICIENCY:.2f} of the dense roof (GROUPED_GEMM_EFFICIENCY, fitted "
            "on DeepGEMM's grouped GEMMs), each expert padding its own last tile on a "
            "uniform-routing draw of its tokens"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_len": self.input_len,
            "output_len": self.output_len,
            "batch": "max" if self.batch is None else self.batch,
            "tp": self.tp,
            "pp": self.pp,
            "replicas": self.replicas,
            "gpus": self.gpus,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "act_dtype": self.act_dtype,
            "engine": self.engine,
            "ep": self.ep,
            "attention_dp": self.attention_dp,
            "num_requests": self.num_requests,
            "concurrency": self.concurrency,
            "request_rate": self.request_rate,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "engine_max_batch": self.engine_max_batch,
            "engine_max_tokens": self.engine_max_tokens,
            "fp8_context_attention": self.fp8_context_attention,
            "decode_kernel": self.decode_kernel,
            "output_spread": self.output_spread,
            "cuda_graph_batch_sizes": list(self.cuda_graph_batch_sizes),
            "scheduler_poll_steps": self.scheduler_poll_steps,
            "prefill_cuda_graphs": self.prefill_cuda_graphs,
        }


@dataclass(frozen=True, slots=True)
class Precision:
    weight: str
    kv: str
    act: str  # GEMM input dtype (the tensor-core rate used)
    mode: str  # "16-bit" | "weight-only" | "weight+activation"
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "weight": self.weight,
            "kv": self.kv,
            "activation": self.act,
            "mode": self.mode,
            "note": self.note,
        }


def _vendor(hw: Hardware) -> str:
    return hw.accelerator.vendor.strip().lower() if hw.accelerator is not None else ""


def _has_rate(hw: Hardware, dtype: str) -> bool:
    return dtype in hw.matmul_tflops or dtype in hw.peak_tflops


def resolve_precision(job: InferJob, hw: Hardware) -> Precision:
    """Weights, KV and GEMM dtypes for this job on this hardware (see the module docstring)."""
    weight = normalize_dtype(job.weight_dtype, WEIGHT_DTYPES)
    kv = normalize_dtype(job.kv_dtype, KV_DTYPES) if job.kv_dtype else None
    if kv is None:
        kv = "fp16" if weight == "fp16" else "bf16"
    sixteen = "fp16" if weight == "fp16" else "bf16"
    note = ""
    _check_block_scaled(hw, weight, "weight dtype")
    if job.act_dtype:
        act = normalize_dtype(job.act_dtype, ACT_DTYPES)
        _check_block_scaled(hw, act, "activation dtype")
    elif weight in ("fp8", "mxfp8") and "fp8" in hw.peak_tflops:
        act = weight
    elif weight in ("fp4", "mxfp4"):
        act = weight  # W4A4 as TensorRT-LLM's NVFP4 checkpoints run
        if weight == "fp4" and _vendor(hw) == "amd":
            note = (
                "fp4 is NVFP4 (4.5 bits stored); AMD's FP4 tensor cores take MXFP4 "
                "(--weight-dtype mxfp4, 4.25 bits)"
            )
    else:
        act = weight if weight in ("bf16", "fp16") else sixteen
    if act == "mxfp8":
        act = "fp8"  # MXFP8 GEMMs run at the fp8 tensor-core rate (block scales in hardware)
        note = "MXFP8: fp8 tensor-core rate with per-32-element block scales"
    elif act == "mxfp4":
        act = "fp4"  # MXFP4 GEMMs run at the fp4 tensor-core rate (block scales in hardware)
        note = "MXFP4: fp4 tensor-core rate with per-32-element block scales"
    if not _has_rate(hw, act):
        measured = sorted(hw.matmul_tflops)
        if job.act_dtype or len(measured) != 1:
            raise FlopwiseError(
                f"{hw.id} has no matmul rate for {act} GEMMs; known: "
                f"{', '.join(sorted(set(hw.matmul_tflops) | set(hw.peak_tflops))) or 'none'}"
                " (pass --activation-dtype, or measure with flopwise bench matmul)"
            )
        note = f"GEMMs planned at the only measured rate ({measured[0]}) of {hw.id}"
        act = measured[0]
    if act == weight or (weight in ("bf16", "fp16") and act in ("bf16", "fp16", "fp32")):
        mode = "16-bit" if weight in ("bf16", "fp16") else "weight+activation"
    elif act in ("fp8", "int8", "fp4"):
        mode = "weight+activation"
    else:
        mode = "weight-only"
    return Precision(weight=weight, kv=kv, act=act, mode=mode, note=note)


def resolve_layout(
    hw: Hardware, gpus: int | None, tp: int | None, pp: int | None
) -> tuple[int, int, int]:
    """(tp, pp, replicas) from --gpus/--tp/--pp. Defaults: tp fills the scale-up domain."""
    pp = pp or 1
    if tp is None:
        if gpus is None:
            tp = 1
        else:
            per_pp, rem = divmod(gpus, pp)
            if rem or per_pp < 1:
                raise FlopwiseError(f"--gpus {gpus} is not a multiple of --pp {pp}")
            tp = min(per_pp, max(1, hw.scaleup_domain))
    group = tp * pp
    if gpus is None:
        return tp, pp, 1
    replicas, rem = divmod(gpus, group)
    if rem or replicas < 1:
        raise FlopwiseError(f"--gpus {gpus} is not a multiple of tp x pp = {tp} x {pp} = {group}")
    return tp, pp, replicas


def check_tensor_parallel(spec: ModelSpec, tp: int) -> None:
    """Refuse a TP degree that cannot split the model's heads (vLLM's rule): TP must divide
    the attention heads, and either divide the KV heads or be a multiple of them (KV heads are
    then replicated)."""
    if spec.heads % tp:
        valid = ", ".join(str(d) for d in range(1, spec.heads + 1) if spec.heads % d == 0)
        raise FlopwiseError(
            f"--tp {tp} does not divide {spec.name}'s {spec.heads} attention heads; valid: {valid}"
        )
    kv = spec.kv_heads
    if kv and not spec.is_mla and (kv % tp if tp <= kv else tp % kv):
        raise FlopwiseError(
            f"--tp {tp} cannot split {spec.name}'s {kv} KV heads evenly (TP must divide them "
            "or be a multiple of them)"
        )
