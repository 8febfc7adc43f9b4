"""Validate the inference planner against every published serving row, scored out of sample.

Each row of ``published/inference_runs.csv`` is posed as the ``flopwise plan infer`` command a
user would type (``inference_rows.py``); its in-sample prediction is exactly what that command
prints. Out of sample = leave one source family out: every constant fitted on these rows is
refitted without the family's rows. One inference constant is fitted on rows
(``FITTED_CONSTANTS``): ``MMHA_OPS_PER_SM_CLOCK``, the rate of TensorRT-LLM's masked MHA decode
kernel, on the rows that ran it (``--decode-kernel per-head``); those rows' out-of-sample
predictions use the value fitted without their family, every other row's equal its in-sample
one (the engine profiles are hand-set from engine sources). GEMMs run at the power cap's measured
share of the die's ceiling where a sustained-load run measured it (plan/sustained.py
POWER_CAPPED_SHARE, GH100), else at the die's sustained fraction, which is fitted on published
training runs only: neither is ever fitted on these rows. The
one candidate, ``FP8_GEMM_FRACTION``,
is fitted per fold as a diagnostic and reported under ``fitted`` (see its comment in
``plan/infer/constants.py`` for why the fit is not shipped).

The same predictions give the residuals that size prediction intervals (``intervals_fit.py``).
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.constants import FP8_GEMM_FRACTION, MMHA_OPS_PER_SM_CLOCK, get_engine
from flopwise.plan.infer.uncertainty import weight_class
from flopwise.plan.sustained import POWER_CAPPED_SHARE, POWER_CAPPED_SHARE_SOURCE
from flopwise.validate.inference_rows import UNSEEN_FAMILIES, PosedRow, Unposed, posed_rows
from flopwise.validate.scoring import (
    CrossValidation,
    by_group,
    error_pct,
    leave_one_group_out,
    summarize,
)

#: Values of FP8_GEMM_FRACTION the fit chooses from (share of the die's sustained fp8 rate).
FP8_FRACTION_GRID: tuple[float, ...] = tuple(round(0.60 + 0.05 * i, 2) for i in range(11))

#: Constants refitted per fold for the out-of-sample predictions.
FITTED_CONSTANTS: tuple[str, ...] = ("MMHA_OPS_PER_SM_CLOCK",)

#: Values of MMHA_OPS_PER_SM_CLOCK the fit chooses from ((query head x KV element)
#: multiply-adds per SM per clock of TensorRT-LLM's masked MHA decode kernel).
MMHA_GRID: tuple[float, ...] = tuple(float(v) for v in range(8, 31))

#: Table key of the per-head rows' predictions at each MMHA_GRID value (engine mode "known",
#: shipped fp8 fraction): (MMHA_MODE, value).
MMHA_MODE = "known:mmha"

#: Metrics a planned row is compared on, and how to read each from an InferPlan.
METRICS = ("output_tokens_per_s", "ttft_ms", "tpot_ms")


@dataclass(frozen=True, slots=True)
class Target:
    """One published number of one posed row."""

    row: PosedRow
    metric: str
    measured: float
    note: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.row.id, self.metric)


#: predictions[(engine mode, fp8 fraction)][(row id, metric)] -> predicted value
Table = dict[tuple[str, float], dict[tuple[str, str], float]]


#: What build_table returns: the predictions, the published targets, the rows refused.
Built = tuple[Table, list[Target], list[tuple[PosedRow, str]]]


def _plan_row(
    row: PosedRow,
    engine_name: str,
    fraction: float,
    inputs: Callable[[PosedRow], Any],
    mmha: float = MMHA_OPS_PER_SM_CLOCK,
) -> dict[str, float]:
    from flopwise.plan.infer import InferJob, plan_inference

    job = InferJob(
        input_len=row.input_len,
        output_len=row.output_len,
        batch=row.batch,
        tp=row.tp,
        pp=row.pp,
        replicas=max(1, row.gpus // (row.tp * row.pp)),
        ep=row.ep,
        attention_dp=row.attention_dp,
        weight_dtype=row.weight_dtype,
        kv_dtype=row.kv_dtype,
        engine=engine_name,
        num_requests=row.num_requests,
        memory_fraction=row.memory_fraction,
        engine_max_batch=row.engine_max_batch,
        engine_max_tokens=row.engine_max_tokens,
        allow_long_context=row.allow_long_context,
        fp8_context_attention=row.fp8_context_attention,
        decode_kernel=row.decode_kernel,
        cuda_graph_batch_sizes=row.cuda_graph_batch_sizes,
    )
    engine = replace(
        get_engine(engine_name), fp8_gemm_fraction=fraction, mmha_ops_per_sm_clock=mmha
    )
    spec, hw = inputs(row)
    plan = plan_inference(spec, hw, job, engine=engine)
    out = {
        "output_tokens_per_s": plan.output_tokens_per_s,
        "ttft_ms": plan.ttft_s * 1e3,
        "tpot_ms": plan.tpot_s * 1e3,
    }
    if plan.fits is False:
        out["does_not_fit"] = 1.0
    return out


def _inputs() -> Callable[[PosedRow], Any]:
    """(ModelSpec, Hardware) of a row, each loaded once per table: both are frozen, so every
    plan of one table shares them (and the per-hardware GEMM memos of plan.gemm)."""
    from flopwise.hardware import hardware_from_catalog
    from flopwise.workload.hf import load_model

    models: dict[str, Any] = {}
    machines: dict[tuple[str, str | None], Any] = {}

    def inputs(row: PosedRow) -> Any:
        if row.model not in models:
            models[row.model] = load_model(row.model)
        key = (row.accelerator, row.system)
        if key not in machines:
            machines[key] = hardware_from_catalog(row.accelerator, row.system)
        return models[row.model], machines[key]

    return inputs


def scored_grid_modes(engines: Sequence[str]) -> tuple[str, ...]:
    """The engine modes whose scores read the fp8 grid: all of them while FP8_GEMM_FRACTION is
    fitted (``score`` refits it per fold), none otherwise (only the diagnostic reads it)."""
    return tuple(engines) if "FP8_GEMM_FRACTION" in FITTED_CONSTANTS else ()


def _uses_fp8(row: PosedRow) -> bool:
    """Rows whose predictions read the fp8 fraction grid: fp8 rows of the families a fit may
    see. Unseen families (UNSEEN_FAMILIES) never enter a fit, the diagnostic included: they
    are planned and scored at the shipped value only."""
    return row.weight_dtype == "fp8" and row.family not in UNSEEN_FAMILIES


#: Rows that forked workers plan (set before the pool forks, read by index in the workers).
_FORKED_ROWS: Sequence[PosedRow] = ()
#: Each worker's own model/hardware cache (``_inputs``), made on its first row.
_WORKER_INPUTS: list[Callable[[PosedRow], Any]] = []

#: A planned row: its refusal (or None), whether the planner said it does not fit, and its
#: predictions as ((engine mode, fp8 fraction), metric, value).
Planned = tuple[str | None, bool, list[tuple[tuple[str, float], str, float]]]


def _plan_cells(
    row: PosedRow,
    engines: Sequence[str],
    grid_modes: Sequence[str],
    inputs: Callable[[PosedRow], Any],
) -> Planned:
    try:
        base = _plan_row(row, row.engine, FP8_GEMM_FRACTION, inputs)
    except FlopwiseError as exc:
        return f"planner refused: {exc}", False, []
    cells: list[tuple[tuple[str, float], str, float]] = []
    for mode in engines:
        name = row.engine if mode == "known" else "generic"
        grid = FP8_FRACTION_GRID if _uses_fp8(row) and mode in grid_modes else ()
        for g in sorted(set(grid) | {FP8_GEMM_FRACTION}):
            try:
                pred = (
                    base
                    if (g, mode) == (FP8_GEMM_FRACTION, "known")
                    else _plan_row(row, name, g, inputs)
                )
            except FlopwiseError:  # e.g. the generic engine keeps more memory back
                continue
            cells.extend(((mode, g), metric, pred[metric]) for metric in row.measured)
    if row.decode_kernel == "per-head" and "known" in engines:
        for c in MMHA_GRID:
            try:
                pred = (
                    base
                    if c == MMHA_OPS_PER_SM_CLOCK
                    else _plan_row(row, row.engine, FP8_GEMM_FRACTION, inputs, mmha=c)
                )
            except FlopwiseError:
                continue
            cells.extend(((MMHA_MODE, c), metric, pred[metric]) for metric in row.measured)
    return None, bool(base.get("does_not_fit")), cells


def _plan_forked(index: int, engines: Sequence[str], grid_modes: Sequence[str]) -> Planned:
    if not _WORKER_INPUTS:
        _WORKER_INPUTS.append(_inputs())
    return _plan_cells(_FORKED_ROWS[index], engines, grid_modes, _WORKER_INPUTS[0])


def validation_workers() -> int:
    """Processes the validation plans rows in: FLOPWISE_WORKERS, else one per CPU core."""
    env = os.environ.get("FLOPWISE_WORKERS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env)
    return os.cpu_count() or 1


def _plan_all(
    rows: Sequence[PosedRow], engines: Sequence[str], grid_modes: Sequence[str]
) -> list[Planned]:
    """Every row planned, in order: in forked worker processes when there are several cores
    (rows are independent; the planner is pure), else in this process."""
    global _FORKED_ROWS
    workers = min(validation_workers(), max(1, len(rows) // 25))
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _FORKED_ROWS = rows
        try:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                args = [(i, tuple(engines), tuple(grid_modes)) for i in range(len(rows))]
                return pool.starmap(_plan_forked, args, chunksize=8)
        finally:
            _FORKED_ROWS = ()
    inputs = _inputs()
    return [_plan_cells(row, engines, grid_modes, inputs) for row in rows]


def build_table(
    rows: Sequence[PosedRow],
    engines: Sequence[str] = ("known",),
    grid_modes: Sequence[str] | None = None,
) -> Built:
    """Predict every row at every grid value it depends on; targets and refusals.

    fp8 rows are planned at every FP8_FRACTION_GRID value in the modes of `grid_modes` (default:
    "known", for the fit diagnostic, and every mode while FP8_GEMM_FRACTION is fitted); in the
    other modes only at the shipped value, the only one their scores read (``score``).
    """
    if grid_modes is None:
        grid_modes = scored_grid_modes(engines) or ("known",)
    table: Table = {}
    targets: list[Target] = []
    refused: list[tuple[PosedRow, str]] = []
    for row, (refusal, misfit, cells) in zip(
        rows, _plan_all(rows, engines, grid_modes), strict=True
    ):
        if refusal is not None:
            refused.append((row, refusal))
            continue
        note = row.note
        if misfit:
            note = (note + "; " if note else "") + "planner says this batch does not fit"
        for metric, value in row.measured.items():
            targets.append(Target(row, metric, value, note))
        for key, metric, value in cells:
            table.setdefault(key, {})[(row.id, metric)] = value
    return table, targets, refused


def predict(table: Table, target: Target, fraction: float, mode: str = "known") -> float:
    """The prediction of `target` with fp8 fraction `fraction` (rows without fp8 ignore it)."""
    g = fraction if _uses_fp8(target.row) else FP8_GEMM_FRACTION
    return table[(mode, g)][target.key]


def fit_fp8_fraction(table: Table, targets: Sequence[Target], mode: str = "known") -> float:
    """Grid value minimising the mean |log(predicted/measured)| of the fp8 targets given.

    With no fp8 row to fit on, the shipped value stays (nothing to learn from).
    """
    fp8 = [t for t in targets if _uses_fp8(t.row)]
    if not fp8:
        return FP8_GEMM_FRACTION

    def loss(g: float) -> float:
        return sum(abs(math.log(predict(table, t, g, mode) / t.measured)) for t in fp8) / len(fp8)

    return min(FP8_FRACTION_GRID, key=lambda g: (loss(g), abs(g - FP8_GEMM_FRACTION)))


def _per_head(t: Target) -> bool:
    """Targets whose rows decode with masked MHA: they read MMHA_OPS_PER_SM_CLOCK."""
    return t.row.decode_kernel == "per-head"


def _mmha_fits_on(t: Target) -> bool:
    """Per-head targets the decode kernel moves (throughput, TPOT): the fit's rows. A first-token
    latency of these rows is predicted with the fold's value too, but is not fitted on."""
    return _per_head(t) and t.metric != "ttft_ms"


