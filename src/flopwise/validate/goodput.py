"""Goodput validation: failures, checkpoints and GPU-hours of published large runs.

Each row of catalog/data/published/goodput_runs.csv states one published figure (a point, or a
range/bound in ``published_low``/``published_high``) and the job it belongs to; flopwise plans
the job with the published layout where one is given and the default goodput inputs (the
storage tier where the source names one), and compares like with like. Nothing is fitted to
these rows; rows whose figure shares a source with a default constant are marked in-sample
(``in_sample``) and kept out of the out-of-sample error.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.validate.common import yes_no_cell

Row = dict[str, str]


def load_goodput_runs() -> list[Row]:
    path = resources.files("flopwise.catalog").joinpath("data/published/goodput_runs.csv")
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _text(row: Row, key: str) -> str:
    """A column's text, stripped; empty when the column is missing or blank."""
    return (row.get(key) or "").strip()


def _num(row: Row, key: str) -> float | None:
    v = _text(row, key)
    return float(v) if v else None


def _int(row: Row, key: str) -> int | None:
    v = _num(row, key)
    return None if v is None else int(v)


@dataclass(frozen=True, slots=True)
class GoodputRow:
    """A published figure (point, or range [low, high] with either end open) vs flopwise."""

    id: str
    metric: str
    predicted: float
    published: float | None = None
    low: float | None = None
    high: float | None = None
    in_sample: bool = False
    note: str = ""

    @property
    def error_pct(self) -> float | None:
        """Point rows: (predicted - published) / published; range rows: distance outside the
        range relative to the bound crossed (0 inside)."""
        if self.published is not None:
            return 100.0 * (self.predicted - self.published) / self.published
        if self.low is not None and self.predicted < self.low:
            return 100.0 * (self.predicted - self.low) / self.low
        if self.high is not None and self.predicted > self.high:
            return 100.0 * (self.predicted - self.high) / self.high
        return 0.0

    @property
    def within(self) -> bool | None:
        if self.published is not None:
            return None
        return self.error_pct == 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "metric": self.metric,
            "measured": self.published,
            "published_low": self.low,
            "published_high": self.high,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
            "within_range": self.within,
            "in_sample": self.in_sample,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class GoodputValidation:
    rows: tuple[GoodputRow, ...]
    skipped: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return len(self.rows)

    def _mape(self, rows: list[GoodputRow]) -> float | None:
        errs = [abs(e) for r in rows if (e := r.error_pct) is not None]
        return sum(errs) / len(errs) if errs else None

    def to_dict(self) -> dict[str, Any]:
        out_rows = [r for r in self.rows if not r.in_sample]
        ranged = [r for r in self.rows if r.within is not None]
        errs = [abs(e) for r in self.rows if (e := r.error_pct) is not None]
        return {
            "n": self.n,
            "n_in_sample": self.n - len(out_rows),
            "mape_pct": self._mape(list(self.rows)),
            "mape_out_of_sample_pct": self._mape(out_rows),
            "max_abs_error_pct": max(errs) if errs else None,
            "ranges_met": sum(1 for r in ranged if r.within),
            "ranges": len(ranged),
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
        }


def _inputs(row: Row) -> Any:
    from flopwise.catalog.goodput import failure_causes, get_storage_tier
    from flopwise.plan.goodput import GoodputInputs, Storage

    profile = _text(row, "failure_profile")
    causes = failure_causes(profile) if profile else ()
    tier_id = _text(row, "storage")
    if not tier_id:
        return GoodputInputs(causes=causes)
    t = get_storage_tier(tier_id)
    return GoodputInputs(
        causes=causes,
        storage=Storage(
            origin=f"storage tier {t.id} ({t.source})",
            write_gbps_per_node=t.write_gbps_per_node,
            read_gbps_per_node=t.read_gbps_per_node,
            aggregate_write_gbps=t.aggregate_write_gbps,
            aggregate_read_gbps=t.aggregate_read_gbps,
        ),
    )


