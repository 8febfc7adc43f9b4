"""`flopwise validate` opens with every section's out-of-sample error, taken from the sections."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.validate.summary import summary_lines
from validation_cache import training_validation, unseen_training


def test_summary_takes_each_figure_from_its_section() -> None:
    doc = {
        "training": training_validation().to_dict(),
        "training_unseen": unseen_training().to_dict(),
    }
    lines = {(x.section, x.what): x for x in summary_lines(doc)}
    train = next(x for (s, _), x in lines.items() if s == "training")
    oos, ins = doc["training"]["out_of_sample"], doc["training"]["in_sample"]
    assert (train.n, train.mape_pct, train.bias_pct) == (oos["n"], oos["mape_pct"], oos["bias_pct"])
    assert train.in_sample_mape_pct == ins["mape_pct"]
    assert train.interval_coverage_pct == doc["training"]["interval_coverage"]["coverage_pct"]
    # the unseen tables split by class: MoE is where the model does worst, so it is not pooled
    unseen = {w: x for (s, w), x in lines.items() if s == "training-unseen"}
    assert len(unseen) == 2
    moe = next(x for w, x in unseen.items() if "moe" in w)
    dense = next(x for w, x in unseen.items() if "dense" in w)
    by_class = doc["training_unseen"]["by_class"]
    assert (
        moe.mape_pct
        == by_class["moe"]["mape_pct"]
        > dense.mape_pct
        == by_class["dense"]["mape_pct"]
    )
    assert moe.n + dense.n == doc["training_unseen"]["out_of_sample"]["n"]


def test_sections_without_rows_or_unknown_keys_add_nothing() -> None:
    doc = {
        "online": {"by_metric": {"ttft_ms": {"n": 0}, "tpot_ms": {"n": 3, "mape_pct": 10.0}}},
        "something-new": {"n": 5, "mape_pct": 1.0},
        "goodput": {"n": 0},
    }
    lines = summary_lines(doc)
    assert [(x.section, x.n, x.mape_pct) for x in lines] == [("online", 3, 10.0)]
    assert lines[0].bias_pct is None


def test_cli_leads_with_the_summary_in_text_and_json() -> None:
    out = run_cli("validate", "--only", "online", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert next(iter(doc)) == "summary"
    by_metric = doc["online"]["by_metric"]
    assert len(doc["summary"]) == len([m for m in by_metric.values() if m["n"]])
    for line in doc["summary"]:
        assert line["section"] == "online"
        metric = {"TTFT": "ttft_ms", "TPOT": "tpot_ms", "tokens/s": "output_tokens_per_s"}[
            line["what"].split(": ")[1]
        ]
        assert line["out_of_sample_mape_pct"] == pytest.approx(by_metric[metric]["mape_pct"])
    text = run_cli("validate", "--only", "matmul")
    assert text.returncode == 0, text.stderr
    first = text.stdout.index("Out of sample, every section")
    assert first < text.stdout.index("Validation: matmul")
