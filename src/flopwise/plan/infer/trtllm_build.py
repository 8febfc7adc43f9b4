"""How ``trtllm-bench build --dataset`` sizes a TensorRT-LLM engine, and what the runtime holds.

TensorRT-LLM fixes two sizes when it builds an engine: ``max_batch_size`` (sequence slots:
decoder and sampling buffers, the logits buffer of max_batch_size x vocab) and
``max_num_tokens`` (rows of one forward pass: TensorRT "pre-computes the activation tensors
memory requirement at build time ... close to max number of input tokens * some constant factor",
docs/source/reference/memory.md "Memory Usage of TensorRT-LLM"). At start-up the C++ runtime
loads the weights, allocates that activation memory, the runtime buffers and the decoder
(logged as "[MemUsageChange] Allocated ... for runtime buffers" / "... for decoder") and only
then gives the KV cache ``kv_cache_free_gpu_mem_fraction`` of the memory still free
(cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp: createRuntimeContexts,
createBuffers and createDecoder run before the KV cache manager reads the free memory).

NVIDIA's published throughput tables (perf-overview, 0.14 edition onward) are built with
``trtllm-bench build --dataset``, which picks both sizes from the dataset's mean input/output
lengths with the heuristic in tensorrt_llm/bench/build/tuning.py (``calc_engine_setting`` and
``finetune_setting``), re-derived here from its documented arithmetic:

- engine size = parameter count x bytes per weight (0.5 for NVFP4, 1 for FP8, 2 otherwise), in
  units of 1e9;
- KV bytes per token = 2 x layers x max(tp, kv_heads) x head_dim x KV bytes, in GiB;
- requests that fit = 0.95 x (device GiB x GPUs - engine size) / (KV per token x (ISL + OSL));
- max_batch_size: requests (capped at 4096, divided by pp) rounded up to a multiple of 32 with
  a floor of 64 below 256, of 128 below 1024, else of 256;
- max_num_tokens: max_batch_size-before-rounding x (1 + ISL/OSL), capped at 32768, rounded up
  to 256 with a floor of 2048 below 4096, to 512 below 8192, else to 1024.

The runtime then caps the running requests at max_batch_size ("Max Runtime Batch Size" in the
trtllm-bench report) and its step at max_num_tokens ("Max Runtime Tokens"), per pipeline
micro-batch: with pipeline parallelism it keeps pp micro-batches in flight (the heuristic's
division by pp above), so pp x max_batch_size sequences run at once (PIPELINE_MICRO_BATCH_SOURCE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from flopwise.plan.infer.constants import EngineProfile
from flopwise.units import GIB
from flopwise.workload.spec import ModelSpec

#: Share of (device memory - engine size) trtllm-bench's sizing heuristic assumes the KV cache
#: gets: ``kv_cache_gpu_mem_fraction`` default 0.95 of calc_engine_setting (tuning.py). This
#: only sizes the engine; the runtime's own fraction is EngineProfile.memory_fraction (0.90).
BENCH_KV_FRACTION = 0.95

#: "Cap total batch size to avoid decoder buffer size becoming too large" (finetune_setting).
BENCH_MAX_BATCH_CAP = 4096

#: "Cap num tokens to avoid TRT activation buffer becoming too large" (finetune_setting).
BENCH_MAX_TOKENS_CAP = 32768

#: "Set min BS to be 64" (finetune_setting, optimistic tuning on).
BENCH_MIN_BATCH = 64

#: "Set min to 2048 to ensure Ctx/Gen overlap efficiency" (finetune_setting).
BENCH_MIN_TOKENS = 2048

#: Bytes per weight / KV element trtllm-bench's sizing counts, by the quantization it is told
#: (tuning.py ``BYTES_PER_ELEM``: NO_QUANT 2.0, FP8 and FP8_BLOCK_SCALES 1.0, NVFP4 0.5; any
#: other algorithm falls back to 2). flopwise's fp4 is NVFP4, the FP4 TensorRT-LLM serves.
BENCH_BYTES_PER_ELEM: dict[str, float] = {"fp8": 1.0, "fp4": 0.5}
BENCH_DEFAULT_BYTES_PER_ELEM = 2.0


def bench_bytes_per_elem(dtype: str) -> float:
    """Bytes per element trtllm-bench's sizing heuristic counts for a weight or KV dtype."""
    return BENCH_BYTES_PER_ELEM.get(dtype, BENCH_DEFAULT_BYTES_PER_ELEM)


@dataclass(frozen=True, slots=True)
class EngineBuild:
    """The two build-time sizes of a TensorRT-LLM engine and where they came from."""

    max_batch_size: int
    max_num_tokens: int
    kv_requests_estimate: float | None  # trtllm-bench's own estimate of requests that fit
    source: str
    #: pipeline micro-batches the runtime keeps in flight, each up to max_batch_size sequences
    #: and max_num_tokens tokens (PIPELINE_MICRO_BATCH_SOURCE)
    micro_batches: int = 1


def _round_batch(raw: float) -> int:
    if raw < 256:
        return max(BENCH_MIN_BATCH, 32 * math.ceil(raw / 32))
    if raw < 1024:
        return 128 * math.ceil(raw / 128)
    return 256 * math.ceil(raw / 256)


def _round_tokens(raw: float) -> int:
    if raw < 4096:
        return max(BENCH_MIN_TOKENS, 256 * math.ceil(raw / 256))
    if raw < 8192:
        return 512 * math.ceil(raw / 512)
    return 1024 * math.ceil(raw / 1024)


