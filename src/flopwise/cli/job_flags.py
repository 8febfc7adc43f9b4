"""Every job flag of every front door, as data (see flopwise.cli.job_args for how they are
added to parsers, read from job files and merged).

To add a job flag everywhere: append one ``JobFlag`` to ``JOB_FLAGS`` here (or call
``job_args.register_flag``), stating its kinds and, if it is not meaningful on every front door,
its doors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flopwise.cli._args import _positive_int, fraction, non_negative_float, tokens
from flopwise.errors import FlopwiseError

KINDS = ("train", "infer")
DOORS = ("plan", "compare")

#: GEMM dtypes a training plan accepts (the planner refuses those the hardware lacks); fp32 is
#: for CPUs planned from a measured fp32 matmul rate.
TRAIN_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")
#: Weight dtypes of an inference plan (fp4 family: Blackwell-class hardware only).
WEIGHT_DTYPES: tuple[str, ...] = (
    "bf16",
    "fp16",
    "fp8",
    "mxfp8",
    "int8",
    "int4",
    "fp4",
    "nvfp4",
    "mxfp4",
)
KV_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8")
ACTIVATION_DTYPES: tuple[str, ...] = (
    "bf16",
    "fp16",
    "fp8",
    "mxfp8",
    "int8",
    "fp32",
    "fp4",
    "nvfp4",
    "mxfp4",
)

BOOL = "bool"  # --x / --no-x, None when not given
FLAG = "flag"  # --x only (store_true), None when not given


def _batch(text: str) -> str | int:
    if text.strip().lower() == "max":
        return "max"
    from flopwise.units import parse_positive_int

    return parse_positive_int(text, "--batch (a positive integer or 'max')")


def _acceptance(text: str) -> float:
    value = non_negative_float(text)
    if value >= 1:
        raise FlopwiseError(f"{text!r} must be a fraction in [0, 1), e.g. 0.7")
    return value


def _positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value <= 0:
        raise FlopwiseError(f"{text!r} must be a positive number")
    return value


def _measured(text: str) -> str:
    return text.strip()


@dataclass(frozen=True, slots=True)
class JobFlag:
    """One job flag: how it parses, its default, and where it applies."""

    name: str  # long flag without dashes, e.g. "seq-len"; also the job-file key
    help: str
    kinds: tuple[str, ...] = KINDS
    doors: tuple[str, ...] = DOORS
    parse: Callable[[str], Any] | None = None  # raises FlopwiseError on bad text
    choices: tuple[Any, ...] | None = None
    default: Any = None
    required: bool = False
    action: str | None = None  # BOOL, FLAG or None (a value)
    metavar: str | None = None
    short: str | None = None
    group: str | None = None  # argparse group title
    exclusive: str | None = None  # flags sharing this name may not be combined
    const: Any = None  # value when given without an argument (nargs='?')
    dest_name: str | None = None  # args attribute when not the flag name (memory_headroom_gib)

    @property
    def dest(self) -> str:
        return self.dest_name or self.name.replace("-", "_")

    def applies(self, kind: str, door: str) -> bool:
        return kind in self.kinds and door in self.doors


_LAYOUT = "layout (any left out is searched)"
_FRAMEWORK = "framework (what overlaps with what; each switch defaults to the profile's value)"


def _frameworks() -> tuple[str, ...]:
    from flopwise.plan.train.frameworks import FRAMEWORKS

    return tuple(FRAMEWORKS)


def _recompute_modes() -> tuple[str, ...]:
    from flopwise.workload.remat import POLICIES

    return ("none", "selective", "full", "op", *POLICIES)


def _remat_tensors(text: str) -> tuple[tuple[str, str], ...]:
    from flopwise.workload.remat import parse_remat_tensors

    return parse_remat_tensors(text)


def _fp8_recipes() -> tuple[str, ...]:
    from flopwise.plan.train.fp8 import FP8_RECIPE_NAMES

    return FP8_RECIPE_NAMES


_GOODPUT = "goodput (failures, checkpoints, restarts; defaults: catalog failures.csv, storage.csv)"
_WHERE = "where to run (compare and report)"
_T, _I = ("train",), ("infer",)
_PLAN, _CMP = ("plan",), ("compare",)

#: Every job flag of every front door, in --help order. Append here to add one everywhere.
JOB_FLAGS: list[JobFlag] = [
    # --- the hardware of a plan (in compare: narrows the candidates) ---
    JobFlag(
        "accelerator",
        "accelerator id or alias (see flopwise catalog accelerators); plan: required; compare: "
        "only this accelerator's offers, or its catalog node type at --price-per-gpu-hour",
        short="-a",
        metavar="ID",
    ),
    JobFlag("system", "node type (see flopwise catalog systems)", metavar="ID"),
    JobFlag(
        "measured",
        "use stored benchmark results: a result id or latest (compare: latest)",
        parse=_measured,
        const="latest",
        metavar="ID|latest",
    ),
    JobFlag(
        "price-per-gpu-hour",
        "price per GPU-hour for the cost (compare: prices --accelerator(s); offers carry "
        "their own prices)",
        parse=non_negative_float,
        metavar="USD",
    ),
    # --- training ---
    JobFlag(
        "gpus", "number of accelerators", kinds=_T, parse=_positive_int, required=True, metavar="N"
    ),
    JobFlag(
        "gpus",
        "total GPUs (replicas = N/(tp*pp))",
        kinds=_I,
        doors=_PLAN,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "tokens",
        "training tokens: 15T, 300B, 2e12",
        kinds=_T,
        parse=tokens,
        required=True,
        metavar="N",
    ),
    JobFlag(
        "seq-len",
        "sequence length (default: min(context, 4096))",
        kinds=_T,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "global-batch-seqs",
        "sequences per optimizer step",
        kinds=_T,
        parse=_positive_int,
        metavar="N",
        exclusive="global batch",
    ),
    JobFlag(
        "global-batch-tokens",
        "tokens per optimizer step (default 4Mi), e.g. 4M, 16M",
        kinds=_T,
        parse=tokens,
        metavar="N",
        exclusive="global batch",
    ),
    JobFlag(
        "dtype",
        "GEMM dtype (default bf16; fp8 needs an accelerator with it; fp32 for -a cpu)",
        kinds=_T,
        choices=TRAIN_DTYPES,
        default="bf16",
    ),
    JobFlag(
        "recipe",
        "training-state recipe (default bf16-adam, fp8-adam for --dtype fp8)",
        kinds=_T,
        metavar="NAME",
    ),
    JobFlag(
        "inter-node-gbps",
        "assume this per-GPU scale-out bandwidth (GB/s, one direction) between nodes; for "
        "accelerators without a node type in the catalog (labelled as assumed)",
        kinds=_T,
        parse=non_negative_float,
        metavar="X",
    ),
    JobFlag(
        "gpus-per-node",
        "GPUs per node (default: the system's)",
        kinds=_T,
        parse=_positive_int,
        metavar="N",
    ),
    *(
        JobFlag(name, help_, kinds=_T, parse=_positive_int, metavar="N", group=_LAYOUT)
        for name, help_ in (
            ("tp", "tensor-parallel degree"),
            ("pp", "pipeline-parallel degree"),
            ("dp", "data-parallel degree"),
            ("cp", "context-parallel degree"),
            ("ep", "expert-parallel degree (MoE)"),
            ("vpp", "virtual pipeline stages per GPU (interleaved 1F1B)"),
            ("microbatch", "sequences per microbatch"),
        )
    ),
    JobFlag(
        "recompute",
        "activation recompute (op: torchtitan's op-level selective checkpointing; minimal ... "
        "custom: MaxText's remat_policy values, offloaded tensors go to host memory)",
        kinds=_T,
        choices=_recompute_modes(),
        group=_LAYOUT,
    ),
    JobFlag(
        "zero",
        "ZeRO stage over DP (x CP)",
        kinds=_T,
        parse=int,
        choices=(0, 1, 2, 3),
        group=_LAYOUT,
    ),
    JobFlag(
        "hsdp",
        "hybrid sharding: ZeRO-3 inside each node, replicas across nodes (FSDP "
        "HYBRID_SHARD; implies --zero 3)",
        kinds=_T,
        action=BOOL,
        group=_LAYOUT,
    ),
    JobFlag(
        "sequence-parallel",
        "shard norms/residuals over TP (Korthikanti et al. 2022)",
        kinds=_T,
        action=BOOL,
        group=_LAYOUT,
    ),
    JobFlag(
        "scaleup-domain",
        "accelerators per scale-up domain (NVLink domain, TPU slice over ICI); default: the "
        "node type's. Multislice TPU jobs: the slice size (slices talk over DCN)",
        kinds=_T,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "framework",
        "training framework profile (default generic: PyTorch DDP/FSDP behaviour); see "
        "docs/training-planner.md for what each profile does and its sources",
        kinds=_T,
        choices=_frameworks(),
        default="generic",
        group=_FRAMEWORK,
    ),
    JobFlag(
        "attention",
        "attention kernel (default: the profile's; flash = the best fused kernel for the "
        "accelerator)",
        kinds=_T,
        choices=("flash", "flash2", "unfused"),
        group=_FRAMEWORK,
    ),
    JobFlag(
        "fp8-recipe",
        "FP8 scaling recipe with --dtype fp8 (default: the profile's; torchtitan: tensorwise, "
        "others: delayed): tensorwise, rowwise, rowwise-gw-hp (torchao), delayed, current "
        "(Transformer Engine)",
        kinds=_T,
        choices=_fp8_recipes(),
        group=_FRAMEWORK,
    ),
    *(
        JobFlag(name, help_, kinds=_T, action=BOOL, group=_FRAMEWORK)
        for name, help_ in (
            ("tp-comm-overlap", "TP collectives overlap GEMMs (Transformer Engine userbuffers)"),
            ("pp-comm-overlap", "pipeline sends overlap compute (Megatron-Core overlap_p2p_comm)"),
            (
                "ep-comm-overlap",
                "expert all-to-alls overlap another microbatch (DeepSeek DualPipe)",
            ),
            ("dp-comm-overlap", "gradient reduction overlaps the backward (DDP/FSDP buckets)"),
            ("pp-scatter-gather", "pipeline sends split over TP ranks (Megatron scatter/gather)"),
        )
    ),
    JobFlag(
        "remat-tensors",
        "MaxText remat_policy=custom: NAME=device|offload|remat,... for decoder_layer_input, "
        "query_proj, key_proj, value_proj, qkv_proj, context, out_proj, mlpwi, mlpwi_0, "
        "mlpwi_1, mlpwo (unnamed: remat; the layer input: device); with --recompute custom",
        kinds=_T,
        parse=_remat_tensors,
        metavar="NAME=PLACE,...",
        group=_FRAMEWORK,
    ),
    JobFlag(
        "objective",
        "rank layouts by step time, or by GPU-hours (may use fewer GPUs)",
        kinds=_T,
        choices=("time", "cost"),
        default="time",
    ),
    JobFlag(
        "mfu",
        "skip the model: first-order estimate at this assumed MFU",
        kinds=_T,
        parse=fraction,
        metavar="X",
    ),
    JobFlag(
        "memory-headroom",
        "GiB per GPU the layout search leaves free (default: 5%% of device memory, 4.0 GiB on "
        "an 80 GB H100, for allocator variance and model error); a layout fixed in full (every "
        "degree, microbatch, recompute and ZeRO given) is judged against the device capacity; 0 "
        "judges any layout against the capacity",
        kinds=_T,
        doors=_PLAN,
        parse=non_negative_float,
        metavar="GIB",
        dest_name="memory_headroom_gib",
    ),
    JobFlag(
        "fused-loss",
        "the loss is one fused cross-entropy kernel (torch.compile of the loss, FlashAttention's "
        "Triton cross-entropy as llm-foundry uses): no fp32 copies of the logits on the "
        "PyTorch-native (fsdp-*) recipes",
        kinds=_T,
        doors=_PLAN,
        action=FLAG,
        default=False,
    ),
    # --- goodput (plan/compare/report train): failures, checkpoints, restarts ---
    JobFlag(
        "failures-per-gpu-day",
        "interruptions per GPU per day, all unexpected (default: the catalog's Llama 3 405B "
        "causes, ~5.3e-4 per GPU-day at 16K GPUs)",
        kinds=_T,
        parse=non_negative_float,
        metavar="X",
        group=_GOODPUT,
    ),
    JobFlag(
        "failure-profile",
        "failure causes of a published cluster from the catalog: llama3-405b (default, H100, by "
        "cause), meta-rsc1-a100, meta-rsc2-a100",
        kinds=_T,
        metavar="ID",
        group=_GOODPUT,
    ),
    JobFlag(
        "failure-data",
        "your cluster's interruptions by cause, columns as the catalog's failures.csv",
        kinds=_T,
        metavar="CSV",
        group=_GOODPUT,
    ),
    JobFlag(
        "storage",
        "checkpoint storage tier from the catalog (storage.csv)",
        kinds=_T,
        metavar="ID",
        group=_GOODPUT,
    ),
    JobFlag(
        "checkpoint-write-gbps",
        "aggregate checkpoint write bandwidth of the whole job, GB/s",
        kinds=_T,
        parse=_positive_float,
        metavar="X",
        group=_GOODPUT,
    ),
    JobFlag(
        "checkpoint-read-gbps",
        "aggregate checkpoint read bandwidth, GB/s (default: the write bandwidth)",
        kinds=_T,
        parse=_positive_float,
        metavar="X",
        group=_GOODPUT,
    ),
    JobFlag(
        "async-checkpoint",
        "snapshot to host memory and drain in the background (PyTorch DCP async_save, "
        "Megatron-Core --async-save); default: synchronous",
        kinds=_T,
        action=BOOL,
        default=False,
        group=_GOODPUT,
    ),
    JobFlag(
        "checkpoint-interval-s",
        "checkpoint every S seconds instead of the Young/Daly optimum",
        kinds=_T,
        parse=_positive_float,
        metavar="S",
        group=_GOODPUT,
    ),
    JobFlag(
        "failure-detection-s",
        "seconds until a failure is noticed (default 600: PyTorch's NCCL timeout)",
        kinds=_T,
        parse=non_negative_float,
        metavar="S",
        group=_GOODPUT,
    ),
    JobFlag(
        "restart-overhead-s",
        "seconds to replace a node and relaunch, excluding the checkpoint load (default 150)",
        kinds=_T,
        parse=non_negative_float,
        metavar="S",
        group=_GOODPUT,
    ),
    # --- inference ---
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
        "with --num-requests: how many run at once (default max)",
        kinds=_I,
        parse=_batch,
        metavar="N|max",
    ),
    JobFlag(
        "num-requests",
        "an offline batch: N requests arrive at once and run by in-flight batching; plans "
        "the whole run (ramp-up and drain included): makespan, tokens/s, cost; compare: "
        "each offer's instance processes all N, ranked by makespan / cost of the batch",
        kinds=_I,
        parse=_positive_int,
        metavar="N",
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
        "weight dtype (fp4/nvfp4/mxfp4/mxfp8: Blackwell-class only)",
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
        "engine class for overhead constants: generic, tensorrt-llm, vllm, sglang",
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
        "ep",
        "expert-parallel groups inside the tensor-parallel group (MoE; divides --tp)",
        kinds=_I,
        doors=_PLAN,
        parse=_positive_int,
        default=1,
        metavar="N",
    ),
    JobFlag(
        "max-num-tokens",
        "the engine's token budget per forward pass: vLLM --max-num-batched-tokens, "
        "TensorRT-LLM max_num_tokens, SGLang --chunked-prefill-size; sizes the activation "
        "workspace (and so the KV cache) and how many prompt tokens a pass prefills "
        "(default: the engine's own, 8192)",
        kinds=_I,
        doors=_PLAN,
        parse=_positive_int,
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
    # --- which candidates (compare and report) ---
    JobFlag(
        "accelerators",
        "compare these accelerators (or system ids) on their catalog node "
        "types instead of offers; priced by --price-per-gpu-hour or the cheapest catalog "
        "offer",
        doors=_CMP,
        parse=lambda t: _csv_list(t),
        metavar="A,B,...",
    ),
    JobFlag(
        "provider",
        "only offers of these providers",
        doors=_CMP,
        parse=lambda t: _csv_list(t),
        metavar="A,B",
    ),
    JobFlag(
        "max-price",
        "only offers at most this many dollars per instance-hour",
        doors=_CMP,
        parse=non_negative_float,
        metavar="USD",
    ),
    JobFlag(
        "spot",
        "price offers at their published spot price (offers without one are left out)",
        doors=_CMP,
        action=FLAG,
        default=False,
    ),
    JobFlag(
        "sort", "row order (default: cost)", doors=_CMP, choices=("cost", "time"), default="cost"
    ),
]


def _csv_list(text: str | list[Any]) -> list[str]:
    if isinstance(text, list):
        return [str(t).strip() for t in text if str(t).strip()]
    return [t.strip() for t in text.split(",") if t.strip()]
