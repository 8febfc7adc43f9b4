"""``TrainJob``: what is to be trained, on how much hardware, with which framework switches.

Frozen and validated on construction; the layout search (layout.py, search.py) and the step
model read it, never change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flopwise.errors import FlopwiseError
from flopwise.units import human_count
from flopwise.workload.remat import parse_remat_tensors

if TYPE_CHECKING:
    from flopwise.plan.train.frameworks import FrameworkProfile

#: GEMM dtypes a training plan accepts (the planner refuses those the hardware lacks); fp32 is
#: for CPUs planned from a measured fp32 matmul rate.
TRAIN_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")
OBJECTIVES: tuple[str, ...] = ("time", "cost")
ATTENTION_IMPLS: tuple[str, ...] = ("flash", "flash2", "unfused")


#: Most multi-token-prediction modules a plan takes (DeepSeek-V3 trains one; the paper's
#: ablations go to a few); more is surely a typo.
MAX_MTP_LAYERS = 16

#: Expert dispatchers (TrainJob.ep_dispatcher).
EP_DISPATCHERS: tuple[str, ...] = ("alltoall", "deepep")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainJob:
    """What to train and on how many GPUs; independent of the parallel layout."""

    gpus: int
    seq_len: int
    global_batch_seqs: int
    tokens: float | None = None  # total training tokens (None: step metrics only)
    dtype: str = "bf16"
    recipe: str | None = None  # training-state recipe; default from dtype
    gpus_per_node: int | None = None  # default: the system's, else the scale-up domain
    price_per_gpu_hour: float | None = None
    objective: str = "time"
    # training framework profile (plan/train/frameworks.py): what overlaps with what, the
    # attention kernel, the recipe per dtype and which layouts the framework can run
    framework: str = "generic"
    # "flash": the best fused kernel for the accelerator (FA2 on Ampere, FA3/cuDNN on Hopper+);
    # "flash2": FlashAttention-2 everywhere; "unfused": s^2 scores through HBM (Megatron 2021).
    # None: the framework profile's kernel
    attention: str | None = None
    # Each overlap switch below is None for "as the framework profile does" and can be forced
    # on or off. TP collectives pipelined with GEMMs (Transformer Engine userbuffers,
    # Megatron-Core --tp-comm-overlap, torchtitan async-TP)
    tp_comm_overlap: bool | None = None
    # pipeline sends/receives under the next microbatch's compute (Megatron-Core
    # overlap_p2p_comm, interleaved schedule only)
    pp_comm_overlap: bool | None = None
    # expert-parallel all-to-alls under another microbatch's compute (DeepSeek-V3's DualPipe,
    # arXiv:2412.19437 §3.2.1)
    ep_comm_overlap: bool | None = None
    # how tokens reach experts on other nodes: "alltoall" (NCCL all-to-all, Megatron-Core's
    # default dispatcher, torchtitan) sends every (token, expert) pair; "deepep" (DeepSeek's
    # DeepEP, Megatron-Core's flex dispatcher with DeepEP or HybridEP) sends a token once per
    # remote node over the network and fans it out over NVLink (arXiv:2412.19437 §3.2.2)
    ep_dispatcher: str = "alltoall"
    # the data-parallel gradient reduction overlaps the backward pass (PyTorch DDP and FSDP
    # buckets, Megatron-Core overlap_grad_reduce); off: it runs after the last backward
    # (Megatron-LM 2021 --DDP-impl local, DeepSpeed's pipeline engine ReduceGrads)
    dp_comm_overlap: bool | None = None
    # pipeline sends split the activation over the TP ranks and all-gather it on the receiver
    # (Megatron-LM's scatter/gather optimisation, Narayanan et al. 2021 §4.1; implicit with
    # sequence parallelism); off: every TP rank sends the whole tensor (DeepSpeed PipelineEngine)
    pp_scatter_gather: bool | None = None
    # accelerators that share the scale-up fabric (NVLink domain, TPU slice over ICI); None:
    # the node type's. Multislice TPU jobs set it to the slice size (DCN between slices)
    scaleup_domain: int | None = None
    # share of the MAMF-based GEMM/attention rate sustained inside a step; None: the calibrated
    # per-die value (plan/sustained.py SUSTAINED_COMPUTE_FRACTION)
    sustained_compute_fraction: float | None = None
    # memory the layout search leaves free on each GPU, GiB; None: the default policy
    # (constants.MEMORY_HEADROOM_FRACTION of device memory). Fully fixed layouts are judged
    # against device capacity.
    memory_headroom_gib: float | None = None
    # the loss is one fused cross-entropy kernel (torch.compile, FlashAttention's Triton
    # cross-entropy): no fp32 copies of the logits; applies to the PyTorch-native (FSDP) recipes
    fused_loss: bool = False
    # the model runs under torch.compile, its pointwise chains fused into one kernel each;
    # None: the framework profile's default (FrameworkProfile.eager_pointwise: torchtitan runs
    # eagerly unless --training.compile). Only changes profiles that run eager ops
    compile: bool | None = None
    # what a full activation checkpoint re-runs (frameworks.RECOMPUTE_REPLAY_MODES); None: the
    # framework profile's (an older PyTorch's non-reentrant checkpoint replays: "replay")
    recompute_replay: str | None = None
    # each norm is one fused kernel even where the other pointwise ops run eagerly
    # (torchtitan's norm_type fused_rmsnorm, a Triton kernel)
    fused_norm: bool = False
    # MaxText remat_policy=custom: (tensor, "device" | "offload" | "remat") pairs
    # (workload/remat.py); tensors not named are recomputed, the layer input stays on device
    remat_tensors: tuple[tuple[str, str], ...] = ()
    # FP8 scaling recipe (plan/train/fp8_recipes.py); None: the framework profile's. Only with fp8
    fp8_recipe: str | None = None
    # "adamw", or "muon": Muon on the layers' weight matrices, AdamW on the rest, as Megatron-Core
    # runs it (plan/train/muon.py); ZeRO 0/1 only
    optimizer: str = "adamw"
    # which layers each pipeline stage holds, in Megatron-Core's --pipeline-model-parallel-layout
    # notation (plan/train/pipeline_layout.py); None: layers split as evenly as pp allows, the
    # logits on the last rank. Fixes the interleaving depth (vpp = stages / pp); needs --pp
    pipeline_layout: str | None = None
    # multi-token-prediction modules trained beside the model (DeepSeek-V3's D = 1; Megatron-Core
    # --mtp-num-layers): each one more transformer layer, an h x 2h projection and its own
    # logits and loss, on the rank the pipeline layout gives it (else the last). 0: none priced
    mtp_layers: int = 0
    # LoRA fine-tuning (plan/train/lora.py): adapters of this rank beside the targeted linears,
    # every base weight frozen (no weight gradient, optimizer state or gradient traffic). 0:
    # every weight is trained
    lora_rank: int = 0
    # the linears that carry an adapter (lora.LORA_TARGETS); only with lora_rank
    lora_targets: tuple[str, ...] | None = None
    # QLoRA: the frozen base's layer linears stored in 4-bit NormalFloat, dequantized per use
    qlora: bool = False
    # packed sequences: each sequence holds documents of this many tokens and attention spans
    # each document only (varlen / THD packing, cu_seqlens); None: the whole sequence
    document_len: int | None = None

    def __post_init__(self) -> None:
        for name in ("gpus", "seq_len", "global_batch_seqs"):
            if getattr(self, name) < 1:
                raise FlopwiseError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.tokens is not None and self.tokens <= 0:
            raise FlopwiseError(f"tokens must be positive, got {self.tokens}")
        if self.tokens is not None and self.tokens < self.tokens_per_step:
            asked = f"{self.tokens:g}" if self.tokens < 1e3 else human_count(self.tokens)
            raise FlopwiseError(
                f"--tokens {asked} is less than one global batch of "
                f"{self.tokens_per_step:,} tokens ({self.global_batch_seqs:,} x {self.seq_len:,}); "
                "give more tokens or a smaller global batch"
            )
        gpn = self.gpus_per_node
        if gpn is not None and self.gpus > gpn and self.gpus % gpn:
            raise FlopwiseError(
                f"--gpus {self.gpus} does not fill whole nodes of --gpus-per-node {gpn}; "
                f"give a multiple of {gpn}"
            )
        if self.dtype not in TRAIN_DTYPES:
            raise FlopwiseError(f"dtype {self.dtype!r} is not one of {', '.join(TRAIN_DTYPES)}")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise FlopwiseError(f"gpus_per_node must be at least 1, got {self.gpus_per_node}")
        if self.price_per_gpu_hour is not None and self.price_per_gpu_hour < 0:
            raise FlopwiseError(
                f"price per GPU-hour must not be negative: {self.price_per_gpu_hour}"
            )
        if self.ep_dispatcher not in EP_DISPATCHERS:
            raise FlopwiseError(
                f"ep dispatcher {self.ep_dispatcher!r} is not one of {', '.join(EP_DISPATCHERS)}"
            )
        from flopwise.plan.train.frameworks import RECOMPUTE_REPLAY_MODES, get_profile

        get_profile(self.framework)
        if self.recompute_replay is not None and (
            self.recompute_replay not in RECOMPUTE_REPLAY_MODES
        ):
            raise FlopwiseError(
                f"recompute replay {self.recompute_replay!r} is not one of "
                f"{', '.join(RECOMPUTE_REPLAY_MODES)}"
            )
        if self.attention is not None and self.attention not in ATTENTION_IMPLS:
            raise FlopwiseError(
                f"attention {self.attention!r} is not one of {', '.join(ATTENTION_IMPLS)}"
            )
        if self.fp8_recipe is not None:
            from flopwise.plan.train.fp8_recipes import get_fp8_recipe

            get_fp8_recipe(self.fp8_recipe)
            if self.dtype != "fp8":
                raise FlopwiseError(
                    f"--fp8-recipe {self.fp8_recipe} applies to --dtype fp8, not {self.dtype}"
                )
        from flopwise.plan.train.muon import OPTIMIZERS

        if self.optimizer not in OPTIMIZERS:
            raise FlopwiseError(
                f"optimizer {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}"
            )
        f = self.sustained_compute_fraction
        if f is not None and not 0.0 < f <= 1.5:
            raise FlopwiseError(f"sustained compute fraction must be in (0, 1.5], got {f}")
        hr = self.memory_headroom_gib
        if hr is not None and not hr >= 0.0:
            raise FlopwiseError(f"memory headroom must be at least 0 GiB, got {hr}")
        if self.objective not in OBJECTIVES:
            raise FlopwiseError(f"objective {self.objective!r} is not one of time, cost")
        if self.remat_tensors:
            text = ",".join(f"{n}={p}" for n, p in self.remat_tensors)
            object.__setattr__(self, "remat_tensors", parse_remat_tensors(text))
        if not 0 <= self.mtp_layers <= MAX_MTP_LAYERS:
            raise FlopwiseError(f"--mtp-layers must be 0..{MAX_MTP_LAYERS}, got {self.mtp_layers}")
        if self.document_len is not None and self.document_len < 1:
            raise FlopwiseError(f"--document-len must be at least 1, got {self.document_len}")
        from flopwise.plan.train.lora import MAX_LORA_RANK, parse_lora_targets

        if not 0 <= self.lora_rank <= MAX_LORA_RANK:
            raise FlopwiseError(f"--lora-rank must be 0..{MAX_LORA_RANK}, got {self.lora_rank}")
        if self.lora_targets is not None:
            if not self.lora_rank:
                raise FlopwiseError("--lora-targets needs --lora-rank (the adapters' rank)")
            object.__setattr__(
                self, "lora_targets", parse_lora_targets(",".join(self.lora_targets))
            )
        if self.pipeline_layout is not None:
            from flopwise.plan.train.pipeline_layout import layout_stages

            layout_stages(self.pipeline_layout)  # syntax; the model and pp are checked at plan time

    @property
    def profile(self) -> FrameworkProfile:
        from flopwise.plan.train.frameworks import get_profile

        return get_profile(self.framework)

    @property
    def recipe_name(self) -> str:
        if self.recipe:
            return self.recipe
        if self.qlora:  # the adapters' state as QLoRA's own code keeps it
            return "qlora-bf16-adam"
        if self.dtype == "fp32":  # CPUs planned from a measured fp32 rate
            return "fp32-adam"
        return self.profile.recipe_for(self.dtype)

    @property
    def lora_target_names(self) -> tuple[str, ...]:
        """The linears carrying a LoRA adapter (none without --lora-rank)."""
        from flopwise.plan.train.lora import DEFAULT_LORA_TARGETS

        if not self.lora_rank:
            return ()
        return self.lora_targets or DEFAULT_LORA_TARGETS

    @property
    def attention_kernel(self) -> str:
        return self.attention or self.profile.attention

    @property
    def eager_pointwise(self) -> bool:
        """Pointwise ops run one PyTorch op per kernel (plan/train/pointwise.py): a profile
        that runs eager ops, not compiled."""
        return self.profile.eager_pointwise and not self.compile

    @property
    def recompute_replay_mode(self) -> str:
        """What a full activation checkpoint of this job re-runs (frameworks.
        RECOMPUTE_REPLAY_MODES): "dce" where --compile compiles the profile's blocks; else the
        flag's or the profile's mode, except that PyTorch's early stop stops before a native
        matmul, not before the eager custom-Function linears of an FP8 run (Transformer Engine,
        torchao), which then replay."""
        if self.compile and self.profile.eager_pointwise:
            # --compile compiles the profile's blocks, checkpoint and all (torchtitan): the
            # partitioner recomputes only what the backward reads, whatever the early stop says
            return "dce"
        mode = self.recompute_replay or self.profile.recompute_replay
        if mode == "early-stop" and self.dtype == "fp8":
            return "replay"
        return mode

    @property
    def recompute_skips_tail(self) -> bool:
        """Whether a full activation checkpoint leaves the layer's last GEMM (the MLP's output
        projection) and its tensor-parallel reduction out of its recomputation."""
        return self.recompute_replay_mode in ("early-stop", "dce")

    @property
    def fp8_recipe_name(self) -> str:
        return self.fp8_recipe or self.profile.fp8_recipe

    def tp_overlap(self) -> bool:
        o = self.tp_comm_overlap
        return self.profile.tp_comm_overlap if o is None else o

    def pp_overlap(self, vpp: int) -> bool:
        o = self.pp_comm_overlap
        return self.profile.pp_overlap_active(vpp) if o is None else o

    def ep_overlap(self) -> bool:
        o = self.ep_comm_overlap
        return self.profile.ep_comm_overlap if o is None else o

    def dp_overlap(self, pp: int) -> bool:
        o = self.dp_comm_overlap
        return self.profile.dp_overlap_active(pp) if o is None else o

    def scatter_gather(self) -> bool:
        o = self.pp_scatter_gather
        return self.profile.pp_scatter_gather if o is None else o

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_seqs * self.seq_len