def _mmha_loss(table: Table, rows: Sequence[Target], c: float) -> float:
    cells = table.get((MMHA_MODE, c), {})
    if any(t.key not in cells for t in rows):
        return math.inf  # a grid value some row could not be planned at
    return sum(abs(math.log(cells[t.key] / t.measured)) for t in rows) / len(rows)


def fit_mmha(table: Table, targets: Sequence[Target]) -> float:
    """MMHA_GRID value minimising the mean |log(predicted/measured)| of the per-head
    throughput and TPOT targets given; with none to fit on, the shipped value stays."""
    rows = [t for t in targets if _mmha_fits_on(t)]
    if not rows:
        return MMHA_OPS_PER_SM_CLOCK
    return min(
        MMHA_GRID, key=lambda c: (_mmha_loss(table, rows, c), abs(c - MMHA_OPS_PER_SM_CLOCK))
    )


@dataclass(frozen=True, slots=True)
class ScoredRow:
    target: Target
    predicted: float
    predicted_oos: float

    @property
    def error_pct(self) -> float:
        return error_pct(self.target.measured, self.predicted)

    @property
    def error_oos_pct(self) -> float:
        return error_pct(self.target.measured, self.predicted_oos)

    def to_dict(self) -> dict[str, Any]:
        r = self.target.row
        return {
            "id": r.id,
            "family": r.family,
            "accelerator": r.accelerator,
            "model": r.model,
            "metric": self.target.metric,
            "measured": self.target.measured,
            "predicted": self.predicted,
            "predicted_out_of_sample": self.predicted_oos,
            "error_pct": self.error_pct,
            "error_out_of_sample_pct": self.error_oos_pct,
            "command": r.command,
            "note": self.target.note,
        }


