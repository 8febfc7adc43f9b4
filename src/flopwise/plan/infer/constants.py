"""Inference-specific constants: one profile per serving-engine class, each value with its source.

The shared hardware knobs (MAMF, achievable HBM bandwidth, collective alpha/beta, kernel launch)
live in ``flopwise.plan.efficiency`` and are used as they are. What differs between serving
engines is the software around the kernels: host time per step (scheduling, sampling, input
preparation), how close their decode-attention kernels get to the memory roofline, how close
their prefill attention gets to the GEMM ceiling, their small-message all-reduce and how much
device memory they take for themselves. Those are the few named constants below. They were set
from the engines' own documentation and kernel benchmarks (cited per value), never tuned to a
single published serving row; ``flopwise.validate.inference`` reports how well they do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from flopwise.errors import unknown
from flopwise.plan import decode_kernels
from flopwise.units import GIB

#: Decode-attention kernels a plan can assume (EngineProfile.decode_kernel, --decode-kernel).
DECODE_KERNELS = decode_kernels.DECODE_KERNELS

#: FITTED ON PUBLISHED SERVING ROWS (the one inference constant that is): the rate of
#: TensorRT-LLM's masked multi-head attention (MMHA) decode kernel, in (query head x KV
#: element) multiply-adds per SM per clock. MMHA runs one CUDA-core thread block per query head
#: (docs/source/advanced/gpt-attention.md), so a KV element is read and multiplied once per query
#: head that shares it and its time is ops / (SMs x clock x this), or the KV bytes over the
#: decode bandwidth where that is longer. No kernel benchmark publishes the rate, so it is fitted
#: on the published rows that ran MMHA (TensorRT-LLM 0.5 and 0.9 rows of models without an XQA
#: kernel: validate/inference_rows.py PER_HEAD_DECODE), least mean |log error|, grid
#: MMHA_GRID in validate/inference.py; `flopwise validate --only inference` refits it without
#: each source family and scores every row out of sample with its fold's value (JSON
#: ``fitted.MMHA_OPS_PER_SM_CLOCK``). What it absorbs: the kernel's instruction mix (KV
#: dequantisation, the QK dot products' shuffles, the softmax), its occupancy and L1/L2 reuse.
#: Fit of 2026-11-25: 18 on the 69 throughput targets of TensorRT-LLM 0.5/0.9 rows (A100 fp16,
#: H100/H200 fp8 and L40S caches): in sample 9.2%, out of sample (the 0.9 rows at the 0.5 rows'
#: 29) 12.3%, where pricing the kernel by its KV bytes alone left them at 19.8% (bias +10.8%);
#: held out by accelerator every fold picks 18-19 and they score 9.3%.
#: Refitted 2026-11-29: 18 -> 17, the A100 rows among its fit rows running their GEMMs at the
#: GA100 training fraction refitted 0.80 -> 0.81 (plan/sustained.py, torchtitan's eager
#: pointwise ops); the same rule on the same rows. Refitted 2026-11-30: 17 -> 18, GA100's
#: training fraction back to 0.80 (full recompute priced by each framework's checkpoint).
MMHA_OPS_PER_SM_CLOCK = 18.0


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineProfile:
    """What a class of serving engine adds to (or takes from) the kernel roofline."""

    name: str
    #: Host/runtime time per decode step that the GPU does not hide (scheduler, sampling,
    #: detokenisation hand-off, input tensors), seconds.
    step_overhead_s: float
    #: Host time per running request per step, seconds, on top of step_overhead_s, as
    #: measured on a Grace host (host_s_per_request scales it to the deployment's host): a
    #: Python executor walks every request each iteration (scheduling, sampled-token
    #: bookkeeping, stop checks, responses), so its host step grows with the batch. 0: a C++
    #: runtime whose per-request work is negligible against the GPU's.
    host_s_per_seq: float = 0.0
    #: Whether that per-request host work for the next step runs while the GPU runs this one
    #: (an overlap scheduler): then only what exceeds the GPU's step is exposed; otherwise it
    #: adds to every step.
    host_overlap: bool = False
    #: Whether a pass that replays no CUDA graph (one carrying prompt tokens: a context or
    #: mixed pass; a decode-only pass above every captured batch) runs its model code op by op
    #: from Python, each op paying its host dispatch (plan/infer/dispatch.py): TensorRT-LLM's
    #: PyTorch backend without piecewise CUDA graphs
    #: (``torch_compile_config.enable_piecewise_cuda_graph``, off by default). False: a
    #: compiled engine or C++ runtime whose launches the GPU does not wait on.
    eager_python_dispatch: bool = False
    #: PyTorch calls the engine's model code makes per op that plan/infer/dispatch.py counts
    #: (its count follows TensorRT-LLM's fused custom ops: 1.0). SGLang's Python modules make
    #: more (SGLANG_CALLS_PER_COUNTED_OP, from a measured eager DeepSeek-V3 pass).
    calls_per_counted_op: float = 1.0
    #: Which passes carrying prompt tokens replay a CUDA graph by default
    #: (plan/infer/prefill_graphs.py): "never" (TensorRT-LLM's PyTorch backend, whose piecewise
    #: graphs are off unless asked), or "sglang" (SGLang's piecewise-graph default of v0.5.10
    #: on, with its exclusions). InferJob.prefill_cuda_graphs overrides it.
    prompt_pass_graphs: str = "never"
    #: Host/runtime time per prefill (context) pass, seconds: request enqueue, input copies,
    #: first-token sampling and copy back; about 1-3 ms in the engines' own batch-1 tables.
    prefill_overhead_s: float
    #: Fraction of achievable (STREAM-like) HBM bandwidth that decode attention reaches. Decode
    #: attention is a streaming read of the KV cache; FlashInfer's and TensorRT-LLM's XQA
    #: kernels approach streaming bandwidth at large batch x context (FlashInfer blog 2024-02,
    #: bandwidth-utilisation plots), vLLM's PagedAttention v1/v2 kernels less so.
    decode_attention_bw_fraction: float
    #: Fraction of the GEMM ceiling (MAMF) that causal prefill attention reaches.
    prefill_attention_fraction: float
    #: The engine's 16-bit GEMMs relative to what the die sustains: MAMF x the GEMM-by-shape
    #: efficiency (plan/gemm.py) x the die's sustained fraction (plan/sustained.py, the same
    #: rate a training step's GEMMs run at). 1.0: the engines call cuBLAS-class kernels.
    gemm_fraction: float
    #: ... and its scaled low-precision (fp8, fp4) GEMMs, relative to the same sustained rate at
    #: their own ceiling (FP8_GEMM_FRACTION).
    fp8_gemm_fraction: float
    #: Latency of one small-message (one-shot) all-reduce inside an NVLink domain, seconds.
    allreduce_latency_s: float
    #: Fraction of device memory the engine lets itself use (the rest is left to the runtime).
    memory_fraction: float
    #: Largest number of sequences the scheduler runs at once by default (None: no cap).
    max_num_seqs: int | None
    #: Tokens one forward pass processes at most (prefill chunk); sizes the activation workspace.
    max_num_tokens: int
    source: str
    #: How the scheduler reserves KV cache for a running request under continuous batching:
    #: "full" admits a request only when KV for all its input + output tokens is free (TensorRT-
    #: LLM's default GUARANTEED_NO_EVICT capacity policy: "only accepts new requests if they can
    #: complete without eviction"); "paged" allocates pages as tokens arrive and preempts when
    #: full (vLLM, SGLang), so a running request holds input + output/2 tokens on average.
    kv_reservation: str = "paged"
    #: What memory_fraction is a fraction of: "total" device memory (vLLM
    #: gpu_memory_utilization, SGLang mem_fraction_static) or the "free" memory left after
    #: weights and activations (TensorRT-LLM kv_cache_free_gpu_mem_fraction / KvCacheConfig
    #: free_gpu_memory_fraction, default 0.9).
    memory_fraction_of: str = "total"
    #: What the engine does around the kernels, in words (batching, prefill, CUDA graphs, KV).
    features: str = ""
    #: Who sizes the engine's sequence slots and step tokens for a ``--batch max`` job:
    #: "trtllm-bench" = from the job's lengths as ``trtllm-bench build --dataset`` does
    #: (plan/infer/trtllm_build.py); "" = max_num_seqs / max_num_tokens as given above.
    build_sizing: str = ""
    #: Tokens per KV cache block: a request reserved whole ("full") is charged whole blocks
    #: (TensorRT-LLM's paged KV cache default tokens_per_block 64, gpt_attention plugin and
    #: BuildConfig defaults of the 0.1x releases).
    kv_block_tokens: int = 1
    #: Device bytes the runtime holds per sequence slot per vocabulary entry (logits, decoder and
    #: sampling buffers sized max_num_seqs x vocab), allocated before the KV cache is sized.
    slot_bytes_per_vocab: float = 0.0
    #: ... and per sequence slot per token of the engine's max sequence length (cache
    #: indirection, output ids: max_num_seqs x max_seq_len int32 tensors).
    slot_bytes_per_seq_token: float = 0.0
    #: How the engine picks a TP all-reduce inside an NVLink domain: "cheapest" = the cheapest of
    #: NCCL's ring and the one-/two-shot custom kernels (vLLM and SGLang dispatch by measured
    #: size thresholds that track the fastest); "trtllm" = TensorRT-LLM's AUTO rule
    #: (``TRTLLM_ALLREDUCE`` below): one-shot below a size that falls with the group, NCCL above.
    allreduce_policy: str = "cheapest"
    #: Bytes per logit the engine gathers and samples from: TensorRT-LLM builds with
    #: logits_dtype float32 by default (PretrainedConfig/convert_checkpoint ``logits_dtype``);
    #: vLLM and SGLang compute and gather logits in the model's 16-bit dtype.
    logits_bytes: float = 2.0
    #: Which kernels run around an MoE layer's expert GEMMs (router dtype, routing, permute,
    #: reduce): a recipe of ``plan/infer/moe_kernels.py`` ("generic" or "tensorrt-llm").
    moe_kernels: str = "generic"
    #: What the scheduler does when a running request's next KV slot cannot be allocated:
    #: "recompute" = it admits requests on their prompt alone and, when the pool is full,
    #: preempts the newest running request, frees its KV and prefills its prompt and generated
    #: tokens again later (vLLM: docs "Optimization and Tuning > Preemption", V1 scheduler
    #: ``self.running.pop()`` / ``num_computed_tokens = 0``; plan/infer/preemption.py);
    #: "" = not modelled (admission keeps the batch within the KV cache).
    preemption: str = ""
    #: Largest all-reduce, bytes, that the engine's custom (one-/two-shot) kernel takes; larger
    #: ones go to NCCL/RCCL's ring (None: no limit modelled). vLLM's CustomAllreduce is built
    #: with ``max_size=8192 * 1024`` and ``should_custom_ar`` requires ``inp_size <
    #: self.max_size`` (vllm/distributed/device_communicators/custom_all_reduce.py).
    custom_allreduce_max_bytes: float | None = None
    #: Whether the engine's prefill (context) attention runs in FP8 when the model is FP8-
    #: quantized: ``trtllm-bench build`` turns on ``use_fp8_context_fmha`` (with paged context
    #: FMHA) for FP8 and NVFP4 quantization (tensorrt_llm/bench/build/build.py, from the 0.12-era
    #: builder through the 0.17+ LLM-API builder), so the published FP8 tables ran FP8 context
    #: attention; the rate is then FP8_ATTENTION_SPEEDUP x the 16-bit one.
    fp8_context_attention: bool = False
    #: Whether generation (decode) requests honour a model's chunked attention (Llama 4's
    #: attention_chunk_size) and attend only within their chunk. TensorRT-LLM 1.0: "chunked
    #: attention can only be applied to context requests" (docs/source/features/
    #: long-sequence.md, NVIDIA/TensorRT-LLM PR #6696), so its generation steps attend to every
    #: token. vLLM runs Llama 4's local layers as ChunkedLocalAttention
    #: (vllm/attention/layers/chunked_local_attention.py) in both phases. Either way the cache
    #: keeps every token of those layers by default (plan/infer/memory.py).
    chunked_attention_in_decode: bool = True
    #: Pipeline micro-batches the runtime keeps in flight (TensorRT-LLM with pp stages: one per
    #: stage, plan/infer/trtllm_build.py PIPELINE_MICRO_BATCH_SOURCE). max_num_seqs and
    #: max_num_tokens above are then totals over them; one forward pass on a GPU is one
    #: micro-batch (max_num_tokens / micro_batches), which sizes the activation workspace.
    micro_batches: int = 1
    #: Under attention data parallelism (--attention-dp), whether the engine keeps the dense
    #: MLP layers, shared experts, router, embedding and lm_head whole on every rank, each rank
    #: running them on its own sequences, so that only the routed experts gather tokens.
    #: TensorRT-LLM's PyTorch backend does (``GatedMLP(..., overridden_tp_size=1 if
    #: self.enable_attention_dp else None)`` for Llama 4's dense layers and shared expert and
    #: for Qwen3's MLPs, the embedding built without a mapping and ``LMHead`` without one
    #: "if config.mapping.enable_attention_dp": tensorrt_llm/_torch/models/modeling_llama.py,
    #: modeling_utils.py). vLLM's attention data parallelism is data-parallel ranks that each
    #: hold the model's weights but share the experts ("Data Parallel Deployment": "model
    #: weights are replicated ... data parallel for the attention layers and expert or tensor
    #: parallel (EP or TP) for the expert layers"), so it does too. SGLang's
    #: --enable-dp-attention gathers the tokens into a dense MLP split over the TP group (its
    #: default moe_dense_tp_size), which False models.
    attention_dp_whole_dense: bool = False
    #: Which kernel runs decode attention (DECODE_KERNELS): "grouped" = a GQA-aware kernel that
    #: reads each KV head once for all the query heads sharing it, on tensor cores (TensorRT-LLM's
    #: XQA, FlashInfer, FlashAttention/FlashDecoding, vLLM's V1 backends): bound by the KV bytes
    #: it reads. "per-head" = TensorRT-LLM's masked multi-head attention (MMHA), "a single CUDA
    #: thread-block per head" (docs/source/advanced/gpt-attention.md, "Generation Phase"): one
    #: CUDA-core pass over the KV cache per *query* head, so its work grows with the query heads
    #: a KV head serves and its rate with the SMs and clock, at MMHA_OPS_PER_SM_CLOCK. Releases
    #: before 0.8 had no XQA, and 0.8-0.10 shipped XQA kernels only for 8 query heads per KV
    #: head at head size 128/256 (cubin/xqa_kernel_cubin.h lists nqpkv_8 only), so Mistral,
    #: Mixtral (4) and Falcon-180B (29, head size 64) and every MHA model ran MMHA there.
    decode_kernel: str = "grouped"
    #: MMHA's rate in (query head x KV element) multiply-adds per SM per clock, for the
    #: "per-head" decode kernel; a field so validation can refit it per fold.
    mmha_ops_per_sm_clock: float = MMHA_OPS_PER_SM_CLOCK

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "step_overhead_s": self.step_overhead_s,
            "prefill_overhead_s": self.prefill_overhead_s,
            "host_s_per_seq": self.host_s_per_seq,
            "host_overlap": self.host_overlap,
            "eager_python_dispatch": self.eager_python_dispatch,
            "calls_per_counted_op": self.calls_per_counted_op,
            "prompt_pass_graphs": self.prompt_pass_graphs,
            "decode_attention_bw_fraction": self.decode_attention_bw_fraction,
            "prefill_attention_fraction": self.prefill_attention_fraction,
            "gemm_fraction": self.gemm_fraction,
            "fp8_gemm_fraction": self.fp8_gemm_fraction,
            "allreduce_latency_s": self.allreduce_latency_s,
            "memory_fraction": self.memory_fraction,
            "max_num_seqs": self.max_num_seqs,
            "max_num_tokens": self.max_num_tokens,
            "kv_reservation": self.kv_reservation,
            "memory_fraction_of": self.memory_fraction_of,
            "features": self.features,
            "build_sizing": self.build_sizing,
            "slot_bytes_per_vocab": self.slot_bytes_per_vocab,
            "slot_bytes_per_seq_token": self.slot_bytes_per_seq_token,
            "kv_block_tokens": self.kv_block_tokens,
            "allreduce_policy": self.allreduce_policy,
            "logits_bytes": self.logits_bytes,
            "moe_kernels": self.moe_kernels,
            "preemption": self.preemption,
            "custom_allreduce_max_bytes": self.custom_allreduce_max_bytes,
            "fp8_context_attention": self.fp8_context_attention,
            "micro_batches": self.micro_batches,
            "attention_dp_whole_dense": self.attention_dp_whole_dense,
            "chunked_attention_in_decode": self.chunked_attention_in_decode,
            "decode_kernel": self.decode_kernel,
            "mmha_ops_per_sm_clock": self.mmha_ops_per_sm_clock,
            "source": self.source,
        }


#: Memory a process holds outside the engine's tensors: CUDA context (~0.5 GiB on Hopper),
#: cuBLAS/cuBLASLt workspaces and NCCL buffers. vLLM's start-up profile reports this as
#: "non-torch memory", typically 0.5-1.5 GiB per GPU; 1 GiB.
RUNTIME_RESERVED_BYTES = 1.0 * GIB

#: Elementwise kernels per layer left after fusion (norms, rotary embedding, residual adds, the
#: gated activation); each costs a launch plus its bytes. Production engines fuse norms with
#: residual adds and rotary with the QKV epilogue, leaving about four per layer.
ELEMENTWISE_KERNELS_PER_LAYER = 4

#: MoE routing kernels per MoE layer: gating top-k softmax, permute (expand) and finalize
#: (TensorRT-LLM moe_kernels.cu: topkGatingSoftmax, expandInputRowsKernel,
#: finalizeMoeRoutingKernel).
MOE_ROUTING_KERNELS = 3

#: Bytes per element of the hidden states the MoE permute and finalize move: the residual
#: stream's 16-bit dtype (an fp8 recipe quantizes inside the expert GEMM's input path).
MOE_ROUTING_ELEMENT_BYTES = 2.0

#: Live activation elements per token per layer, in units of `hidden` (residual stream, normed
#: input, attention output, MLP input and output): sizes the transient workspace.
ACTIVATION_HIDDEN_BUFFERS = 4

#: Smoothing of the roofline corner for GEMMs. max(compute, memory) assumes compute and memory
#: traffic overlap perfectly; near the ridge point (short prefills, decode at ~100-300 rows) real
#: kernels fall below both roofs (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4):
#: the roof is an upper bound). Time = roofline x (1 + r^p)^(1/p), r = the ratio of the smaller
#: to the larger of FLOP time and memory time: 2^(1/3) = 1.26x at the ridge, < 2% once one side is
#: 3x the other. Larger p = sharper corner (p -> inf is the ideal roofline).
RIDGE_SMOOTHING_P = 3.0

#: Per-tensor-scaled fp8 GEMMs relative to the die's sustained 16-bit share of their own ceiling:
#: 1.0, as a training step's tensor-wise FP8 recipe prices them (plan/train/fp8_recipes.py
#: fwd_gemm_fraction 1.0). Measured on an H100 (benchmarks/device/results/h100-2026-11-23,
#: matmul_round2.csv, cuBLAS via torch 2.11): at the projection shapes of Llama 3.1 8B and 70B
#: with M = 2048-16384, fp8 GEMMs reach 0.64-0.95 of the fp8 MAMF (median 0.93) and bf16 ones
#: 0.79-0.97 of the bf16 MAMF (median 0.92): the same share, the spread being the shapes'
#: (plan/gemm.py's shape model carries it).
#: Until 2026-11-24 serving priced GEMMs at burst rates, MAMF x 0.90 (16-bit) or x 0.75 (this
#: constant, hand-set), with no power cap; both now sit under the die's sustained fraction.
#: `flopwise validate --only inference` still reports what a leave-one-family-out fit of this
#: one number on the serving rows would choose; it is not shipped as fitted.
FP8_GEMM_FRACTION = 1.0

#: GEMM input dtypes that run as scaled low-precision GEMMs and so take the engine's
#: ``fp8_gemm_fraction`` instead of its 16-bit ``gemm_fraction``: FP8 (per-tensor or block
#: scales) and NVFP4 (an FP8 scale per 16 elements plus a per-tensor one, OCP/NVIDIA NVFP4),
#: whose scale loads and dequantizing epilogues are what FP8_GEMM_FRACTION prices.
SCALED_GEMM_DTYPES: tuple[str, ...] = ("fp8", "fp4")

#: Rate of FP8 fused attention relative to the same kernel family in 16-bit on Hopper:
#: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608, abstract and §4.1) reaches "up to 740
#: TFLOPs/s" in FP16 and "close to 1.2 PFLOPs/s" in FP8 on H100 SXM5: 1200 / 740 = 1.62. Used
#: for engines whose prefill attention runs FP8 (EngineProfile.fp8_context_attention).
FP8_ATTENTION_SPEEDUP = 1200.0 / 740.0

#: The fused attention kernel a serving engine's prefill runs, for devices where kernels were
#: timed (plan/attention_rate.py): the Hopper-native class ("flash": cuDNN/FlashAttention-3,
#: TensorRT-LLM's context FMHA; vLLM on Hopper defaults to FlashAttention-3 since v0.7 and
#: SGLang to FA3/FlashInfer), not FlashAttention-2.
PREFILL_ATTENTION_KERNEL = "flash"

#: Bytes of all-reduced activations per element: engines reduce in bf16/fp16 even with fp8 GEMMs
#: (TensorRT-LLM and vLLM custom all-reduce kernels operate on 16-bit tensors).
ALLREDUCE_ELEMENT_BYTES = 2.0

#: TensorRT-LLM's AUTO all-reduce strategy (AllreducePlugin::selectImplementation,
#: cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp; the same rule in the PyTorch-flow op
#: thop/allreduceOp.cpp): inside an NVLink-connected group a message up to the custom workspace
#: (16 MB for 2 ranks, 8 MB above: customAllReduceUtils::getMaxRequiredWorkspaceSize) runs the
#: one-shot kernel when it is below the bytes given here for the group size, NCCL otherwise. The
#: two-shot kernel is off under AUTO ("the two-shot strategy has exhibited significant
#: performance issues ... we have disabled the two-shot strategy", nvbug 4718747, mid-2024, so
#: from the 0.1x releases that the 0.14 perf-overview used). (largest group size, one-shot below
#: this many bytes), checked in order.
TRTLLM_ALLREDUCE_ONESHOT_BELOW: tuple[tuple[int, float], ...] = (
    (2, 16e6),
    (4, 1e6),
    (1 << 30, 500e3),
)

#: TensorRT-LLM C++ runtime: device bytes per sequence slot per token of the engine's max
#: sequence length (beam 1), allocated with the slots before the KV cache is sized: four int32
#: tensors of [max_batch_size, beam, max_attention_window or max_seq_len], the runtime buffers'
#: cache indirection (batch_manager/transformerBuffers.cpp), the decoder's input and output
#: cache indirection (decoderBuffers.cpp) and its output ids (runtime/gptDecoderBatched.cpp
#: ``dOutput.ids->reshape({maxBatchSize, maxBeamWidth, maxSequenceLength})``). Tensors some
#: releases add (parent ids, log probs) are left out.
TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN = 4 * 4.0

#: TensorRT-LLM C++ runtime: device bytes per sequence slot per vocabulary entry held by the
#: runtime buffers (logits) and the decoder (sampling buffers), both sized by the engine's
#: max_batch_size x vocab and allocated before the KV cache is sized. From the runtime's own
#: start-up log in NVIDIA/TensorRT-LLM#1188 (2024-11-21, Qwen2.5-Coder-0.5B int8, default
#: max_batch_size 2048, vocab 151,936, default max_seq_len = its 32,768 positions): "Allocated
#: 2.66 GB GPU memory for runtime buffers", "Allocated 5.76 GB GPU memory for decoder". Those
#: "GB" are GiB: MemoryCounters::bytesToString divides by 1024 per unit and labels the third
#: unit "GB" (cpp/tensorrt_llm/runtime/memoryCounters.cpp; its unit test expects 1 << 30 bytes
#: -> "1.00 GB"). Less the sequence-length tensors above (2048 x 32,768 x 16 B = 1 GiB):
#: (8.42 - 1.0) GiB / (2048 x 151,936) = 25.6 bytes (logits, top-k/top-p workspaces). An older
#: runtime logged more: trtllm-bench's own 0.12 example (benchmarks/cpp README: Llama-2-7B,
#: max_batch_size 4096, vocab 32,000, max_seq_len 4098) shows 1.14 + 4.35 GiB, 43 bytes per slot
#: per vocab entry after the same subtraction; the late-2024 log is the one nearest the
#: 0.14-0.17 releases the published tables ran.
TRTLLM_SLOT_BYTES_PER_VOCAB = (
    (2.66 + 5.76) * GIB - 2048 * 32_768 * TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN
) / (2048 * 151_936)

#: vLLM's CustomAllreduce buffer: all-reduces of 8 MiB and more fall back to NCCL/RCCL
#: (custom_all_reduce.py ``max_size=8192 * 1024``, ``should_custom_ar``: ``inp_size <
#: self.max_size``); on 8x MI300X RCCL then runs at 241 GB/s busbw for 32 MiB and 274 for 64
#: MiB (AMD ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on MI300X", 2025-03).
VLLM_CUSTOM_ALLREDUCE_MAX_BYTES = 8192 * 1024

_TRTLLM_SRC = (
    "TensorRT-LLM docs (C++ runtime with CUDA graphs: per-step host time is sub-millisecond; "
    "custom one-shot all-reduce for small messages; XQA decode-attention kernels; "
    "kv_cache_free_gpu_mem_fraction default 0.9 of the memory left after weights and "
    "activations; max_num_tokens default 8192; GUARANTEED_NO_EVICT default capacity scheduler "
    "policy: docs performance-tuning-guide/useful-runtime-flags and the perf-overview's "
    "trtllm-bench output 'Scheduling Policy: Guaranteed No Evict', 'Max Runtime Tokens: 8192'; "
    "trtllm-bench build (tensorrt_llm/bench/build/tuning.py) sizes max_batch_size and "
    "max_num_tokens from the dataset's lengths, max_batch_size at most 4096; the runtime sizes "
    "the KV cache after weights, activations, runtime buffers and decoder: "
    "batch_manager/trtGptModelInflightBatching.cpp)"
)
#: TensorRT-LLM's PyTorch backend (the default from 1.0; ``trtllm-bench --backend pytorch``):
#: host time per running request per iteration. NVIDIA's own measurement in
#: NVIDIA/TensorRT-LLM PR #10273 (2025-12-24, "Re-implement MicroBatchScheduler and
#: CapacityScheduler in Python"): GB200, GPT-OSS-120B, attention DP 2 with max_batch_size 1536
#: per rank, 3,072 requests in flight at 1k/1k, "the average per iteration host_step_time is
#: 45.11 ms" with the C++ scheduler, a scenario the PR calls host-bound. 45.11 ms over the
#: 1,536 requests each rank's executor walks = 29.4 us per request per iteration (the step's
#: fixed part, under a millisecond, left in). Measured on Grace (Neoverse V2) cores: the figure
#: holds on Grace-hosted parts; an x86 host runs it HOST_SPEEDUP_X86_OVER_GRACE times faster.
#: Not fitted to any published row.
TRTLLM_PYTORCH_HOST_S_PER_SEQ = 45.11e-3 / 1536

#: Accelerator ids whose host CPU is Grace (the superchips): host times measured on Grace
#: (EngineProfile.host_s_per_seq) hold there as they are.
GRACE_HOSTED_PREFIXES: tuple[str, ...] = ("gb200", "gb300", "gh200")

#: Host (CPU) time to dispatch one PyTorch op from Python, module call to kernel launch: the
#: CPU time of one PyTorch ``Linear`` forward (bf16, hidden 2048, 8,192 tokens), 37.08 us on
#: GB200's Grace against 13.48 us on an H100 DGX (Xeon Platinum 8480C) (NVIDIA/
#: TransformerEngine issue #2053, 2025-08-11, "High CPU overhead on Grace systems", the "torch"
#: rows; GH200 33.17 us). MEASURED, not fitted; the Xeon 8480C stands for every x86 server of
#: the catalog. Used per op of an eagerly dispatched pass (plan/infer/dispatch.py).
HOST_S_PER_OP_GRACE = 37.08e-6
HOST_S_PER_OP_X86 = 13.48e-6

#: PyTorch calls SGLang's model code dispatches per op plan/infer/dispatch.py counts. One
#: measurement: an eager (no CUDA graph) DeepSeek-V3 prefill pass of one new token logged a
#: "forward cost" of 82.6 ms, against 23.1 ms replaying a prefill CUDA graph (sgl-project/sglang
#: PR #12160, 2025-10-26; GPU and host not stated, taken as x86). With one token the GPU's work
#: is the smaller, so the eager pass is its host dispatch: 82.6 ms over 61 layers of 21.9
#: counted ops (FP8 weights and activations) at HOST_S_PER_OP_X86 is 4.59 calls per counted op
#: (a Python module call, a quantize, a view or a copy beside each counted GEMM). MEASURED on one
#: model and taken to hold for SGLang's other models; tests/infer/test_prefill_graphs.py
#: re-derives it from the catalog's DeepSeek-V3.
SGLANG_EAGER_PASS_S = 82.6e-3
SGLANG_EAGER_PASS_SOURCE = (
    "sgl-project/sglang PR #12160 (2025-10-26): DeepSeek-V3, one new prefill token, forward "
    "cost 82.6 ms eager vs 23.1 ms with a prefill CUDA graph"
)
SGLANG_CALLS_PER_COUNTED_OP = 4.59

#: How much faster an x86 host runs the same framework CPU code than Grace (the ratio of the
#: two measurements above).
HOST_SPEEDUP_X86_OVER_GRACE = HOST_S_PER_OP_GRACE / HOST_S_PER_OP_X86


def grace_hosted(accelerator_id: str) -> bool:
    """Whether `accelerator_id`'s host CPU is Grace (the superchips)."""
    return accelerator_id.lower().startswith(GRACE_HOSTED_PREFIXES)


