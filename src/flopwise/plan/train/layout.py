"""Parallel layouts: the job, the user's constraints, and which layouts are valid.

Rank order of the process grid (Megatron-LM's default "tp-cp-ep-dp-pp"): TP is innermost, then
CP, then DP (EP is carved out of DP), then PP outermost. Whether a group crosses the scale-up
domain follows from that order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from flopwise.errors import FlopwiseError
from flopwise.units import human_count
from flopwise.workload.flops import RECOMPUTE_MODES
from flopwise.workload.remat import parse_remat_tensors
from flopwise.workload.spec import ModelSpec

if TYPE_CHECKING:
    from flopwise.plan.train.frameworks import FrameworkProfile

#: What the search tries when recompute is free: Megatron's three; "op" (torchtitan's op-level
#: selective checkpointing) when asked for
SEARCHED_RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")
TRAIN_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")
OBJECTIVES: tuple[str, ...] = ("time", "cost")
ATTENTION_IMPLS: tuple[str, ...] = ("flash", "flash2", "unfused")


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
    # per-die value (constants.SUSTAINED_COMPUTE_FRACTION)
    sustained_compute_fraction: float | None = None
    # memory the layout search leaves free on each GPU, GiB; None: the default policy
    # (constants.MEMORY_HEADROOM_FRACTION of device memory). Fully fixed layouts are judged
    # against device capacity.
    memory_headroom_gib: float | None = None
    # the loss is one fused cross-entropy kernel (torch.compile, FlashAttention's Triton
    # cross-entropy): no fp32 copies of the logits; applies to the PyTorch-native (FSDP) recipes
    fused_loss: bool = False
    # MaxText remat_policy=custom: (tensor, "device" | "offload" | "remat") pairs
    # (workload/remat.py); tensors not named are recomputed, the layer input stays on device
    remat_tensors: tuple[tuple[str, str], ...] = ()
    # FP8 scaling recipe (plan/train/fp8.py); None: the framework profile's. Only with fp8
    fp8_recipe: str | None = None

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
        from flopwise.plan.train.frameworks import get_profile

        get_profile(self.framework)
        if self.attention is not None and self.attention not in ATTENTION_IMPLS:
            raise FlopwiseError(
                f"attention {self.attention!r} is not one of {', '.join(ATTENTION_IMPLS)}"
            )
        if self.fp8_recipe is not None:
            from flopwise.plan.train.fp8 import get_fp8_recipe

            get_fp8_recipe(self.fp8_recipe)
            if self.dtype != "fp8":
                raise FlopwiseError(
                    f"--fp8-recipe {self.fp8_recipe} applies to --dtype fp8, not {self.dtype}"
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

    @property
    def profile(self) -> FrameworkProfile:
        from flopwise.plan.train.frameworks import get_profile

        return get_profile(self.framework)

    @property
    def recipe_name(self) -> str:
        if self.recipe:
            return self.recipe
        if self.dtype == "fp32":  # CPUs planned from a measured fp32 rate
            return "fp32-adam"
        return self.profile.recipe_for(self.dtype)

    @property
    def attention_kernel(self) -> str:
        return self.attention or self.profile.attention

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


@dataclass(frozen=True, kw_only=True, slots=True)
class LayoutConstraints:
    """Layout choices the user fixed; None means 'search it'."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    vpp: int | None = None
    microbatch: int | None = None
    recompute: str | None = None
    zero: int | None = None
    sequence_parallel: bool | None = None
    hsdp: bool | None = None  # ZeRO-3 inside a node, replicated across nodes

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "ep", "vpp", "microbatch"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise FlopwiseError(f"--{name} must be at least 1, got {v}")
        if self.recompute is not None and self.recompute not in RECOMPUTE_MODES:
            raise FlopwiseError(
                f"recompute {self.recompute!r} is not one of {', '.join(RECOMPUTE_MODES)}"
            )
        if self.zero is not None and self.zero not in (0, 1, 2, 3):
            raise FlopwiseError(f"--zero must be 0, 1, 2 or 3, got {self.zero}")
        if self.hsdp and self.zero is not None and self.zero != 3:
            raise FlopwiseError(
                f"--hsdp shards like ZeRO-3 inside each node; it needs --zero 3, got --zero "
                f"{self.zero}"
            )

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """One complete parallel layout."""

    tp: int
    pp: int
    dp: int
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    microbatch: int = 1
    recompute: str = "none"
    zero: int = 1
    sequence_parallel: bool = False
    # hybrid sharding (FSDP HYBRID_SHARD, DeepSpeed ZeRO++ hpZ-style): ZeRO-3 over the
    # data-parallel ranks inside one node, plain replication (gradient all-reduce) across nodes
    hsdp: bool = False

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    def microbatches(self, job: TrainJob) -> int:
        """Microbatches per step per data-parallel replica (gradient accumulation steps)."""
        return job.global_batch_seqs // (self.dp * self.microbatch)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def zero_shard_gpus(tp: int, dp: int, cp: int, hsdp: bool, domain: int) -> int:
    """GPUs ZeRO shards the training state over: the whole DP x CP group, or with HSDP the
    members of that group inside one scale-up domain (an NVLink node or rack, a TPU slice;
    rank order tp-cp-dp: the group's ranks sit tp apart, so a domain holds domain / tp)."""
    n = dp * cp
    if not hsdp:
        return n
    return max(1, min(n, domain // tp))


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def tp_problem(model: ModelSpec, tp: int) -> str | None:
    """Why tensor parallelism of degree tp cannot split this model (None if it can)."""
    if model.heads % tp:
        return f"tp={tp} does not divide {model.heads} heads"
    if model.kv_heads % tp and tp % model.kv_heads:
        return f"tp={tp} does not divide {model.kv_heads} key/value heads (nor is a multiple)"
    if model.ffn and model.ffn % tp:
        return f"tp={tp} does not divide the FFN width {model.ffn}"
    if model.is_moe and model.expert_ffn % tp:
        return f"tp={tp} does not divide the expert FFN width {model.expert_ffn}"
    return None


def layout_problem(model: ModelSpec, job: TrainJob, lay: Layout) -> str | None:
    """The first constraint `lay` violates, named, or None when the layout is valid."""
    if (p := tp_problem(model, lay.tp)) is not None:
        return p
    product = lay.tp * lay.pp * lay.cp * lay.dp
    if product != job.gpus:
        return (
            f"tp*pp*cp*dp = {lay.tp}*{lay.pp}*{lay.cp}*{lay.dp} = {product} is not the "
            f"{job.gpus} GPUs"
        )
    if lay.pp > model.layers:
        return f"pp={lay.pp} exceeds the {model.layers} layers"
    if job.seq_len % lay.cp:
        return f"cp={lay.cp} does not divide the sequence length {job.seq_len}"
    if model.is_moe:
        if model.experts % lay.ep:
            return f"ep={lay.ep} does not divide {model.experts} experts"
        if lay.dp % lay.ep:
            return f"ep={lay.ep} does not divide dp={lay.dp} (experts are sharded inside DP)"
    elif lay.ep != 1:
        return f"ep={lay.ep} needs a mixture-of-experts model; {model.name} is dense"
    if job.global_batch_seqs % lay.dp:
        return f"dp={lay.dp} does not divide the global batch of {job.global_batch_seqs} sequences"
    per_replica = job.global_batch_seqs // lay.dp
    if per_replica % lay.microbatch:
        return (
            f"microbatch={lay.microbatch} does not divide the {per_replica} sequences per "
            "data-parallel replica"
        )
    if lay.vpp > 1:
        if lay.pp == 1:
            return f"vpp={lay.vpp} needs pipeline parallelism (pp > 1)"
        per_stage = -(-model.layers // lay.pp)
        if per_stage % lay.vpp:
            return (
                f"vpp={lay.vpp} does not divide the {per_stage} layers of a pipeline stage "
                f"({model.layers} layers over pp={lay.pp})"
            )
        if lay.microbatches(job) % lay.pp:
            return (
                f"the interleaved schedule needs the {lay.microbatches(job)} microbatches to "
                f"be a multiple of pp={lay.pp}"
            )
    if lay.sequence_parallel and lay.tp == 1:
        return "sequence parallelism needs tp > 1"
    if lay.hsdp and lay.zero != 3:
        return f"hsdp shards like ZeRO-3 inside each node; it needs zero=3, got zero={lay.zero}"
    if lay.recompute not in RECOMPUTE_MODES:
        return f"recompute {lay.recompute!r} is not one of {', '.join(RECOMPUTE_MODES)}"
    return None


def _pick(given: Any, options: list[Any]) -> list[Any]:
    return options if given is None else [given]


def enumerate_layouts(
    model: ModelSpec, job: TrainJob, cons: LayoutConstraints, scaleup_domain: int
) -> Iterator[tuple[int, int, int, int, int]]:
    """Valid (tp, cp, pp, dp, ep) grids; the per-grid options are enumerated by the search."""
    n = job.gpus
    for tp in _pick(cons.tp, divisors(n)):
        if n % tp or tp_problem(model, tp) is not None:
            continue
        if cons.tp is None and tp > scaleup_domain:
            continue
        rest = n // tp
        for cp in _pick(cons.cp, divisors(rest)):
            if rest % cp or job.seq_len % cp:
                continue
            if cons.cp is None and cp > 1 and job.seq_len // cp < 1024:
                continue  # chunks this short make ring attention all latency
            rest2 = rest // cp
            for pp in _pick(cons.pp, divisors(rest2)):
                if rest2 % pp or pp > model.layers:
                    continue
                dp = rest2 // pp
                if cons.dp is not None and dp != cons.dp:
                    continue
                if job.global_batch_seqs % dp:
                    continue
                eps = [1]
                if model.is_moe:
                    eps = [e for e in divisors(dp) if model.experts % e == 0]
                for ep in _pick(cons.ep, eps):
                    if model.is_moe and (dp % ep or model.experts % ep):
                        continue
                    if not model.is_moe and ep != 1:
                        continue
                    yield tp, cp, pp, dp, ep


def vpp_options(model: ModelSpec, pp: int, given: int | None) -> list[int]:
    """Virtual stages per GPU for the interleaved schedule (1 = plain 1F1B)."""
    # uneven pipelines (fewer layers on the first/last stage, as Megatron-Core's
    # decoder_first/last_pipeline_num_layers and Llama 3 do) keep ceil(L/pp) per stage
    opts = [1] if pp == 1 else divisors(-(-model.layers // pp))
    if given is None:
        return opts
    return [given] if given in opts else []


def explain_constraints(model: ModelSpec, job: TrainJob, cons: LayoutConstraints) -> str | None:
    """A one-line reason the fixed parts of the layout can never work, if there is one."""
    if cons.tp is not None and (p := tp_problem(model, cons.tp)) is not None:
        return p
    if cons.tp is not None and job.gpus % cons.tp:
        return f"tp={cons.tp} does not divide the {job.gpus} GPUs"
    if cons.cp is not None and job.seq_len % cons.cp:
        return f"cp={cons.cp} does not divide the sequence length {job.seq_len}"
    if cons.pp is not None and cons.pp > model.layers:
        return f"pp={cons.pp} exceeds the {model.layers} layers"
    if cons.ep is not None and cons.ep > 1 and not model.is_moe:
        return f"ep={cons.ep} needs a mixture-of-experts model; {model.name} is dense"
    if cons.ep is not None and model.is_moe and model.experts % cons.ep:
        return f"ep={cons.ep} does not divide {model.experts} experts"
    if cons.dp is not None and job.global_batch_seqs % cons.dp:
        return f"dp={cons.dp} does not divide the global batch of {job.global_batch_seqs} sequences"
    fixed = [cons.tp, cons.pp, cons.cp, cons.dp]
    prod = 1
    for v in fixed:
        prod *= v or 1
    if all(v is not None for v in fixed) and prod != job.gpus:
        return f"tp*pp*cp*dp = {prod} is not the {job.gpus} GPUs"
    if job.gpus % prod:
        return f"the fixed degrees multiply to {prod}, which does not divide {job.gpus} GPUs"
    if cons.vpp is not None and cons.vpp > 1 and cons.pp is not None:
        if cons.pp == 1:
            return f"vpp={cons.vpp} needs pipeline parallelism (pp > 1)"
        per_stage = -(-model.layers // cons.pp)
        if per_stage % cons.vpp:
            return (
                f"vpp={cons.vpp} does not divide the {per_stage} layers of a pipeline stage "
                f"({model.layers} layers over pp={cons.pp})"
            )
    if cons.sequence_parallel and cons.tp == 1:
        return "sequence parallelism needs tp > 1"
    if cons.hsdp and cons.pp is not None and cons.pp > 1:
        return f"hsdp shards like ZeRO-3, which pipeline parallelism (pp={cons.pp}) cannot use"
    return None
