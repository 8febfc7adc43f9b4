"""`flopwise bench step`: a real training step on the CPU, the planner beside it, calibration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.results.store import ResultStore

TINY_CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 256,
}
FAST = ("--device", "cpu", "--layers", "2", "--seq-len", "16", "--steps", "1", "--warmup", "0")


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY_CONFIG))
    return path


@pytest.mark.parametrize("tied", [False, True])
def test_built_model_has_the_parameters_the_planner_counts(tiny: Path, tied: bool) -> None:
    from flopwise.bench.device import import_torch

    import_torch()
    from flopwise.bench.step import reduced_model
    from flopwise.bench.step_model import build, parameter_count
    from flopwise.workload.hf import spec_from_config
    from flopwise.workload.params import count_params

    cfg = {**TINY_CONFIG, "tie_word_embeddings": tied}
    spec = reduced_model(spec_from_config("tiny", cfg), 3, 256)
    model = build(spec, "cpu")
    assert parameter_count(model) == count_params(spec).total
    assert (model.head.weight is model.embed.weight) == tied


def test_cli_step_without_measurements_times_and_says_why_no_prediction(
    tiny: Path, isolated_home: Path
) -> None:
    r = run_cli("bench", "step", str(tiny), *FAST, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)  # exactly one document
    assert doc["layers"] == 2 and doc["layers_full"] == 4 and "2 of 4 layers" in doc["reduced"]
    assert doc["dtype"] == "fp32" and doc["tokens_per_s"] > 0 and doc["step_time_s"] > 0
    # the fused AdamW frameworks run (torch >= 2.4 has it on the CPU too), named in the result
    assert doc["optimizer"] == "AdamW (fused)"
    assert doc["tokens_per_s"] == pytest.approx(16 / doc["step_time_s"])
    assert doc["predicted"]["tokens_per_s"] is None
    assert "bench matmul" in doc["predicted"]["note"] and doc["calibration"] is None
    stored = ResultStore(isolated_home / "results.sqlite").get(doc["result_id"])
    assert stored.kind == "step" and stored.accelerator == "cpu"


def _store_cpu_measurements(home: Path, tflops: float = 0.05, gbps: float = 10.0) -> None:
    store = ResultStore(home / "results.sqlite")
    store.add("matmul", {"dtype": "fp32", "best_tflops": tflops}, {}, accelerator="cpu")
    store.add("memory", {"triad_gbps": gbps}, {}, accelerator="cpu")


def test_step_with_measurements_reports_prediction_mfu_and_ratio(
    tiny: Path, isolated_home: Path
) -> None:
    from flopwise.bench.step import StepConfig, run_step

    _store_cpu_measurements(isolated_home)
    doc = run_step(
        StepConfig(model=str(tiny), device="cpu", layers=2, seq_len=16, steps=1, warmup=0)
    )
    pred = doc["predicted"]
    assert pred["tokens_per_s"] > 0 and pred["mfu"] > 0
    assert doc["calibration"] == pytest.approx(doc["tokens_per_s"] / pred["tokens_per_s"])
    # MFU = model FLOPs/token x tokens/s / peak; the CPU's peak is its measured matmul rate
    assert doc["peak_tflops"] == pytest.approx(0.05)
    assert doc["mfu"] == pytest.approx(doc["model_flops_per_token"] * doc["tokens_per_s"] / 0.05e12)
    assert "measured fp32 matmul rate used as the peak" in pred["peak_source"]


def test_prediction_ignores_an_earlier_calibration(tiny: Path, isolated_home: Path) -> None:
    from flopwise.bench.step_predict import prediction_hardware

    _store_cpu_measurements(isolated_home)
    ResultStore(isolated_home / "results.sqlite").add(
        "step", {"calibration": 0.25, "model": "tiny"}, {}, accelerator="cpu"
    )
    ResultStore(isolated_home / "results.sqlite").add(
        "step", {"calibration": 0.4, "model": "tiny-moe", "moe": True}, {}, accelerator="cpu"
    )
    hw, _ = prediction_hardware("cpu", None, "fp32")
    assert hw.step_calibration is None and "step_calibration" not in hw.origins
    assert hw.step_calibration_moe is None and "step_calibration_moe" not in hw.origins


def _h100_plan(db: Path | None, measured: bool) -> dict[str, Any]:
    args = ["plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8", "--tokens", "1B",
            "--tp", "1", "--pp", "1", "--dp", "8", "--cp", "1", "--microbatch", "1",
            "--recompute", "none", "--zero", "1", "--json"]  # fmt: skip
    if measured:
        args.append("--measured")
    r = run_cli(*args)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_plan_train_measured_uses_the_step_ratio_as_calibration(isolated_home: Path) -> None:
    store = ResultStore(isolated_home / "results.sqlite")
    rid = store.add(
        "step",
        {"calibration": 0.5, "model": "llama-3.1-8b", "layers": 4, "dtype": "bf16"},
        {},
        accelerator="h100-sxm",
    )
    base = _h100_plan(None, measured=False)
    cal = _h100_plan(None, measured=True)
    m = cal["measured"]["step_calibration"]
    assert m["value"] == 0.5 and f"result {rid} " in m["source"]
    # the device's own work takes twice as long; the network does not change
    for key in ("compute_s", "optimizer_s"):
        assert cal["breakdown"][key] == pytest.approx(2 * base["breakdown"][key], rel=0.02)
    assert cal["breakdown"]["dp_comm_exposed_s"] <= 2 * base["breakdown"]["dp_comm_exposed_s"]
    text = run_cli("plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8",
                   "--tokens", "1B", "--measured")  # fmt: skip
    assert "step_calibration" in text.stdout


def test_layers_are_reduced_to_fit_the_device() -> None:
    from flopwise.bench.step import layers_that_fit
    from flopwise.workload.hf import load_model

    spec = load_model("llama-3.1-8b")
    fit = layers_that_fit(spec, 80 * 2**30, 4096, 2)
    assert 1 <= fit < spec.layers  # 8B with fp32 AdamW state does not fit 80 GB whole
    assert layers_that_fit(spec, 10**15, 4096, 2) == spec.layers
    with pytest.raises(FlopwiseError, match="not even one layer"):
        layers_that_fit(spec, 8 * 2**30, 4096, 2)


def test_mla_models_are_refused_in_one_line() -> None:
    r = run_cli("bench", "step", "deepseek-v3", "--device", "cpu")
    assert r.returncode == 2
    assert "multi-head latent attention" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_adamw_falls_back_to_foreach_where_there_is_no_fused_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from flopwise.bench.step import make_adamw

    real = torch.optim.AdamW

    def no_fused(params: object, **kwargs: object) -> object:
        if kwargs.get("fused"):
            raise RuntimeError("`fused=True` requires all the params to be on a supported device")
        return real(params, **kwargs)

    monkeypatch.setattr(torch.optim, "AdamW", no_fused)
    opt, name = make_adamw(torch, [torch.nn.Parameter(torch.zeros(2))])
    assert name.startswith("AdamW (foreach") and isinstance(opt, real)
