"""The report file without a browser: self-contained, escaped, data round-trips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.compare.report_data import matmul_intensity, measured_points
from flopwise.present.html import build_report, embed_json
from flopwise.results.store import ResultStore


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="flopwise-data">(.*?)</script>', page, re.S)
    assert m, "data element missing"
    return json.loads(m.group(1))


def test_embed_json_cannot_close_the_script() -> None:
    evil = "</script><script>alert(1)</script><!--"
    text = embed_json({"s": evil, "t": "a\u2028b & c > d"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"s": evil, "t": "a\u2028b & c > d"}


def test_report_is_self_contained_and_escaped(evil_offer: tuple[str, str], tmp_path: Path) -> None:
    evil, evil_instance = evil_offer
    out = tmp_path / "r.html"
    proc = run_cli(
        "report", "train", "llama-3.1-70b", "--tokens", "15T", "--gpus", "1024", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "wrote" in proc.stderr
    page = out.read_text(encoding="utf-8")
    assert "alert(1)</script>" not in page and "<img" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    # no external resource of any kind, and a policy that forbids fetching one
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page
    doc = _data(page)
    top = doc["compare"]["rows"][0]
    assert top["provider"] == evil and top["instance"] == evil_instance  # cheapest, first
    assert doc["compare"]["chosen"]["plan"]["model"] == "llama-3.1-70b"
    assert doc["roofline"]["accelerator"] == "h100-sxm"


def test_report_carries_store_history_and_measured_points(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    store = ResultStore(db)
    mm = store.add(
        "matmul",
        {"dtype": "bf16", "best_tflops": 712.0, "best_shape": [8192, 8192, 8192]},
        {},
        accelerator="h100-sxm",
        host="node1",
    )
    store.add("memory", {"triad_gbps": 2950.0}, {}, accelerator="h100-sxm", host="node1")
    store.add("matmul", {"dtype": "bf16", "best_tflops": 280.0}, {}, accelerator="a100-sxm-80gb")
    store.add(
        "matmul", {"dtype": "bf16", "best_tflops": 1.0}, {}, accelerator="h100-sxm", status="failed"
    )
    points = measured_points(store.list(), "h100-sxm")
    assert [p["kind"] for p in points] == ["memory", "matmul"]
    assert points[1]["id"] == mm
    assert points[1]["intensity"] == pytest.approx(8192 / 3)  # 2n^3 / (2 bytes x 3n^2)
    out = tmp_path / "r.html"
    proc = run_cli(
        "report",
        "infer",
        "llama-3.1-8b",
        "--batch",
        "8",
        "--accelerators",
        "h100,a100",
        "--out",
        str(out),
        "--db",
        str(db),
    )
    assert proc.returncode == 0, proc.stderr
    doc = _data(out.read_text(encoding="utf-8"))
    assert len(doc["history"]) == 4
    assert doc["compare"]["kind"] == "infer"


def test_matmul_intensity_by_hand() -> None:
    assert matmul_intensity(4096, 4096, 4096, "bf16") == pytest.approx(4096 / 3)
    assert matmul_intensity(1, 4096, 4096, "fp8") == pytest.approx(
        2 * 4096 * 4096 / (4096 + 4096 * 4096 + 4096)
    )
    assert matmul_intensity(0, 1, 1, "bf16") is None


def test_report_refuses_a_folder_as_out(tmp_path: Path) -> None:
    proc = run_cli(
        "report", "train", "llama-3.1-8b", "--tokens", "1T", "--gpus", "8", "--out", str(tmp_path)
    )
    assert proc.returncode == 2 and "is a folder" in proc.stderr


def test_build_report_with_no_rows_still_renders() -> None:
    doc = {
        "generated_at": "2026-11-22T00:00:00+00:00",
        "compare": {
            "kind": "train",
            "model": {"name": "m", "params": 1, "active_params": 1},
            "job": {"tokens": 1, "gpus": 1, "seq_len": None, "dtype": "bf16"},
            "sort": "cost",
            "time_metric": "train_days",
            "cost_metric": "cost_usd",
            "rows": [],
            "excluded": [],
            "chosen": None,
        },
        "roofline": None,
        "history": [],
    }
    page = build_report(doc)
    assert _data(page)["compare"]["rows"] == []
