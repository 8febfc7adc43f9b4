"""flopwise.validate.scoring: summaries, groups, leave-one-group-out and quantiles."""

from __future__ import annotations

import math

import pytest

from flopwise.validate.scoring import (
    by_group,
    error_pct,
    leave_one_group_out,
    new_family_ratios,
    quantile,
    summarize,
)


def test_error_and_summary() -> None:
    assert error_pct(100.0, 110.0) == pytest.approx(10.0)
    s = summarize([10.0, -20.0, 4.0])
    assert s.n == 3
    assert s.mape_pct == pytest.approx(34.0 / 3)
    assert s.max_abs_error_pct == pytest.approx(20.0)
    assert s.bias_pct == pytest.approx(-2.0)
    assert summarize([]).mape_pct is None


def test_by_group_sorted() -> None:
    items = [("b", 10.0), ("a", -5.0), ("b", -30.0)]
    groups = by_group(items, lambda x: x[0], lambda x: x[1])
    assert [g.group for g in groups] == ["a", "b"]
    assert groups[1].summary.mape_pct == pytest.approx(20.0)
    assert groups[1].to_dict("family")["family"] == "b"


def test_leave_one_group_out_never_sees_the_held_out_rows() -> None:
    # fit = mean of the training values; a group's rows are predicted from the others only
    rows = [("a", 1.0), ("a", 3.0), ("b", 10.0), ("c", 20.0)]
    cv = leave_one_group_out(
        rows,
        lambda r: r[0],
        lambda train: sum(v for _, v in train) / len(train),
        lambda r, mean: mean,
    )
    assert cv.predictions == (15.0, 15.0, pytest.approx(8.0), pytest.approx(14.0 / 3))
    assert cv.params_by_group["a"] == 15.0


def test_quantile_matches_linear_interpolation() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert quantile(xs, 0.0) == 1.0 and quantile(xs, 1.0) == 5.0
    assert quantile(xs, 0.1) == pytest.approx(1.4)
    assert quantile(xs, 0.9) == pytest.approx(4.6)
    with pytest.raises(ValueError):
        quantile([], 0.5)


def _widened(biases: list[float]) -> list[float]:
    """Family biases (ratios) moved away from their log-mean by sqrt((F+1)/(F-1))."""
    logs = [math.log(b) for b in biases]
    centre = sum(logs) / len(logs)
    k = math.sqrt((len(logs) + 1) / (len(logs) - 1))
    return [math.exp(centre + k * (x - centre)) for x in logs]


def test_new_family_outcomes_give_each_family_bias_equal_weight() -> None:
    # 100 rows of a family that the model over-predicts by 10% and 2 of one it under-predicts:
    # pooled, the 10th-90th percentile would sit on the big family alone; a row of a new
    # family is as likely to err like the small one
    pairs = [("big", 1.1)] * 100 + [("small", 0.9)] * 2
    out = new_family_ratios(pairs)
    assert len(out) == 2 * 102
    small, big = _widened([0.9, 1.1])
    assert sum(1 for x in out if abs(x - small) < 1e-9) == 102
    assert quantile(out, 0.10) == pytest.approx(small)
    assert quantile(out, 0.90) == pytest.approx(big)
    assert small < 0.9 and big > 1.1  # two families seen: the next one may lie beyond both
    pooled = [r for _, r in pairs]
    assert quantile(pooled, 0.10) == pytest.approx(1.1)


def test_new_family_outcomes_carry_each_rows_scatter() -> None:
    # within-family scatter (x1.2 and /1.2 around each family's mean) rides on every bias
    pairs = [("a", 1.2), ("a", 1 / 1.2), ("b", 2.0 * 1.2), ("b", 2.0 / 1.2)]
    out = sorted(new_family_ratios(pairs))
    expected = sorted(b * s for b in _widened([1.0, 2.0]) for s in (1.2, 1 / 1.2, 1.2, 1 / 1.2))
    assert out == pytest.approx(expected)


def test_the_spread_of_family_biases_is_widened_less_as_families_accumulate() -> None:
    # with F families the next family's bias spreads sqrt((F+1)/(F-1)) wider than the F seen
    def spread(n_families: int) -> float:
        biases = [1.0 + 0.1 * i for i in range(n_families)]
        out = new_family_ratios([(f"f{i}", b) for i, b in enumerate(biases)])
        logs = [math.log(x) for x in out]
        seen = [math.log(b) for b in biases]
        return (max(logs) - min(logs)) / (max(seen) - min(seen))

    assert spread(2) == pytest.approx(math.sqrt(3))
    assert spread(6) == pytest.approx(math.sqrt(7 / 5))
    assert spread(50) < 1.05


def test_one_family_is_its_own_residuals() -> None:
    pairs = [("only", r) for r in (0.8, 0.95, 1.0, 1.3)]
    assert sorted(new_family_ratios(pairs)) == pytest.approx([0.8, 0.95, 1.0, 1.3])


def test_validate_spinner_stays_off_a_non_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from flopwise.present.validate_view import section_status

    ran = []
    with section_status("inference"):  # pytest's stderr is not a terminal
        ran.append(1)
    with section_status("inference", enabled=False):
        ran.append(2)
    assert ran == [1, 2]
    assert capsys.readouterr().err == ""
