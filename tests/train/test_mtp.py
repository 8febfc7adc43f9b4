"""Multi-token-prediction modules (`--mtp-layers`, TrainJob.mtp_layers): DeepSeek-V3's MTP
trained beside the model, priced on the rank that holds it."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.memory import memory_breakdown, mtp_module_params
from flopwise.plan.train.step_time import layer_cost, logits_time_s, mtp_time_s, step_breakdown
from flopwise.workload.hf import load_model

#: DeepSeek-V3's README: 685B weights, "671B of the Main Model weights and 14B of the
#: Multi-Token Prediction (MTP) Module weights" (one module, D = 1 in the paper's §2.2).
MTP_WEIGHTS_PUBLISHED = 14e9


def _ctx(mtp: int, layout: str | None = None, gpus: int = 8) -> ModelContext:
    return ModelContext(
        load_model("deepseek-v3"),
        hardware_from_catalog("b200"),
        TrainJob(
            gpus=gpus, seq_len=4096, global_batch_seqs=4096, dtype="fp8", framework="nemo",
            mtp_layers=mtp, pipeline_layout=layout,
        ),
    )  # fmt: skip


def test_module_weights_match_the_published_checkpoint() -> None:
    # the module's layer and projection, plus the embedding and output head it shares: what
    # DeepSeek's checkpoint stores as its MTP weights
    ctx = _ctx(1)
    shared, experts = mtp_module_params(ctx)
    c = ctx.counts
    total = shared + experts + c.embedding + c.output_projection
    assert total == pytest.approx(MTP_WEIGHTS_PUBLISHED, rel=0.05)


def test_flops_per_token_grow_by_one_layer_and_head() -> None:
    base, mtp = _ctx(0), _ctx(1)
    added = mtp.model_flops_per_token - base.model_flops_per_token
    # a layer (~1/61 of the layers' work), an h x 2h projection and a second pass through the
    # 129K x 7,168 head: between 2% and 8% of DeepSeek-V3's 6 x 37B per token
    assert 0.02 < added / base.model_flops_per_token < 0.08
    head = 6 * base.counts.output_projection
    assert added > head  # the head alone is less than the module


def test_pp1_step_adds_the_module_time_once_per_microbatch() -> None:
    lay = Layout(tp=1, pp=1, dp=8, ep=8, microbatch=1, zero=1)
    a = step_breakdown(_ctx(0), lay, 512)
    ctx = _ctx(1)
    b = step_breakdown(ctx, lay, 512)
    lc = layer_cost(ctx, 1, 1, 1, False, 8)
    per_layer = lc.compute_fwd + lc.compute_bwd + lc.tp_fwd + lc.tp_bwd + lc.ep_fwd + lc.ep_bwd
    module = mtp_time_s(ctx, lay, per_layer, logits_time_s(ctx, 1, 1, 1))
    assert module > per_layer  # a layer, the projection and the head
    assert b.compute - a.compute == pytest.approx(512 * module, rel=1e-9)
    assert b.step_time_s > a.step_time_s


def test_the_rank_with_m_runs_it() -> None:
    # Megatron-Bridge's DeepSeek-V3 layout on PP 16: rank 15 holds one layer, the module and
    # the loss; without MTP the planner's even split leaves rank 15 three layers and the loss
    recipe = "Et*4|(t*4|)*14,tmL"
    lay = Layout(tp=1, pp=16, dp=16, ep=8, microbatch=1, zero=1)
    ctx = _ctx(1, recipe, gpus=256)
    pl = ctx.pipeline(16)
    assert pl is not None and pl.mtp_rank == 15 and pl.rank_layers[15] == 1
    st = step_breakdown(ctx, lay, 256)
    lc = layer_cost(ctx, 1, 1, 1, False, 8)
    per_layer = lc.compute_fwd + lc.compute_bwd
    logits = logits_time_s(ctx, 1, 1, 1)
    module = mtp_time_s(ctx, lay, per_layer + lc.ep_fwd + lc.ep_bwd, logits)
    last = per_layer + logits + module  # rank 15's compute per microbatch
    assert st.compute == pytest.approx(256 * max(4 * per_layer, last), rel=1e-9)
    # memory: rank 15 holds the module, but rank 0's in-flight microbatches still peak
    m_with = memory_breakdown(ctx, lay, 256)
    m_none = memory_breakdown(_ctx(0, "Et*4|(t*4|)*14,tL", gpus=256), lay, 256)
    assert m_with.stage == "first" and m_with.total == pytest.approx(m_none.total)
    # on one rank the module's weights, a layer's activations and its logits all add
    one = Layout(tp=1, pp=1, dp=8, ep=8, microbatch=1, zero=1)
    with_1, with_0 = memory_breakdown(_ctx(1), one, 512), memory_breakdown(_ctx(0), one, 512)
    assert with_1.weights > with_0.weights
    assert with_1.activations > with_0.activations and with_1.logits == 2 * with_0.logits


def test_layout_and_job_must_agree() -> None:
    model, hw = load_model("deepseek-v3"), hardware_from_catalog("b200")
    job = TrainJob(
        gpus=256, seq_len=4096, global_batch_seqs=4096, dtype="fp8", framework="nemo",
        pipeline_layout="Et*4|(t*4|)*14,tmL",
    )  # fmt: skip
    with pytest.raises(FlopwiseError, match="places 1 multi-token-prediction"):
        plan_training(model, hw, job, LayoutConstraints(tp=1, pp=16, dp=16, ep=8))
    with pytest.raises(FlopwiseError, match="--mtp-layers must be"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, mtp_layers=-1)


def test_cli_note_flag_and_json() -> None:
    base = ("plan", "train", "deepseek-v3", "-a", "b200", "--gpus", "256", "--tokens", "1T",
            "--seq-len", "4096", "--global-batch-seqs", "4096", "--dtype", "fp8",
            "--framework", "nemo", "--tp", "1", "--pp", "16", "--dp", "16", "--ep", "8",
            "--microbatch", "1", "--json")  # fmt: skip
    without = json.loads(run_cli(*base).stdout)
    assert without["mtp_layers"] == 0
    assert any("--mtp-layers 1" in n for n in without["notes"])  # the model has one
    r = run_cli(*base, "--mtp-layers", "1", "--pipeline-layout", "Et*4|(t*4|)*14,tmL")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mtp_layers"] == 1 and "notes" not in doc
    assert doc["pipeline_layout"]["mtp_rank"] == 15
    assert doc["step_time_s"] > without["step_time_s"]
    bad = run_cli(*base, "--mtp-layers", "x")
    assert bad.returncode == 2 and "whole number" in bad.stderr and "Traceback" not in bad.stderr
    args = ("plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8", "--tokens", "1T")
    llama = json.loads(run_cli(*args, "--json").stdout)
    assert "notes" not in llama or not any("multi-token" in n for n in llama["notes"])
