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
from flopwise.validate.common import ValidationRow
from flopwise.validate.scoring import summarize

METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "output_tokens_per_s")

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
        return {
            "method": "each published closed-loop point posed as `flopwise plan infer "
            "--concurrency N` with its deployment (with `--num-requests` where the benchmark "
            "states its request count: the cold-start run it averages over); nothing fitted to "
            "these rows; in-sample "
            "rows (a modelling choice was made with them in view) kept out of the first figure",
            "out_of_sample": stats(oos),
            "by_metric": {m: stats(r for r in oos if r.metric == m) for m in METRICS},
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
    ):
        if r[key].strip():
            parts += [flag, r[key]]
    return " ".join(parts)


def _plan(r: Row) -> dict[str, Any]:
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.infer import InferJob, plan_inference
    from flopwise.workload import load_model

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
    )
    plan = plan_inference(load_model(r["model"]), hardware_from_catalog(r["accelerator"]), job)
    return plan.to_dict()


def validate_online() -> OnlineValidation:
    rows: list[OnlineRow] = []
    planned: dict[str, dict[str, Any]] = {}
    for r in load_online_runs():
        if r["metric"] not in METRICS:
            raise FlopwiseError(f"online_runs.csv row {r['id']}: unknown metric {r['metric']!r}")
        command = _command(r)
        if command not in planned:
            planned[command] = _plan(r)
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
            )
        )
    return OnlineValidation(rows=tuple(rows))
