"""`flopwise compare`: instances, time, cost, network verdict, Pareto front, sorting."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from conftest import run_cli
from flopwise.compare import (
    CompareInferJob,
    CompareTrainJob,
    compare_infer,
    compare_train,
    from_accelerators,
    from_offers,
    mark_pareto,
)
from flopwise.compare.engine import sort_rows
from flopwise.errors import FlopwiseError
from flopwise.workload.hf import load_model


def _row(name: str, t: float | None, c: float | None) -> dict[str, Any]:
    return {"provider": name, "instance": name, "t": t, "c": c}


def test_pareto_front_by_hand() -> None:
    rows = [
        _row("fast-dear", 1, 10),
        _row("slow-cheap", 10, 1),
        _row("middle", 5, 5),
        _row("dominated", 6, 6),
        _row("tie-a", 5, 5),
        _row("same-time-dearer", 1, 11),
        _row("no-price", 0.5, None),
    ]
    mark_pareto(rows, "t", "c")
    front = {r["provider"] for r in rows if r["pareto"]}
    assert front == {"fast-dear", "slow-cheap", "middle", "tie-a"}
    sort_rows(rows, "time", "t", "c")
    assert [r["provider"] for r in rows][:2] == ["no-price", "fast-dear"]
    sort_rows(rows, "cost", "t", "c")
    assert rows[0]["provider"] == "slow-cheap" and rows[-1]["provider"] == "no-price"
    with pytest.raises(FlopwiseError, match="--sort must be one of cost, time"):
        sort_rows(rows, "speed", "t", "c")


@pytest.fixture(scope="module")
def llama70b_1024() -> dict[str, Any]:
    model = load_model("llama-3.1-70b")
    job = CompareTrainJob(tokens=15e12, gpus=1024)
    return compare_train(model, job, from_offers()).to_dict()


def test_done_when_llama70b_on_1024_gpus(llama70b_1024: dict[str, Any]) -> None:
    doc = llama70b_1024
    rows = doc["rows"]
    assert len(rows) >= 20
    costs = [r["cost_usd"] for r in rows]
    assert all(c is not None and c > 0 for c in costs) and costs == sorted(costs)
    front = [r for r in rows if r["pareto"]]
    assert front
    for f in front:  # nothing both faster and cheaper than a front row
        assert not any(
            o["train_days"] < f["train_days"] and o["cost_usd"] < f["cost_usd"] for o in rows
        )
    for r in rows:
        if not r["pareto"]:  # every other row is beaten on both by someone
            assert any(
                o["train_days"] <= r["train_days"] and o["cost_usd"] <= r["cost_usd"] for o in front
            )
        assert r["price_as_of"] and r["train_days"] > 0
        assert r["instances"] == math.ceil(1024 / r["gpus_per_instance"])


def test_cost_is_whole_instances_times_hours(llama70b_1024: dict[str, Any]) -> None:
    rows = {(r["provider"], r["instance"]): r for r in llama70b_1024["rows"]}
    p5 = rows[("aws", "p5.48xlarge")]
    assert p5["instances"] == 128 and p5["gpus_billed"] == 1024
    assert p5["cost_usd"] == pytest.approx(98.32 * 128 * p5["train_days"] * 24, rel=1e-9)
    v5p = rows[("gcp", "tpu-v5p-11776")]  # one slice of 5,888 chips: all of them billed
    assert v5p["instances"] == 1 and v5p["gpus_billed"] == 5888
    # sold only as a 5,888-chip slice: planned on the slice, and the row says so
    assert v5p["gpus"] == 5888 and v5p["gpus_requested"] == 1024
    assert "nearest whole slices to the 1,024 asked" in v5p["chips_note"]
    assert "5,888 GPUs" in v5p["ran"]
    assert v5p["network"]["status"] == "not used"


def test_network_verdicts(llama70b_1024: dict[str, Any]) -> None:
    rows = {(r["provider"], r["instance"]): r for r in llama70b_1024["rows"]}
    # p4d: 400 Gb/s per 8 A100s vs HGX A100's 8 x 200 Gb/s InfiniBand
    p4d = rows[("aws", "p4d.24xlarge")]["network"]
    assert p4d["status"] == "slower" and p4d["planned_with"] == "offer"
    assert p4d["offer_gbit_s_per_gpu"] == 50 and p4d["system_gbit_s_per_gpu"] == 200
    nebius = rows[("nebius", "gpu-h100-sxm_8gpu-128vcpu-1600gb")]["network"]
    assert nebius["status"] == "matches"
    lam = rows[("lambda", "gpu_8x_h100_sxm5")]["network"]
    assert lam["status"] == "unknown" and lam["planned_with"] == "system"
    assert "400" in lam["note"] or "assumes" in lam["note"]


def test_partial_nodes_are_listed_with_a_reason(llama70b_1024: dict[str, Any]) -> None:
    excluded = {(e["provider"], e["instance"]): e["reason"] for e in llama70b_1024["excluded"]}
    assert "slices of a 8-GPU node" in excluded[("lambda", "gpu_1x_h100_sxm5")]
    assert "single-GPU instances" in excluded[("lambda", "gpu_1x_gh200")]
    # A100 PCIe cards now have a catalog node type (pcie-a100-8x): a slice of it
    assert "slices of a 8-GPU node" in excluded[("vultr", "A100-80G")]
    assert excluded.keys().isdisjoint((r["provider"], r["instance"]) for r in llama70b_1024["rows"])


def test_accelerators_mode_uses_given_price() -> None:
    model = load_model("llama-3.1-8b")
    job = CompareTrainJob(tokens=1e12, gpus=64)
    doc = compare_train(model, job, from_accelerators(["h100", "dgx-b200"], 2.0)).to_dict()
    by_acc = {r["accelerator"]: r for r in doc["rows"]}
    assert set(by_acc) == {"h100-sxm", "b200"}
    h100 = by_acc["h100-sxm"]
    assert h100["system"] == "hgx-h100" and h100["price_kind"] == "given"
    assert h100["cost_usd"] == pytest.approx(2.0 * 64 * h100["train_days"] * 24)
    # faster B200 at the same price is cheaper too: it alone is on the front
    assert [r["accelerator"] for r in doc["rows"] if r["pareto"]] == ["b200"]


def test_accelerators_mode_without_price_uses_cheapest_offer_or_unknown() -> None:
    doc = compare_train(
        load_model("llama-3.1-8b"),
        CompareTrainJob(tokens=1e12, gpus=64),
        from_accelerators(["h100-sxm", "mi300x"]),
    ).to_dict()
    by_acc = {r["accelerator"]: r for r in doc["rows"]}
    assert by_acc["h100-sxm"]["price_per_gpu_hour"] == pytest.approx(11.12 / 8)
    assert by_acc["h100-sxm"]["price_as_of"] == "2026-11-22"
    assert by_acc["mi300x"]["cost_usd"] is None and not by_acc["mi300x"]["pareto"]
    assert doc["rows"][-1]["accelerator"] == "mi300x"  # unknown cost sorts last


def test_infer_compare_prices_tokens_and_drops_what_does_not_fit() -> None:
    model = load_model("llama-3.1-70b")
    job = CompareInferJob(batch=16, input_len=1024, output_len=256)
    doc = compare_infer(model, job, from_offers()).to_dict()
    rows = {(r["provider"], r["instance"]): r for r in doc["rows"]}
    p5 = rows[("aws", "p5.48xlarge")]
    assert p5["gpus_per_replica"] * p5["replicas"] == 8
    assert p5["gpus_per_replica"] >= 2  # 141 GB of bf16 weights need two 80 GB GPUs
    per_hour = p5["output_tokens_per_s"] * 3600
    assert p5["cost_per_million_output_tokens"] == pytest.approx(98.32 / per_hour * 1e6)
    excluded = {(e["provider"], e["instance"]): e["reason"] for e in doc["excluded"]}
    assert "does not fit" in excluded[("crusoe", "L40S")]
    assert any(r["pareto"] for r in doc["rows"])


def test_infer_compare_ranges_the_ranked_numbers_and_names_overlaps() -> None:
    model = load_model("llama-3.1-8b")
    # a batch at which the first two offers' cost ranges meet (at batch 32 they did until the
    # 2026-11-25 interval refit narrowed them), so the overlap naming is exercised
    job = CompareInferJob(batch=8, input_len=1000, output_len=500)
    offers = from_accelerators(["h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s"])
    doc = compare_infer(model, job, offers).to_dict()
    for r in doc["rows"]:
        cost, rate = r["cost_per_million_output_tokens"], r["output_tokens_per_s"]
        lo, hi = r["cost_per_million_output_tokens_interval"]
        t_lo, t_hi = r["output_tokens_per_s_interval"]
        # price over throughput: the cost range is the tokens/s range inverted
        assert lo == pytest.approx(cost * rate / t_hi) and hi == pytest.approx(cost * rate / t_lo)
        assert lo <= cost <= hi
        e_lo, e_hi = r["e2e_latency_s_interval"]
        assert e_lo <= r["e2e_latency_s"] <= e_hi
        # the first token moves with the TTFT range, the decode after it with the TPOT range
        first = r["ttft_ms"] / 1e3
        decode = r["e2e_latency_s"] - first
        assert e_hi == pytest.approx(
            r["ttft_ms_interval"][1] / 1e3 + decode * r["tpot_ms_interval"][1] / r["tpot_ms"]
        )
    # ranked by cost, every row whose cost range meets the first's is named, and only those
    first_lo, first_hi = doc["rows"][0]["cost_per_million_output_tokens_interval"]
    expected = [
        i
        for i, r in enumerate(doc["rows"][1:], start=1)
        if r["cost_per_million_output_tokens_interval"][0] <= first_hi
        and first_lo <= r["cost_per_million_output_tokens_interval"][1]
    ]
    assert expected, "these four accelerators' cost ranges are expected to meet"
    assert doc["within_error_of_first"] == [i + 1 for i in expected]


def test_cli_compare_json_is_one_document() -> None:
    proc = run_cli(
        "compare", "train", "llama-3.1-70b", "--tokens", "15T", "--gpus", "1024", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "train" and doc["rows"] and any(r["pareto"] for r in doc["rows"])
    assert {"train_days", "cost_usd", "pareto", "network", "price_as_of"} <= doc["rows"][0].keys()


def test_cli_compare_table_and_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    proc = run_cli("compare", "train", "llama-3.1-70b", "--tokens", "15T", "--gpus", "1024")
    assert proc.returncode == 0, proc.stderr
    assert (
        "★" in proc.stdout
        and "days" in proc.stdout
        and "Price publication dates unknown" in proc.stdout
    )
    assert "Prices as of" not in proc.stdout  # the date a snapshot was read is not its date
    assert "not listed: lambda gpu_1x_h100_pcie" in proc.stdout
    timed = run_cli(
        "compare",
        "train",
        "llama-3.1-8b",
        "--tokens",
        "1T",
        "--gpus",
        "64",
        "--sort",
        "time",
        "--json",
    )
    days = [r["train_days"] for r in json.loads(timed.stdout)["rows"]]
    assert days == sorted(days)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--price-per-gpu-hour", "2"), "--price-per-gpu-hour prices --accelerators"),
        (("--accelerators", "h100", "--provider", "aws"), "drop --accelerators"),
        (("--accelerators", "h100", "--spot"), "drop --accelerators"),
        (("--accelerators", "warp-9000"), "unknown accelerator 'warp-9000'"),
        (("--seq-len", "999999"), "exceeds llama-3.1-70b's context"),
    ],
)
def test_cli_compare_bad_input_is_one_line(args: tuple[str, ...], message: str) -> None:
    proc = run_cli("compare", "train", "llama-3.1-70b", "--tokens", "1T", "--gpus", "64", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_layout_text_is_compact() -> None:
    from flopwise.present.compare_view import layout_text

    layout = {
        "tp": 8,
        "pp": 4,
        "dp": 32,
        "cp": 1,
        "ep": 1,
        "vpp": 2,
        "zero": 1,
        "recompute": "none",
    }
    assert layout_text(layout) == "tp8 pp4 dp32 vpp2 zero1"
    assert layout_text({"tp": 2, "recompute": "full"}) == "tp2 rc-full"
    assert layout_text(None) == "—"


def test_measured_flag_uses_stored_runs_only_where_they_exist(tmp_path: Any) -> None:
    from flopwise.results.store import ResultStore

    db = tmp_path / "r.sqlite"
    ResultStore(db).add(
        "matmul", {"dtype": "bf16", "best_tflops": 500.0}, {}, accelerator="h100-sxm"
    )
    args = ("compare", "train", "llama-3.1-8b", "--tokens", "1T", "--gpus", "64", "--json")
    args += ("--accelerators", "h100,b200", "--price-per-gpu-hour", "2", "--db", str(db))
    plain = {r["accelerator"]: r for r in json.loads(run_cli(*args).stdout)["rows"]}
    measured = {
        r["accelerator"]: r for r in json.loads(run_cli(*args, "--measured").stdout)["rows"]
    }
    # the bf16 run also prices fp16 (same tensor cores), and both are listed as measured
    assert measured["h100-sxm"]["measured"] == ["matmul_tflops:bf16", "matmul_tflops:fp16"]
    assert measured["b200"]["measured"] == [] and plain["h100-sxm"]["measured"] == []
    assert measured["b200"]["train_days"] == plain["b200"]["train_days"]
    # 500 measured TFLOPS is below H100's published MAMF: the plan gets slower
    assert measured["h100-sxm"]["train_days"] > plain["h100-sxm"]["train_days"]


def test_infer_rows_are_the_inference_planners_numbers() -> None:
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.infer import InferJob as PlannerJob
    from flopwise.plan.infer import plan_inference

    model = load_model("llama-3.1-8b")
    doc = compare_infer(
        model, CompareInferJob(batch=8, tp=2), from_offers(providers=["aws"])
    ).to_dict()
    p5 = next(r for r in doc["rows"] if r["instance"] == "p5.48xlarge")
    assert (p5["gpus_per_replica"], p5["replicas"], p5["method"]) == (2, 4, "model")
    hw = hardware_from_catalog("h100-sxm", p5["system"])
    direct = plan_inference(model, hw, PlannerJob(batch=8, tp=2, input_len=1024)).to_dict()
    assert p5["tpot_ms"] == pytest.approx(direct["tpot_ms"])
    assert p5["output_tokens_per_s"] == pytest.approx(4 * direct["output_tokens_per_s"])
    assert set(p5["breakdown"]) >= {"weights_read_ms", "kv_read_ms", "compute_ms"}
    assert "total_ms" not in p5["breakdown"] and "total_gib" not in p5["memory_breakdown"]


def test_infer_engine_sizes_reach_every_offer() -> None:
    # an engine built with 64 sequence slots runs at most 64 at once on every offer: the
    # --engine-max-batch of `plan infer` means the same in `compare infer`
    model = load_model("llama-3.1-8b")
    offers = from_offers(providers=["aws"])
    free = compare_infer(model, CompareInferJob(batch=None, tp=1), offers).to_dict()
    sized = compare_infer(
        model, CompareInferJob(batch=None, tp=1, engine_max_batch=64), offers
    ).to_dict()
    assert max(r["batch"] for r in free["rows"]) > 64
    assert sized["rows"] and all(r["batch"] <= 64 for r in sized["rows"])


def test_infer_batch_max_and_fixed_tp_cli() -> None:
    proc = run_cli(
        "compare",
        "infer",
        "llama-3.1-70b",
        "--batch",
        "max",
        "--tp",
        "8",
        "--json",
        "--provider",
        "aws,nebius",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["job"]["batch"] == "max"
    for r in doc["rows"]:
        assert r["gpus_per_replica"] == 8 and r["batch"] > 1
    excluded = {e["instance"]: e["reason"] for e in doc["excluded"]}
    assert "does not divide a 1-GPU instance" in excluded["gpu-h100-sxm_1gpu-16vcpu-200gb"]


def test_train_rows_are_the_training_planners_numbers(llama70b_1024: dict[str, Any]) -> None:
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.train import TrainJob as PlannerJob
    from flopwise.plan.train import plan_training

    rows = {(r["provider"], r["instance"]): r for r in llama70b_1024["rows"]}
    p5 = rows[("aws", "p5.48xlarge")]
    assert p5["method"] == "model" and p5["network"]["status"] == "matches"
    job = PlannerJob(gpus=1024, seq_len=4096, global_batch_seqs=1024, tokens=15e12)
    direct = plan_training(load_model("llama-3.1-70b"), hardware_from_catalog("h100-sxm"), job)
    assert p5["step_time_s"] == pytest.approx(direct.to_dict()["step_time_s"])
    assert p5["train_days"] == pytest.approx(direct.to_dict()["train_days"])
    assert p5["layout"]["tp"] * p5["layout"]["pp"] * p5["layout"]["dp"] * p5["layout"]["cp"] == 1024
    assert p5["breakdown"]["compute_s"] > 0 and p5["memory_breakdown"]["weights_gib"] > 0
    assert "total_gib" not in p5["memory_breakdown"]
    assert 0 < p5["mfu"] < 1 and p5["memory_per_gpu_gib"] <= p5["device_memory_gib"]


def test_a_slower_offer_network_is_planned_and_costs_time(llama70b_1024: dict[str, Any]) -> None:
    rows = {(r["provider"], r["instance"]): r for r in llama70b_1024["rows"]}
    p4d = rows[("aws", "p4d.24xlarge")]  # 400 Gb/s EFA per 8 A100-40GB
    lam = rows[("lambda", "gpu_8x_a100")]  # unknown: planned with HGX A100's 8 x 200 Gb/s
    assert p4d["accelerator"] == lam["accelerator"] == "a100-sxm-40gb"
    assert p4d["network"]["planned_with"] == "offer" and lam["network"]["planned_with"] == "system"
    assert p4d["step_time_s"] > lam["step_time_s"]


def test_unpublished_network_reason_says_what_to_add(llama70b_1024: dict[str, Any]) -> None:
    excluded = {(e["provider"], e["instance"]): e["reason"] for e in llama70b_1024["excluded"]}
    reason = excluded[("gcp", "tpu-v6e-8")]
    assert "scale-out" in reason and "network_gbit_s" in reason


def test_mfu_flag_uses_the_first_order_estimate() -> None:
    model = load_model("llama-3.1-8b")
    job = CompareTrainJob(tokens=1e12, gpus=64, mfu=0.5)
    doc = compare_train(model, job, from_accelerators(["h100"], 2.0)).to_dict()
    row = doc["rows"][0]
    assert row["method"] == "first-order" and row["mfu"] == 0.5 and row["layout"] is None
    with pytest.raises(FlopwiseError, match="unknown layout choice"):
        CompareTrainJob(tokens=1e12, gpus=64, layout={"tensor": 8})


def test_cli_layout_flags_are_respected() -> None:
    proc = run_cli(
        "compare",
        "train",
        "llama-3.1-70b",
        "--tokens",
        "1T",
        "--gpus",
        "256",
        "--tp",
        "8",
        "--pp",
        "2",
        "--provider",
        "aws,nebius",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["job"]["layout"] == {"tp": 8, "pp": 2}
    assert doc["rows"] and all(
        (r["layout"]["tp"], r["layout"]["pp"]) == (8, 2) for r in doc["rows"]
    )


def test_spot_prices_replace_on_demand_and_drop_offers_without_one() -> None:
    model = load_model("llama-3.1-8b")
    job = CompareTrainJob(tokens=1e12, gpus=64, mfu=0.4)
    doc = compare_train(model, job, from_offers(providers=["aws", "lambda"], spot=True)).to_dict()
    rows = {r["instance"]: r for r in doc["rows"]}
    assert "gpu_8x_h100_sxm5" not in rows  # Lambda publishes no spot price
    p5 = rows["p5.48xlarge"]
    assert p5["price_kind"] == "spot" and p5["price_per_hour"] == 20.9934
    assert p5["cost_usd"] == pytest.approx(20.9934 * 8 * p5["train_days"] * 24)
