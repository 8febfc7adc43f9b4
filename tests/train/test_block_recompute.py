"""Block recompute (`--recompute-layers`, Layout.recompute_layers): only some layers of each
pipeline-stage chunk fully recomputed, as Megatron's block method and torchtitan's per-layer
AC run it; the search uses it when whole-layer recompute is the only other way to fit."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.layout import layout_problem
from flopwise.plan.train.memory import memory_breakdown
from flopwise.plan.train.step_time import step_breakdown
from flopwise.validate.train_rows import PosedRow, load_training_runs, pose
from flopwise.workload.hf import load_model

# NVIDIA's Llama 3.1 405B FP8 layout on 256 GB200 (Megatron-Bridge performance summary)
JOB_405B = TrainJob(gpus=256, seq_len=8192, global_batch_seqs=1536, dtype="fp8", framework="nemo")
LAYOUT_405B = dict(tp=4, pp=16, dp=4, cp=1, vpp=4, microbatch=1, zero=1, sequence_parallel=True)


def test_share_of_a_stage_chunk() -> None:
    lay = Layout(tp=4, pp=16, dp=4, vpp=4, recompute="full", recompute_layers=1)
    assert lay.chunk_layers(126) == 2  # ceil(ceil(126 / 16) / 4)
    assert lay.recompute_share(126) == 0.5
    assert Layout(tp=1, pp=1, dp=8, recompute="full").recompute_share(32) == 1.0
    assert Layout(tp=1, pp=1, dp=8, recompute="full", recompute_layers=16).recompute_share(
        32
    ) == pytest.approx(0.5)
    assert Layout(tp=1, pp=1, dp=8, recompute="selective").recompute_share(32) == 0.0


def test_memory_and_time_sit_between_none_and_full() -> None:
    model = load_model("llama-3.1-8b")
    ctx = ModelContext(model, hardware_from_catalog("h100-sxm", "dgx-h100"), TrainJob(
        gpus=8, seq_len=8192, global_batch_seqs=64))  # fmt: skip
    base = dict(tp=1, pp=1, dp=8, microbatch=1, zero=3)
    m = 8
    mem = {
        n: memory_breakdown(ctx, Layout(**base, recompute="full", recompute_layers=n), m)
        for n in (8, 16, 24)
    }
    full = memory_breakdown(ctx, Layout(**base, recompute="full"), m)
    none = memory_breakdown(ctx, Layout(**base, recompute="none"), m)
    acts = [mem[n].activations for n in (8, 16, 24)]
    assert none.activations > acts[0] > acts[1] > acts[2] > full.activations
    # linear in the recomputed layers: equal steps of 8 layers free equal memory
    assert acts[0] - acts[1] == pytest.approx(acts[1] - acts[2], rel=1e-9)
    step_full = step_breakdown(ctx, Layout(**base, recompute="full"), m)
    step_half = step_breakdown(ctx, Layout(**base, recompute="full", recompute_layers=16), m)
    assert step_half.recompute == pytest.approx(step_full.recompute / 2, rel=1e-9)
    assert step_half.compute == pytest.approx(step_full.compute, rel=1e-9)


def test_search_recomputes_only_the_layers_memory_needs() -> None:
    """Selective recompute does not fit NVIDIA's 405B layout at vpp 4 on GB200 (186 GB);
    recomputing one layer of each two-layer chunk does, and is faster than recomputing all."""
    model = load_model("llama-3.1-405b")
    hw = hardware_from_catalog("gb200")
    free = plan_training(model, hw, JOB_405B, LayoutConstraints(**LAYOUT_405B))
    lay = free.best.layout
    assert (lay.recompute, lay.recompute_layers) == ("full", 1)
    assert free.fits
    every = plan_training(model, hw, JOB_405B, LayoutConstraints(**LAYOUT_405B, recompute="full"))
    assert every.best.layout.recompute_layers == 0
    assert free.step_time_s < 0.9 * every.step_time_s
    # HFU counts the recompute that runs: half of whole-layer recompute's extra FLOPs
    extra_free = free.hw_tflops_per_gpu * free.step_time_s - free.tflops_per_gpu * free.step_time_s
    extra_all = (
        every.hw_tflops_per_gpu * every.step_time_s - every.tflops_per_gpu * every.step_time_s
    )
    assert extra_free == pytest.approx(extra_all / 2, rel=1e-6)


def test_given_layers_are_kept_and_checked() -> None:
    model = load_model("llama-3.1-405b")
    hw = hardware_from_catalog("gb200")
    plan = plan_training(model, hw, JOB_405B, LayoutConstraints(**LAYOUT_405B, recompute_layers=2))
    assert (plan.best.layout.recompute, plan.best.layout.recompute_layers) == ("full", 2)
    bad = Layout(**LAYOUT_405B, recompute="full", recompute_layers=3)
    assert "exceeds the 2 layers of a pipeline stage chunk" in (
        layout_problem(model, JOB_405B, bad) or ""
    )
    with pytest.raises(FlopwiseError, match="goes with --recompute full"):
        LayoutConstraints(recompute="selective", recompute_layers=2)


def test_cli_flag_implies_full_and_errors_in_one_line() -> None:
    common = ["plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8", "--tokens", "1T",
              "--tp", "1", "--pp", "1", "--dp", "8", "--cp", "1", "--microbatch", "1",
              "--zero", "3"]  # fmt: skip
    r = run_cli(*common, "--recompute-layers", "8", "--json")
    assert r.returncode == 0, r.stderr
    lay = json.loads(r.stdout)["layout"]
    assert (lay["recompute"], lay["recompute_layers"]) == ("full", 8)
    r = run_cli(*common, "--recompute-layers", "8")  # the text view says so
    text = " ".join(r.stdout.replace("│", " ").split())
    assert r.returncode == 0 and "recompute full (8 layers of each stage chunk)" in text
    r = run_cli(*common, "--recompute", "selective", "--recompute-layers", "8")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--recompute-layers 8" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli(*common, "--recompute-layers", "40")
    assert r.returncode == 2 and "exceeds the 32 layers" in r.stderr


def test_torchtitan_per_layer_ac_is_posed_as_every_second_layer() -> None:
    rows = {r["id"]: r for r in load_training_runs()}
    posed = pose(rows["tt2411_l3_8b_64a100_sac_layer"])
    assert isinstance(posed, PosedRow)
    assert "--recompute full --recompute-layers 16" in posed.command  # Llama 3 8B: 32 layers
    assert "every 2nd layer fully recomputed" in posed.note
