"""Parallel layouts: the user's constraints, and which layouts are valid for a job.

Rank order of the process grid (Megatron-LM's default "tp-cp-ep-dp-pp"): TP is innermost, then
CP, then DP (EP is carved out of DP), then PP outermost. Whether a group crosses the scale-up
domain follows from that order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from flopwise.errors import FlopwiseError
from flopwise.workload.flops import RECOMPUTE_MODES
from flopwise.workload.spec import ModelSpec

from .job import TrainJob

if TYPE_CHECKING:
    pass

#: What the search tries when recompute is free: Megatron's three; "op" (torchtitan's op-level
#: selective checkpointing) when asked for
SEARCHED_RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


@dataclass(frozen=True, kw_only=True, slots=True)
class LayoutConstraints:
    """Layout choices the user fixed; None means 'search it'."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    # expert tensor parallelism (MoE); None: the TP degree (see Layout.etp)
    etp: int | None = None
    vpp: int | None = None
    microbatch: int | None = None
    recompute: str | None = None
    # with recompute "full": fully recompute only this many layers of each pipeline-stage chunk
    # (Megatron --recompute-method block --recompute-num-layers); None: all of them, or, when
    # recompute is searched, as few as fit
    recompute_layers: int | None = None
    zero: int | None = None
    sequence_parallel: bool | None = None
    hsdp: bool | None = None  # ZeRO-3 inside a node, replicated across nodes

    def __post_init__(self) -> None:
        for name in (
            "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "microbatch", "recompute_layers"
        ):  # fmt: skip
            v = getattr(self, name)
            if v is not None and v < 1:
                raise FlopwiseError(f"--{name} must be at least 1, got {v}")
        if self.recompute is not None and self.recompute not in RECOMPUTE_MODES:
            raise FlopwiseError(
                f"recompute {self.recompute!r} is not one of {', '.join(RECOMPUTE_MODES)}"
            )
        if self.recompute_layers is not None:
            if self.recompute not in (None, "full"):
                raise FlopwiseError(
                    f"--recompute-layers {self.recompute_layers} recomputes whole layers: it "
                    f"goes with --recompute full, not --recompute {self.recompute}"
                )
            # recomputing some layers is full recompute of those layers: say so once, here
            object.__setattr__(self, "recompute", "full")
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
    # expert tensor-parallel degree (Megatron-Core --expert-tensor-parallel-size); 0 = the TP
    # degree (experts split like the dense layers, expert groups inside DP x CP). Below TP, the
    # experts are "folded" (Megatron-Core's parallel folding): each expert splits over etp
    # ranks and the expert-parallel group spans TP x CP x DP, so ep x etp divides tp x cp x dp
    etp: int = 0
    # with recompute "full": layers of each pipeline-stage chunk (a stage's share of one
    # virtual stage) that are fully recomputed, the others keeping all their activations
    # (Megatron --recompute-method block --recompute-num-layers N; torchtitan's per-layer
    # selective AC every k-th layer is layers/k of one stage); 0 = every layer
    recompute_layers: int = 0

    def chunk_layers(self, layers: int) -> int:
        """Layers of the busiest stage's virtual-stage chunk (padded when vpp does not divide)."""
        per_stage = -(-layers // self.pp)
        return -(-per_stage // self.vpp)

    def recompute_share(self, layers: int) -> float:
        """Share of the layers that "full" recompute re-runs (1 unless recompute_layers < the
        chunk's layers); 0 for every other recompute mode."""
        if self.recompute != "full":
            return 0.0
        if self.recompute_layers <= 0:
            return 1.0
        return min(1.0, self.recompute_layers / self.chunk_layers(layers))

    @property
    def expert_tp(self) -> int:
        """Ranks one expert's weights are split over (the TP degree unless folded)."""
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same experts: the expert data-parallel group."""
        return max(self.tp * self.cp * self.dp // (self.ep * self.expert_tp), 1)

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    def microbatches(self, job: TrainJob) -> int:
        """Microbatches per step per data-parallel replica (gradient accumulation steps)."""
        return job.global_batch_seqs // (self.dp * self.microbatch)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["etp"] = self.expert_tp
        return d


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
        if p := _etp_problem(lay.tp, lay.cp, lay.dp, lay.ep, lay.expert_tp):
            return p
    elif lay.ep != 1 or lay.etp not in (0, lay.tp):
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
        if lay.vpp > per_stage:
            return (
                f"vpp={lay.vpp} exceeds the {per_stage} layers of a pipeline stage "
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
    if lay.recompute_layers:
        if lay.recompute != "full":
            return f"recompute_layers={lay.recompute_layers} needs recompute full"
        chunk = lay.chunk_layers(model.layers)
        if lay.recompute_layers > chunk:
            return (
                f"recompute_layers={lay.recompute_layers} exceeds the {chunk} layers of a "
                f"pipeline stage chunk ({model.layers} layers over pp={lay.pp}, vpp={lay.vpp})"
            )
    return None


def _etp_problem(tp: int, cp: int, dp: int, ep: int, etp: int) -> str | None:
    """Why experts cannot be laid out with these degrees (None if they can)."""
    if tp % etp:
        return f"etp={etp} does not divide tp={tp}"
    if etp == tp:
        if dp % ep:
            fold = "; --etp 1 folds them across TP ranks too" if tp > 1 else ""
            return f"ep={ep} does not divide dp={dp} (experts are sharded inside DP{fold})"
        return None
    if (tp * cp * dp) % (ep * etp):
        return (
            f"ep x etp = {ep * etp} does not divide tp x cp x dp = {tp * cp * dp} (folded "
            "experts span the TP, CP and DP ranks)"
        )
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
                etp = cons.etp or tp
                if model.is_moe:
                    # the ranks an expert group may span (_etp_problem rejects what cannot)
                    pool = dp if etp == tp else tp * cp * dp // etp
                    eps = [e for e in divisors(pool) if model.experts % e == 0]
                for ep in _pick(cons.ep, eps):
                    if model.is_moe and (
                        model.experts % ep or _etp_problem(tp, cp, dp, ep, etp) is not None
                    ):
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
    # a given depth that does not divide the stage runs with padded virtual stages
    # (stage_layers), as Megatron-Core's --pipeline-model-parallel-layout places the rest
    if given in opts or (pp > 1 and given <= -(-model.layers // pp)):
        return [given]
    return []


def stage_layers(layers: int, pp: int, vpp: int) -> int:
    """Transformer layers the busiest pipeline stage runs: ceil(layers / pp), and with an
    interleaved schedule whose depth does not divide that, vpp virtual stages of
    ceil(per stage / vpp) each (61 layers over pp=2, vpp=4: 4 x 8 = 32, not 31)."""
    per_stage = -(-layers // pp)
    return per_stage if vpp <= 1 else vpp * -(-per_stage // vpp)


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
    if cons.etp is not None and not model.is_moe:
        return f"etp={cons.etp} needs a mixture-of-experts model; {model.name} is dense"
    if cons.etp is not None and cons.tp is not None and cons.tp % cons.etp:
        return f"etp={cons.etp} does not divide tp={cons.tp}"
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
        if cons.vpp > per_stage:
            return (
                f"vpp={cons.vpp} exceeds the {per_stage} layers of a pipeline stage "
                f"({model.layers} layers over pp={cons.pp})"
            )
    if cons.sequence_parallel and cons.tp == 1:
        return "sequence parallelism needs tp > 1"
    if cons.hsdp and cons.pp is not None and cons.pp > 1:
        return f"hsdp shards like ZeRO-3, which pipeline parallelism (pp={cons.pp}) cannot use"
    return None
