"""`flopwise plan train` and `flopwise validate` from the command line."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def test_done_when_command_prints_layout_memory_time_mfu_days() -> None:
    r = run_cli(
        "plan",
        "train",
        "llama-3.1-70b",
        "--accelerator",
        "h100-sxm",
        "--gpus",
        "512",
        "--tokens",
        "15T",
    )
    assert r.returncode == 0, r.stderr
    for text in ("layout", "Memory per GPU", "Step time", "MFU", "days", "cost"):
        assert text in r.stdout
    assert "Traceback" not in r.stderr


def test_json_is_one_document_with_stable_keys() -> None:
    r = run_cli(
        "plan",
        "train",
        "llama-3.1-8b",
        "-a",
        "a100-sxm-80gb",
        "--gpus",
        "64",
        "--tokens",
        "1T",
        "--tp",
        "2",
        "--recompute",
        "selective",
        "--price-per-gpu-hour",
        "1.5",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in (
        "params",
        "active_params",
        "total_flops",
        "gpus",
        "mfu",
        "train_days",
        "gpu_hours",
        "cost_usd",
        "memory_per_gpu_gib",
        "fits",
    ):
        assert key in doc
    assert doc["layout"]["tp"] == 2 and doc["layout"]["recompute"] == "selective"
    s = doc["search"]
    assert s["configs_evaluated"] >= s["feasible"] > 0 and "elapsed_s" in s and s["best"]


def test_first_order_mode_is_kept() -> None:
    r = run_cli(
        "plan",
        "train",
        "llama-3.1-8b",
        "-a",
        "h100-sxm",
        "--gpus",
        "8",
        "--tokens",
        "1T",
        "--mfu",
        "0.4",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["method"] == "first-order"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tp", "6"), "tp=6 does not divide 64 heads"),
        (("--cp", "3"), "cp=3 does not divide"),
        (("--zero", "5"), "invalid choice"),
        (("--recompute", "some"), "invalid choice"),
        (("--global-batch-seqs", "3", "--global-batch-tokens", "4M"), "not allowed with"),
    ],
)
def test_bad_layouts_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    r = run_cli(
        "plan", "train", "llama-3.1-70b", "-a", "h100-sxm", "--gpus", "64", "--tokens", "1T", *args
    )
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_impossible_job_exits_1_and_says_what_would_fit() -> None:
    r = run_cli(
        "plan",
        "train",
        "llama-3.1-405b",
        "-a",
        "a100-sxm-40gb",
        "--gpus",
        "8",
        "--tokens",
        "1T",
        "--json",
    )
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["fits"] is False
    assert doc["search"]["nothing_fits"]["what_would"]


def test_validate_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # in-process on the session's validate_training() (validation_cache): a subprocess would
    # plan every row again; tests/goodput/test_goodput_cli.py runs `flopwise validate --json`
    # as a real subprocess
    from flopwise.cli.main import main
    from validation_cache import training_validation

    report = training_validation()
    monkeypatch.setattr("flopwise.validate.training.validate_training", lambda rows=None: report)
    monkeypatch.setattr("flopwise.present.console._console", None)  # a fresh console, as a CLI
    code = main(["validate", "--only", "training", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    t = doc["training"]
    assert t["n"] == len(t["rows"]) >= 150
    for key in ("out_of_sample", "in_sample"):
        assert set(t[key]) == {"n", "mape_pct", "max_abs_error_pct", "bias_pct"}
        assert t[key]["n"] == t["n"]
    assert {
        "id",
        "family",
        "metric",
        "measured",
        "predicted",
        "predicted_out_of_sample",
        "error_pct",
        "error_out_of_sample_pct",
        "command",
    } <= set(t["rows"][0])
    # the text view leads with the out-of-sample error
    code = main(["validate", "--only", "training"])
    txt, err = capsys.readouterr()
    assert code == 0, err
    # (after the summary of every section's out-of-sample error, tests/foundation/
    # test_validate_summary.py)
    assert txt.index("Out of sample, every section") < txt.index("OUT-OF-SAMPLE")
    assert txt.index("OUT-OF-SAMPLE") < txt.index("in-sample (fitted")