def _plan_doc(row: Row) -> dict[str, Any]:
    """The job planned with its published layout (degrees left empty are searched)."""
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.train import LayoutConstraints, TrainJob, assume_inter_node_bw, plan_training
    from flopwise.workload import load_model

    model = load_model(row["model"])
    hw = hardware_from_catalog(row["accelerator"])
    if (bw := _num(row, "inter_node_gbps")) is not None:
        hw = assume_inter_node_bw(hw, bw)
    gpus = _int(row, "num_gpus")
    seq, gbs = _int(row, "seq_len"), _int(row, "global_batch_seqs")
    if gpus is None or seq is None or gbs is None:
        raise FlopwiseError("GPUs, sequence length or global batch not published")
    job = TrainJob(
        gpus=gpus,
        seq_len=seq,
        global_batch_seqs=gbs,
        tokens=_num(row, "tokens"),
        recipe=_text(row, "recipe") or None,
        gpus_per_node=_int(row, "gpus_per_node"),
        # the precision, overlap and dispatch the source states (left empty: the defaults)
        dtype=_text(row, "dtype") or "bf16",
        pp_comm_overlap=yes_no_cell(row, "pp_comm_overlap"),
        ep_comm_overlap=yes_no_cell(row, "ep_comm_overlap"),
        ep_dispatcher=_text(row, "ep_dispatcher") or "alltoall",
    )
    cons = LayoutConstraints(
        tp=_int(row, "tp"),
        pp=_int(row, "pp"),
        dp=_int(row, "dp"),
        cp=_int(row, "cp"),
        ep=_int(row, "ep"),
    )
    plan = plan_training(model, hw, job, cons)
    if plan.fits is False:
        raise FlopwiseError("the published layout does not fit in flopwise's memory model")
    return plan.to_dict()


def _failure_only(row: Row) -> dict[str, Any]:
    """Failure metrics need only the job size: a stand-in plan document."""
    gpus = _int(row, "num_gpus")
    if gpus is None:
        raise FlopwiseError("GPU count not published")
    return {"gpus": gpus, "gpus_per_node": _int(row, "gpus_per_node") or 1}


def _predict(row: Row) -> tuple[float, str]:
    from flopwise.plan.goodput import goodput_from_plan_dict, unexpected_per_day

    metric = row["metric"]
    if metric in ("interruptions_per_day", "unexpected_interruptions_over_days"):
        d = _failure_only(row)
        total, unexpected = unexpected_per_day(d["gpus"], d["gpus_per_node"], _inputs(row))
        if metric == "interruptions_per_day":
            return total, f"{unexpected:.2f} of them unexpected"
        days = _num(row, "days")
        if days is None:
            raise FlopwiseError("observation period not published")
        return unexpected * days, f"{unexpected:.3f} unexpected per day x {days:g} days"
    if metric == "checkpoint_bytes" and not row.get("tp"):
        raise FlopwiseError("layout not published")
    doc = _plan_doc(row)
    g = goodput_from_plan_dict(doc, _inputs(row))
    ideal = (
        f"ideal {doc['gpu_hours']:,.0f} GPU-h at MFU {doc['mfu']:.1%}, goodput "
        f"{g.goodput_fraction:.1%}"
        if doc.get("gpu_hours") and g.goodput_fraction
        else ""
    )
    values = {
        "goodput_fraction": g.goodput_fraction,
        "effective_gpu_hours": g.effective_gpu_hours,
        "checkpoint_bytes": g.checkpoint_bytes,
        "checkpoint_bytes_per_gpu_mean": g.checkpoint_bytes / int(doc["gpus"]),
    }
    if metric not in values:
        raise FlopwiseError(f"metric {metric!r} is not modelled")
    value = values[metric]
    if value is None:
        raise FlopwiseError(f"{metric} unknown for this plan")
    return float(value), ideal


def validate_goodput() -> GoodputValidation:
    rows: list[GoodputRow] = []
    skipped: list[tuple[str, str]] = []
    for r in load_goodput_runs():
        if not r.get("model"):
            skipped.append((r["id"], "hardware and storage of the published run not stated"))
            continue
        try:
            predicted, how = _predict(r)
        except FlopwiseError as exc:
            skipped.append((r["id"], str(exc)))
            continue
        rows.append(
            GoodputRow(
                id=r["id"],
                metric=r["metric"],
                predicted=predicted,
                published=_num(r, "published"),
                low=_num(r, "published_low"),
                high=_num(r, "published_high"),
                in_sample=_text(r, "in_sample").lower() == "yes",
                note=how,
            )
        )
    return GoodputValidation(tuple(rows), tuple(skipped))
