"""Memory validation: every published layout must fit, and published peaks are predicted.

Each published training run that states its layout is posed as a user would pose it to
``flopwise plan train`` (model shape, GPUs, sequence, global batch, the published degrees, the
framework's recipe), with ``--memory-headroom 0``: a published layout ran, so it is judged
against the device's capacity; headroom is the search's margin for layouts nobody has run yet.
Where a source publishes the peak memory per GPU (torchtitan's logs: ``max_reserved``, the
caching allocator's reserved bytes, which is what our total models), the prediction is scored
against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, Origin, hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.units import GIB
from flopwise.workload.spec import ModelSpec

Row = Mapping[str, str]

#: torchtitan's Grand Teton H100s have 96 GB of HBM2e (torchtitan benchmarks, Dec 2024). The
#: 80 GB H100 exposes 81559 of its 81920 MiB to CUDA; the same share of 96 GiB is 95.58 GiB.
GRAND_TETON_H100_GIB = 96.0 * 81559 / 81920

_PEAK = re.compile(r"(?:[Pp]eak memory(?: \(max over PP ranks\))?|Memory) ([0-9.]+) GiB")


@dataclass(frozen=True, slots=True)
class MemoryCase:
    """One published layout posed for the planner."""

    id: str
    model: ModelSpec
    hardware: Hardware
    job: TrainJob
    constraints: LayoutConstraints
    published_gib: float | None
    note: str


@dataclass(frozen=True, slots=True)
class MemoryRow:
    id: str
    predicted_gib: float
    capacity_gib: float | None
    fits: bool | None
    published_gib: float | None
    layout: str
    note: str

    @property
    def error_pct(self) -> float | None:
        if self.published_gib is None:
            return None
        return 100.0 * (self.predicted_gib - self.published_gib) / self.published_gib

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "predicted_gib": self.predicted_gib,
            "published_gib": self.published_gib,
            "error_pct": self.error_pct,
            "capacity_gib": self.capacity_gib,
            "fits": self.fits,
            "layout": self.layout,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class MemoryReport:
    rows: tuple[MemoryRow, ...]
    skipped: tuple[tuple[str, str], ...]

    @property
    def scored(self) -> tuple[MemoryRow, ...]:
        return tuple(r for r in self.rows if r.published_gib is not None)

    def _errors(self) -> list[float]:
        return [r.error_pct for r in self.scored if r.error_pct is not None]

    @property
    def n(self) -> int:
        return len(self.scored)

    @property
    def mape_pct(self) -> float | None:
        e = self._errors()
        return sum(abs(x) for x in e) / len(e) if e else None

    @property
    def max_abs_error_pct(self) -> float | None:
        e = self._errors()
        return max(abs(x) for x in e) if e else None

    @property
    def bias_pct(self) -> float | None:
        e = self._errors()
        return sum(e) / len(e) if e else None

    @property
    def not_fitting(self) -> tuple[MemoryRow, ...]:
        return tuple(r for r in self.rows if r.fits is False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mape_pct": self.mape_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "bias_pct": self.bias_pct,
            "layouts_posed": len(self.rows),
            "layouts_not_fitting": [r.id for r in self.not_fitting],
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
        }


def published_peak_gib(row: Row) -> float | None:
    """The peak memory per GPU a row's notes publish (GiB), if any."""
    m = _PEAK.search(row.get("notes", ""))
    return float(m.group(1)) if m else None


def _num(row: Row, key: str) -> int | None:
    v = (row.get(key) or "").strip()
    return int(float(v)) if v else None


def _llama(row: Row) -> ModelSpec:
    h, heads = _num(row, "hidden") or 0, _num(row, "heads") or 0
    return ModelSpec(
        name=row["model"],
        model_type="llama",
        hidden=h,
        layers=_num(row, "layers") or 0,
        heads=heads,
        kv_heads=_num(row, "kv_heads") or heads,
        head_dim=h // heads,
        v_head_dim=h // heads,
        vocab=_num(row, "vocab") or 0,
        ffn=_num(row, "ffn_hidden") or 4 * h,
        gated_mlp=True,
        max_seq_len=max(_num(row, "seq_len") or 0, 2048),
    )


def _nemo_spec(row: Row) -> ModelSpec:
    if "gated SwiGLU" in row.get("notes", "") or row["model"].upper().startswith("LLAMA"):
        return _llama(row)
    h, heads = _num(row, "hidden") or 0, _num(row, "heads") or 0
    return ModelSpec(
        name=row["model"],
        model_type="gpt_neox",
        hidden=h,
        layers=_num(row, "layers") or 0,
        heads=heads,
        kv_heads=_num(row, "kv_heads") or heads,
        head_dim=h // heads,
        v_head_dim=h // heads,
        vocab=_num(row, "vocab") or 0,
        ffn=_num(row, "ffn_hidden") or 4 * h,
        gated_mlp=False,
        norm="layernorm",
        tied_embeddings=row["model"].startswith("GPT3"),
        max_seq_len=max(_num(row, "seq_len") or 0, 2048),
    )


