"""Explicit pipeline layouts (`--pipeline-layout`, plan/train/pipeline_layout.py): Megatron-Core's
--pipeline-model-parallel-layout notation, each rank's own layers pacing the step and sizing its
memory, the loss rank's logits where the layout puts the loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.memory import memory_breakdown
from flopwise.plan.train.pipeline_layout import layout_stages, parse_pipeline_layout
from flopwise.plan.train.step_time import step_breakdown
from flopwise.workload.hf import load_model

#: Megatron-Bridge's Llama 3 70B FP8 current-scaling recipe on 64 H100s (TP 4, PP 8, VPP 5;
#: src/megatron/bridge/perf_recipes/llama/h100/llama3.py, 2026-08).
RECIPE_70B = "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"


def test_megatron_recipe_layout_by_hand() -> None:
    # 40 stages, stage i on rank i % 8: stage 35 (three layers) on rank 3, the last stage (one
    # layer and the loss) on rank 7, the first (embedding and two layers) on rank 0
    pl = parse_pipeline_layout(RECIPE_70B, 8, 80)
    assert (pl.pp, pl.vpp) == (8, 5)
    assert pl.rank_layers == (10, 10, 10, 11, 10, 10, 10, 9)
    assert pl.chunk_layers[3] == (2, 2, 2, 2, 3)
    assert pl.chunk_layers[7] == (2, 2, 2, 2, 1)
    assert (pl.embedding_rank, pl.loss_rank, pl.busiest_rank) == (0, 7, 3)


def test_nested_groups_commas_and_spaces() -> None:
    # ((t|)*2)*2 is four one-layer stages; commas and spaces are cosmetic
    assert layout_stages("E((t|)*2)*2,tL") == ("Et", "t", "t", "t", "tL")
    assert layout_stages(" E t*2 | t L ") == ("Ett", "tL")
    pl = parse_pipeline_layout("E((t|)*2)*2,tL", 5, 5)
    assert pl.rank_layers == (1,) * 5 and pl.vpp == 1


@pytest.mark.parametrize(
    ("text", "pp", "layers", "says"),
    [
        ("", 1, 1, "empty"),
        ("Et|tm|L", 3, 2, "multi-token-prediction"),
        ("Et|tx|L", 3, 2, "unknown letter 'x'"),
        ("Ett|tt", 2, 4, "loss (L) 0 times"),
        ("tE|tL", 2, 2, "must come first"),
        ("Et|t|tL", 2, 3, "not a multiple of --pp 2"),
        ("Et*3|tL", 2, 5, "places 4 transformer layers"),
        ("E(t|*2L", 1, 2, "never closed"),
        ("Et)|tL", 1, 2, "closes nothing"),
        ("Et*|tL", 2, 2, "needs a count"),
        ("E(t|)tL", 2, 2, "followed by *N"),
        ("E(t*100000|)*100000L", 1, 1, "expands to more than"),
    ],
)
def test_bad_layouts_say_why(text: str, pp: int, layers: int, says: str) -> None:
    with pytest.raises(FlopwiseError) as err:
        parse_pipeline_layout(text, pp, layers)
    assert says in str(err.value)


def _ctx(layout: str | None, **job: object) -> ModelContext:
    args: dict[str, object] = dict(
        gpus=64, seq_len=8192, global_batch_seqs=256, dtype="fp8", framework="nemo"
    )
    args.update(job)
    return ModelContext(
        load_model("llama-3.1-70b"),
        hardware_from_catalog("h100-sxm", "dgx-h100"),
        TrainJob(pipeline_layout=layout, **args),  # type: ignore[arg-type]
    )


LAY = dict(tp=4, pp=8, dp=2, microbatch=1, zero=1, sequence_parallel=True)


def test_a_layout_of_the_default_split_changes_nothing() -> None:
    # ten layers a rank, the loss on the last: the split the plan makes without a layout
    even = "Et*10|(t*10|)*6,t*10L"
    for extra in ({}, {"recompute": "full", "recompute_layers": 1}):
        lay = Layout(**LAY, **extra)  # type: ignore[arg-type]
        a = step_breakdown(_ctx(None), lay, 128)
        b = step_breakdown(_ctx(even), lay, 128)
        assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-12)
        assert b.recompute == pytest.approx(a.recompute, rel=1e-12)
        ma, mb = memory_breakdown(_ctx(None), lay, 128), memory_breakdown(_ctx(even), lay, 128)
        assert mb.total == pytest.approx(ma.total, rel=1e-12)


def test_moving_a_layer_off_the_loss_rank() -> None:
    # 70B's logits (128K vocabulary) cost more than a layer: a rank of ten layers and the loss
    # paces the even split; with one layer moved to the embedding rank the pace is eleven layers
    lay = Layout(**LAY)  # type: ignore[arg-type]
    even = step_breakdown(_ctx(None), lay, 128)
    moved = step_breakdown(_ctx("Et*11|(t*10|)*6,t*9L"), lay, 128)
    assert moved.step_time_s < even.step_time_s
    # same per-layer costs: the paced compute goes from 10 layers + logits to 11 layers
    ctx = _ctx(None)
    from flopwise.plan.train.step_time import layer_cost, logits_time_s

    lc = layer_cost(ctx, 4, 1, 1, True, 1)
    layer = lc.compute_fwd + lc.compute_bwd
    logits = logits_time_s(ctx, 4, 1, 1)
    assert logits > layer  # why moving the layer helps
    assert even.compute == pytest.approx(128 * (10 * layer + logits), rel=1e-9)
    assert moved.compute == pytest.approx(128 * 11 * layer, rel=1e-9)
    # the embedding rank now holds eleven layers' weights and the most in-flight activations
    m_even = memory_breakdown(_ctx(None), lay, 128)
    m_moved = memory_breakdown(_ctx("Et*11|(t*10|)*6,t*9L"), lay, 128)
    assert m_moved.stage == "first" and m_moved.total > m_even.total


def test_block_recompute_counts_each_virtual_stage() -> None:
    # rank 3 of the recipe holds chunks of 2, 2, 2, 2 and 3 layers: one recomputed layer per
    # chunk is five of its eleven, where an even split's share would say 11 x 1/2
    ctx = _ctx(RECIPE_70B)
    lay = Layout(**LAY, vpp=5, recompute="full", recompute_layers=1)  # type: ignore[arg-type]
    st = step_breakdown(ctx, lay, 128)
    from flopwise.plan.train.step_time import layer_cost

    lc = layer_cost(ctx, 4, 1, 1, True, 1)
    unit = lc.compute_fwd + lc.tp_fwd + lc.ep_fwd + lc.cp_fwd
    assert st.recompute == pytest.approx(128 * 5 * unit, rel=1e-9)


def test_plan_takes_vpp_from_the_layout_and_needs_pp() -> None:
    model, hw = load_model("llama-3.1-70b"), hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(
        gpus=64, seq_len=8192, global_batch_seqs=256, dtype="fp8", framework="nemo",
        pipeline_layout=RECIPE_70B,
    )  # fmt: skip
    plan = plan_training(model, hw, job, LayoutConstraints(tp=4, pp=8, dp=2, microbatch=1))
    assert plan.best.layout.vpp == 5
    doc = plan.to_dict()
    assert doc["pipeline_layout"]["rank_layers"] == [10, 10, 10, 11, 10, 10, 10, 9]
    assert doc["pipeline_layout"]["loss_rank"] == 7
    with pytest.raises(FlopwiseError, match="needs --pp"):
        plan_training(model, hw, job, LayoutConstraints(tp=4))
    with pytest.raises(FlopwiseError, match="--vpp 4 disagrees"):
        plan_training(model, hw, job, LayoutConstraints(tp=4, pp=8, vpp=4))
    no_layout = plan_training(
        model, hw, TrainJob(gpus=64, seq_len=8192, global_batch_seqs=256, dtype="fp8",
                            framework="nemo"),
        LayoutConstraints(tp=4, pp=8, dp=2, microbatch=1, vpp=5),
    )  # fmt: skip
    assert no_layout.to_dict()["pipeline_layout"] is None
    # the recipe's layout: rank 3's eleven layers pace it, not rank 7's ten and the logits
    assert plan.step_time_s < no_layout.step_time_s


def test_cli_flag_job_file_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    base = ("plan", "train", "llama-3.1-70b", "-a", "h100-sxm", "--gpus", "64", "--tokens", "1T",
            "--seq-len", "8192", "--global-batch-seqs", "256", "--dtype", "fp8",
            "--framework", "nemo", "--tp", "4", "--pp", "8", "--dp", "2", "--microbatch", "1")  # fmt: skip
    r = run_cli(*base, "--pipeline-layout", RECIPE_70B, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["layout"]["vpp"] == 5 and doc["pipeline_layout"]["layout"] == RECIPE_70B
    text = run_cli(*base, "--pipeline-layout", RECIPE_70B)
    assert "layers per rank 10 10 10 11 10 10 10 9" in " ".join(text.stdout.split())
    job = tmp_path / "job.toml"
    job.write_text(f'pipeline-layout = "{RECIPE_70B}"\n')
    r2 = run_cli(*base, "--config", str(job), "--json")
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["pipeline_layout"]["rank_layers"][3] == 11
    for bad, says in (
        ("Et*10|(t*10|)*6,t*10mL", "multi-token-prediction"),
        ("Et*10|(t*10|)*6,t*9L", "places 79 transformer layers"),
    ):
        e = run_cli(*base, "--pipeline-layout", bad)
        assert e.returncode == 2 and "Traceback" not in e.stderr
        assert says in e.stderr and len(e.stderr.strip().splitlines()) == 1
