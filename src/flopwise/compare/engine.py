"""Run one job on every candidate: instances, time, cost, network verdict, Pareto front."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flopwise.compare import planners
from flopwise.compare.candidates import Candidate
from flopwise.compare.jobs import CompareInferJob, CompareTrainJob
from flopwise.compare.network import network_check
from flopwise.compare.overlap import within_error_of_first
from flopwise.compare.rows import (
    TRAIN_INTERVALS,
    CompareRow,
    _interval,
    is_slice,
    layout_summary,
    price_date,
    scaled_interval,
    slice_chips,
)
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.workload.spec import ModelSpec

SORTS: tuple[str, ...] = ("cost", "time")


@dataclass(frozen=True, slots=True)
class CompareResult:
    """Rows (sorted, Pareto-marked), the candidates that cannot run the job and why."""

    kind: str  # "train" | "infer"
    model: dict[str, Any]
    job: dict[str, Any]
    sort: str
    time_metric: str
    cost_metric: str
    rows: tuple[CompareRow, ...]
    excluded: tuple[dict[str, Any], ...]
    chosen: dict[str, Any] | None  # the top row's full plan and hardware, for the report
    # ranks (1-based) of rows whose 80% interval on the ranking metric overlaps the first's
    within_error_of_first: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "job": self.job,
            "sort": self.sort,
            "time_metric": self.time_metric,
            "cost_metric": self.cost_metric,
            "rows": [r.to_dict() for r in self.rows],
            "excluded": [dict(e) for e in self.excluded],
            "chosen": self.chosen,
            "ranking_metric": self.cost_metric if self.sort == "cost" else self.time_metric,
            "within_error_of_first": list(self.within_error_of_first),
        }


HardwareFor = Callable[[Candidate], Hardware]


def catalog_hardware(c: Candidate) -> Hardware:
    from flopwise.hardware import hardware_for

    return hardware_for(c.accelerator, c.system_id)


def measured_hardware(db: str | None = None) -> HardwareFor:
    """Catalog hardware overridden by the results store's latest complete runs for each
    accelerator that has any; accelerators never measured keep their own catalog values."""
    from flopwise.hardware import hardware_for
    from flopwise.results.measured import apply_measurements

    def build(c: Candidate) -> Hardware:
        hw = hardware_for(c.accelerator, c.system_id)
        try:
            return apply_measurements(hw, "latest", db)
        except FlopwiseError:
            return hw  # nothing stored for this accelerator

    return build


class _Memo:
    """Offers of the same accelerator, node type and network get the same plan: plan it once
    (a layout search per offer would repeat identical work dozens of times)."""

    def __init__(self) -> None:
        self._done: dict[tuple[Any, ...], dict[str, Any] | FlopwiseError] = {}

    def __call__(
        self,
        planner: Callable[[ModelSpec, Hardware, int, Any], dict[str, Any]],
        model: ModelSpec,
        hw: Hardware,
        gpus: int,
        job: Any,
        variant: Any = None,
    ) -> dict[str, Any]:
        k = (hw.id, hw.system_id, hw.inter_bw_per_gpu_gbps, gpus, variant)
        if k not in self._done:
            try:
                self._done[k] = planner(model, hw, gpus, job)
            except FlopwiseError as exc:
                self._done[k] = exc
        done = self._done[k]
        if isinstance(done, FlopwiseError):
            raise done
        return done


def _check_catalogs() -> None:
    """Read the catalogs first: a broken file (e.g. the user's overlay) is the error, not a
    reason to exclude every offer one by one and exit 0."""
    from flopwise.catalog import load_accelerators, load_systems

    load_accelerators()
    load_systems()


def _excluded(c: Candidate, reason: str) -> dict[str, Any]:
    return {**c.to_dict(), "reason": reason}


def mark_pareto(rows: Sequence[dict[str, Any]], time_key: str, cost_key: str) -> None:
    """Set row['pareto']: True when no other row is both no slower and no dearer, and better in
    one; rows without a time or a cost are never on the front."""
    known = [r for r in rows if r.get(time_key) is not None and r.get(cost_key) is not None]
    for r in rows:
        r["pareto"] = False
    for r in known:
        t, c = r[time_key], r[cost_key]
        r["pareto"] = not any(
            o[time_key] <= t and o[cost_key] <= c and (o[time_key] < t or o[cost_key] < c)
            for o in known
        )


def sort_rows(rows: list[dict[str, Any]], sort: str, time_key: str, cost_key: str) -> None:
    if sort not in SORTS:
        raise FlopwiseError(f"--sort must be one of {', '.join(SORTS)}, got {sort!r}")
    inf = math.inf
    first, second = (cost_key, time_key) if sort == "cost" else (time_key, cost_key)
    rows.sort(
        key=lambda r: (
            inf if r.get(first) is None else r[first],
            inf if r.get(second) is None else r[second],
            r["provider"],
            r["instance"],
        )
    )


def _model_summary(model: ModelSpec) -> dict[str, Any]:
    from flopwise.workload.params import count_params

    c = count_params(model)
    return {"name": model.name, "params": c.total, "active_params": c.active}


def _price_fields(c: Candidate) -> dict[str, Any]:
    label, age, stale = price_date(c.price_published, c.price_kind)
    return {"price_date": label, "price_age_days": age, "price_stale": stale}


def _train_ran(gpus: int, est: dict[str, Any], seq: int, gbs: int) -> str:
    layout = (
        layout_summary(est["layout"]) if est["layout"] else f"first-order at MFU {est['mfu']:g}"
    )
    return f"{gpus:,} GPUs, {layout}, global batch {gbs} x {seq} tokens"


def _train_extras(est: dict[str, Any], price: float | None, instances: int) -> dict[str, Any]:
    """Prediction intervals the plan carries (None where it gives none); the cost interval is
    this offer's price over the plan's days interval. Goodput: compare.goodput_rank."""
    plan = est.get("plan") or {}
    out: dict[str, Any] = {k: _interval(plan.get(k)) for k in TRAIN_INTERVALS}
    per_day = None if price is None else price * instances * 24.0
    out["cost_usd_interval"] = scaled_interval(plan.get("train_days_interval"), per_day)
    return out


def compare_train(
    model: ModelSpec,
    job: CompareTrainJob,
    candidates: Sequence[Candidate],
    *,
    sort: str = "cost",
    hardware: HardwareFor = catalog_hardware,
    goodput: Any = None,  # GoodputInputs: rank by effective time and cost (goodput_rank.py)
) -> CompareResult:
    _check_catalogs()
    from flopwise.compare.goodput_rank import goodput_fields, rank_keys

    rows: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    hw_by_row: dict[int, Hardware] = {}
    memo = _Memo()
    seq = job.seq_len_for(model.max_seq_len)
    gbs = job.batch_seqs_for(seq)
    for c in candidates:
        gpus, chips_note = job.gpus, None
        if is_slice(c.accelerator, c.fabric):
            gpus, chips_note = slice_chips(job.gpus, c.gpus_per_instance)
        instances = math.ceil(gpus / c.gpus_per_instance)
        try:
            hw = hardware(c)
            node = hw.scaleup_domain if c.system_id is None else _gpus_per_node(c.system_id)
            if instances > 1 and c.gpus_per_instance < node:
                raise FlopwiseError(
                    f"{c.gpus_per_instance}-GPU instances are slices of a {node}-GPU node; a "
                    f"{gpus}-GPU job needs whole nodes on a cluster network"
                )
            if instances > 1 and c.gpus_per_instance == 1 and c.network_gbit_s is None:
                raise FlopwiseError(
                    f"single-GPU instances with no published cluster network cannot be assumed "
                    f"to form a {gpus}-GPU cluster"
                )
            hw, net = network_check(hw, c.network_gbit_s, c.gpus_per_instance, instances)
            est = memo(planners.train_estimate, model, hw, gpus, job)
        except FlopwiseError as exc:
            reason = str(exc)
            if c.offer is not None and c.network_gbit_s is None and "scale-out" in reason:
                reason = reason.replace("; pass --system with a node type", "") + (
                    "; this offer publishes no inter-node network: give its network_gbit_s in "
                    "$FLOPWISE_HOME/catalog/offers.csv"
                )
            if chips_note:
                reason = f"{chips_note}: {reason}"
            excluded.append(_excluded(c, reason))
            continue
        if est["fits"] is False:
            reason = est.get("why_not") or (
                f"does not fit: {est['memory_per_gpu_gib']:.1f} GiB per GPU needed, "
                f"{est['device_memory_gib'] or 0:.1f} GiB on {c.accelerator}"
            )
            excluded.append(_excluded(c, f"{chips_note}: {reason}" if chips_note else reason))
            continue
        hours = est["train_days"] * 24.0
        cost = None if c.price_per_hour is None else c.price_per_hour * instances * hours
        row = {
            **c.to_dict(),
            **_price_fields(c),
            "kind": "train",
            "gpus": gpus,
            "gpus_requested": job.gpus,
            "instances": instances,
            "gpus_billed": instances * c.gpus_per_instance,
            "chips_note": chips_note,
            "ran": _train_ran(gpus, est, seq, gbs),
            "global_batch_seqs": gbs,
            "seq_len": seq,
            "method": est["method"],
            "step_time_s": est["step_time_s"],
            "mfu": est["mfu"],
            "train_days": est["train_days"],
            "gpu_hours": est["gpu_hours"],
            "cost_usd": cost,
            "memory_per_gpu_gib": est["memory_per_gpu_gib"],
            "device_memory_gib": est["device_memory_gib"],
            "fits": est["fits"],
            "layout": est["layout"],
            "breakdown": est["breakdown"],
            "memory_breakdown": est["memory_breakdown"],
            "network": net,
            "measured": sorted(k for k, o in hw.origins.items() if o.kind == "measured"),
            "hardware_sources": {k: f"{o.kind}: {o.detail}" for k, o in hw.origins.items()},
            **_train_extras(est, c.price_per_hour, instances),
        }
        row.update(goodput_fields(est["plan"], cost, goodput))
        hw_by_row[id(row)] = hw
        row["_plan"] = est["plan"]
        rows.append(row)
    return _finish("train", model, job.to_dict(), rows, excluded, sort, *rank_keys(rows), hw_by_row)


def _gpus_per_node(system_id: str) -> int:
    from flopwise.catalog.systems import get_system

    return get_system(system_id).gpus_per_node


def compare_infer(
    model: ModelSpec,
    job: CompareInferJob,
    candidates: Sequence[Candidate],
    *,
    sort: str = "cost",
    hardware: HardwareFor = catalog_hardware,
) -> CompareResult:
    """Serve `job` on every candidate (see compare.infer_engine)."""
    _check_catalogs()
    from flopwise.compare.infer_engine import infer_rows

    rows, excluded, hw_by_row = infer_rows(model, job, candidates, hardware, _Memo())
    return _finish(
        "infer",
        model,
        job.to_dict(),
        rows,
        excluded,
        sort,
        "e2e_latency_s" if job.num_requests is None else "makespan_s",
        "cost_per_million_output_tokens" if job.num_requests is None else "batch_cost_usd",
        hw_by_row,
    )


def _finish(
    kind: str,
    model: ModelSpec,
    job: dict[str, Any],
    rows: list[dict[str, Any]],
    excluded: list[dict[str, Any]],
    sort: str,
    time_key: str,
    cost_key: str,
    hw_by_row: dict[int, Hardware],
) -> CompareResult:
    mark_pareto(rows, time_key, cost_key)
    sort_rows(rows, sort, time_key, cost_key)
    overlap = within_error_of_first(rows, cost_key if sort == "cost" else time_key)
    chosen = None
    if rows:
        top = rows[0]
        chosen = {
            "provider": top["provider"],
            "instance": top["instance"],
            "region": top["region"],
            "accelerator": top["accelerator"],
            "plan": top["_plan"],
            "hardware": hw_by_row[id(top)].to_dict(),
        }
    for r in rows:
        del r["_plan"]
    return CompareResult(
        kind=kind,
        model=_model_summary(model),
        job=job,
        sort=sort,
        time_metric=time_key,
        cost_metric=cost_key,
        rows=tuple(CompareRow.from_dict(r) for r in rows),
        excluded=tuple(excluded),
        chosen=chosen,
        within_error_of_first=tuple(i + 1 for i in overlap),
    )
