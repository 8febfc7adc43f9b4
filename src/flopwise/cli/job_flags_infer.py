"""The inference job flags (plan, compare and report infer), in --help order."""

from __future__ import annotations

from flopwise.cli._args import _positive_int, batch_sizes, fraction, non_negative_float, spread
from flopwise.cli.job_flag import (
    _CMP,
    _I,
    _PLAN,
    ACTIVATION_DTYPES,
    BOOL,
    FLAG,
    KV_DTYPES,
    WEIGHT_DTYPES,
    JobFlag,
    _acceptance,
    _batch,
    _concurrency,
    _request_rate,
)
from flopwise.plan.decode_kernels import DECODE_KERNELS

#: Inference: the workload, the deployment, the engine.
INFER_FLAGS: list[JobFlag] = [
    JobFlag(
        "tp",
        "tensor-parallel degree of a replica (default: the smallest that fits)",
        kinds=_I,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag("pp", "pipeline-parallel degree", kinds=_I, parse=_positive_int, metavar="N"),
    JobFlag(
        "batch",
        "static batch per replica, or 'max' for steady-state continuous batching (default 1); "
        "with --num-requests or --concurrency: how many run at once (default max)",
        kinds=_I,
        parse=_batch,
        metavar="N|max",
    ),
    JobFlag(
        "num-requests",
        "an offline batch: N requests arrive at once and run by in-flight batching; plans "
        "the whole run (ramp-up and drain included): makespan, tokens/s, cost; with one "
        "--concurrency C: the benchmark run of N requests from a cold start, C in flight "
        "(vllm bench serve --max-concurrency C --num-prompts N), TTFT from each send; "
        "compare: each offer's instance processes all N, ranked by makespan / cost of the batch",
        kinds=_I,
        parse=_positive_int,
        metavar="N",
        exclusive="mode",
        combines_with=("concurrency",),
    ),
    JobFlag(
        "concurrency",
        "online serving: N requests in flight, a new one sent as one finishes (AIPerf/"
        "GenAI-Perf --concurrency, vllm bench serve --max-concurrency); plans the steady "
        "state: TTFT, inter-token latency and tokens/s at that load, queueing included when "
        "N exceeds what the engine runs at once (--batch caps that; default max); plan: a "
        "comma list (1,8,32,128) gives the concurrency sweep; compare: one N in flight per "
        "instance, split over its replicas",
        kinds=_I,
        parse=_concurrency,
        metavar="N[,N...]",
        exclusive="mode",
    ),
    JobFlag(
        "request-rate",
        "online serving: requests arriving at R per second, Poisson (vllm bench serve "
        "--request-rate); plans the steady state: TTFT, inter-token latency and how many run "
        "at once, or says the highest rate the deployment sustains; plan: a comma list "
        "(1,2,4,8) gives the rate sweep, stopping at the first rate it cannot sustain; "
        "compare: one R per instance",
        kinds=_I,
        parse=_request_rate,
        metavar="R[,R...]",
        exclusive="mode",
    ),
    JobFlag(
        "input-len",
        "prompt tokens (default 1024)",
        kinds=_I,
        parse=_positive_int,
        default=1024,
        metavar="N",
    ),
    JobFlag(
        "output-len",
        "output tokens (default 256)",
        kinds=_I,
        parse=_positive_int,
        default=256,
        metavar="N",
    ),
    JobFlag(
        "weight-dtype",
        "weight dtype, stored with its block scales (fp4 = nvfp4: 4.5 bits; mxfp4: 4.25; "
        "int4: 4.125); fp4/nvfp4/mxfp4/mxfp8 need Blackwell-class tensor cores",
        kinds=_I,
        choices=WEIGHT_DTYPES,
        default="bf16",
    ),
    JobFlag("kv-dtype", "KV-cache dtype (default 16-bit)", kinds=_I, choices=KV_DTYPES),
    JobFlag(
        "activation-dtype",
        "GEMM input dtype (default: fp8 with fp8 weights on fp8 hardware, else 16-bit "
        "weight-only); int8 = SmoothQuant-style W8A8",
        kinds=_I,
        choices=ACTIVATION_DTYPES,
    ),
    JobFlag(
        "engine",
        "engine class for overhead constants: generic, tensorrt-llm (C++ runtime, the 0.x "
        "trtllm-build engines), tensorrt-llm-pytorch (the PyTorch backend, TensorRT-LLM's "
        "default from 1.0), vllm, sglang",
        kinds=_I,
        default="generic",
        metavar="NAME",
    ),
    JobFlag(
        "memory-fraction",
        "the engine's memory knob: TensorRT-LLM kv_cache_free_gpu_mem_fraction (of the memory "
        "left after weights and activations), vLLM gpu_memory_utilization, SGLang "
        "mem_fraction_static (of device memory); default: the engine's own (0.90, 0.90, 0.88)",
        kinds=_I,
        parse=fraction,
        metavar="F",
    ),
    JobFlag(
        "allow-long-context",
        "plan sequences longer than the model's context (TensorRT-LLM --max_seq_len, vLLM "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); rotary/ALiBi models only, quality not assessed",
        kinds=_I,
        action=FLAG,
        default=False,
    ),
    JobFlag(
        "fp8-context-attention",
        "with FP8 quantization, run prefill attention in FP8 (TensorRT-LLM use_fp8_context_fmha: "
        "on in trtllm-bench builds, off by default in trtllm-build); default: the engine's",
        kinds=_I,
        action=BOOL,
    ),
    JobFlag(
        "prefill-cuda-graphs",
        "passes with prompt tokens replay (piecewise) CUDA graphs (SGLang "
        "--enable-piecewise-cuda-graph, TensorRT-LLM enable_piecewise_cuda_graph); "
        "--no-prefill-cuda-graphs: they run eagerly, each op dispatched from Python (SGLang "
        "before v0.5.10, DeepSeek-R1 through v0.5.12); default: the engine's",
        kinds=_I,
        action=BOOL,
    ),
    JobFlag(
        "decode-kernel",
        "decode-attention kernel: grouped (XQA, FlashInfer, FlashDecoding: each KV head read "
        "once, bound by the KV bytes) or per-head (TensorRT-LLM's masked MHA, which releases "
        "before 0.8, and 0.8-0.10 for models without 8 query heads per KV head, ran: a CUDA-core "
        "pass per query head); default: the engine's (grouped)",
        kinds=_I,
        choices=DECODE_KERNELS,
    ),
    JobFlag(
        "cuda-graph-batch-sizes",
        "the batch sizes the engine captured CUDA graphs for, with padding on (TensorRT-LLM "
        "cuda_graph_config enable_padding + batch_sizes): a decode-only pass runs the smallest "
        "captured batch at least as large, its GEMMs over the padded rows, and a larger one "
        "runs eagerly (tensorrt-llm-pytorch: its ops dispatched from Python); default: none",
        kinds=_I,
        parse=batch_sizes,
        metavar="B1,B2,...",
    ),
    JobFlag(
        "output-spread",
        "with --num-requests: output lengths spread evenly over (1 +/- S) x --output-len, mean "
        "unchanged, as random-length benchmarks draw them (a --random-range-ratio R over "
        "[R x L, L] is S = (1 - R) / (1 + R) around the mean (1 + R) / 2 x L); default 0",
        kinds=_I,
        parse=spread,
        metavar="S",
    ),
    JobFlag(
        "engine-max-batch",
        "the engine's build-time sequence slots (TensorRT-LLM max_batch_size, vLLM "
        "--max-num-seqs); sizes its per-slot runtime/decoder buffers and caps the running "
        "requests (TensorRT-LLM with --pp: per pipeline micro-batch, pp of them in flight); "
        "default: the engine's, or as trtllm-bench build --dataset picks it",
        kinds=_I,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "engine-max-tokens",
        "the engine's tokens per forward pass (TensorRT-LLM max_num_tokens, vLLM "
        "--max-num-batched-tokens, SGLang --chunked-prefill-size); sizes its activation memory "
        "(and so the KV cache) and the prompt tokens a pass admits; default: as for "
        "--engine-max-batch",
        kinds=_I,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "scheduler-poll-steps",
        "decode steps between the engine scheduler's looks at newly arrived requests (SGLang "
        "--scheduler-recv-interval or --num-continuous-decode-steps, vLLM V0 "
        "--num-scheduler-steps): online, a request that arrives while others decode waits for "
        "the next look, (N - 1) / 2 steps more on average; default 1 (every step)",
        kinds=_I,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "ep",
        "expert-parallel groups inside the tensor-parallel group (MoE; divides --tp)",
        kinds=_I,
        doors=_PLAN,
        parse=_positive_int,
        default=1,
        metavar="N",
    ),
    JobFlag(
        "attention-dp",
        "attention data-parallel over the tensor-parallel ranks (MoE, e.g. DeepSeek MLA)",
        kinds=_I,
        doors=_PLAN,
        action=FLAG,
        default=False,
    ),
    JobFlag(
        "sweep",
        "latency/throughput over batch sizes",
        kinds=_I,
        doors=_PLAN,
        action=FLAG,
        default=False,
        exclusive="mode",
    ),
    JobFlag(
        "target-tpot-ms",
        "plan: bandwidth and GPUs needed for this time per output token; compare: each "
        "offer at its largest batch within this TPOT",
        kinds=_I,
        parse=non_negative_float,
        metavar="MS",
        exclusive="mode",
    ),
    JobFlag(
        "target-ttft-ms",
        "compare: each offer at its largest batch within this time to first token",
        kinds=_I,
        doors=_CMP,
        parse=non_negative_float,
        metavar="MS",
    ),
    JobFlag(
        "draft", "draft model for speculative decoding", kinds=_I, doors=_PLAN, metavar="MODEL"
    ),
    JobFlag(
        "acceptance",
        "draft acceptance rate (default 0.7)",
        kinds=_I,
        doors=_PLAN,
        parse=_acceptance,
        default=0.7,
        metavar="A",
    ),
    JobFlag(
        "draft-tokens",
        "draft tokens per step (default 4)",
        kinds=_I,
        doors=_PLAN,
        parse=_positive_int,
        default=4,
        metavar="K",
    ),
]