def _hardware(row: Row) -> Hardware | str:
    acc = row["accelerator"]
    if "96GB HBM2e" in acc or "94/95GB" in acc:
        hw = hardware_from_catalog("h100-sxm")
        origins = dict(hw.origins)
        origins["memory_bytes"] = Origin(
            "assumed", "torchtitan Grand Teton H100 96 GB HBM2e, 81559/81920 of it usable"
        )
        return replace(hw, memory_bytes=GRAND_TETON_H100_GIB * GIB)
    low = acc.lower()
    for key, acc_id in (
        ("h200", "h200-sxm"),
        ("h100", "h100-sxm"),
        ("a100-sxm-80", "a100-sxm-80gb"),
        ("a100-sxm4-80", "a100-sxm-80gb"),
        ("a100-sxm-40", "a100-sxm-40gb"),
        ("a100-80", "a100-sxm-80gb"),
        ("a100-40", "a100-sxm-40gb"),
    ):
        if key in low:
            return hardware_from_catalog(acc_id)
    return f"accelerator {acc!r} is not modelled"


def _recompute(text: str) -> str | None:
    """torchtitan's AC modes: full; selective op (op-level SAC, the 8B/70B tomls' default at
    the benchmarked commits) -> "op"; selective layer (every second block fully
    checkpointed) has no exact mode and is posed as Megatron's selective."""
    t = text.lower()
    if t.startswith("full"):
        return "full"
    if t.startswith("selective op") or "per-op" in t or "(op)" in t:
        return "op"
    if t.startswith("selective activation checkpointing"):
        return "op"  # Dec 2024 tables: llama3_8b.toml selective_ac_option = 'op'
    if t.startswith("selective"):
        return "selective"
    if t.startswith("none"):
        return "none"
    return None


