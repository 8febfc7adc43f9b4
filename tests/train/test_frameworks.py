"""Framework profiles: what each changes in a plan, and what a framework cannot run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.frameworks import FRAMEWORKS, PROFILES, get_profile
from flopwise.workload.hf import load_model

FIXED = LayoutConstraints(tp=8, pp=4, dp=4, cp=1, vpp=1, microbatch=1, recompute="full", zero=1)


def _plan(**job: object):  # type: ignore[no-untyped-def]
    model = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    j = TrainJob(gpus=128, seq_len=4096, global_batch_seqs=256, **job)  # type: ignore[arg-type]
    return plan_training(model, hw, j, FIXED)


def test_every_profile_cites_sources() -> None:
    for p in PROFILES.values():
        assert p.sources, p.name
        assert p.summary


def test_unknown_framework_is_a_one_line_error() -> None:
    with pytest.raises(FlopwiseError, match="not one of"):
        get_profile("jax-magic")
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
        "--framework",
        "nope",
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_profile_sets_the_attention_kernel() -> None:
    unfused = _plan(framework="deepspeed").step_time_s
    fused = _plan(framework="deepspeed", attention="flash").step_time_s
    assert unfused > fused  # s^2 scores through HBM


def test_override_beats_the_profile() -> None:
    nemo = _plan(framework="nemo")  # TP comm overlap on
    forced = _plan(framework="nemo", tp_comm_overlap=False)
    assert forced.best.step.tp_comm > nemo.best.step.tp_comm
    assert _plan(framework="generic", tp_comm_overlap=True).best.step.tp_comm == pytest.approx(
        nemo.best.step.tp_comm
    )


def test_dp_reduction_after_the_flush_is_exposed() -> None:
    after = _plan(framework="deepspeed", attention="flash").best.step.dp_comm
    during = _plan(framework="generic").best.step.dp_comm
    assert after > during


def test_framework_without_tp_refuses_tp_and_pins_it() -> None:
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(gpus=64, seq_len=4096, global_batch_seqs=512, framework="llm-foundry")
    plan = plan_training(model, hw, job)
    assert plan.best.layout.tp == plan.best.layout.pp == 1
    assert plan.best.layout.zero in (2, 3)
    with pytest.raises(FlopwiseError, match="no tensor parallelism"):
        plan_training(model, hw, job, LayoutConstraints(tp=2))


def test_plan_json_names_the_framework_and_its_recipe() -> None:
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
        "--framework",
        "torchtitan",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["framework"]["name"] == "torchtitan"
    assert doc["recipe"] == "fsdp-mixed"
    assert set(FRAMEWORKS) >= {"generic", "megatron-core", "nemo", "torchtitan", "maxtext"}


def test_megatron_frameworks_run_megatron_fsdp_as_zero3_but_no_zero2() -> None:
    # Megatron-FSDP (--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params)
    # shards weights, gradients and optimizer state: ZeRO-3. Its weights are gathered before each
    # microbatch's forward and again before its backward, so it moves more than the distributed
    # optimizer and holds less
    model = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    for name in ("megatron-core", "nemo"):
        assert get_profile(name).zero_stages == (0, 1, 3)
        job = TrainJob(gpus=128, seq_len=4096, global_batch_seqs=256, framework=name)
        z1 = plan_training(model, hw, job, FIXED).best
        z3 = plan_training(model, hw, job, replace(FIXED, zero=3, hsdp=False)).best
        assert z3.layout.zero == 3 and not z3.layout.hsdp
        assert z3.memory.weights < z1.memory.weights and z3.memory.grads < z1.memory.grads
        assert z3.step.dp_comm > z1.step.dp_comm
        with pytest.raises(FlopwiseError, match=r"runs ZeRO stage\(s\) 0, 1, 3"):
            plan_training(model, hw, job, replace(FIXED, zero=2))


def test_megatron_fsdp_accumulates_gradients_in_its_communication_buckets() -> None:
    # PyTorch FSDP copies each microbatch's unsharded gradients into a flat buffer, casts them to
    # the reduce dtype and pre-divides them; Megatron-FSDP's main_grad is a view of the
    # reduce-scatter bucket (TE's fused wgrad accumulation writes there, zero-copy) and a 16-bit
    # bucket is only pre-scaled in place: read 2 + write 2 = 4 B per parameter per microbatch
    from flopwise.plan.train.constants import STEP_FIXED_S
    from flopwise.workload.params import count_params

    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    cons = LayoutConstraints(tp=1, pp=1, dp=8, cp=1, microbatch=1, recompute="none", zero=3)
    job = TrainJob(gpus=8, seq_len=8192, global_batch_seqs=32, framework="nemo")
    plan = plan_training(model, hw, job, replace(cons, hsdp=False))
    assert get_profile("nemo").zero_grad_handling == "in-bucket"
    assert plan.job.recipe_name == "mcore-bf16"  # 16-bit gradients, reduced in 16 bits
    from flopwise.plan.train.context import ModelContext

    bw = ModelContext(model, hw, job).bw_bytes_s
    m = plan.best.microbatches
    expect = m * count_params(model).total * 4.0 / bw
    assert plan.best.step.other - STEP_FIXED_S == pytest.approx(expect, rel=1e-6)
    # the generic profile (PyTorch FSDP, fp32 reduce): flatten 4 + cast 2 + 4 + divide 4 + 4
    generic = plan_training(model, hw, replace(job, framework="generic"), replace(cons, hsdp=False))
    assert get_profile("generic").zero_grad_handling == "flat"
    assert generic.best.step.other - STEP_FIXED_S == pytest.approx(expect * 18.0 / 4.0, rel=1e-6)


def test_fsdp2_copies_gradients_in_once_and_divides_in_nccl() -> None:
    # torchtitan's FSDP2: foreach_reduce copies the bf16 gradients into the fp32 reduce-scatter
    # input (read 2, write 4) and lets NCCL's AVG divide: 6 B per parameter per microbatch,
    # where FSDP1's flat parameter pays 18 (flatten 4, cast 2 + 4, divide 4 + 4)
    from flopwise.plan.train.constants import STEP_FIXED_S
    from flopwise.plan.train.context import ModelContext
    from flopwise.workload.params import count_params

    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    cons = LayoutConstraints(
        tp=1, pp=1, dp=8, cp=1, microbatch=1, recompute="none", zero=3, hsdp=False
    )
    job = TrainJob(gpus=8, seq_len=8192, global_batch_seqs=16, framework="torchtitan")
    plan = plan_training(model, hw, job, cons)
    assert get_profile("torchtitan").zero_grad_handling == "fsdp2-copy-in"
    assert plan.job.recipe_name == "fsdp-mixed"  # fp32 reduction
    bw = ModelContext(model, hw, job).bw_bytes_s
    expect = plan.best.microbatches * count_params(model).total * 6.0 / bw
    assert plan.best.step.other - STEP_FIXED_S == pytest.approx(expect, rel=1e-6)


def test_a_profile_names_a_known_gradient_handling() -> None:
    with pytest.raises(FlopwiseError, match="zero_grad_handling 'bucketed' is not one of"):
        replace(get_profile("generic"), zero_grad_handling="bucketed")