@dataclass(frozen=True, slots=True)
class InferenceValidation:
    rows: tuple[ScoredRow, ...]
    skipped: tuple[tuple[str, str], ...]
    fitted: dict[str, Any]
    interval_coverage_pct: float | None
    posed: int

    def _groups(
        self,
        key: Callable[[ScoredRow], str],
        name: str,
        rows: Sequence[ScoredRow] | None = None,
    ) -> list[dict[str, Any]]:
        scored = self.rows if rows is None else rows
        oos = by_group(scored, key, lambda s: s.error_oos_pct)
        ins = {g.group: g.summary for g in by_group(scored, key, lambda s: s.error_pct)}
        return [{**g.to_dict(name), "in_sample": ins[g.group].to_dict()} for g in oos]

    def _by_static_batch(self) -> list[dict[str, Any]]:
        """Rows that ran one static batch to the end, grouped by the batch's band."""
        static = [s for s in self.rows if static_batch_band(s.target.row) is not None]
        groups = self._groups(
            lambda s: static_batch_band(s.target.row) or "", "static_batch", static
        )
        order = [name for _, name in STATIC_BATCH_BANDS]
        return sorted(
            groups,
            key=lambda g: (
                order.index(g["static_batch"]) if g["static_batch"] in order else len(order)
            ),
        )

    def _unseen(self) -> dict[str, Any]:
        """Rows of the families added after the planner's modelling choices (UNSEEN_FAMILIES):
        the serving model's error on jobs it has never seen; rows a later choice was made with
        in view are summarised apart."""
        fresh = [s for s in self.rows if s.target.row.family in UNSEEN_FAMILIES]
        unseen = [s for s in fresh if not s.target.row.in_view]
        seen = [s for s in fresh if s.target.row.in_view]
        return {
            "families": dict(UNSEEN_FAMILIES),
            "summary": summarize(s.error_oos_pct for s in unseen).to_dict(),
            "in_view": summarize(s.error_oos_pct for s in seen).to_dict(),
            "by_accelerator": [
                g.to_dict("accelerator")
                for g in by_group(
                    unseen, lambda s: s.target.row.accelerator, lambda s: s.error_oos_pct
                )
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        oos = summarize(s.error_oos_pct for s in self.rows)
        ins = summarize(s.error_pct for s in self.rows)
        return {
            "n": oos.n,
            "mape_pct": oos.mape_pct,
            "max_abs_error_pct": oos.max_abs_error_pct,
            "out_of_sample": oos.to_dict(),
            "in_sample": ins.to_dict(),
            "cross_validation": "leave one source family out; constants fitted on rows: "
            + (", ".join(FITTED_CONSTANTS) or "none (out of sample = in sample)"),
            "by_family": self._groups(lambda s: s.target.row.family, "family"),
            "by_accelerator": self._groups(lambda s: s.target.row.accelerator, "accelerator"),
            "by_metric": self._groups(lambda s: s.target.metric, "metric"),
            "by_regime": self._groups(lambda s: serving_regime(s.target.row), "regime"),
            "by_static_batch": self._by_static_batch(),
            "unseen": self._unseen(),
            "interval_coverage_pct": self.interval_coverage_pct,
            "fitted": self.fitted,
            "measured": measured_constants(),
            "posed_rows": self.posed,
            "rows": [s.to_dict() for s in self.rows],
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
        }


def measured_constants() -> dict[str, Any]:
    """The serving model's measured (not fitted) kernel shares, with where each was measured:
    ``inference.measured`` in JSON."""
    return {
        "POWER_CAPPED_SHARE": {
            die: {**shares, "source": POWER_CAPPED_SHARE_SOURCE[die]}
            for die, shares in POWER_CAPPED_SHARE.items()
        }
    }


def serving_regime(row: PosedRow) -> str:
    """Weight precision and replica size of a row: "16-bit, 1 GPU", "fp8, multi-GPU", ...

    The published rows' bias differs by these two more than by model or engine version (16-bit
    TensorRT-LLM replicas of several GPUs run slower than planned, docs/inference-validation.md),
    so validate reports them apart.
    """
    return f"{weight_class(row.weight_dtype)}, {'1 GPU' if row.gpus == 1 else 'multi-GPU'}"


#: Upper ends of the batch bands ``by_static_batch`` reports. A static batch (one batch of
#: prompts run to the end: AMD's vLLM latency tables, TensorRT-LLM 0.9's static-batching
#: tables) shows how the error moves with the number of sequences in a step; on AMD's tables the
#: plan runs slow at batch 1 and fast at 128 (docs/inference-validation.md), so validate reports
#: those rows by band.
STATIC_BATCH_BANDS: tuple[tuple[int, str], ...] = ((4, "1-4"), (32, "5-32"), (128, "33-128"))


def static_batch_band(row: PosedRow) -> str | None:
    """The band of a row's static batch ("1-4", "5-32", "33-128", ">128"); None for rows that
    are not one static batch (an offline run of --num-requests, or --batch max)."""
    if row.num_requests is not None or row.batch is None:
        return None
    for top, name in STATIC_BATCH_BANDS:
        if row.batch <= top:
            return name
    return f">{STATIC_BATCH_BANDS[-1][0]}"


def _family(t: Target) -> str:
    return t.row.family


def score(
    table: Table,
    targets: Sequence[Target],
    mode: str = "known",
    group: Callable[..., str] = _family,
    diagnostic: bool = False,
) -> tuple[list[float], list[float], dict[str, Any]]:
    """(in-sample, out-of-sample predictions in target order, fitted value per held-out group).

    `diagnostic` refits FP8_GEMM_FRACTION per fold even though it is not shipped as fitted.
    Rows decoding with masked MHA take their MMHA_OPS_PER_SM_CLOCK fold's prediction either
    way, at the shipped fp8 fraction (the only one their MMHA grid is planned at).
    """

    def fit(train: Sequence[Target]) -> float:
        if "FP8_GEMM_FRACTION" in FITTED_CONSTANTS or diagnostic:
            return fit_fp8_fraction(table, train, mode)
        return FP8_GEMM_FRACTION

    cv = leave_one_group_out(targets, group, fit, lambda t, g: predict(table, t, g, mode))
    ins = [predict(table, t, FP8_GEMM_FRACTION, mode) for t in targets]
    oos = list(cv.predictions)
    if mode == "known" and "MMHA_OPS_PER_SM_CLOCK" in FITTED_CONSTANTS:
        mcv = mmha_cross_validation(table, targets, group)
        oos = [
            m if _per_head(t) else o for t, o, m in zip(targets, oos, mcv.predictions, strict=True)
        ]
    return ins, oos, cv.params_by_group


def mmha_cross_validation(
    table: Table, targets: Sequence[Target], group: Callable[..., str] = _family
) -> CrossValidation:
    """Per-head targets predicted with MMHA_OPS_PER_SM_CLOCK refitted without their group
    (nan for the other targets); params_by_group: each fold's value."""

    def predict_fold(t: Target, c: float) -> float:
        if not _per_head(t):
            return math.nan
        return table[(MMHA_MODE, c)][t.key]

    return leave_one_group_out(targets, group, lambda train: fit_mmha(table, train), predict_fold)


def validate_inference(with_intervals: bool = True) -> InferenceValidation:
    """Pose, plan and score every published inference row (see the module docstring)."""
    posed, unposed = posed_rows()
    return score_inference(posed, unposed, build_table(posed), with_intervals)


def score_inference(
    posed: Sequence[PosedRow],
    unposed: Sequence[Unposed],
    built: Built,
    with_intervals: bool = True,
) -> InferenceValidation:
    """Score the predictions `built` (build_table of `posed`, engine mode "known" at least)."""
    table, targets, refused = built
    ins, oos, _ = score(table, targets)
    _, diag_oos, folds = score(table, targets, diagnostic=True)
    rows = tuple(ScoredRow(t, p, q) for t, p, q in zip(targets, ins, oos, strict=True))
    skipped = tuple((u.id, u.reason) for u in unposed) + tuple((r.id, why) for r, why in refused)
    coverage = None
    if with_intervals:
        from flopwise.validate.intervals_fit import coverage_pct

        coverage = coverage_pct(rows)
    diag = summarize(
        error_pct(t.measured, p) for t, p in zip(targets, diag_oos, strict=True)
    ).to_dict()
    per_head = [i for i, t in enumerate(targets) if _mmha_fits_on(t)]
    mcv = mmha_cross_validation(table, targets)
    # the same fit held out by accelerator: whether one rate per SM and clock holds across dies
    acv = mmha_cross_validation(table, targets, lambda t: t.row.accelerator)
    fit_accelerators = {targets[i].row.accelerator for i in per_head}
    fitted = {
        "MMHA_OPS_PER_SM_CLOCK": {
            "shipped": MMHA_OPS_PER_SM_CLOCK,
            "fitted": "MMHA_OPS_PER_SM_CLOCK" in FITTED_CONSTANTS,
            "unit": "(query head x KV element) multiply-adds per SM per clock",
            "fit_on_all_rows": fit_mmha(table, targets),
            "fit_without_family": dict(mcv.params_by_group),
            "fit_rows": [targets[i].row.id + ":" + targets[i].metric for i in per_head],
            "in_sample": summarize(
                error_pct(targets[i].measured, ins[i]) for i in per_head
            ).to_dict(),
            "out_of_sample": summarize(
                error_pct(targets[i].measured, oos[i]) for i in per_head
            ).to_dict(),
            "leave_one_accelerator_out": {
                "fit_without_accelerator": {
                    k: v for k, v in acv.params_by_group.items() if k in fit_accelerators
                },
                "out_of_sample": summarize(
                    error_pct(targets[i].measured, acv.predictions[i]) for i in per_head
                ).to_dict(),
            },
            "grid": list(MMHA_GRID),
            "objective": "mean |log(predicted/measured)| over the throughput and TPOT targets "
            "of the rows decoding with masked MHA",
        },
        "FP8_GEMM_FRACTION": {
            "shipped": FP8_GEMM_FRACTION,
            "fitted": "FP8_GEMM_FRACTION" in FITTED_CONSTANTS,
            "diagnostic_out_of_sample_if_fitted": diag,
            "fit_on_all_rows": fit_fp8_fraction(table, targets),
            "fit_without_family": folds,
            "grid": list(FP8_FRACTION_GRID),
            "objective": "mean |log(predicted/measured)| over fp8 rows",
        },
    }
    return InferenceValidation(rows, skipped, fitted, coverage, len(posed))


def skipped_reasons(unposed: Sequence[Unposed]) -> Mapping[str, str]:
    return {u.id: u.reason for u in unposed}