def _torchtitan(row: Row, hw: Hardware) -> MemoryCase | str:
    """torchtitan: FSDP2 (bf16 params, fp32 reduce: fsdp-mixed), TP with sequence parallel
    norms, PyTorch pipelining (local batch split into pp microbatches, torchtitan
    pipelining_utils.py at 9dec370; interleaved 1F1B with 2 stages per rank). Without PP,
    FULL_SHARD (ZeRO-3). With PP the schedule runs every
    backward but the last with set_requires_gradient_sync(False) and
    set_reshard_after_backward(False) (torch.distributed.pipelining backward_maybe_with_nosync):
    the 16-bit weights stay gathered and the gradients accumulate unsharded in the fp32 reduce
    dtype until the last microbatch, so only the master weights and Adam are sharded: ZeRO-1.
    """
    gpus, seq, gbt = _num(row, "num_gpus"), _num(row, "seq_len"), _num(row, "global_batch_tokens")
    tp, pp, dp, cp = (_num(row, k) or 1 for k in ("tp", "pp", "dp", "cp"))
    if not gpus or not seq or not gbt:
        return "GPU count, sequence length or global batch not published"
    gbs = gbt // seq
    local = gbs // dp
    rc = _recompute(row.get("recompute", ""))
    if rc is None:
        return f"activation checkpointing {row.get('recompute')!r} not stated"
    vpp, note = 1, "FSDP2 fsdp-mixed"
    mb = _num(row, "microbatch") or local
    if pp > 1:
        vpp = 2 if "i1f1b" in row["id"] else 1
        mb = max(local // pp, 1)
        note += f"; {pp} pipeline microbatches of {mb} (torchtitan default)"
    if rc == "selective":
        note += "; torchtitan layer-level SAC posed as selective recompute"
    job = TrainJob(
        gpus=gpus,
        seq_len=seq,
        global_batch_seqs=gbs,
        dtype="fp8" if "float8" in row.get("dtype", "").lower() else "bf16",
        recipe="fsdp-mixed",
        memory_headroom_gib=0.0,
        # torchtitan compiles the loss with --training.compile at the June 2025 commits
        # (820504e, e7c0cae: components/loss.py); at the Dec 2024 one (9dec370) it stayed eager
        fused_loss=row["id"].startswith("tt2506_") and "compile" in row.get("notes", ""),
    )
    cons = LayoutConstraints(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vpp=vpp,
        microbatch=mb,
        recompute=rc,
        zero=1 if pp > 1 else 3,
        sequence_parallel=tp > 1,
    )
    return MemoryCase(row["id"], _llama(row), hw, job, cons, published_peak_gib(row), note)


#: NeMo-Framework-Launcher 24.07 conf/training/*: activation recompute per model (null = none).
NEMO_RECOMPUTE = {"Nemotron-340B": "selective"}


def _nemo(row: Row, hw: Hardware) -> MemoryCase | str:
    """NeMo 24.07: Megatron-Core with TE fp8, distributed_fused_adam (nemo-fp8), sequence
    parallel with TP; recompute per the 24.07 launcher configs; unpublished microbatch and
    recompute are searched."""
    if "lora" in row["id"]:
        return (
            "LoRA freezes the base weights (no gradients or optimizer state for them); the "
            "planner has no LoRA mode"
        )
    if "INCONSISTENT" in row.get("notes", ""):
        return "layout degrees do not multiply to the GPU count in the source"
    gpus, seq, gbt = _num(row, "num_gpus"), _num(row, "seq_len"), _num(row, "global_batch_tokens")
    if not gpus or not seq or not gbt:
        return "GPU count, sequence length or global batch not published"
    tp, pp, cp = (_num(row, k) or 1 for k in ("tp", "pp", "cp"))
    vp = re.search(r"VP=(\d+)", row.get("notes", ""))
    model = row["model"].split(" ")[0]
    pretrain = row["id"].startswith("nemo2407_") and "_ft_" not in row["id"]
    rc = NEMO_RECOMPUTE.get(model, "none") if pretrain else None
    job = TrainJob(
        gpus=gpus,
        seq_len=seq,
        global_batch_seqs=gbt // seq,
        dtype="fp8",
        recipe="nemo-fp8",
        memory_headroom_gib=0.0,
    )
    cons = LayoutConstraints(
        tp=tp,
        pp=pp,
        cp=cp,
        dp=gpus // (tp * pp * cp),
        vpp=int(vp.group(1)) if vp else (1 if pp == 1 else None),
        microbatch=_num(row, "microbatch"),
        recompute=rc,
        zero=1,
        sequence_parallel=tp > 1,
    )
    note = "NeMo 24.07 distributed_fused_adam, TE fp8" + ("" if rc else "; recompute searched")
    return MemoryCase(row["id"], _nemo_spec(row), hw, job, cons, None, note)


def _gpt(row: Row, model_type: str, **kw: Any) -> ModelSpec:
    h, heads = _num(row, "hidden") or 0, _num(row, "heads") or 0
    return ModelSpec(
        name=row["model"],
        model_type=model_type,
        hidden=h,
        layers=_num(row, "layers") or 0,
        heads=heads,
        kv_heads=_num(row, "kv_heads") or heads,
        head_dim=h // heads,
        v_head_dim=h // heads,
        vocab=_num(row, "vocab") or 0,
        ffn=_num(row, "ffn_hidden") or 4 * h,
        gated_mlp=False,
        tied_embeddings=True,
        max_seq_len=max(_num(row, "seq_len") or 0, 2048),
        **kw,
    )


def _mpt(row: Row, hw: Hardware) -> MemoryCase | str:
    """llm-foundry: FSDP FULL_SHARD (ZeRO-3), Composer's amp_bf16 (fp32 reduce) or PURE (bf16
    reduce) mixed precision, FlashAttention, the table's microbatch and checkpointing."""
    gpus, seq, gbt = _num(row, "num_gpus"), _num(row, "seq_len"), _num(row, "global_batch_tokens")
    if not gpus or not seq or not gbt:
        return "GPU count, sequence length or global batch not published"
    rc = "none" if row.get("recompute", "").strip() == "none" else "full"
    job = TrainJob(
        gpus=gpus,
        seq_len=seq,
        global_batch_seqs=gbt // seq,
        dtype="fp8" if "fp8" in row.get("dtype", "") else "bf16",
        attention="flash2",
        recipe="fsdp-pure" if "PURE" in row.get("dtype", "") else "fsdp-mixed",
        memory_headroom_gib=0.0,
        fused_loss=True,  # llm-foundry's default loss_fn: fused_crossentropy (flash_attn)
    )
    cons = LayoutConstraints(
        tp=1, pp=1, cp=1, dp=gpus, microbatch=_num(row, "microbatch"), recompute=rc, zero=3
    )
    spec = _gpt(row, "mpt", norm="layernorm_nobias")
    return MemoryCase(row["id"], spec, hw, job, cons, None, "FSDP FULL_SHARD")


def _megatron(row: Row, hw: Hardware) -> MemoryCase | str:
    """Megatron-LM 2021 (Narayanan et al. Tables 1-2) and BLOOM (Megatron-DeepSpeed): full
    recompute, unfused attention; fp16 with 16-bit main grads (2021) or bf16 ZeRO-1 (BLOOM).
    Where the t/p split or microbatch is not published it is searched."""
    gpus, seq, gbt = _num(row, "num_gpus"), _num(row, "seq_len"), _num(row, "global_batch_tokens")
    if not gpus or not seq or not gbt:
        return "GPU count, sequence length or global batch not published"
    bloom = row["id"].startswith("bloom")
    job = TrainJob(
        gpus=gpus,
        seq_len=seq,
        global_batch_seqs=gbt // seq,
        dtype="bf16" if bloom else "fp16",
        recipe=None if bloom else "megatron-fp16",
        attention="unfused",
        memory_headroom_gib=0.0,
    )
    cons = LayoutConstraints(
        tp=_num(row, "tp"),
        pp=_num(row, "pp"),
        dp=_num(row, "dp"),
        cp=1,
        microbatch=_num(row, "microbatch"),
        recompute="full",
        zero=1 if bloom else 0,
        sequence_parallel=False,
    )
    if bloom:
        spec = _gpt(row, "bloom", norm="layernorm", linear_bias=True, embedding_norm=True)
    else:
        spec = _gpt(row, "gpt2", norm="layernorm", linear_bias=True, learned_positions=seq)
    return MemoryCase(row["id"], spec, hw, job, cons, None, "Megatron-LM / Megatron-DeepSpeed")


def pose(row: Row) -> MemoryCase | str:
    """A published row posed for the planner, or why it cannot be."""
    rid = row["id"]
    family = {"tt24": _torchtitan, "tt25": _torchtitan, "nemo": _nemo, "mpt_": _mpt}.get(rid[:4])
    if rid.startswith(("n21_", "bloom")):
        family = _megatron
    if family is None:
        return "no published layout for this family of runs"
    hw = _hardware(row)
    if isinstance(hw, str):
        return hw
    return family(row, hw)


def llama3_405b_case() -> MemoryCase:
    """Meta's Llama 3 405B pre-training layout (arXiv:2407.21783 §3.3.2, Table 4): 16,384 H100
    80 GB, 8K context, TP8 CP1 PP16 DP128, 16 sequences per DP rank (16M-token batch),
    microbatch 1 ("we could pre-train Llama 3 on sequences of 8K tokens without activation
    checkpointing"). FSDP shards the optimizer state and gradients but keeps the weights after
    the forward (ZeRO-2); bf16 weights, fp32 gradient accumulation and reduce-scatter (bf16-adam
    recipe); one layer fewer on the first and the last stage (126 layers over 16 stages)."""
    model = ModelSpec(
        name="llama-3.1-405b",
        model_type="llama",
        hidden=16384,
        layers=126,
        heads=128,
        kv_heads=8,
        head_dim=128,
        v_head_dim=128,
        vocab=128256,
        ffn=53248,
        gated_mlp=True,
        max_seq_len=131072,
    )
    job = TrainJob(
        gpus=16384,
        seq_len=8192,
        global_batch_seqs=2048,
        dtype="bf16",
        recipe="bf16-adam",
        memory_headroom_gib=0.0,
    )
    cons = LayoutConstraints(
        tp=8, pp=16, cp=1, dp=128, microbatch=1, recompute="none", zero=2, sequence_parallel=True
    )
    return MemoryCase(
        "llama3_405b_paper",
        model,
        hardware_from_catalog("h100-sxm", "dgx-h100"),
        job,
        cons,
        None,
        "Llama 3 §3.3.2 layout; interleaving depth searched",
    )


def predict(case: MemoryCase) -> MemoryRow:
    plan = plan_training(case.model, case.hardware, case.job, case.constraints)
    mem, lay = plan.best.memory, plan.best.layout
    layout = (
        f"tp={lay.tp} pp={lay.pp} dp={lay.dp} cp={lay.cp} vpp={lay.vpp} mb={lay.microbatch} "
        f"{lay.recompute} zero={lay.zero}{' sp' if lay.sequence_parallel else ''} "
        f"peak on {mem.stage}"
    )
    cap = None if case.hardware.memory_bytes is None else case.hardware.memory_bytes / GIB
    return MemoryRow(case.id, mem.total / GIB, cap, mem.fits, case.published_gib, layout, case.note)


def validate_peak_memory(rows: Iterable[Row], include_paper: bool = True) -> MemoryReport:
    """Every published layout posed and predicted; peaks scored where published."""
    out: list[MemoryRow] = []
    skipped: list[tuple[str, str]] = []
    cases: list[MemoryCase] = [llama3_405b_case()] if include_paper else []
    for row in rows:
        case = pose(row)
        if isinstance(case, str):
            skipped.append((row["id"], case))
        else:
            cases.append(case)
    for case in cases:
        try:
            out.append(predict(case))
        except FlopwiseError as exc:
            skipped.append((case.id, f"cannot be planned: {exc}"))
    return MemoryReport(rows=tuple(out), skipped=tuple(skipped))
