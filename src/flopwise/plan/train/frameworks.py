"""Framework profiles: what a training framework really does, so a plan can say so.

A profile carries the behaviour that changes step time and memory but is not a layout degree:
which communications overlap with what, the attention kernel, the training-state recipe per
dtype, and which parallel dimensions the framework can use at all. ``--framework NAME`` picks
one; every single setting can still be overridden by its own flag (``--attention``,
``--tp-comm-overlap`` ...). Each value cites the framework's public docs or scripts.

Nothing here is fitted to a published run: a profile says what the framework's code and
recipes do, and the validation rows of that framework are predicted with the same profile a
user would pick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError

#: When the data-parallel gradient reduction runs.
#: "backward": bucketed, launched as buckets fill during the backward of the last microbatch
#: (PyTorch DDP, FSDP, Megatron-Core overlap_grad_reduce); "after_backward": one reduction
#: after the last backward (Megatron-LM 2021 --DDP-impl local, DeepSpeed's pipeline engine);
#: "backward_without_pp": bucketed without pipelining, after the flush with it (Megatron-LM
#: 2021's sc21 scripts: --DDP-impl torch for the pp=1 runs, local otherwise).
DP_OVERLAP_MODES: tuple[str, ...] = ("backward", "after_backward", "backward_without_pp")


#: What ZeRO-2/3 does to each microbatch's unsharded gradients in HBM before the reduce-scatter:
#: "flat": PyTorch FSDP1's FlatParameter and DeepSpeed's reduce bucket: a flattening copy, a
#:     cast to the reduce dtype and a pre-divide (constants.zero_grad_handling_bytes prices
#:     every value);
#: "fsdp2-copy-in": FSDP2's foreach_reduce copies the gradients into the reduce-scatter input,
#:     widening to the reduce dtype in the same copy (torch._chunk_cat), and divides inside NCCL
#:     ("For fp32/bf16 ... we use NCCL's built-in division to avoid separate div kernels",
#:     torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py _get_gradient_divide_factors):
#:     read the 16-bit gradient, write it in the reduce dtype;
#: "in-bucket": Megatron-FSDP: param.main_grad is a view of the reduce-scatter bucket, allocated
#:     in the communication dtype, that Transformer Engine's fused wgrad accumulation writes
#:     ("zero-copy", megatron_fsdp/param_and_grad_buffer.py); gradient_reduce_preprocessing
#:     pre-scales a 16-bit bucket in place (grad_data.mul_) and folds the divide into NCCL's
#:     premul_sum otherwise (gradient_reduce_div_fusion=True default);
#: "none": XLA (MaxText): a JAX gradient is one array per parameter that GSPMD reduce-scatters
#:     straight from the weight-gradient fusion (jax-ml/scaling-book training.md), the cast and
#:     the loss's mean riding in that fusion.
ZERO_GRAD_HANDLING: tuple[str, ...] = ("flat", "fsdp2-copy-in", "in-bucket", "none")


#: What a full (per-layer) activation checkpoint re-runs in the backward:
#: "replay": the layer's whole forward again: Megatron's CheckpointFunction
#:     (tensor_parallel.checkpoint) and Transformer Engine's te_checkpoint, DeepSpeed's
#:     checkpointing, PyTorch's reentrant torch.utils.checkpoint;
#: "early-stop": PyTorch's non-reentrant checkpoint (torch >= 2.1, pytorch/pytorch#90105):
#:     "non-reentrant checkpoint stops recomputation as soon as it has computed all needed
#:     Tensors" (torch/utils/checkpoint.py set_checkpoint_early_stop, on by default). A native
#:     aten matmul stores its inputs for the backward before it runs (the generated
#:     VariableType code saves inputs ahead of the redispatch), so the recomputation stops
#:     before the layer's last GEMM, the MLP's output projection, whose result only the residual
#:     add reads (torchtitan until 2025-08-29, llm-foundry); verified on torch 2.13 (tests/train/test_recompute_early_stop.py counts the
#:     matmuls of a checkpointed block's backward). A custom autograd Function (Transformer
#:     Engine's and torchao's eager float8 linears) saves after it runs, so an eager FP8 layer
#:     re-runs it; a compiled one is "dce". A non-reentrant checkpoint with the early stop
#:     turned off (torchtitan since 25413d224, torch < 2.1) is "replay";
#: "dce": a compiled graph's recomputation (JAX/XLA remat, torch.compile's partitioner,
#:     PyTorch/XLA's lazy trace; a torch.compile'd block of a profile whose --compile compiles
#:     its blocks, TrainJob.recompute_replay_mode) holds only what the backward reads; the output projection's
#:     result is dead and never recomputed (jax.checkpoint of a Llama block: 8 of its 9 forward
#:     dot_generals appear again in the gradient's jaxpr, jax 0.10; torch.compile's min-cut
#:     partitioner re-runs 4 of a checkpointed block's 5 linears in its backward graph, the
#:     test above).
#: Under "early-stop" and "dce" a plan's full recompute leaves out the dense MLP's output
#: projection and its tensor-parallel reduction (step_time.LayerCost.tail_fwd).
RECOMPUTE_REPLAY_MODES: tuple[str, ...] = ("replay", "early-stop", "dce")

#: What each mode re-runs, as a plan says it.
RECOMPUTE_REPLAY_TEXT: Mapping[str, str] = MappingProxyType(
    {
        "replay": "each layer's whole forward again",
        "early-stop": "each layer's forward up to its MLP output projection (PyTorch's "
        "non-reentrant checkpoint stops once the saved tensors are back)",
        "dce": "only what the backward reads (a compiled recomputation): not the MLP output "
        "projection",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class FrameworkProfile:
    """What one training framework does, with where each value comes from."""

    name: str
    summary: str
    attention: str  # flash | flash2 | unfused
    dp_overlap: str  # one of DP_OVERLAP_MODES
    tp_comm_overlap: bool  # TP collectives pipelined with GEMMs (userbuffers / async-TP)
    pp_comm_overlap: bool  # pipeline p2p overlapped with compute (interleaved schedules)
    pp_scatter_gather: bool  # p2p sends split over TP ranks (Megatron scatter/gather)
    ep_comm_overlap: bool  # expert all-to-all under another microbatch's compute
    recipes: Mapping[str, str]  # dtype -> training-state recipe
    # FP8 scaling recipe of --dtype fp8 (plan/train/fp8_recipes.py): Transformer Engine's delayed
    # scaling unless the framework trains FP8 otherwise
    fp8_recipe: str = "delayed"
    # the attention's Q, K and V projections and the MLP's gate and up projections are
    # separate GEMMs (one nn.Linear each), not one fused GEMM per input (Megatron-Core
    # linear_qkv and linear_fc1, Transformer Engine LayerNormLinear)
    separate_projections: bool = False
    # the compiler fuses pointwise work into the matmuls around it (XLA: "a dot or fusion op is
    # a set of operations containing at most 1 matrix multiplication and possibly a bunch of
    # related pointwise VPU-ops", jax-ml/scaling-book profiling.md): residual adds, the gated
    # activation and RoPE make no HBM round trip of their own; a norm's reduction still reads
    # its input once (FUSED_NORM_READS_PER_LAYER)
    fused_pointwise: bool = False
    # the model code's pointwise ops (norms, RoPE, the gated activation) run as plain PyTorch
    # ops, one kernel each, unless the job is compiled (TrainJob.compile): torchtitan's Llama
    # without --training.compile (plan/train/pointwise.py prices the traced op graph)
    eager_pointwise: bool = False
    # the layer's QKV and FC1 projections are Transformer Engine LayerNormLinear/LayerNormMLP
    # modules (Megatron-Core's TE layer spec: TELayerNormColumnParallelLinear for linear_qkv
    # and linear_fc1, megatron/core/models/gpt/gpt_layer_specs.py), whose norm and activation
    # kernels write the FP8 GEMM inputs themselves under a recipe that allows it
    # (Fp8Recipe.producer_writes_fp8)
    te_layernorm_modules: bool = False
    # what ZeRO-2/3 does to every microbatch's unsharded gradients in HBM before the
    # reduce-scatter (ZERO_GRAD_HANDLING; constants.zero_grad_handling_bytes)
    zero_grad_handling: str = "flat"
    # what a full activation checkpoint re-runs in the backward (RECOMPUTE_REPLAY_MODES)
    recompute_replay: str = "replay"
    max_tp: int | None = None  # None: any; 1: the framework has no tensor parallelism
    max_pp: int | None = None
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    context_parallel: bool = True
    sources: tuple[str, ...] = ()
    # recompute modes the layout search tries (None: Megatron's none, selective, full)
    recompute_modes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.zero_grad_handling not in ZERO_GRAD_HANDLING:
            raise FlopwiseError(
                f"profile {self.name}: zero_grad_handling {self.zero_grad_handling!r} is not one "
                f"of {', '.join(ZERO_GRAD_HANDLING)}"
            )
        if self.recompute_replay not in RECOMPUTE_REPLAY_MODES:
            raise FlopwiseError(
                f"profile {self.name}: recompute_replay {self.recompute_replay!r} is not one "
                f"of {', '.join(RECOMPUTE_REPLAY_MODES)}"
            )

    def recipe_for(self, dtype: str) -> str:
        return self.recipes.get(dtype, self.recipes["bf16"])

    def pp_overlap_active(self, vpp: int) -> bool:
        """Megatron-Core overlaps p2p only in the interleaved schedule (overlap_p2p_comm)."""
        return self.pp_comm_overlap and vpp > 1

    def dp_overlap_active(self, pp: int) -> bool:
        if self.dp_overlap == "backward":
            return True
        if self.dp_overlap == "backward_without_pp":
            return pp == 1
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "attention": self.attention,
            "dp_overlap": self.dp_overlap,
            "tp_comm_overlap": self.tp_comm_overlap,
            "pp_comm_overlap": self.pp_comm_overlap,
            "pp_scatter_gather": self.pp_scatter_gather,
            "ep_comm_overlap": self.ep_comm_overlap,
            "recipes": dict(self.recipes),
            "fp8_recipe": self.fp8_recipe,
            "separate_projections": self.separate_projections,
            "fused_pointwise": self.fused_pointwise,
            "eager_pointwise": self.eager_pointwise,
            "te_layernorm_modules": self.te_layernorm_modules,
            "zero_grad_handling": self.zero_grad_handling,
            "recompute_replay": self.recompute_replay,
            "max_tp": self.max_tp,
            "max_pp": self.max_pp,
            "zero_stages": list(self.zero_stages),
            "context_parallel": self.context_parallel,
            "sources": list(self.sources),
        }


#: ZeRO stages of Megatron-Core and the frameworks on it: none, the distributed optimizer
#: (ZeRO-1), and Megatron-FSDP's ``optim_grads_params`` sharding (ZeRO-3: parameters,
#: gradients and optimizer state sharded over the data-parallel group, each module's weights
#: all-gathered before its forward and again before its backward, gradients reduce-scattered
#: under the backward). There is no ZeRO-2 mode among the recipes (``optim_grads`` exists in
#: Megatron-FSDP but no published recipe or table uses it).
MCORE_ZERO_STAGES: tuple[int, ...] = (0, 1, 3)
MEGATRON_FSDP_SOURCE = (
    "NVIDIA/Megatron-LM docs/discussions/megatron-fsdp-user-guide: --use-megatron-fsdp "
    "--data-parallel-sharding-strategy optim_grads_params; NVIDIA-NeMo/Megatron-Bridge "
    "scripts/performance/utils/overrides.py _set_megatron_fsdp_overrides (earlier: helpers.py "
    "set_megatron_fsdp_overrides, beside set_basic_perf_overrides' grad_reduce_in_fp32=False): "
    "optim_grads_params; docs/performance-summary.md ('FSDP > 0: use FSDP with sharding group "
    "size = #GPUs / (TP x PP)')"
)

_DEFAULT_RECIPES = MappingProxyType({"bf16": "bf16-adam", "fp16": "bf16-adam", "fp8": "fp8-adam"})
_MCORE_RECIPES = MappingProxyType({"bf16": "mcore-bf16", "fp16": "mcore-bf16", "fp8": "mcore-fp8"})
_FSDP_RECIPES = MappingProxyType({"bf16": "fsdp-mixed", "fp16": "fsdp-mixed", "fp8": "fsdp-mixed"})

_PROFILES: tuple[FrameworkProfile, ...] = (
    FrameworkProfile(
        name="generic",
        summary="PyTorch defaults: bucketed DDP/FSDP gradient reduction during the backward, "
        "the best fused attention kernel for the device, blocking TP and pipeline "
        "communication; every layout the planner knows",
        attention="flash",
        dp_overlap="backward",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=True,
        ep_comm_overlap=False,
        recipes=_DEFAULT_RECIPES,
        # full recompute: "replay", as a reentrant checkpoint runs it (Hugging Face
        # transformers' gradient_checkpointing_enable passes use_reentrant=True unless told)
        sources=(
            "PyTorch DDP docs: gradients are all-reduced in buckets as they become ready "
            "during the backward (torch.nn.parallel.DistributedDataParallel, bucket_cap_mb)",
        ),
    ),
    FrameworkProfile(
        name="megatron-lm-2021",
        summary="Megatron-LM as in Narayanan et al. 2021 (examples/sc21): unfused attention "
        "with a fused scale-mask-softmax, fp16 main grads, PyTorch DDP without pipelining "
        "and the local DDP (reduction after the flush) with it, blocking p2p with "
        "scatter/gather",
        attention="unfused",
        dp_overlap="backward_without_pp",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=True,
        ep_comm_overlap=False,
        recipes=MappingProxyType(
            {"bf16": "mcore-bf16", "fp16": "megatron-fp16", "fp8": "mcore-fp8"}
        ),
        zero_stages=(0,),
        context_parallel=False,
        sources=(
            "NVIDIA/Megatron-LM examples/sc21/run_table_1.sh and CONFIG.sh: --fp16, "
            "--DDP-impl torch (pp=1) / local; no flash attention in 2021",
            "Narayanan et al. 2021 (arXiv:2104.04473) §4.1: scatter/gather of p2p activations",
        ),
    ),
    FrameworkProfile(
        name="megatron-core",
        summary="Megatron-Core (Megatron-LM >= core_r0.5): distributed optimizer (ZeRO-1) or "
        "Megatron-FSDP (--zero 3), "
        "overlap_grad_reduce and overlap_param_gather, Transformer Engine fused attention, "
        "p2p overlapped in the interleaved schedule; TP communication blocking unless "
        "--tp-comm-overlap",
        attention="flash",
        dp_overlap="backward",
        tp_comm_overlap=False,
        pp_comm_overlap=True,
        pp_scatter_gather=True,
        ep_comm_overlap=False,
        recipes=_MCORE_RECIPES,
        te_layernorm_modules=True,
        zero_grad_handling="in-bucket",
        zero_stages=MCORE_ZERO_STAGES,
        sources=(
            "megatron/core/distributed/distributed_data_parallel_config.py: overlap_grad_reduce, "
            "overlap_param_gather, grad_reduce_in_fp32=False",
            MEGATRON_FSDP_SOURCE,
            "megatron/core/model_parallel_config.py: overlap_p2p_comm (interleaved schedule), "
            "tp_comm_overlap default False",
        ),
    ),
    FrameworkProfile(
        name="nemo",
        summary="NVIDIA NeMo (2.x recipes on Megatron-Core): as megatron-core, plus TP "
        "communication overlap (Transformer Engine userbuffers) wherever TP > 1 with "
        "sequence parallelism",
        attention="flash",
        dp_overlap="backward",
        tp_comm_overlap=True,
        pp_comm_overlap=True,
        pp_scatter_gather=True,
        ep_comm_overlap=False,
        recipes=_MCORE_RECIPES,
        te_layernorm_modules=True,
        zero_grad_handling="in-bucket",
        zero_stages=MCORE_ZERO_STAGES,
        sources=(
            MEGATRON_FSDP_SOURCE,
            "NVIDIA/NeMo nemo/collections/llm/recipes/*.py performance recipes: "
            "tp_comm_overlap=True with sequence_parallel, overlap_grad_reduce, "
            "overlap_param_gather, use_distributed_optimizer",
            "NeMo performance_summary.md (24.07): layouts with TP/PP/CP/VP per model",
        ),
    ),
    FrameworkProfile(
        name="torchtitan",
        summary="torchtitan (PyTorch-native): FSDP2 with bf16 parameters and fp32 "
        "gradient reduction, prefetched all-gathers and reduce-scatters overlapping "
        "compute, SDPA attention (FlashAttention-2 kernels), TP via DTensor (async-TP "
        "only when enabled), pipeline schedules from torch.distributed.pipelining, "
        "pointwise ops run eagerly unless --compile",
        attention="flash2",
        dp_overlap="backward",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=False,
        ep_comm_overlap=False,
        recipes=_FSDP_RECIPES,
        # torchao float8 (--model.converters float8): recipe_name unset = tensorwise
        fp8_recipe="tensorwise",
        # torchtitan/models/llama3/model.py: Attention wq, wk, wv; FeedForward w1, w3
        separate_projections=True,
        # train_configs/*.toml: compile = false; the model's RMSNorm, RoPE and SwiGLU are
        # plain PyTorch ops (torchtitan/models/norms.py, models/llama/model.py at 9dec370)
        eager_pointwise=True,
        zero_grad_handling="fsdp2-copy-in",
        # torchtitan/distributed/activation_checkpoint.py FullAC (c5d93d109, 2026-06):
        # ptd_checkpoint_wrapper(..., early_stop=False), the default since 25413d224
        # (2025-08-29: "Add config to AC to toggle early-stop with a default of False"); before
        # it (9dec370, 820504e) the wrapper ran PyTorch's early stop: runs of that time are
        # `--recompute-replay early-stop`. Compiled (--compile), the partitioner decides: dce
        recompute_replay="replay",
        sources=(
            "pytorch/torchtitan docs/fsdp.md (FSDP2: reshard_after_forward, implicit "
            "prefetching) and train_configs/llama3_*.toml (mixed_precision_param bfloat16, "
            "mixed_precision_reduce float32)",
            "PyTorch SDPA: the flash backend is FlashAttention-2 "
            "(torch.nn.functional.scaled_dot_product_attention docs)",
            "pytorch/torchtitan docs/float8.md: float8 via torchao, tensorwise scaling unless "
            "recipe_name is rowwise / rowwise_with_gw_hp",
            "pytorch/torchtitan train_configs/llama3_8b.toml (9dec370): compile = false, "
            "norm_type = rmsnorm (eager RMSNorm in torchtitan/models/norms.py)",
        ),
    ),
    FrameworkProfile(
        name="llm-foundry",
        summary="MosaicML llm-foundry / Composer: FSDP only (no tensor or pipeline "
        "parallelism), FULL_SHARD by default, FlashAttention-2, gradients reduced in fp32 "
        "(amp) or bf16 (PURE)",
        attention="flash2",
        dp_overlap="backward",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=False,
        ep_comm_overlap=False,
        recipes=_FSDP_RECIPES,
        max_tp=1,
        max_pp=1,
        zero_stages=(2, 3),
        context_parallel=False,
        # scripts/train/yamls/pretrain/mpt-*.yaml: activation_checkpointing_reentrant: false
        # (Composer's checkpoint_wrapper, CheckpointImpl.NO_REENTRANT); torch >= 2.1 since
        # v0.3.0 (Oct 2023). te.Linear FP8 runs are forced reentrant by train.py and replay.
        recompute_replay="early-stop",
        sources=(
            "mosaicml/llm-foundry scripts/train/benchmarking/README.md: FSDP FULL_SHARD, "
            "'our models use Flash Attention'",
            "mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml (v0.3.0, b2a43a147, "
            "5e85bd62d): activation_checkpointing_reentrant: false; setup.py torch>=2.1,<2.1.1 "
            "at 5e85bd62d",
            "Composer FSDP docs: mixed_precision DEFAULT reduces in fp32, PURE in bf16",
        ),
    ),
    FrameworkProfile(
        name="deepspeed",
        summary="Megatron-DeepSpeed (as BLOOM-176B): DeepSpeed pipeline engine with "
        "gradients reduced after the pipeline flush, full-tensor p2p from every TP rank, "
        "unfused attention with fused softmax, ZeRO-1",
        attention="unfused",
        dp_overlap="after_backward",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=False,
        ep_comm_overlap=False,
        recipes=_DEFAULT_RECIPES,
        context_parallel=False,
        sources=(
            "deepspeed/runtime/pipe/engine.py: ReduceGrads after the schedule's last "
            "backward; SendActivation sends the whole tensor",
            "bigscience-workshop/bigscience train/tr11-176B-ml/README.md: ZeRO-1, "
            "Megatron fused softmax",
        ),
    ),
    FrameworkProfile(
        name="maxtext",
        summary="MaxText (JAX/XLA on TPU): FSDP over ICI with XLA's asynchronous "
        "collectives overlapping compute, tensor parallelism over ICI, splash/flash "
        "attention kernels; no pipeline parallelism in the published configs",
        attention="flash",
        dp_overlap="backward",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=True,
        ep_comm_overlap=False,
        recipes=_FSDP_RECIPES,
        context_parallel=False,
        fused_pointwise=True,
        zero_grad_handling="none",
        # remat_policy=full: nn.remat(policy=None) of each decoder layer; JAX keeps only the
        # recomputation its gradient reads
        recompute_replay="dce",
        # its remat_policy values (configs/base.yml; workload/remat.py) that keep tensors in
        # HBM or recompute them; the host-offloading ones only when asked: the time of their
        # device-host copies is not modelled (no sourced TPU host-link bandwidth in the catalog)
        recompute_modes=("none", "minimal", "save_dot_except_mlpwi", "save_qkv_proj", "full"),
        sources=(
            "AI-Hypercomputer/maxtext MaxText/configs/base.yml: ici_fsdp_parallelism, "
            "ici_tensor_parallelism, attention 'flash' (splash kernels), remat_policy",
        ),
    ),
    FrameworkProfile(
        name="pytorch-xla",
        summary="PyTorch/XLA SPMD on TPU (torchprime): the whole step compiled by XLA, FSDP "
        "over the slice's ICI mesh (and DCN) with XLA's asynchronous collectives, tensor "
        "parallelism over ICI, Pallas flash/splash attention, per-layer activation "
        "checkpointing; weights and gradients in bf16",
        attention="flash",
        dp_overlap="backward",
        tp_comm_overlap=False,
        pp_comm_overlap=False,
        pp_scatter_gather=True,
        ep_comm_overlap=False,
        # train.py casts the model to bfloat16: gradients are reduce-scattered in bf16
        recipes=MappingProxyType({"bf16": "fsdp-pure", "fp16": "fsdp-pure", "fp8": "fsdp-pure"}),
        context_parallel=False,
        max_pp=1,
        fused_pointwise=True,
        zero_grad_handling="none",
        # torch_xla's checkpoint re-runs the layer inside the lazy trace, and XLA compiles
        # only what the step's outputs read
        recompute_replay="dce",
        # activation_checkpoint_layers = [LlamaDecoderLayer] (remat/llama.yaml) or none; the
        # layer input offloaded to host (remat/llama-scan-offload.yaml) is `--recompute custom
        # --remat-tensors decoder_layer_input=offload`, tried only when asked
        recompute_modes=("none", "full"),
        sources=(
            "AI-Hypercomputer/torchprime torchprime/torch_xla_models/README.md (12dc8a42, "
            "2025-05): ici_mesh.fsdp / ici_mesh.tensor / dcn_mesh.fsdp, "
            "model.attention_kernel=splash_attention, LIBTPU_INIT_ARGS "
            "--xla_tpu_enable_async_collective_fusion=true "
            "--xla_tpu_overlap_compute_collective_tc=true",
            "torchprime configs/model/remat/{llama,llama-scan,llama-scan-offload}.yaml: "
            "per-decoder-layer checkpointing, scan over layers, decoder_input offloaded",
            "torchprime torch_xla_models/train.py: 'Set the model dtype to bfloat16'; no "
            "pipeline parallelism in torchprime at 12dc8a42",
        ),
    ),
)

PROFILES: Mapping[str, FrameworkProfile] = MappingProxyType({p.name: p for p in _PROFILES})
FRAMEWORKS: tuple[str, ...] = tuple(PROFILES)


def get_profile(name: str) -> FrameworkProfile:
    """The profile called `name`, or a one-line error listing the valid names."""
    p = PROFILES.get(name)
    if p is None:
        raise FlopwiseError(f"framework {name!r} is not one of {', '.join(FRAMEWORKS)}")
    return p


def constrain(profile: FrameworkProfile, given: Mapping[str, Any]) -> dict[str, Any]:
    """Layout constraints the profile adds to the user's (`given`: LayoutConstraints.given()),
    or a one-line error when the user asked for something the framework cannot run."""
    extra: dict[str, Any] = {}
    for dim, cap in (("tp", profile.max_tp), ("pp", profile.max_pp)):
        if cap is None:
            continue
        v = given.get(dim)
        if v is not None and v > cap:
            raise FlopwiseError(
                f"--{dim} {v}: framework {profile.name} has no "
                f"{'tensor' if dim == 'tp' else 'pipeline'} parallelism beyond {cap}"
            )
        if v is None:
            extra[dim] = cap
    if not profile.context_parallel:
        v = given.get("cp")
        if v is not None and v > 1:
            raise FlopwiseError(f"--cp {v}: framework {profile.name} has no context parallelism")
        if v is None:
            extra["cp"] = 1
    z = given.get("zero")
    if z is not None and z not in profile.zero_stages:
        stages = ", ".join(map(str, profile.zero_stages))
        raise FlopwiseError(f"--zero {z}: framework {profile.name} runs ZeRO stage(s) {stages}")
    return extra
