"""`flopwise validate --only online`: published concurrency sweeps, out of sample first."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.validate.online import METRICS, load_online_runs, validate_online


def test_every_published_point_is_posed_and_in_sample_rows_are_kept_apart() -> None:
    published = load_online_runs()
    rep = validate_online().to_dict()
    assert len(rep["rows"]) == len(published) > 90
    assert all("--concurrency" in r["command"] for r in rep["rows"])
    in_sample = [r for r in rep["rows"] if r["in_sample"]]
    # rows that shaped a modelling choice: NIM's TTFT up to 50 in flight (the prefill queue),
    # InferenceX's H200 decode figures (prompts in whole passes), its 4 x B200 run (the B200's
    # memory as CUDA reports it, catalog memory_gib) and the B200/B300 TTFT rows whose
    # recipes poll for new requests every 10 or 30 decode steps (--scheduler-poll-steps)
    b200 = {f"inferencex_dsr1_fp8_b200_sglang_tp4_8192_1024_c32_{m}" for m in METRICS}
    polled = {
        f"inferencex_dsr1_fp8_{k}_ttft_ms"
        for k in (
            "b200_sglang_tp8_1024_1024_c64",
            "b300_sglang_tp8_1024_1024_c4",
            "b300_sglang_tp8_1024_1024_c16",
            "b300_sglang_tp8_1024_1024_c64",
            "b300_sglang_tp4_8192_1024_c8",
        )
    }
    nim = {f"nim180_llama33_70b_h100x2_5000_500_c{c}_ttft_ms" for c in (1, 5, 25, 50)}
    h200 = {
        r["id"]
        for r in published
        if r["id"].startswith("inferencex_dsr1_fp8_h200_")
        and r["metric"] in ("tpot_ms", "output_tokens_per_s")
    }
    assert len(h200) == 18
    assert {r["id"] for r in in_sample} == nim | h200 | b200 | polled
    oos = [r for r in rep["rows"] if not r["in_sample"]]
    assert rep["out_of_sample"]["n"] == len(oos)
    mape = sum(abs(r["error_pct"]) for r in oos) / len(oos)
    assert rep["out_of_sample"]["mape_pct"] == pytest.approx(mape)
    assert set(rep["by_metric"]) == set(METRICS)
    assert sum(st["n"] for st in rep["by_metric"].values()) == len(oos)
    # the same rows predicted alike: one plan per posed command
    by_cmd: dict[tuple[str, str], float] = {}
    for r in rep["rows"]:
        by_cmd.setdefault((r["command"], r["metric"]), r["predicted"])
        assert by_cmd[(r["command"], r["metric"])] == r["predicted"]


def test_cli_section_text_and_json() -> None:
    out = run_cli("validate", "--only", "online", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc) == ["summary", "online"] and doc["online"]["out_of_sample"]["n"] > 70
    text = run_cli("validate", "--only", "online", "--rows")
    assert text.returncode == 0
    assert "Validation: online serving" in text.stdout and "in-sample" in text.stdout