def host_s_per_op(accelerator_id: str) -> float:
    """Host time to dispatch one PyTorch op on the host of `accelerator_id`."""
    return HOST_S_PER_OP_GRACE if grace_hosted(accelerator_id) else HOST_S_PER_OP_X86


def host_s_per_request(engine: EngineProfile, accelerator_id: str) -> float:
    """The engine's per-request host time per step on the host of `accelerator_id`: as
    measured on Grace-hosted parts, HOST_SPEEDUP_X86_OVER_GRACE times less on x86 hosts."""
    if grace_hosted(accelerator_id):
        return engine.host_s_per_seq
    return engine.host_s_per_seq / HOST_SPEEDUP_X86_OVER_GRACE


#: ... and the host time per iteration its overlap scheduler (one step of lookahead) still
#: exposes as GPU idle at a small batch: "~580 us/iter" (NVIDIA/TensorRT-LLM issue #13957,
#: 2026-05, Llama-3.1-8B FP8 on B200 at concurrency 64, from nsys traces).
TRTLLM_PYTORCH_STEP_OVERHEAD_S = 580e-6

#: What both TensorRT-LLM profiles do around the kernels (the runtime named in each profile).
_TRTLLM_FEATURES = (
    "in-flight batching (context and generation requests in one forward pass); paged KV "
    "cache; GUARANTEED_NO_EVICT admission; FP8 KV cache with FP8 quantization; chunked "
    "context optional (enable_chunked_context); custom one-/two-shot all-reduce inside NVLink; "
    "Llama 4's chunked attention in context requests only"
)

