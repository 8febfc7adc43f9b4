"""Training runs no constant was fitted to: newer published tables, dense and mixture-of-experts.

Each row of catalog/data/published/training_unseen.csv is one published pre-training or
fine-tuning (SFT, LoRA) throughput (tokens/s per GPU) with the layout the source states.
flopwise poses the ``flopwise plan train`` command a user would type for it (catalog model, the
row's framework (``--framework nemo`` unless its ``framework`` cell names another), the
published TP/PP/CP/VP/EP, microbatch and global batch, recompute where stated, ``--dtype`` and
FP8 recipe; LoRA's rank and targets and the packed examples' length where the recipe
fine-tunes) and compares like with like.

Nothing is fitted to these rows and no modelling choice was made with them in view: they were
read after the fitted constant was last changed, so every error here is out of sample. They are
kept out of `validate --only training` (whose rows refit the compute fraction per held-out
family) because they are the check on it: a row whose figure later shapes a modelling choice,
or that is the fit run of a die no training family ran on (plan/sustained.py
FRACTION_FITTED_ON_UNSEEN; refitted here, ``fraction_fits``), is marked ``in_sample`` in the
CSV and kept out of the first figure, as in `validate --only online`.

A row the planner cannot pose (a recipe it does not model, an uneven pipeline, a malformed source
cell) is listed with the reason: the CLI's own one-line error where there is one.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.sustained import (
    FRACTION_FIT_ROWS,
    FRACTION_FITTED_ON_UNSEEN,
    fraction_group,
)
from flopwise.plan.train.interval import INTERVAL_LEVEL
from flopwise.validate.common import SkippedRow, ValidationRow, yes_no_cell
from flopwise.validate.scoring import quantile, summarize
from flopwise.validate.train_arch import arch_config, published_model_id

Row = dict[str, str]

#: Precision cells posed, and the flags they become. FP8-CS: Transformer Engine's per-tensor
#: current scaling; FP8-MX / MXFP8 / "FP8 32x32" (the 25.09 edition's footnote for its
#: parenthesized Blackwell figures): its MXFP8 block scaling. A bare "FP8" (the 25.09 and 26.x
#: editions name no recipe) is posed as current scaling, the recipe the 25.11 edition names for
#: the same models; NVFP4: Transformer Engine's NVFP4BlockScaling (Megatron-Bridge
#: bf16_with_nvfp4_mixed), the planner's nvfp4 recipe since 2026-11-24. DeepSeek-style 128x128
#: block scaling has no recipe in the planner.
PRECISION_FLAGS: dict[str, tuple[str, ...]] = {
    "BF16": ("--dtype", "bf16"),
    "FP8-CS": ("--dtype", "fp8", "--fp8-recipe", "current"),
    "FP8": ("--dtype", "fp8", "--fp8-recipe", "current"),
    "FP8-MX": ("--dtype", "fp8", "--fp8-recipe", "mxfp8"),
    "MXFP8": ("--dtype", "fp8", "--fp8-recipe", "mxfp8"),
    "FP8 32x32": ("--dtype", "fp8", "--fp8-recipe", "mxfp8"),
    "NVFP4": ("--dtype", "fp8", "--fp8-recipe", "nvfp4"),
    # torchao's float8 training recipes by their recipe names (Float8LinearConfig
    # .from_recipe_name), as torchtitan runs them; "tensorwise" with float8 all-gather
    "FP8 tensorwise": ("--dtype", "fp8", "--fp8-recipe", "tensorwise"),
    "FP8 rowwise": ("--dtype", "fp8", "--fp8-recipe", "rowwise"),
    "FP8 rowwise_with_gw_hp": ("--dtype", "fp8", "--fp8-recipe", "rowwise-gw-hp"),
}

#: Frameworks a row may name in its ``framework`` cell (empty: nemo, the Megatron-Bridge tables).
FRAMEWORKS: tuple[str, ...] = ("nemo", "torchtitan", "pytorch-xla", "megatron-core")

#: Frameworks whose whole step, loss included, XLA compiles: the loss is one fused computation
#: (no materialised fp32 copies of the logits), as MaxText's rows are posed (train_rows.py).
XLA_FRAMEWORKS: tuple[str, ...] = ("pytorch-xla",)

#: Fewest MoE rows that size an interval regime of their own.
MIN_MOE_RESIDUALS = 5


def load_unseen_training_runs() -> list[Row]:
    path = resources.files("flopwise.catalog").joinpath("data/published/training_unseen.csv")
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


#: What a row trained: pre-training, supervised (full) fine-tuning, LoRA fine-tuning.
TASKS: tuple[str, ...] = ("pretrain", "sft", "lora")


#: Architecture columns of a row that publishes its model's shape instead of naming a catalog
#: model (the Megatron-LM README's GPT weak-scaling table); its ``model`` cell is then the pub-*
#: config scripts/published_models.py writes from them, with Megatron's GPT defaults (MHA,
#: 4h GELU MLP, tied embeddings, learned positions: validate/train_arch.py arch_config).
ARCH_COLUMNS: tuple[str, ...] = ("layers", "hidden", "heads", "ffn_hidden", "vocab")


def unseen_published_model(r: Row) -> tuple[str, dict[str, Any]] | None:
    """(catalog id, config) of the architecture a row publishes (its ``model`` cell must name
    that id; scripts/published_models.py writes the config), or None for a row that names a
    catalog model instead (or whose shape makes no config)."""
    if not (r.get("layers") or "").strip():
        return None
    arch = {k: r[k] for k in ARCH_COLUMNS}
    arch |= {"model": r["table_model"], "seq_len": r["seq_len"], "notes": r["notes"]}
    cfg = arch_config(arch, "megatron-lm-2021")  # Megatron's GPT defaults
    if isinstance(cfg, str):
        return None
    return published_model_id(arch, cfg)


def row_task(r: Row) -> str:
    """A row's task: LoRA where it names an adapter rank, SFT where its source table is a
    fine-tuning one, else pre-training."""
    if (r.get("lora_rank") or "").strip():
        return "lora"
    return "sft" if "SFT Performance" in r["source"] else "pretrain"


def _cell(r: Row, key: str) -> int | None:
    text = r[key].strip()
    return int(text) if text else None


def pose_argv(r: Row) -> list[str] | str:
    """The `flopwise plan train` arguments for a row, or why it is not posed."""
    if not r["measured_tokens_per_s_per_gpu"].strip() or not r["gbs"].strip():
        return r["notes"] or "throughput or global batch not published"
    if not r["model"].strip():
        return f"no catalog model for {r['table_model']}"
    # the table's note "Muon optimizer was used for pre-training Kimi-K2": Megatron-Core's
    # Muon under its layer-wise distributed optimizer (ZeRO-1, plan/train/muon.py)
    optimizer = ["--optimizer", "muon"] if "Muon optimizer" in r["notes"] else []
    flags = PRECISION_FLAGS.get(r["precision"])
    if flags is None:
        posed = ", ".join(PRECISION_FLAGS)
        return f"precision {r['precision']}: no such recipe in the planner (posed: {posed})"
    gpus, tp, pp, cp = (_cell(r, k) or 1 for k in ("gpus", "tp", "pp", "cp"))
    dp = gpus // (tp * pp * cp)
    if dp * tp * pp * cp != gpus:
        return f"layout inconsistent in the source: TPxPPxCP = {tp * pp * cp} on {gpus} GPUs"
    fsdp = _cell(r, "fsdp") or 0
    if fsdp > 1 and fsdp != gpus // (tp * pp):
        # the page's nomenclature: 'FSDP > 0: use FSDP with sharding group size = #GPUs /
        # (TP x PP)' (an earlier revision: 'FSDP = 1: use FSDP')
        return f"FSDP = {fsdp} is not #GPUs / (TP x PP) = {gpus // (tp * pp)}"
    # Megatron-FSDP's optim_grads_params over the whole data-parallel group (FSDP > 0) is
    # ZeRO-3, not hybrid; otherwise the recipes' distributed optimizer, ZeRO-1
    sharding = ["--zero", "3", "--no-hsdp"] if fsdp else ["--zero", "1"]
    framework = (r.get("framework") or "").strip() or "nemo"
    if framework not in FRAMEWORKS:
        return f"framework {framework}: not posed (posed: {', '.join(FRAMEWORKS)})"
    argv = [
        "-a", r["accelerator"], "--gpus", str(gpus), "--tokens", "1T",
        "--seq-len", r["seq_len"], "--global-batch-seqs", r["gbs"], *flags,
        "--framework", framework, "--tp", str(tp), "--pp", str(pp), "--cp", str(cp),
        "--dp", str(dp),
    ]  # fmt: skip
    if r["mbs"].strip():
        argv += ["--microbatch", r["mbs"]]  # else searched, as every degree a source leaves out
    tp_overlap = yes_no_cell(r, "tp_comm_overlap")
    if tp_overlap is not None:
        # the run's TP communication overlap where the source states it (Megatron-Core
        # --tp-comm-overlap: userbuffers all-gather/reduce-scatter pipelined with the GEMMs)
        argv.append("--tp-comm-overlap" if tp_overlap else "--no-tp-comm-overlap")
    recompute = (r.get("recompute") or "").strip()
    if recompute:
        argv += ["--recompute", recompute]
    tensors = (r.get("remat_tensors") or "").strip()
    if tensors:
        # where the recipe keeps each named tensor (workload/remat.py): torchprime's
        # offload_tensors [decoder_input] is decoder_layer_input=offload, the rest recomputed
        argv += ["--remat-tensors", tensors]
    if framework in XLA_FRAMEWORKS:
        argv += ["--fused-loss"]
    if framework == "torchtitan" and "torch.compile" in r["notes"]:
        # torchtitan compiles the loss and the blocks with --training.compile
        # (components/loss.py), as the June 2025 rows of validate --only training are posed
        # (train_rows.py)
        argv += ["--fused-loss", "--compile"]
    vp = _cell(r, "vp")
    if vp and vp > 1:
        argv += ["--vpp", str(vp)]
    mtp = _cell(r, "mtp_layers")
    if mtp:
        # the multi-token-prediction modules the recipe trains (DeepSeek-V3: mtp_num_layers 1)
        argv += ["--mtp-layers", str(mtp)]
    layout = (r.get("pipeline_layout") or "").strip()
    if layout:
        # the layers per pipeline stage the edition's recipe set or computed (NOTES.md)
        argv += ["--pipeline-layout", layout]
    lora = _cell(r, "lora_rank")
    if lora:
        # a LoRA fine-tuning row: the recipe's adapter rank and target modules (NOTES.md)
        argv += ["--lora-rank", str(lora)]
        targets = (r.get("lora_targets") or "").strip()
        if targets:
            argv += ["--lora-targets", targets]
    doc = _cell(r, "document_len")
    if doc:
        # packed fine-tuning examples: attention inside each (token-weighted mean length)
        argv += ["--document-len", str(doc)]
    ep = _cell(r, "ep")
    if ep and ep > 1:
        argv += ["--ep", str(ep)]
        # the expert dispatcher and all-to-all overlap the edition's recipe set (Megatron-Core
        # flex dispatcher with DeepEP or HybridEP: once per remote node; see NOTES.md)
        dispatcher = (r.get("ep_dispatcher") or "").strip()
        if dispatcher:
            argv += ["--ep-dispatcher", dispatcher]
        overlap = yes_no_cell(r, "ep_comm_overlap")
        if overlap is not None:
            argv.append("--ep-comm-overlap" if overlap else "--no-ep-comm-overlap")
        if tp > 1 and dp % ep:
            # more expert ranks than data-parallel ranks: the experts are folded across the TP
            # ranks too (Megatron-Core parallel folding, expert TP 1), the only way it runs
            argv += ["--etp", "1"]
    # a published layout is judged against device capacity, as a user pinning it would
    # (headroom is the search's margin for unrun layouts)
    return [*argv, *sharding, *optimizer, "--memory-headroom", "0"]


@dataclass(frozen=True, slots=True)
class UnseenTrainingRow:
    """A published tokens/s per GPU against the plan, with the job's class (dense or MoE)."""

    row: ValidationRow
    source: str
    model: str
    accelerator: str
    precision: str
    moe: bool
    in_sample: bool
    command: str
    interval: tuple[float, float] | None  # the plan's 80% range of tokens/s per GPU
    #: the CUDA graphs the run's recipe captured ("none", "te:<scopes>" for Transformer
    #: Engine's per-module graphs, "full-iteration"); "" where no recipe was matched
    cuda_graphs: str = ""
    #: what the run trained (TASKS): pre-training, full fine-tuning or LoRA
    task: str = "pretrain"

    @property
    def error_pct(self) -> float:
        return self.row.error_pct

    @property
    def step_ratio(self) -> float:
        """Measured / predicted step time (tokens/s is per unit time)."""
        return self.row.predicted / self.row.measured

    @property
    def inside_interval(self) -> bool | None:
        if self.interval is None:
            return None
        return self.interval[0] <= self.row.measured <= self.interval[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.row.to_dict(),
            "source": self.source,
            "model": self.model,
            "accelerator": self.accelerator,
            "precision": self.precision,
            "class": "moe" if self.moe else "dense",
            "task": self.task,
            "in_sample": self.in_sample,
            "tokens_per_s_per_gpu_interval": list(self.interval) if self.interval else None,
            "inside_interval": self.inside_interval,
            "command": self.command,
            "cuda_graphs": self.cuda_graphs or None,
        }


