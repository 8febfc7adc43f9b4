"""Closed-loop plans (--concurrency) take 80% intervals from published closed-loop sweeps."""

from __future__ import annotations

import math

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.intervals import interval_for
from flopwise.validate.common import ValidationRow
from flopwise.validate.online import (
    OnlineRow,
    coverage,
    interval_regimes,
    validate_online,
)
from flopwise.workload import load_model


def _row(deployment: str, ratio: float, metric: str = "ttft_ms", moe: bool = True) -> OnlineRow:
    return OnlineRow(
        row=ValidationRow(id=f"{deployment}-{ratio}", metric=metric, measured=ratio, predicted=1.0),
        source="s",
        deployment=deployment,
        in_sample=False,
        command="c",
        moe=moe,
    )


def test_a_cell_needs_two_deployments_and_eight_points() -> None:
    one = [_row("a", 1.0 + 0.01 * i) for i in range(12)]  # many points, one deployment
    assert interval_regimes(one) == {}
    few = [_row("a", 1.1), _row("b", 1.3), _row("b", 1.2)]
    assert interval_regimes(few) == {}
    rows = [_row("a", 2.0 + 0.1 * i) for i in range(5)] + [
        _row("b", 3.0 + 0.1 * i) for i in range(5)
    ]
    cell = interval_regimes(rows)["online/moe"]["ttft_ms"]
    assert cell["n"] == 10 and "2 deployments" in cell["source"]
    # both deployments ran slower than planned: the whole interval lies above the plan
    assert 1.0 < cell["lo"] < 2.0 and cell["hi"] > 3.4
    # dense rows are another cell, in-sample rows none
    dense = [_row("a", 1.0, moe=False)] * 8 + [_row("b", 1.0, moe=False)]
    assert "online/dense" in interval_regimes(dense)
    inside = [OnlineRow(r.row, r.source, r.deployment, True, r.command, r.moe) for r in rows]
    assert interval_regimes(inside) == {}


def test_coverage_holds_each_deployment_out() -> None:
    # three deployments alike and a fourth far off: the fourth falls outside what the others
    # give, and the others inside what the rest give
    rows = [_row(d, 1.0 + 0.02 * i) for d in "abc" for i in range(5)]
    rows += [_row("d", 10.0 + i) for i in range(5)]
    cov = coverage(rows)
    assert cov["n"] == 20
    assert cov["by_metric"]["ttft_ms"]["n"] == 20
    assert cov["coverage_pct"] == pytest.approx(75.0)


def test_shipped_regimes_are_the_online_sections() -> None:
    rows = validate_online().rows
    regimes = interval_regimes(rows)
    assert regimes, "the published sweeps size at least one online regime"
    for name, metrics in regimes.items():
        for metric, cell in metrics.items():
            shipped = interval_for("inference", name, metric)
            assert shipped is not None
            assert (shipped.lo, shipped.hi, shipped.n) == (
                pytest.approx(cell["lo"]),
                pytest.approx(cell["hi"]),
                cell["n"],
            )
    moe_ttft = [r for r in rows if r.moe and not r.in_sample and r.metric == "ttft_ms"]
    assert regimes["online/moe"]["ttft_ms"]["n"] == len(moe_ttft)


def _plan(model: str, **kw: object) -> dict[str, object]:
    job = InferJob(input_len=922, output_len=922, tp=8, weight_dtype="fp8", engine="sglang", **kw)  # type: ignore[arg-type]
    return plan_inference(load_model(model), hardware_from_catalog("h200-sxm"), job).to_dict()


def test_a_closed_loop_moe_plan_takes_the_online_regime() -> None:
    doc = _plan("deepseek-v3", concurrency=4)
    intervals = doc["intervals"]
    assert isinstance(intervals, dict)
    for metric in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        shipped = interval_for("inference", "online/moe", metric)
        assert shipped is not None
        assert intervals[metric]["regime"] == "online/moe"
        lo, hi = doc[f"{metric}_interval"]  # type: ignore[misc]
        value = doc[metric]
        assert isinstance(value, float)
        assert (lo, hi) == (pytest.approx(value * shipped.lo), pytest.approx(value * shipped.hi))
    # a static batch of the same model is no closed loop: the offline regimes
    static = _plan("deepseek-v3", batch=4)
    regimes = {m: iv["regime"] for m, iv in static["intervals"].items()}  # type: ignore[union-attr]
    assert "online/moe" not in regimes.values()
    assert not math.isclose(
        static["output_tokens_per_s_interval"][1] / static["output_tokens_per_s"],  # type: ignore[index,operator]
        interval_for("inference", "online/moe", "output_tokens_per_s").hi,  # type: ignore[union-attr]
    )


def test_a_closed_loop_dense_plan_keeps_its_regimes_without_online_residuals() -> None:
    if interval_for("inference", "online/dense", "ttft_ms") is not None:
        pytest.skip("dense closed-loop sweeps now size their own regime")
    doc = _plan("llama-3.1-70b", concurrency=4)
    regimes = {m: iv["regime"] for m, iv in doc["intervals"].items()}  # type: ignore[union-attr]
    assert all(not r.startswith("online/") for r in regimes.values())
