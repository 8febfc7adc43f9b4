"""Training validation: predict each published run with its published layout, compare like
with like.

- Narayanan et al. 2021 and BLOOM publish TFLOPS that include the recompute forward (Eq. 3's
  factor 96 / BLOOM's ``4*2``): compared with ``hw_tflops_per_gpu``.
- NeMo 24.07 publishes model TFLOPS (3 passes, attention not halved, logits included): compared
  with ``tflops_per_gpu``, whose convention is the same.
- MosaicML publishes MFU = (6N + attention) / (GPUs x 989 or 312 TF): compared with ``mfu``.
Layout degrees a source publishes are fixed; those it does not (microbatch where absent,
interleaving depth, recompute where absent) are searched, as an operator tuning the run would.
Rows whose layout, hardware or FLOP convention is unknown are listed as skipped, with why.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, Origin, hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, TrainPlan, plan_training
from flopwise.validate.common import SkippedRow, ValidationReport, ValidationRow
from flopwise.validate.memory import NEMO_RECOMPUTE
from flopwise.workload.spec import ModelSpec

Row = Mapping[str, str]


def load_training_runs() -> list[dict[str, str]]:
    """The published training runs shipped with the package (catalog/data/published)."""
    path = resources.files("flopwise.catalog").joinpath("data/published/training_runs.csv")
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _num(row: Row, key: str) -> float | None:
    v = (row.get(key) or "").strip()
    return float(v) if v else None


def _int(row: Row, key: str) -> int | None:
    v = _num(row, key)
    return None if v is None else int(v)


def _jean_zay(hw: Hardware) -> Hardware:
    """BLOOM's Jean Zay A100 nodes: 8 GPUs with 4 Omni-Path 100 Gb/s links per node
    (bigscience-workshop/bigscience train/tr11-176B-ml/README.md, Hardware) = 6.25 GB/s per GPU.
    """
    origins = dict(hw.origins)
    origins["inter_bw_per_gpu_gbps"] = Origin(
        "catalog", "tr11-176B-ml README: 4 OmniPath links per 8-GPU node (4 x 100 Gb/s)"
    )
    return replace(
        hw, inter_bw_per_gpu_gbps=4 * 100 / 8 / 8, system_id=None, origins=MappingProxyType(origins)
    )


def _hardware(row: Row) -> Hardware | None:
    acc = row["accelerator"].lower()
    if "jean zay" in acc:
        return _jean_zay(hardware_from_catalog("a100-sxm-80gb"))
    if "a100" in acc and "80" in acc:
        return hardware_from_catalog("a100-sxm-80gb")
    if "a100" in acc and "40" in acc:
        return hardware_from_catalog("a100-sxm-40gb")
    if "h100" in acc:
        return hardware_from_catalog("h100-sxm", "dgx-h100" if "dgx" in acc else None)
    return None


def _family(row: Row) -> str:
    rid = row["id"]
    if rid.startswith("n21_"):
        return "megatron"
    if rid.startswith("bloom"):
        return "bloom"
    if rid.startswith("nemo"):
        return "nemo"
    if rid.startswith("mpt_"):
        return "mpt"
    return "other"


def _spec(row: Row, family: str) -> ModelSpec:
    h = _int(row, "hidden") or 0
    heads = _int(row, "heads") or 0
    kv = _int(row, "kv_heads") or heads
    ffn = _int(row, "ffn_hidden") or 4 * h
    seq = _int(row, "seq_len") or 2048
    notes = row.get("notes", "")
    common: dict[str, Any] = {
        "name": row["model"],
        "hidden": h,
        "layers": _int(row, "layers") or 0,
        "heads": heads,
        "kv_heads": kv,
        "head_dim": h // heads,
        "v_head_dim": h // heads,
        "vocab": _int(row, "vocab") or 0,
        "ffn": ffn,
        "max_seq_len": max(seq, 2048),
    }
    if family in ("megatron",):
        return ModelSpec(
            model_type="gpt2",
            gated_mlp=False,
            linear_bias=True,
            norm="layernorm",
            tied_embeddings=True,
            learned_positions=seq,
            **common,
        )
    if family == "bloom":
        return ModelSpec(
            model_type="bloom",
            gated_mlp=False,
            linear_bias=True,
            norm="layernorm",
            tied_embeddings=True,
            embedding_norm=True,
            **common,
        )
    if family == "mpt":
        return ModelSpec(
            model_type="mpt",
            gated_mlp=False,
            norm="layernorm_nobias",
            tied_embeddings=True,
            **common,
        )
    gated = "gated SwiGLU" in notes
    if gated:
        return ModelSpec(model_type="llama", gated_mlp=True, **common)
    return ModelSpec(
        model_type="gpt_neox",
        gated_mlp=False,
        norm="layernorm",
        tied_embeddings=row["model"].startswith("GPT3"),
        **common,
    )


#: Narayanan et al. 2021 Table 1 run scripts (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh):
#: microbatch size and virtual pipeline depth (layers / (pp x layers per virtual stage)).
_SC21_TABLE_1: dict[str, tuple[int, int]] = {
    "n21_t1_1.7B": (16, 1),
    "n21_t1_3.6B": (16, 1),
    "n21_t1_7.5B": (16, 1),
    "n21_t1_18.4B": (8, 1),
    "n21_t1_39.1B": (4, 1),
    "n21_t1_76.1B": (2, 3),
    "n21_t1_145.6B": (2, 2),
    "n21_t1_310.1B": (1, 2),
    "n21_t1_529.6B": (1, 3),
    "n21_t1_1008.0B": (1, 1),
}


@dataclass(frozen=True, slots=True)
class _Setup:
    metric: str
    measured: float
    job: TrainJob
    constraints: LayoutConstraints
    note: str


def _setup(row: Row, family: str) -> _Setup | str:
    """How to predict one row, or why it cannot be predicted."""
    gpus = _int(row, "num_gpus")
    seq = _int(row, "seq_len")
    batch_tokens = _int(row, "global_batch_tokens")
    if not gpus or not seq or not batch_tokens:
        return "GPU count, sequence length or global batch not published"
    gbs = batch_tokens // seq
    tp, pp, dp, cp, mb = (_int(row, k) for k in ("tp", "pp", "dp", "cp", "microbatch"))
    note = ""
    if family == "megatron":
        vpp = None
        if row["id"] in _SC21_TABLE_1:
            mb, vpp = _SC21_TABLE_1[row["id"]]
            note = "microbatch and interleaving from Megatron-LM examples/sc21/run_table_1.sh"
        if tp is None:
            # Table 2 gives only the model-parallel size; the paper keeps TP inside a node
            mp = gpus // (dp or 1)
            tp, pp = 8, mp // 8
            note = f"t/p split not transcribed: tp=8 (one DGX A100 node), pp={pp} assumed"
        cons = LayoutConstraints(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=1,
            vpp=vpp,
            microbatch=mb,
            recompute="full",
            zero=0,
            sequence_parallel=False,
        )
        # examples/sc21: --fp16 (16-bit main_grad), --DDP-impl torch (PyTorch DDP, reduction
        # overlapped with the backward) for the pp=1 rows, local (after the backward) otherwise
        job = TrainJob(
            gpus=gpus,
            seq_len=seq,
            global_batch_seqs=gbs,
            dtype="fp16",
            recipe="megatron-fp16",
            attention="unfused",
            dp_comm_overlap=pp == 1,
        )
        measured = _num(row, "measured_tflops_per_gpu")
        assert measured is not None
        return _Setup("hw_tflops_per_gpu", measured, job, cons, note)
    if family == "bloom":
        cons = LayoutConstraints(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=1,
            vpp=1,
            microbatch=mb,
            recompute="full",
            zero=1,
            sequence_parallel=False,
        )
        # Megatron-DeepSpeed on DeepSpeed's PipelineEngine: gradients reduced after the
        # pipeline flush, every TP rank sends its whole activation to the next stage
        job = TrainJob(
            gpus=gpus,
            seq_len=seq,
            global_batch_seqs=gbs,
            dtype="bf16",
            attention="unfused",
            dp_comm_overlap=False,
            pp_scatter_gather=False,
        )
        return _Setup(
            "hw_tflops_per_gpu",
            float(row["measured_tflops_per_gpu"]),
            job,
            cons,
            "DeepSpeed pipeline engine: DP reduce after the flush, full-tensor p2p",
        )
    if family == "nemo":
        vp = re.search(r"VP=(\d+)", row.get("notes", ""))
        vpp = int(vp.group(1)) if vp else 1
        # the table lists no recompute: NeMo-Framework-Launcher 24.07 conf/training sets it
        # per model (validate/memory.py NEMO_RECOMPUTE: Nemotron-340B selective, others none)
        cons = LayoutConstraints(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp or 1,
            vpp=vpp,
            microbatch=mb,
            recompute=NEMO_RECOMPUTE.get(row["model"], "none"),
            zero=1,
            sequence_parallel=bool(tp and tp > 1),
        )
        job = TrainJob(
            gpus=gpus,
            seq_len=seq,
            global_batch_seqs=gbs,
            dtype="fp8",
            recipe="nemo-fp8",
            tp_comm_overlap=bool(tp and tp > 1),
            pp_comm_overlap=vpp > 1,
        )
        return _Setup(
            "tflops_per_gpu",
            float(row["measured_tflops_per_gpu"]),
            job,
            cons,
            "recompute none, TP overlap and p2p overlap assumed (NeMo recipes)",
        )
    if family == "mpt":
        rc = "none" if row.get("recompute", "").strip() == "none" else "full"
        cons = LayoutConstraints(
            tp=1, pp=1, dp=gpus, cp=1, microbatch=mb, recompute=rc, zero=3, sequence_parallel=False
        )
        # the README (2023, before FlashAttention-3) says "our models use Flash Attention";
        # its "bf16 PURE" rows reduce gradients in bf16, "amp_bf16" (DEFAULT) rows in fp32
        job = TrainJob(
            gpus=gpus,
            seq_len=seq,
            global_batch_seqs=gbs,
            dtype="bf16",
            attention="flash2",
            recipe="fsdp-pure" if "PURE" in row.get("dtype", "") else "fsdp-mixed",
            fused_loss=True,  # llm-foundry's default loss_fn: fused_crossentropy (flash_attn)
        )
        return _Setup("mfu", float(row["measured_mfu"]), job, cons, "FSDP FULL_SHARD = ZeRO-3")
    return "no published layout for this family of runs"


_SKIP_REASONS = {
    "llama": "whole-run GPU-hours on A100s, but the parallel layout, microbatch and "
    "recompute policy were never published; any assumed layout would be a guess",
    "opt": "'up to 147 TFLOP/s' with an unpublished FSDP+TP split and an unstated FLOP "
    "convention (with or without recompute)",
    "palm": "TPU v4 with XLA 2D sharding (12-way model x 256-way data per pod) and a partial "
    "rematerialisation policy; the GPU layout model does not describe it",
    "gpt3": "V100 count and layout never published",
    "gopher": "TPU v3 run; layout and architecture details not in the shared file",
    "falcon": "GPU-hours only; the 3D layout (and its changes during the run) not published",
    "starcoderbase": "GPU-hours only; layout, microbatch and recompute not published",
}


def _skip_reason(row: Row) -> str | None:
    rid = row["id"]
    for prefix, why in _SKIP_REASONS.items():
        if rid.startswith(prefix):
            return why
    return None


def predict_row(row: Row, compute_fraction: float | None = None) -> tuple[TrainPlan, _Setup] | str:
    """The plan for one published row with its published layout, or why there is none.

    ``compute_fraction`` overrides the calibrated sustained compute fraction (for the
    calibration and hold-out checks in validate/calibration.py)."""
    if (why := _skip_reason(row)) is not None:
        return why
    family = _family(row)
    hw = _hardware(row)
    if hw is None:
        return f"accelerator {row['accelerator']!r} is not modelled"
    setup = _setup(row, family)
    if isinstance(setup, str):
        return setup
    spec = _spec(row, family)
    if compute_fraction is not None:
        setup = replace(setup, job=replace(setup.job, sustained_compute_fraction=compute_fraction))
    # a published layout ran: judge it against the device capacity (--memory-headroom 0), as
    # a user reproducing it would; headroom is the search's margin for untried layouts
    setup = replace(setup, job=replace(setup.job, memory_headroom_gib=0.0))
    plan = plan_training(spec, hw, setup.job, setup.constraints)
    if plan.fits is False:
        return (
            f"the memory model says the published layout does not fit "
            f"({plan.best.memory.total / 2**30:.1f} GiB of "
            f"{(hw.memory_bytes or 0) / 2**30:.1f} GiB); not scored"
        )
    return plan, setup


def _metric(plan: TrainPlan, metric: str) -> float:
    return float(getattr(plan, metric))


def validate_training(rows: list[dict[str, str]] | None = None) -> ValidationReport:
    """Every published training row predicted with its layout; error_pct per row."""
    done: list[ValidationRow] = []
    skipped: list[SkippedRow] = []
    for row in rows if rows is not None else load_training_runs():
        try:
            res = predict_row(row)
        except FlopwiseError as exc:
            skipped.append(SkippedRow(row["id"], f"cannot be planned: {exc}"))
            continue
        if isinstance(res, str):
            skipped.append(SkippedRow(row["id"], res))
            continue
        plan, setup = res
        lay = plan.best.layout
        layout_note = (
            f"tp={lay.tp} pp={lay.pp} dp={lay.dp} cp={lay.cp} vpp={lay.vpp} "
            f"mb={lay.microbatch} {lay.recompute} zero={lay.zero}"
            f"{' sp' if lay.sequence_parallel else ''}"
        )
        note = layout_note + (f"; {setup.note}" if setup.note else "")
        done.append(
            ValidationRow(
                row["id"], setup.metric, setup.measured, _metric(plan, setup.metric), note
            )
        )
    return ValidationReport(rows=tuple(done), skipped=tuple(skipped))