def stats(rows: Iterable[UnseenTrainingRow]) -> dict[str, Any]:
    rs = list(rows)
    inside = [r.inside_interval for r in rs if r.inside_interval is not None]
    return {
        **summarize(r.error_pct for r in rs).to_dict(),
        "interval_coverage_pct": 100.0 * sum(inside) / len(inside) if inside else None,
    }


@dataclass(frozen=True, slots=True)
class UnseenTrainingValidation:
    rows: tuple[UnseenTrainingRow, ...]
    skipped: tuple[SkippedRow, ...]
    #: plan/sustained.py FRACTION_FITTED_ON_UNSEEN, refitted and checked (fraction_fits)
    fits: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def out_of_sample(self) -> tuple[UnseenTrainingRow, ...]:
        return tuple(r for r in self.rows if not r.in_sample)

    def step_ratios(self, moe: bool) -> list[float]:
        """Measured / predicted step time of the out-of-sample rows of one class."""
        return [r.step_ratio for r in self.out_of_sample if r.moe == moe]

    def moe_regime(self) -> dict[str, float] | None:
        """The MoE interval regime (plan/train/interval.py): 10th-90th percentile of the MoE
        rows' measured/predicted step, their observed range, and n; None below 5 rows."""
        ratios = self.step_ratios(moe=True)
        if len(ratios) < MIN_MOE_RESIDUALS:
            return None
        tail = (1.0 - INTERVAL_LEVEL) / 2.0
        return {
            "lo": round(quantile(ratios, tail), 4),
            "hi": round(quantile(ratios, 1.0 - tail), 4),
            "n": len(ratios),
            "lo_observed": round(min(ratios), 4),
            "hi_observed": round(max(ratios), 4),
        }

    def moe_coverage_leave_one_out(self) -> float | None:
        """Share of MoE rows inside the 10th-90th percentile of the other MoE rows' step
        ratios: the regime's coverage on rows it was not sized from (there is no second
        source of MoE runs to hold out instead)."""
        ratios = self.step_ratios(moe=True)
        if len(ratios) <= MIN_MOE_RESIDUALS:
            return None
        tail = (1.0 - INTERVAL_LEVEL) / 2.0
        hits = 0
        for i, x in enumerate(ratios):
            rest = ratios[:i] + ratios[i + 1 :]
            hits += quantile(rest, tail) <= x <= quantile(rest, 1.0 - tail)
        return 100.0 * hits / len(ratios)

    @staticmethod
    def _moe_by_graphs(rows: Iterable[UnseenTrainingRow]) -> dict[str, list[UnseenTrainingRow]]:
        groups: dict[str, list[UnseenTrainingRow]] = {}
        for r in rows:
            if r.moe and r.cuda_graphs:
                key = "transformer-engine" if r.cuda_graphs.startswith("te:") else r.cuda_graphs
                groups.setdefault(key, []).append(r)
        return groups

    def to_dict(self) -> dict[str, Any]:
        oos = self.out_of_sample
        by_acc: dict[str, list[UnseenTrainingRow]] = {}
        for r in oos:
            by_acc.setdefault(r.accelerator, []).append(r)
        return {
            "method": "each published run posed as `flopwise plan train` with its stated "
            "layout and framework (--framework nemo for Megatron-Bridge's tables, torchtitan "
            "for torchao's); nothing fitted to the out-of-sample rows and no modelling choice "
            "made with them in view; in-sample rows (a choice made with them in view, or the "
            "fit run of a die's fraction: fraction_fits) kept out of the first figure",
            "metric": "tokens/s per GPU",
            "out_of_sample": stats(oos),
            "by_class": {
                "dense": stats(r for r in oos if not r.moe),
                "moe": stats(r for r in oos if r.moe),
            },
            "by_accelerator": {a: stats(rs) for a, rs in sorted(by_acc.items())},
            "by_task": {t: stats(r for r in oos if r.task == t) for t in TASKS},
            # the MoE rows by the CUDA graphs their recipe captured: the host work the plan
            # has no term for shrinks from none to full-iteration (docs/training-planner.md)
            "moe_by_cuda_graphs": {
                g: stats(rs) for g, rs in sorted(self._moe_by_graphs(oos).items())
            },
            "in_sample": stats(r for r in self.rows if r.in_sample),
            "moe_interval": {
                "regime": self.moe_regime(),
                "coverage_leave_one_out_pct": self.moe_coverage_leave_one_out(),
                "note": "MoE plans take this regime's step-time interval (never narrower than "
                "the dense one); the plans' MoE coverage above is in sample for it, the "
                "leave-one-out figure is not",
            },
            "fraction_fits": self.fits,
            "n": len(self.rows),
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [s.to_dict() for s in self.skipped],
        }


