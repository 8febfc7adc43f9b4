"""The training job flags (plan, compare and report train) and the goodput flags of training
plans (failures, checkpoints, restarts), in --help order. Inference's ``--gpus`` sits beside
training's here so that the two read together in --help."""

from __future__ import annotations

from flopwise.cli._args import (
    _positive_int,
    fraction,
    non_negative_float,
    non_negative_int,
    tokens,
)
from flopwise.cli.job_flag import (
    _FRAMEWORK,
    _GOODPUT,
    _I,
    _LAYOUT,
    _PLAN,
    _T,
    BOOL,
    FLAG,
    JobFlag,
    _fp8_recipes,
    _frameworks,
    _pipeline_layout,
    _positive_float,
    _recompute_modes,
    _remat_tensors,
)
from flopwise.plan.train.frameworks import RECOMPUTE_REPLAY_MODES
from flopwise.plan.train.job import ATTENTION_IMPLS, TRAIN_DTYPES
from flopwise.plan.train.lora import parse_lora_targets
from flopwise.plan.train.muon import OPTIMIZERS

#: Training: the workload, the layout (any left out is searched), the framework switches.
TRAIN_FLAGS: list[JobFlag] = [
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
        "optimizer",
        "optimizer (default adamw; muon: Muon on the layers' weight matrices and AdamW on "
        "embeddings, output layer and norms, as Megatron-Core runs it: one momentum buffer, "
        "five Newton-Schulz iterations per matrix by the rank that owns it; ZeRO 0/1 only)",
        kinds=_T,
        choices=OPTIMIZERS,
        default="adamw",
    ),
    JobFlag(
        "document-len",
        "packed sequences: each sequence holds documents of N tokens and attention spans each "
        "document only (varlen/THD packing, NeMo packed_sequence); for lengths that vary, the "
        "token-weighted mean sum(d^2)/sum(d). Default: attention spans the whole sequence",
        kinds=_T,
        parse=_positive_int,
        metavar="N",
    ),
    JobFlag(
        "lora-rank",
        "LoRA fine-tuning: adapters of rank R beside the targeted linears, every base weight "
        "frozen (no weight-gradient GEMM, gradient, optimizer state or gradient traffic for "
        "it); on MoE layers every routed expert gets its own. AdamW. Default 0: every weight "
        "trained",
        kinds=_T,
        parse=non_negative_int,
        metavar="R",
    ),
    JobFlag(
        "lora-targets",
        "with --lora-rank: the linears that carry an adapter, a comma list of qkv, proj, "
        "fc1, fc2 (Megatron-Core's linear_qkv, linear_proj, linear_fc1, linear_fc2) or all. "
        "Default all (NeMo 2 and Megatron-Bridge LoRA)",
        kinds=_T,
        parse=parse_lora_targets,
        metavar="LIST",
    ),
    JobFlag(
        "qlora",
        "with --lora-rank: QLoRA, the frozen base's layer linears stored in 4-bit NormalFloat "
        "with double quantization (4.127 bits per weight, bitsandbytes nf4) and dequantized to "
        "16 bits for every GEMM; embeddings, head and norms stay 16-bit",
        kinds=_T,
        action=FLAG,
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
            (
                "etp",
                "expert tensor-parallel degree (MoE; default: the TP degree; 1 folds the "
                "experts across TP ranks too, Megatron-Core's parallel folding)",
            ),
            ("vpp", "virtual pipeline stages per GPU (interleaved 1F1B)"),
            ("microbatch", "sequences per microbatch"),
        )
    ),
    JobFlag(
        "pipeline-layout",
        "which layers each pipeline stage holds, in Megatron-Core's "
        "--pipeline-model-parallel-layout notation: stages split by |, E embedding, t "
        "transformer layer, m multi-token-prediction module, L loss, x*N and (...)*N "
        "repeats, e.g. "
        "'Et*2|(t*2|)*34,t*3|(t*2|)*3,tL' (needs --pp; sets --vpp to stages/pp). Default: "
        "layers split as evenly as pp allows, the logits on the last rank",
        kinds=_T,
        parse=_pipeline_layout,
        metavar="LAYOUT",
        group=_LAYOUT,
    ),
    JobFlag(
        "mtp-layers",
        "multi-token-prediction modules trained beside the model (DeepSeek-V3 trains 1; "
        "Megatron-Core --mtp-num-layers): each one more transformer layer, an h x 2h "
        "projection and its own logits and loss, on the last pipeline rank unless "
        "--pipeline-layout places them (m). Default 0: none priced",
        kinds=_T,
        parse=non_negative_int,
        metavar="N",
        group=_LAYOUT,
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
        "recompute-layers",
        "with --recompute full (implied): fully recompute only N layers of each pipeline "
        "stage chunk, the others keeping their activations (Megatron --recompute-method block "
        "--recompute-num-layers N; torchtitan's per-layer AC every k-th layer: layers/k at "
        "pp 1). Default: every layer; when recompute is searched, as few as fit",
        kinds=_T,
        parse=_positive_int,
        metavar="N",
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
        choices=ATTENTION_IMPLS,
        group=_FRAMEWORK,
    ),
    JobFlag(
        "fp8-recipe",
        "low-precision recipe with --dtype fp8 (default: the profile's; torchtitan: "
        "tensorwise, others: delayed): tensorwise, rowwise, rowwise-gw-hp (torchao), delayed, "
        "current, mxfp8, nvfp4 (Transformer Engine; mxfp8 on Blackwell/CDNA4 only; nvfp4, "
        "NVFP4 GEMMs at the FP4 rate, on NVIDIA Blackwell only)",
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
            (
                "compile",
                "the model runs under torch.compile: each chain of pointwise ops (norm, RoPE, "
                "activation) is one fused kernel; without it torchtitan runs them as eager "
                "PyTorch ops, one kernel each (other profiles already fuse them)",
            ),
        )
    ),
    JobFlag(
        "ep-dispatcher",
        "how tokens reach experts on other nodes (MoE): alltoall (NCCL all-to-all, "
        "Megatron-Core's default; every token-expert pair crosses the network) or deepep "
        "(DeepEP / Megatron-Core flex dispatcher: once per remote node, then over NVLink); "
        "default alltoall",
        kinds=_T,
        choices=("alltoall", "deepep"),
        group=_FRAMEWORK,
    ),
    JobFlag(
        "recompute-replay",
        "what a full activation checkpoint re-runs in the backward (default: the profile's): "
        "replay (the whole layer: Megatron, DeepSpeed, PyTorch's reentrant checkpoint), "
        "early-stop (PyTorch >= 2.1 non-reentrant: stops before the MLP's output projection) "
        "or dce (compiled: only what the backward reads)",
        kinds=_T,
        choices=RECOMPUTE_REPLAY_MODES,
        group=_FRAMEWORK,
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
        "fused-norm",
        "each norm is one fused kernel where the other pointwise ops run eagerly (torchtitan's "
        "norm_type fused_rmsnorm; without --compile)",
        kinds=_T,
        doors=_PLAN,
        action=FLAG,
        default=False,
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
]

#: Goodput of a training plan: failures, checkpoints, restarts.
GOODPUT_FLAGS: list[JobFlag] = [
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
]
