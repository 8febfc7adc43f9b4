"""`plan train -a cpu --measured latest`: the measured matmul rate stands in for the peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopwise.cli.main import main
from flopwise.results.store import ResultStore


def _seed(db: Path) -> None:
    store = ResultStore(db)
    store.add("matmul", {"dtype": "fp32", "best_tflops": 2.0}, {}, accelerator="cpu", host="h")
    store.add("memory", {"triad_gbps": 40.0}, {}, accelerator="cpu", host="h")


def test_cpu_plan_uses_measured_rate_as_peak_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    _seed(db)
    argv = ["plan", "train", "mistral-7b", "-a", "cpu", "--measured", "latest", "--db", str(db)]
    code = main([*argv, "--dtype", "fp32", "--gpus", "1", "--tokens", "1B", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1)  # 1 = nothing fits in this host's memory: still a plan
    assumed = doc["assumed"]["peak_tflops:fp32"]
    assert assumed["value"] == 2.0 and "measured matmul rate" in assumed["source"]
    assert doc["measured"]["matmul_tflops:fp32"]["value"] == 2.0


def test_cpu_plan_in_a_dtype_never_measured_says_which_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    _seed(db)
    argv = ["plan", "train", "mistral-7b", "-a", "cpu", "--measured", "--db", str(db)]
    assert main([*argv, "--gpus", "1", "--tokens", "1B"]) == 2
    err = capsys.readouterr().err
    assert "bf16" in err and "fp32" in err and err.count("\n") == 1


def test_text_view_prints_non_numeric_measured_values() -> None:
    # a CPU plan lists its measured device id ("cpu") beside the numbers; the view printed a
    # traceback on it (abs() of a string)
    from flopwise.present.console import fmt_num

    assert fmt_num("cpu") == "cpu"
    assert fmt_num(1234.5) == "1,234"
    assert fmt_num(None) == "unknown"