#: Range and step of the refit (plan/sustained.py fits every die on a 0.005 grid).
FRACTION_FIT_RANGE: tuple[float, float] = (0.30, 1.20)
FRACTION_FIT_STEP = 0.005


def _predicted_per_gpu(r: Row, fraction: float) -> float:
    from flopwise.validate.training import plan_command

    argv = pose_argv(r)
    if isinstance(argv, str):
        raise FlopwiseError(f"fit row {r['id']} is not posed: {argv}")
    plan = plan_command(r["model"], argv, compute_fraction=fraction)
    return float(plan.tokens_per_s) / int(r["gpus"])


def refit_fraction(rows: Sequence[Row]) -> float:
    """The sustained fraction (0.005 steps) with the least mean absolute log error over `rows`,
    the rule plan/sustained.py's training fit uses: a 0.05 scan, then 0.005 steps around its
    best."""

    def score(f: float) -> float:
        return sum(
            abs(math.log(_predicted_per_gpu(r, f) / float(r["measured_tokens_per_s_per_gpu"])))
            for r in rows
        )

    lo, hi = FRACTION_FIT_RANGE
    coarse = [round(lo + 0.05 * i, 3) for i in range(round((hi - lo) / 0.05) + 1)]
    best = min(coarse, key=score)
    fine = [
        round(best + FRACTION_FIT_STEP * i, 3)
        for i in range(-10, 11)
        if lo <= best + FRACTION_FIT_STEP * i <= hi
    ]
    return min(fine, key=score)