_TRTLLM_PYTORCH_SRC = (
    "TensorRT-LLM PyTorch backend (the default from 1.0; trtllm-bench --backend pytorch): the "
    "C++ profile's kernels, memory and batching, with a Python executor (PyExecutor) whose "
    "overlap scheduler prepares step n+1 on the host while the GPU runs step n; its host step "
    "grows with the requests it walks: 45.11 ms per iteration for 1,536 requests per rank on "
    "GB200 (NVIDIA/TensorRT-LLM PR #10273), ~0.58 ms per iteration exposed at concurrency 64 "
    "on B200 (issue #13957); context and mixed passes run eagerly, their ops dispatched from "
    "Python (docs/source/torch/features/torch_compile_and_piecewise_cuda_graph.md: piecewise "
    "CUDA graphs exist 'to reduce context-phase launch overhead' of 'host-bound iterations in "
    "the context phase'), decode-only passes replay CUDA graphs"
)
_VLLM_SRC = (
    "vLLM docs and v0.6 performance blog (2024-09: CPU scheduling/output processing was ~1-4 ms "
    "of each step before multi-step scheduling; gpu_memory_utilization default 0.9; "
    "max_num_seqs default 256; PagedAttention decode kernels)"
)
_SGLANG_SRC = (
    "SGLang docs and v0.3/v0.4 release notes (overlapped CPU scheduler, FlashInfer decode "
    "kernels, mem_fraction_static ~0.88, chunked_prefill_size 8192)"
)