def bench_build(
    spec: ModelSpec,
    total_params: float,
    tp: int,
    pp: int,
    weight_bytes: float,
    kv_bytes: float,
    device_bytes: float,
    input_len: int,
    output_len: int,
) -> EngineBuild:
    """max_batch_size and max_num_tokens as ``trtllm-bench build --dataset`` chooses them.

    `weight_bytes`/`kv_bytes`: bytes per element as trtllm-bench counts them (BENCH_BYTES_PER_ELEM:
    it does not know that the embedding and lm_head stay 16-bit).
    """
    gpus = tp * pp
    engine_gib = total_params / 1e9 * weight_bytes  # trtllm-bench mixes 1e9 and GiB here
    available_gib = device_bytes / GIB * gpus - engine_gib
    kv_per_token_gib = 2 * spec.layers * max(tp, spec.kv_heads) * spec.head_dim * kv_bytes / GIB
    requests = max(0.0, BENCH_KV_FRACTION * available_gib) / (
        kv_per_token_gib * (input_len + output_len)
    )
    raw_batch = min(requests, BENCH_MAX_BATCH_CAP) / pp
    raw_tokens = min(raw_batch * (1 + input_len / output_len), BENCH_MAX_TOKENS_CAP)
    return EngineBuild(
        max_batch_size=_round_batch(raw_batch),
        max_num_tokens=_round_tokens(raw_tokens),
        kv_requests_estimate=requests,
        source="trtllm-bench build --dataset heuristic (tensorrt_llm/bench/build/tuning.py)",
    )


def built_engine(
    engine: EngineProfile,
    spec: ModelSpec,
    total_params: float,
    tp: int,
    pp: int,
    weight_dtype: str,
    kv_dtype: str,
    device_bytes: float | None,
    input_len: int,
    output_len: int,
    *,
    given_batch: int | None = None,
    given_tokens: int | None = None,
) -> tuple[EngineProfile, EngineBuild | None]:
    """The engine profile with the build sizes its builder picks for this job (if it picks any).

    Only profiles whose ``build_sizing`` is "trtllm-bench" change: max_num_seqs becomes the
    engine's max_batch_size and max_num_tokens the engine's; others come back unchanged. Sizes
    the job gives (``given_*``: an engine built with explicit max_batch_size / max_num_tokens,
    e.g. trtllm-bench's pre-defined table before 0.15) win over the heuristic.
    """
    if engine.build_sizing != "trtllm-bench" or device_bytes is None:
        return engine, None
    build = bench_build(
        spec,
        total_params,
        tp,
        pp,
        bench_bytes_per_elem(weight_dtype),
        bench_bytes_per_elem(kv_dtype),
        device_bytes,
        input_len,
        output_len,
    )
    if given_batch is not None or given_tokens is not None:
        build = EngineBuild(
            max_batch_size=build.max_batch_size if given_batch is None else given_batch,
            max_num_tokens=build.max_num_tokens if given_tokens is None else given_tokens,
            kv_requests_estimate=None,
            source="given (--engine-max-batch / --engine-max-tokens)",
        )
    # with pipeline parallelism the runtime keeps one micro-batch per stage in flight, each up
    # to the engine's sizes, so it holds pp x max_batch_size sequences at once
    mb = max(1, pp)
    build = replace(build, micro_batches=mb)
    sized = replace(
        engine,
        max_num_seqs=build.max_batch_size * mb,
        max_num_tokens=build.max_num_tokens * mb,
        micro_batches=mb,
    )
    return sized, build


#: Where the per-micro-batch sizes come from: TensorRT-LLM's C++ batch manager sets
#: mNumMicroBatches to the pipeline-parallel size and sizes its capacity scheduler
#: getMaxBatchSize() * mNumMicroBatches (cpp/tensorrt_llm/batch_manager/
#: trtGptModelInflightBatching.cpp); its PyTorch backend allocates max_num_sequences =
#: max_batch_size * mapping.pp_size sequence slots (tensorrt_llm/_torch/pyexecutor/_util.py).
PIPELINE_MICRO_BATCH_SOURCE = (
    "TensorRT-LLM keeps one micro-batch per pipeline stage in flight, each up to "
    "max_batch_size / max_num_tokens (batch manager: CapacityScheduler(getMaxBatchSize() * "
    "mNumMicroBatches), mNumMicroBatches = pp; PyTorch backend: max_num_sequences = "
    "max_batch_size * pp_size)"
)


def with_engine_sizes(
    engine: EngineProfile, max_batch: int | None, max_tokens: int | None
) -> EngineProfile:
    """The profile with the sequence slots and per-pass token budget a job gives, if any."""
    if max_batch is not None:
        engine = replace(engine, max_num_seqs=max_batch)
    if max_tokens is not None:
        engine = replace(engine, max_num_tokens=max_tokens)
    return engine


def slot_buffer_bytes(
    engine: EngineProfile, vocab: int, seqs: int | None = None, seq_tokens: float = 0.0
) -> float:
    """Runtime and decoder buffers sized per sequence slot (`seqs`, default the engine's
    max_num_seqs): vocab-wide logits and sampling buffers, and tensors as long as the engine's
    max sequence length (`seq_tokens`; trtllm-bench builds it for the dataset's ISL + OSL)."""
    slots = engine.max_num_seqs if seqs is None else seqs
    if slots is None:
        return 0.0
    per_slot = vocab * engine.slot_bytes_per_vocab + seq_tokens * engine.slot_bytes_per_seq_token
    return slots * per_slot