def fraction_fits(
    runs: Sequence[Row], scored: Sequence[UnseenTrainingRow]
) -> dict[str, dict[str, Any]]:
    """Each FRACTION_FITTED_ON_UNSEEN die: the shipped value, the refit from its fit rows, and
    the error of this section's other rows on the die (its out-of-sample check here; serving
    rows on the die are the other, in `validate --only inference`)."""
    out: dict[str, dict[str, Any]] = {}
    by_id = {r["id"]: r for r in runs}
    for die, shipped in FRACTION_FITTED_ON_UNSEEN.items():
        fit_ids = FRACTION_FIT_ROWS[die]
        others = [
            s for s in scored if fraction_group(s.accelerator) == die and s.row.id not in fit_ids
        ]
        out[die] = {
            "shipped": shipped,
            "refit": refit_fraction([by_id[i] for i in fit_ids]),
            "fit_rows": list(fit_ids),
            "out_of_sample_here": stats(others) | {"rows": [s.row.id for s in others]},
            "out_of_sample_elsewhere": "every serving row on the die (validate --only "
            "inference, by_accelerator), whose GEMMs run at this fraction and which no fit sees",
        }
    return out


def validate_unseen_training() -> UnseenTrainingValidation:
    from flopwise.validate.training import plan_command

    rows: list[UnseenTrainingRow] = []
    skipped: list[SkippedRow] = []
    runs = load_unseen_training_runs()
    for r in runs:
        argv = pose_argv(r)
        if isinstance(argv, str):
            skipped.append(SkippedRow(r["id"], argv))
            continue
        try:
            plan = plan_command(r["model"], argv)
        except FlopwiseError as exc:
            skipped.append(SkippedRow(r["id"], f"the planner refuses it: {exc}"))
            continue
        gpus = int(r["gpus"])
        doc = plan.to_dict()
        iv = doc.get("tokens_per_s_interval")
        rows.append(
            UnseenTrainingRow(
                row=ValidationRow(
                    id=r["id"],
                    metric="tokens_per_s_per_gpu",
                    measured=float(r["measured_tokens_per_s_per_gpu"]),
                    predicted=float(plan.tokens_per_s) / gpus,
                    note=r["notes"],
                ),
                source=r["source"],
                model=r["model"],
                accelerator=r["accelerator"],
                precision=r["precision"],
                moe=bool(plan.model.is_moe),
                in_sample=r["in_sample"].strip().lower() == "yes",
                command=" ".join(("flopwise", "plan", "train", r["model"], *argv)),
                interval=None if iv is None else (float(iv[0]) / gpus, float(iv[1]) / gpus),
                cuda_graphs=(r.get("cuda_graphs") or "").strip(),
                task=row_task(r),
            )
        )
    fits = fraction_fits(runs, rows)
    return UnseenTrainingValidation(rows=tuple(rows), skipped=tuple(skipped), fits=fits)
