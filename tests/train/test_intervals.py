"""Prediction intervals: sized from out-of-sample residuals, shipped as data, shown in plans."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from conftest import run_cli
from flopwise.plan.train.interval import step_interval
from flopwise.validate.scoring import quantile


def test_quantile_interpolates() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert quantile([1.0, 2.0], 0.25) == pytest.approx(1.25)
    with pytest.raises(ValueError):
        quantile([], 0.5)


@pytest.mark.slow
def test_shipped_intervals_are_what_the_residuals_give() -> None:
    from flopwise.plan.train.interval import MOE_REGIME
    from flopwise.validate.unseen_training import validate_unseen_training
    from validation_cache import training_validation  # validate_training(), once per session

    path = resources.files("flopwise.catalog").joinpath("data/intervals_training.json")
    shipped = json.loads(path.read_text(encoding="utf-8"))["regimes"]
    moe = shipped.pop(MOE_REGIME, None)
    table = training_validation().interval_table()
    assert shipped == table, "re-run python scripts/fit_intervals.py"
    assert moe == validate_unseen_training().moe_regime(), "re-run python scripts/fit_intervals.py"


def test_generic_framework_gets_a_wider_interval_than_a_named_one() -> None:
    named = step_interval(True, True, False)
    generic = step_interval(True, False, False)
    assert named is not None and generic is not None
    assert generic.hi - generic.lo > named.hi - named.lo
    assert named.lo < 1.0 < named.hi


def test_plan_json_carries_intervals_around_every_time_figure() -> None:
    r = run_cli(
        "plan",
        "train",
        "llama-3.1-8b",
        "-a",
        "h100-sxm",
        "--gpus",
        "64",
        "--tokens",
        "1T",
        "--framework",
        "nemo",
        "--price-per-gpu-hour",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("step_time_s", "train_days", "gpu_hours", "cost_usd"):
        lo, hi = d[f"{key}_interval"]
        assert lo < d[key] < hi, key
    lo, hi = d["tokens_per_s_interval"]
    assert lo < d["tokens_per_s"] < hi
    assert d["interval"]["regime"] == "validated-die/profile"
    txt = run_cli(
        "plan",
        "train",
        "llama-3.1-8b",
        "-a",
        "h100-sxm",
        "--gpus",
        "64",
        "--tokens",
        "1T",
        "--framework",
        "nemo",
    )
    assert "80% interval" in txt.stdout


def test_moe_plans_take_the_moe_regime_never_narrower_than_dense() -> None:
    dense = step_interval(True, True, moe=False)
    iv = step_interval(True, True, moe=True)
    assert dense is not None and iv is not None
    assert iv.regime == "moe" and "training-unseen" in iv.note
    assert iv.lo <= dense.lo and iv.hi >= dense.hi
    # the same hull for a die without a fitted fraction and a generic framework
    wide = step_interval(False, False, moe=True)
    assert wide is not None and wide.hi >= iv.hi


def _plan_json(seq_len: int, accelerator: str = "h100-sxm") -> dict[str, object]:
    r = run_cli(
        "plan",
        "train",
        "llama-3.1-8b",
        "-a",
        accelerator,
        "--gpus",
        "64",
        "--tokens",
        "100B",
        "--seq-len",
        str(seq_len),
        "--framework",
        "torchtitan",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def test_attention_bound_plans_get_the_attention_bound_regime() -> None:
    short, long = _plan_json(8192), _plan_json(65536)
    assert float(short["attention_share"]) < 0.5 < float(long["attention_share"])  # type: ignore[arg-type]
    assert short["interval"]["regime"] == "validated-die/profile"  # type: ignore[index]
    assert long["interval"]["regime"] == "validated-die/profile/attention-bound"  # type: ignore[index]
    s_lo, s_hi = short["interval"]["step_time_factor"]  # type: ignore[index]
    l_lo, l_hi = long["interval"]["step_time_factor"]  # type: ignore[index]
    assert (s_lo, s_hi) != (l_lo, l_hi)
    # the interval scales the plan's own step time
    lo, hi = long["step_time_s_interval"]  # type: ignore[misc]
    assert lo == pytest.approx(long["step_time_s"] * l_lo)  # type: ignore[operator]
    assert hi == pytest.approx(long["step_time_s"] * l_hi)  # type: ignore[operator]


def test_attention_bound_without_residuals_falls_back_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flopwise.plan.train import interval as interval_mod

    # a table whose unvalidated-die regime has no attention-bound residuals (as before NeMo's
    # B200 long-sequence rows were posed): the job takes the other regime and says so
    table = {
        "regimes": {
            name: entry
            for name, entry in interval_mod._table()["regimes"].items()
            if not name.startswith("unvalidated-die/profile/attention")
        }
    }
    monkeypatch.setattr(interval_mod, "_table", lambda: table)
    iv = step_interval(False, True, moe=False, attention_bound=True)
    short = step_interval(False, True, moe=False)
    assert iv is not None and short is not None
    assert iv.regime == short.regime == "unvalidated-die/profile"
    assert (iv.lo, iv.hi) == (short.lo, short.hi)
    assert "attention-bound" in iv.note


def test_an_unvalidated_die_has_attention_bound_residuals_of_its_own() -> None:
    # NeMo's B200 long-sequence rows run on a die without a fitted fraction: their residuals
    # form the unvalidated die's attention-bound regime
    iv = step_interval(False, True, moe=False, attention_bound=True)
    assert iv is not None
    assert iv.regime == "unvalidated-die/profile/attention-bound"
    assert iv.n >= 5
