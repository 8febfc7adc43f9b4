"""MaxText remat policies and XLA-on-TPU memory (workload/remat.py, plan/train/xla_memory.py).

Golden numbers are derived by hand from Llama 2 70B's architecture (hidden 8192, 64 query heads
and 8 KV heads of 128, gated MLP 28672, 80 layers; Touvron et al. 2023 / its HF config.json)
and MaxText's checkpoint_name tags (decoders.py get_remat_policy at 92e59fdf): elements per
token of each residual, 2 bytes each.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, TrainJob
from flopwise.plan.train.activations import layer_acts
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.memory import memory_breakdown
from flopwise.validate.train_remat import maxtext_remat
from flopwise.validate.train_rows import load_training_runs
from flopwise.workload.flops import train_flops_per_token
from flopwise.workload.hf import load_model
from flopwise.workload.remat import parse_remat_tensors, residual_elements

H, Q, KV, FFN = 8192, 64 * 128, 8 * 128, 28672
#: MaxText llama3_1_70b_8192's custom policy (maxtext_trillium_model_configs.py@92e59fdf)
OFFLOAD_70B = (
    ("decoder_layer_input", "offload"),
    ("key_proj", "offload"),
    ("query_proj", "offload"),
    ("value_proj", "offload"),
)


@pytest.fixture(scope="module")
def llama70():  # type: ignore[no-untyped-def]
    return load_model("llama-2-70b")


# (policy, elements per token kept in HBM, offloaded to host), TP 1
GOLDEN = [
    # input + q + k + v + out_proj + both MLP input projections (mlpwo only feeds the residual)
    ("minimal", H + Q + 2 * KV + H + 2 * FFN, 0),
    ("minimal_with_context", H + Q + 2 * KV + H + 2 * FFN + Q, 0),
    ("save_dot_except_mlpwi", H + Q + 2 * KV + H, 0),
    ("save_dot_except_mlp", H + Q + 2 * KV + H, 0),
    ("save_dot_with_context_except_mlp", H + Q + 2 * KV + Q + H, 0),
    ("save_qkv_proj", H + Q + 2 * KV, 0),
    ("save_out_proj", H + H, 0),
    ("qkv_proj_offloaded", H, Q + 2 * KV),
    ("minimal_offloaded", H, Q + 2 * KV + H + 2 * FFN),
]


@pytest.mark.parametrize(("policy", "device", "host"), GOLDEN)
def test_policy_residuals_per_token(llama70, policy: str, device: int, host: int) -> None:  # type: ignore[no-untyped-def]
    assert residual_elements(llama70, 1, False, policy) == (device, host)


def test_custom_policy_offloads_what_the_recipe_names(llama70) -> None:  # type: ignore[no-untyped-def]
    # nothing kept in HBM: the layer input and q/k/v go to host (8192 + 8192 + 1024 + 1024)
    assert residual_elements(llama70, 1, False, "custom", OFFLOAD_70B) == (0, 18432)
    # custom with nothing named is MaxText's default: layer input on device, the rest remat
    assert residual_elements(llama70, 1, False, "custom") == (H, 0)


def test_tensor_parallel_splits_heads_mlp_and_sequence_parallel_hidden(llama70) -> None:  # type: ignore[no-untyped-def]
    # TP 8 with MaxText's activation_embed on the tensor axis: hidden 1024, q 1024, one KV head
    # of 128 each for k and v, MLP 2 x 3584
    assert residual_elements(llama70, 8, True, "minimal") == (1024 + 1024 + 256 + 1024 + 7168, 0)


def test_kept_bytes_per_layer_reach_the_memory_model(llama70) -> None:  # type: ignore[no-untyped-def]
    # MaxText tiering llama2-70b on v5p: per_device_batch 4 x 4096 tokens, FSDP over 512 chips
    ctx = ModelContext(
        llama70,
        hardware_from_catalog("tpu-v5p"),
        TrainJob(gpus=512, seq_len=4096, global_batch_seqs=2048, framework="maxtext"),
    )
    lay = Layout(tp=1, pp=1, dp=512, microbatch=4, zero=3, recompute="save_dot_except_mlpwi")
    kept, _working = layer_acts(ctx, lay)
    assert kept == (H + Q + 2 * KV + H) * 4 * 4096 * 2  # 872,415,232 B per layer


def test_recompute_flops_follow_what_is_not_kept(llama70) -> None:  # type: ignore[no-untyped-def]
    def extra(rc: str, custom: tuple[tuple[str, str], ...] = ()) -> float:
        return train_flops_per_token(llama70, 4096, recompute=rc, remat_tensors=custom).recompute

    attn = train_flops_per_token(llama70, 4096, recompute="selective").recompute
    mlp_in = 2 * 80 * 2 * H * FFN  # gate and up projections, 2 FLOPs per multiply-add
    wo = 2 * 80 * Q * H
    assert extra("minimal") == pytest.approx(attn)  # only the attention core, as selective
    assert extra("minimal_offloaded") == pytest.approx(attn)
    assert extra("minimal_with_context") == 0.0
    assert extra("save_dot_except_mlpwi") == pytest.approx(attn + mlp_in)
    assert extra("save_qkv_proj") == pytest.approx(attn + wo + mlp_in)
    assert extra("qkv_proj_offloaded") == pytest.approx(attn + wo + mlp_in)
    assert extra("custom", OFFLOAD_70B) == pytest.approx(attn + wo + mlp_in)
    assert mlp_in == 75_161_927_680


def test_xla_gathers_one_scanned_layer_pytorch_fsdp_two(llama70) -> None:  # type: ignore[no-untyped-def]
    # ZeRO-3 transient: gathered 16-bit weights and 16-bit gradients of one layer on TPU
    # (855,654,400 params x 4 B), of two on an H100 (PyTorch FSDP prefetch)
    lay = Layout(tp=1, pp=1, dp=256, microbatch=1, zero=3, recompute="full")
    job = TrainJob(gpus=256, seq_len=4096, global_batch_seqs=256, recipe="fsdp-mixed")
    tpu = memory_breakdown(ModelContext(llama70, hardware_from_catalog("tpu-v5p"), job), lay, 1)
    gpu = memory_breakdown(ModelContext(llama70, hardware_from_catalog("h100-sxm"), job), lay, 1)
    assert tpu.zero3_gathered == pytest.approx(855_654_400 * 4, rel=1e-6)
    assert gpu.zero3_gathered == pytest.approx(2 * tpu.zero3_gathered)
    # no CUDA context, NCCL buffers or caching allocator on a TPU
    assert tpu.framework == 0.0 and tpu.fragmentation == 0.0
    assert gpu.framework > 0.0 and gpu.fragmentation > 0.0


def test_xla_loss_and_layer_backward_are_two_peaks(llama70) -> None:  # type: ignore[no-untyped-def]
    lay = Layout(tp=1, pp=1, dp=256, microbatch=2, zero=3, recompute="custom")
    job = TrainJob(
        gpus=256,
        seq_len=8192,
        global_batch_seqs=512,
        framework="maxtext",
        fused_loss=True,
        remat_tensors=OFFLOAD_70B,
    )
    mem = memory_breakdown(ModelContext(llama70, hardware_from_catalog("tpu-v6e"), job), lay, 1)
    state = mem.weights + mem.grads + mem.master + mem.optimizer
    layer_phase = mem.zero3_gathered + mem.activations
    assert mem.total == pytest.approx(state + max(layer_phase, mem.logits))
    assert 0 < mem.phase_reuse < layer_phase + mem.logits
    # the offloaded tensors live in host memory: 80 layers x 2 x 8192 x 18432 x 2 B
    assert mem.host_offload == pytest.approx(80 * 2 * 8192 * 18432 * 2)


def test_tpu_capacities_are_what_xla_may_allocate() -> None:
    # XLA:TPU's own out-of-memory messages and JAX's bytes_limit (catalog notes give sources)
    gib = 2**30
    assert hardware_from_catalog("tpu-v5e").memory_bytes == pytest.approx(15.75 * gib)
    assert hardware_from_catalog("tpu-v6e").memory_bytes == pytest.approx(31.25 * gib)
    assert hardware_from_catalog("tpu-v5p").memory_bytes == pytest.approx(95.74 * gib)


def test_bad_remat_tensors_are_one_line_errors() -> None:
    with pytest.raises(FlopwiseError, match="query_proj"):
        parse_remat_tensors("query=offload")
    with pytest.raises(FlopwiseError, match="PLACE"):
        parse_remat_tensors("query_proj=disk")
    with pytest.raises(FlopwiseError, match="decoder_layer_input"):
        parse_remat_tensors("decoder_layer_input=remat")
    assert parse_remat_tensors("value_proj=offload, query_proj=device") == (
        ("query_proj", "device"),
        ("value_proj", "offload"),
    )


def test_published_maxtext_rows_pose_their_remat_policy() -> None:
    rows = {r["id"]: r for r in load_training_runs()}
    assert maxtext_remat(rows["maxtext_v5p_32b_1xv5p128"])[:2] == ("minimal", "")
    assert maxtext_remat(rows["maxtext_tier_v5p_llama2_70b"])[0] == "save_dot_except_mlpwi"
    # the v5e table was published with 128b.sh at remat_policy=full (76bd53b)
    assert maxtext_remat(rows["maxtext_v5e_128b_1x256"])[0] == "full"
    policy, tensors, _ = maxtext_remat(rows["maxtext_tier_v6e_llama31_70b"])
    assert policy == "custom"
    assert parse_remat_tensors(tensors) == OFFLOAD_70B


def test_cli_plans_a_maxtext_policy_with_host_offload() -> None:
    r = run_cli(
        "plan", "train", "llama-2-70b", "-a", "tpu-v6e", "--system", "tpu-v6e-slice",
        "--gpus", "256", "--seq-len", "4096", "--global-batch-seqs", "512", "--tokens", "1T",
        "--framework", "maxtext", "--tp", "1", "--pp", "1", "--dp", "256", "--cp", "1",
        "--microbatch", "2", "--zero", "3", "--recompute", "custom", "--remat-tensors",
        "decoder_layer_input=offload,query_proj=offload,key_proj=offload,value_proj=offload",
        "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    mem = json.loads(r.stdout)["memory_breakdown"]
    assert mem["host_offload_gib"] == pytest.approx(80 * 2 * 4096 * 18432 * 2 / 2**30)
    bad = run_cli(
        "plan", "train", "llama-2-70b", "-a", "tpu-v6e", "--gpus", "256",
        "--recompute", "custom", "--remat-tensors", "wq=offload",
    )  # fmt: skip
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1


def test_maxtext_search_tries_its_own_remat_policies(llama70) -> None:  # type: ignore[no-untyped-def]
    from flopwise.plan.train import LayoutConstraints, plan_training
    from flopwise.plan.train.frameworks import get_profile

    modes = get_profile("maxtext").recompute_modes
    assert modes is not None and "minimal" in modes and "selective" not in modes
    # host offloading is chosen only when asked: its copies' time is not modelled
    assert not any("offload" in m for m in modes)
    job = TrainJob(gpus=512, seq_len=4096, global_batch_seqs=2048, tokens=1e12, framework="maxtext")
    cons = LayoutConstraints(tp=1, pp=1, dp=512, cp=1, zero=3)
    plan = plan_training(llama70, hardware_from_catalog("tpu-v5p"), job, cons)
    assert plan.best.layout.recompute in modes


def test_xla_fuses_pointwise_work_into_the_matmuls(llama70, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # MaxText's profile: residual adds, SwiGLU and RoPE ride on matmul fusions; only the two
    # norms' reductions read the hidden state (2h per token per layer instead of 10h + 3 x FFN
    # + RoPE's 2 x (q + kv) heads x head_dim). The same job with that flag off pays the rest.
    from dataclasses import replace

    import flopwise.plan.train.frameworks as fw
    from flopwise.plan.train.step_time import layer_cost

    job = TrainJob(gpus=256, seq_len=4096, global_batch_seqs=1024, framework="maxtext")
    fused_ctx = ModelContext(llama70, hardware_from_catalog("tpu-v5p"), job)
    fused = layer_cost(fused_ctx, tp=1, cp=1, mb=1, sp=False, ep=1)
    unfused_profile = replace(fw.PROFILES["maxtext"], fused_pointwise=False)
    real = fw.get_profile
    monkeypatch.setattr(
        fw, "get_profile", lambda name: unfused_profile if name == "maxtext" else real(name)
    )
    unfused_ctx = ModelContext(llama70, hardware_from_catalog("tpu-v5p"), job)
    unfused = layer_cost(unfused_ctx, tp=1, cp=1, mb=1, sp=False, ep=1)
    rope = 2 * (64 + 8) * 128
    saved_elems = (10 * H - 2 * H) + 3 * FFN + rope
    saved_fwd_s = saved_elems * 4096 * 2 / fused_ctx.bw_bytes_s
    assert unfused.compute_fwd - fused.compute_fwd == pytest.approx(saved_fwd_s)
    assert unfused.compute_bwd - fused.compute_bwd == pytest.approx(2 * saved_fwd_s)
    assert fw.get_profile("torchtitan").fused_pointwise is False


def test_xla_fsdp_spends_no_gradient_flatten_cast_or_divide_pass(llama70, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # PyTorch FSDP copies each microbatch's unsharded gradients into a flat buffer (read 2 +
    # write 2 B), casts them to the fp32 reduce dtype (read 2, write 4) and pre-divides them
    # (read 4, write 4): 18 B per parameter in HBM before the reduce-scatter. A JAX gradient is
    # one array per parameter that GSPMD reduce-scatters straight from its producing fusion, so
    # MaxText's ZeRO-3 step pays only the fixed time; the same step priced as PyTorch FSDP1's
    # flat parameter pays the 18 B per parameter.
    from dataclasses import replace

    import flopwise.plan.train.frameworks as fw
    from flopwise.plan.train.constants import STEP_FIXED_S
    from flopwise.plan.train.step_time import step_breakdown

    job = TrainJob(gpus=256, seq_len=4096, global_batch_seqs=1024, framework="maxtext")
    lay = Layout(tp=1, pp=1, dp=256, microbatch=2, zero=3, recompute="full")
    fused_ctx = ModelContext(llama70, hardware_from_catalog("tpu-v5p"), job)
    assert step_breakdown(fused_ctx, lay, 2).other == pytest.approx(STEP_FIXED_S)
    unfused_profile = replace(fw.PROFILES["maxtext"], zero_grad_handling="flat")
    real = fw.get_profile
    monkeypatch.setattr(
        fw, "get_profile", lambda name: unfused_profile if name == "maxtext" else real(name)
    )
    unfused_ctx = ModelContext(llama70, hardware_from_catalog("tpu-v5p"), job)
    extra = step_breakdown(unfused_ctx, lay, 2).other - STEP_FIXED_S
    # Llama 2 70B: 80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672) + 2 x 32000 x 8192
    params = 80 * (2 * H * H + 2 * H * KV + 3 * H * FFN) + 2 * 32000 * H
    assert extra == pytest.approx(2 * params * 18.0 / unfused_ctx.bw_bytes_s, rel=0.02)
