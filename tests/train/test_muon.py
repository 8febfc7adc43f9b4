"""Muon (plan/train/muon.py): which matrices it orthogonalises, what it holds, what it costs.

Golden numbers are by hand from the architectures (Llama 3.1 8B: hidden 4096, 32 query and 8 KV
heads of 128, gated MLP 14336, 32 layers, vocab 128256; DeepSeek-V3's MLA: q_lora 1536, kv_lora
512, rope 64, 128 heads of 128 + 64, v 128) and Megatron-Core's Muon (five quintic Newton-Schulz
iterations of 4 m^2 n + 2 m^3 FLOPs on an m x n matrix, m <= n).
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.muon import (
    layer_matrices,
    muon_managed_params,
    newton_schulz_flops,
)
from flopwise.validate.unseen_training import load_unseen_training_runs, pose_argv
from flopwise.workload.hf import load_model
from flopwise.workload.params import count_params


def test_newton_schulz_flops_by_hand() -> None:
    # 7168 x 4096 (DeepSeek-V3's expert fc1, gate and up fused): m = 4096, n = 7168
    one = 4 * 4096**2 * 7168 + 2 * 4096**3
    assert newton_schulz_flops(7168, 4096) == 5 * one
    assert newton_schulz_flops(4096, 7168) == 5 * one  # orientation does not matter


def test_llama_matrices_are_every_layer_weight() -> None:
    m = load_model("llama-3.1-8b")
    mats = layer_matrices(m)
    assert mats.dense_layer == (
        (4096 + 2 * 1024, 4096),  # linear_qkv, fused
        (4096, 4096),  # linear_proj
        (2 * 14336, 4096),  # linear_fc1, gate and up fused
        (4096, 14336),  # linear_fc2
    )
    counts = count_params(m)
    # the matrices are exactly the layers' weights (no biases in Llama); embedding, lm_head and
    # norms stay on AdamW
    assert 32 * sum(r * c for r, c in mats.dense_layer) == muon_managed_params(counts)
    assert counts.total - muon_managed_params(counts) == 2 * 128256 * 4096 + (2 * 32 + 1) * 4096


def test_mla_and_expert_matrices() -> None:
    m = load_model("deepseek-v3")
    mats = layer_matrices(m)
    assert mats.moe_layer[:5] == (
        (1536, 7168),  # q down
        (128 * 192, 1536),  # q up
        (512 + 64, 7168),  # kv down (+ the shared rope key)
        (128 * (128 + 128), 512),  # kv up: nope keys and values
        (7168, 128 * 128),  # output
    )
    assert mats.moe_layer[5] == (256, 7168)  # router
    assert mats.expert == ((2 * 2048, 7168), (7168, 2048))
    counts = count_params(m)
    per_layer = sum(r * c for r, c in mats.moe_layer) + m.experts * sum(
        r * c for r, c in mats.expert
    )
    # within the MLA norms (1-D, AdamW) and the 3 dense layers' MLP difference
    managed = muon_managed_params(counts)
    assert per_layer * m.layers == pytest.approx(managed, rel=0.05)


def _plan(optimizer: str, **cons: object):  # type: ignore[no-untyped-def]
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(gpus=64, seq_len=4096, global_batch_seqs=512, optimizer=optimizer)
    base = {"tp": 1, "pp": 1, "dp": 64, "cp": 1, "microbatch": 2, "recompute": "none"}
    return plan_training(model, hw, job, LayoutConstraints(**{**base, **cons}))  # type: ignore[arg-type]


def test_muon_holds_one_momentum_buffer_where_adam_holds_two() -> None:
    adam, muon = _plan("adamw", zero=1), _plan("muon", zero=1)
    share = (
        muon_managed_params(count_params(load_model("llama-3.1-8b")))
        / count_params(load_model("llama-3.1-8b")).total
    )
    a, b = adam.best.memory, muon.best.memory
    assert b.optimizer == pytest.approx(a.optimizer * (1 - share / 2))
    assert b.master == pytest.approx(a.master)  # fp32 master weights either way


def test_layer_wise_ownership_divides_the_iterations_over_the_dp_group() -> None:
    every_rank = _plan("muon", zero=0).best.step.newton_schulz
    owned = _plan("muon", zero=1).best.step.newton_schulz
    assert every_rank > 0
    # 128 matrices over 64 ranks, the largest (fc1) about 0.4 of a layer's iterations: the
    # busiest owner's share is at least the largest matrix's, at most the even split's ~2x
    assert every_rank / 64 <= owned <= every_rank / 64 * 2.5
    # the FLOPs at full 16-bit peak bound the time from below
    m = load_model("llama-3.1-8b")
    flops = 32 * sum(newton_schulz_flops(r, c) for r, c in layer_matrices(m).dense_layer)
    assert every_rank > flops / 989e12
    assert _plan("muon", zero=1).best.step.optimizer > _plan("adamw", zero=1).best.step.optimizer


def test_tensor_parallel_ranks_duplicate_the_iterations_and_gather_the_momentum() -> None:
    tp1 = _plan("muon", zero=0)
    tp8 = _plan("muon", zero=0, tp=8, dp=8)
    # "duplicated" mode: every TP rank runs the whole matrix, after an all-gather of it
    assert tp8.best.step.newton_schulz > tp1.best.step.newton_schulz


def test_muon_refuses_element_sharded_state() -> None:
    with pytest.raises(FlopwiseError, match="--zero 3 with --optimizer muon"):
        _plan("muon", zero=3)
    with pytest.raises(FlopwiseError, match="--hsdp with --optimizer muon"):
        _plan("muon", hsdp=True)
    with pytest.raises(FlopwiseError, match="not one of adamw, muon"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, optimizer="lion")
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(
        gpus=8, seq_len=2048, global_batch_seqs=64, optimizer="muon", framework="llm-foundry"
    )
    with pytest.raises(FlopwiseError, match="framework llm-foundry runs ZeRO stage"):
        plan_training(model, hw, job)


def test_search_keeps_muon_on_zero_0_or_1() -> None:
    # Llama 3.1 8B without TP or PP on 8 A100-40GB: AdamW fits only with ZeRO-3 (16 B/param of
    # state over 8 GPUs), which Muon's whole-matrix ownership cannot run
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("a100-sxm-40gb")
    cons = LayoutConstraints(tp=1, pp=1)

    def plan(opt: str):  # type: ignore[no-untyped-def]
        job = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, optimizer=opt)
        return plan_training(model, hw, job, cons)

    adam = plan("adamw")
    assert adam.fits and adam.best.layout.zero == 3
    muon = plan("muon")
    assert muon.fits is False and muon.best.layout.zero in (0, 1)
    assert all(c.layout.zero in (0, 1) for c in muon.outcome.top)


def test_cli_flag_json_and_one_line_errors() -> None:
    base = ("plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "64", "--tokens", "1T")
    r = run_cli(*base, "--optimizer", "muon", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["optimizer"]["name"] == "muon"
    assert 0 < doc["optimizer"]["newton_schulz_s"] < doc["breakdown"]["optimizer_s"] + 1e-12
    assert json.loads(run_cli(*base, "--json").stdout)["optimizer"] == {"name": "adamw"}
    text = run_cli(*base, "--optimizer", "muon")
    assert "optimizer muon" in text.stdout and "Newton-Schulz" in text.stdout
    bad = run_cli(*base, "--optimizer", "muon", "--zero", "3")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--zero 3 with --optimizer muon" in bad.stderr
    unknown = run_cli(*base, "--optimizer", "sgd")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr


def test_kimi_k2_rows_are_posed_with_muon() -> None:
    rows = [r for r in load_unseen_training_runs() if r["model"] == "kimi-k2"]
    assert len(rows) == 4
    for r in rows:
        argv = pose_argv(r)
        assert isinstance(argv, list)
        assert argv[argv.index("--optimizer") + 1] == "muon"
        assert argv[argv.index("--zero") + 1] == "1"


def test_checkpoint_holds_muons_smaller_state() -> None:
    # goodput's checkpoint: weights + fp32 master + optimizer state; Muon saves one momentum
    # buffer where Adam saves two moments, on the managed share of the parameters
    base = ("plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "64", "--tokens", "1T")
    adam = json.loads(run_cli(*base, "--zero", "1", "--json").stdout)
    muon = json.loads(run_cli(*base, "--zero", "1", "--optimizer", "muon", "--json").stdout)
    share = muon["optimizer"]["managed_params_share"]
    saved = adam["goodput"]["checkpoint_bytes"] - muon["goodput"]["checkpoint_bytes"]
    # the generic profile's bf16-adam recipe keeps 8 B of Adam moments per parameter
    assert saved == pytest.approx(adam["params"] * 8 * share / 2, rel=1e-6)


def test_newton_schulz_device_script_runs_on_the_cpu() -> None:
    # benchmarks/device/newton_schulz.py is what a GPU session runs to time the iterations the
    # plan prices; on the CPU it checks itself: the quintic iteration leaves every singular value
    # of a gradient-like input (columns spread over a decade of scale) in Jordan's band
    # ("S'_ii ~ Uniform(0.5, 1.5)"); five steps cannot lift far smaller singular values
    import importlib.util
    from pathlib import Path

    torch = pytest.importorskip("torch")
    path = Path(__file__).resolve().parents[2] / "benchmarks/device/newton_schulz.py"
    spec = importlib.util.spec_from_file_location("newton_schulz_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    for rows, cols in ((96, 64), (64, 160)):
        g = torch.randn(rows, cols, dtype=torch.float64) * torch.logspace(0, 1, cols)
        s = torch.linalg.svdvals(mod.newton_schulz(g))
        assert s.min() > 0.5 and s.max() < 1.5, (rows, cols, s.min(), s.max())
    r = __import__("subprocess").run(
        [
            __import__("sys").executable,
            str(path),
            "--cpu",
            "--runs",
            "1",
            "--accelerator",
            "h100-sxm",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "shape,rows,cols,dtype,device,measured_s,planned_s"
    assert len(lines) == 3 and all(float(x.split(",")[-1]) > 0 for x in lines[1:])
