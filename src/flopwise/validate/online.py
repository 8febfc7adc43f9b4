"""Online-serving validation: published concurrency sweeps against ``plan infer --concurrency``.

Each row of catalog/data/published/online_runs.csv is one published figure (TTFT, inter-token
latency or output tokens/s) of a closed-loop benchmark at one concurrency (AIPerf, SGLang/vLLM
``benchmark_serving.py --max-concurrency``), with the deployment it ran. flopwise poses the
``plan infer ... --concurrency N`` command a user would type and compares like with like; where
the benchmark states how many requests it ran (InferenceX: ``--num-prompts 10C``), with
``--num-requests`` too, the run from a cold start whose means the benchmark reports, and its
lengths' spread (``--random-range-ratio 0.8``: each length uniform on [0.8 L, L], posed at the
mean 0.9 L with ``--output-spread 0.111``). No
constant is fitted to these rows; a row whose figure shaped a modelling choice is marked
``in_sample`` and kept out of the out-of-sample error (NOTES in the CSV say which and why).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.uncertainty import online_regime_name
from flopwise.validate.common import ValidationRow, yes_no_cell
from flopwise.validate.intervals_fit import HI_Q, LO_Q, MIN_RESIDUALS
from flopwise.validate.scoring import new_family_bounds, summarize

METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "output_tokens_per_s")

#: Fewest deployments the out-of-sample residuals of a (dense|moe, metric) cell come from (at
#: least intervals_fit.MIN_RESIDUALS of them) for it to size an online interval: one
#: deployment's rows say nothing of how far the next deployment's bias lies, so such a cell is
#: left out and the plan keeps its other intervals.
MIN_DEPLOYMENTS = 2

Row = dict[str, str]


def load_online_runs() -> list[Row]:
    path = resources.files("flopwise.catalog").joinpath("data/published/online_runs.csv")
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@dataclass(frozen=True, slots=True)
class OnlineRow:
    """A published closed-loop figure against the plan (``common.ValidationRow``), and where it
    came from."""

    row: ValidationRow
    source: str
    deployment: str  # model, GPUs and engine, for the report
    in_sample: bool
    command: str
    moe: bool = False  # the model is a mixture of experts (the intervals' split)

    @property
    def metric(self) -> str:
        return self.row.metric

    @property
    def error_pct(self) -> float:
        return self.row.error_pct

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.row.to_dict(),
            "source": self.source,
            "deployment": self.deployment,
            "in_sample": self.in_sample,
            "command": self.command,
            "moe": self.moe,
        }

    @property
    def ratio(self) -> float:
        """measured / predicted: the residual an interval factor is read from."""
        return self.row.measured / self.row.predicted


def interval_cells(rows: Iterable[OnlineRow]) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """Out-of-sample residuals (deployment, measured/predicted) by regime (the model class's
    ``online/dense|moe``) and metric."""
    cells: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for r in rows:
        if not r.in_sample:
            cells.setdefault(online_regime_name(r.moe), {}).setdefault(r.metric, []).append(
                (r.deployment, r.ratio)
            )
    return cells


def bounds(pairs: list[tuple[str, float]]) -> tuple[float, float] | None:
    """The 80% interval factors of a new deployment from `pairs` (every deployment's bias with
    every row's scatter about it, scoring.new_family_bounds), or None with too few."""
    if len(pairs) < MIN_RESIDUALS or len({d for d, _ in pairs}) < MIN_DEPLOYMENTS:
        return None
    return new_family_bounds(pairs, LO_Q, HI_Q)


def interval_regimes(rows: Iterable[OnlineRow]) -> dict[str, dict[str, dict[str, Any]]]:
    """The online regimes of intervals_inference.json: per class (``online/dense``,
    ``online/moe``) and metric, the 80% factors a deployment no published sweep measured may
    see, from every scored deployment's out-of-sample residuals."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for regime, metrics in sorted(interval_cells(rows).items()):
        for metric, pairs in sorted(metrics.items()):
            b = bounds(pairs)
            if b is None:
                continue
            deployments = sorted({d for d, _ in pairs})
            out.setdefault(regime, {})[metric] = {
                "lo": b[0],
                "hi": b[1],
                "n": len(pairs),
                "source": "out-of-sample residuals of published closed-loop sweeps (validate "
                f"--only online), each deployment's bias with every point's scatter: "
                f"{len(pairs)} points on {len(deployments)} deployments ({'; '.join(deployments)})",
            }
    return out


def coverage(rows: Iterable[OnlineRow]) -> dict[str, Any]:
    """Share of out-of-sample points inside an 80% interval built without their deployment
    (same model class and metric): overall and by metric; points whose cell has too few other
    deployments are not counted."""
    rows = [r for r in rows if not r.in_sample]
    cells = interval_cells(rows)
    hits: dict[str, list[bool]] = {}
    for r in rows:
        cell = cells[online_regime_name(r.moe)][r.metric]
        others = [(d, x) for d, x in cell if d != r.deployment]
        b = bounds(others)
        if b is not None:
            hits.setdefault(r.metric, []).append(b[0] <= r.ratio <= b[1])
    every = [h for v in hits.values() for h in v]
    return {
        "coverage_pct": 100.0 * sum(every) / len(every) if every else None,
        "n": len(every),
        "by_metric": {
            m: {"coverage_pct": 100.0 * sum(v) / len(v), "n": len(v)} for m, v in hits.items()
        },
        "method": "each deployment's out-of-sample points against an 80% interval built from "
        "the other deployments' residuals of the same model class and metric",
    }


def stats(rows: Iterable[OnlineRow]) -> dict[str, Any]:
    return summarize(r.error_pct for r in rows).to_dict()


@dataclass(frozen=True, slots=True)
class OnlineValidation:
    rows: tuple[OnlineRow, ...]

    def to_dict(self) -> dict[str, Any]:
        oos = [r for r in self.rows if not r.in_sample]
        groups: dict[str, dict[str, Any]] = {}
        for r in oos:
            groups.setdefault(r.deployment, {}).setdefault(r.metric, []).append(r)
        cover = coverage(self.rows)

        def metric_stats(m: str) -> dict[str, Any]:
            st = stats(r for r in oos if r.metric == m)
            st["interval_coverage_pct"] = cover["by_metric"].get(m, {}).get("coverage_pct")
            return st

        return {
            "method": "each published closed-loop point posed as `flopwise plan infer "
            "--concurrency N` with its deployment (with `--num-requests` where the benchmark "
            "states its request count: the cold-start run it averages over); nothing fitted to "
            "these rows; in-sample "
            "rows (a modelling choice was made with them in view) kept out of the first figure",
            "out_of_sample": stats(oos),
            "by_metric": {m: metric_stats(m) for m in METRICS},
            "interval_coverage": cover,
            "by_deployment": {
                g: {m: stats(rs) for m, rs in metrics.items()} for g, metrics in groups.items()
            },
            "in_sample": stats(r for r in self.rows if r.in_sample),
            "rows": [r.to_dict() for r in self.rows],
        }


def _opt_int(text: str) -> int | None:
    return int(text) if text.strip() else None


def _opt_float(text: str) -> float | None:
    return float(text) if text.strip() else None


def _command(r: Row) -> str:
    parts = [
        "flopwise plan infer",
        r["model"],
        "-a",
        r["accelerator"],
        "--tp",
        r["tp"],
        "--gpus",
        r["gpus"],
        "--engine",
        r["engine"],
        "--weight-dtype",
        r["weight_dtype"],
        "--kv-dtype",
        r["kv_dtype"],
        "--concurrency",
        r["level"],
        *(["--num-requests", r["num_requests"]] if r["num_requests"].strip() else []),
        *(["--output-spread", r["output_spread"]] if r["output_spread"].strip() else []),
        "--input-len",
        r["input_len"],
        "--output-len",
        r["output_len"],
    ]
    for key, flag in (
        ("memory_fraction", "--memory-fraction"),
        ("engine_max_batch", "--batch"),
        ("engine_max_tokens", "--engine-max-tokens"),
        ("scheduler_poll_steps", "--scheduler-poll-steps"),
    ):
        if r[key].strip():
            parts += [flag, r[key]]
    graphs = yes_no_cell(r, "prefill_cuda_graphs")
    if graphs is not None:
        parts.append("--prefill-cuda-graphs" if graphs else "--no-prefill-cuda-graphs")
    return " ".join(parts)


def _plan(r: Row, model: Any) -> dict[str, Any]:
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.infer import InferJob, plan_inference

    job = InferJob(
        input_len=int(r["input_len"]),
        output_len=int(r["output_len"]),
        batch=_opt_int(r["engine_max_batch"]),  # the engine's running-sequence cap
        tp=int(r["tp"]),
        replicas=max(1, int(r["gpus"]) // int(r["tp"])),
        weight_dtype=r["weight_dtype"],
        kv_dtype=r["kv_dtype"] or None,
        engine=r["engine"],
        concurrency=int(r["level"]),
        num_requests=_opt_int(r["num_requests"]),
        output_spread=_opt_float(r["output_spread"]) or 0.0,
        memory_fraction=_opt_float(r["memory_fraction"]),
        engine_max_tokens=_opt_int(r["engine_max_tokens"]),
        scheduler_poll_steps=_opt_int(r["scheduler_poll_steps"]) or 1,
        prefill_cuda_graphs=yes_no_cell(r, "prefill_cuda_graphs"),
    )
    plan = plan_inference(model, hardware_from_catalog(r["accelerator"]), job)
    return plan.to_dict()


def validate_online() -> OnlineValidation:
    from flopwise.workload import load_model

    rows: list[OnlineRow] = []
    planned: dict[str, dict[str, Any]] = {}
    models: dict[str, Any] = {}  # each model's config read once, not once per figure
    for r in load_online_runs():
        if r["metric"] not in METRICS:
            raise FlopwiseError(f"online_runs.csv row {r['id']}: unknown metric {r['metric']!r}")
        model = models.get(r["model"])
        if model is None:
            model = models[r["model"]] = load_model(r["model"])
        command = _command(r)
        if command not in planned:
            planned[command] = _plan(r, model)
        rows.append(
            OnlineRow(
                row=ValidationRow(
                    id=r["id"],
                    metric=r["metric"],
                    measured=float(r["measured"]),
                    predicted=float(planned[command][r["metric"]]),
                    note=r["notes"],
                ),
                source=r["source"],
                deployment=f"{r['model']} on {r['gpus']} x {r['accelerator']}, {r['engine']}",
                in_sample=r["in_sample"].strip().lower() == "yes",
                command=command,
                moe=model.is_moe,
            )
        )
    return OnlineValidation(rows=tuple(rows))