_PROFILES: tuple[EngineProfile, ...] = (
    EngineProfile(
        name="generic",
        step_overhead_s=1.0e-3,
        prefill_overhead_s=1.5e-3,
        decode_attention_bw_fraction=0.85,
        prefill_attention_fraction=0.60,
        gemm_fraction=1.0,
        fp8_gemm_fraction=FP8_GEMM_FRACTION,
        allreduce_latency_s=15e-6,
        memory_fraction=0.90,
        max_num_seqs=None,
        max_num_tokens=8192,
        source="middle of the engine profiles below; no engine-specific fusion assumed",
        features="continuous batching with paged KV; nothing engine-specific assumed",
    ),
    EngineProfile(
        name="tensorrt-llm",
        step_overhead_s=0.3e-3,
        prefill_overhead_s=1.5e-3,
        decode_attention_bw_fraction=0.95,
        prefill_attention_fraction=0.65,
        gemm_fraction=1.0,
        fp8_gemm_fraction=FP8_GEMM_FRACTION,
        allreduce_latency_s=10e-6,
        memory_fraction=0.90,
        max_num_seqs=4096,
        max_num_tokens=8192,
        source=_TRTLLM_SRC,
        kv_reservation="full",
        memory_fraction_of="free",
        build_sizing="trtllm-bench",
        slot_bytes_per_vocab=TRTLLM_SLOT_BYTES_PER_VOCAB,
        slot_bytes_per_seq_token=TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN,
        kv_block_tokens=64,
        allreduce_policy="trtllm",
        logits_bytes=4.0,
        moe_kernels="tensorrt-llm",
        fp8_context_attention=True,
        attention_dp_whole_dense=True,
        chunked_attention_in_decode=False,
        features=(
            "the C++ runtime of the 0.x releases (trtllm-build engines; TensorRT-LLM runs "
            "its PyTorch backend by default from 1.0: --engine tensorrt-llm-pytorch); "
            + _TRTLLM_FEATURES
        ),
    ),
    EngineProfile(
        name="vllm",
        step_overhead_s=2.0e-3,
        prefill_overhead_s=3.0e-3,
        decode_attention_bw_fraction=0.80,
        prefill_attention_fraction=0.60,
        gemm_fraction=1.0,
        fp8_gemm_fraction=FP8_GEMM_FRACTION,
        allreduce_latency_s=15e-6,
        memory_fraction=0.90,
        max_num_seqs=256,
        max_num_tokens=8192,
        source=_VLLM_SRC,
        preemption="recompute",
        custom_allreduce_max_bytes=VLLM_CUSTOM_ALLREDUCE_MAX_BYTES,
        attention_dp_whole_dense=True,
        features=(
            "continuous (iteration-level) batching; PagedAttention KV blocks allocated "
            "on demand, preempting when full; CUDA graphs for decode; chunked prefill; "
            "fp8 KV cache with --kv-cache-dtype fp8"
        ),
    ),
    EngineProfile(
        name="sglang",
        step_overhead_s=0.5e-3,
        prefill_overhead_s=2.0e-3,
        decode_attention_bw_fraction=0.90,
        prefill_attention_fraction=0.60,
        gemm_fraction=1.0,
        fp8_gemm_fraction=FP8_GEMM_FRACTION,
        allreduce_latency_s=12e-6,
        memory_fraction=0.88,
        max_num_seqs=None,
        max_num_tokens=8192,
        source=_SGLANG_SRC,
        eager_python_dispatch=True,
        host_overlap=True,
        calls_per_counted_op=SGLANG_CALLS_PER_COUNTED_OP,
        prompt_pass_graphs="sglang",
        features=(
            "continuous batching with an overlapped CPU scheduler; token-level paged KV "
            "pool with RadixAttention prefix reuse; chunked prefill (8192); CUDA graphs "
            "for decode; piecewise CUDA graphs for prompt passes where its default allows "
            "(v0.5.10 on; eager before, and for MLA models above 2,048 tokens, on ROCm, with "
            "DP attention); fp8 KV cache with --kv-cache-dtype; DP attention for MLA models"
        ),
    ),
)


def _trtllm_pytorch(cpp: EngineProfile) -> EngineProfile:
    """TensorRT-LLM's PyTorch backend: the C++ profile's kernels and batching under a Python
    executor whose host step grows with the requests (TRTLLM_PYTORCH_HOST_S_PER_SEQ)."""
    return replace(
        cpp,
        name="tensorrt-llm-pytorch",
        step_overhead_s=TRTLLM_PYTORCH_STEP_OVERHEAD_S,
        host_s_per_seq=TRTLLM_PYTORCH_HOST_S_PER_SEQ,
        host_overlap=True,
        eager_python_dispatch=True,
        source=_TRTLLM_PYTORCH_SRC,
        features="PyTorch backend (TensorRT-LLM's default from 1.0): a Python executor with an "
        "overlap scheduler (host work for the next step runs beside the GPU's step, and bounds "
        "it once the batch is large); " + _TRTLLM_FEATURES,
    )


ENGINES: Mapping[str, EngineProfile] = MappingProxyType(
    {
        p.name: p
        for p in (
            *_PROFILES,
            _trtllm_pytorch(next(p for p in _PROFILES if p.name == "tensorrt-llm")),
        )
    }
)

ENGINE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "trtllm": "tensorrt-llm",
        "trt-llm": "tensorrt-llm",
        "tensorrt_llm": "tensorrt-llm",
        "trtllm-pytorch": "tensorrt-llm-pytorch",
        "trt-llm-pytorch": "tensorrt-llm-pytorch",
        "tensorrt_llm_pytorch": "tensorrt-llm-pytorch",
    }
)


def get_engine(name: str) -> EngineProfile:
    """Engine profile by name ('generic', 'tensorrt-llm', 'vllm', 'sglang')."""
    key = name.strip().lower()
    key = ENGINE_ALIASES.get(key, key)
    profile = ENGINES.get(key)
    if profile is None:
        raise unknown("engine", name, ENGINES)
    return profile
