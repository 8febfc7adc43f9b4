"""What a full activation checkpoint re-runs depends on the framework's checkpoint.

PyTorch's non-reentrant checkpoint stops its recomputation once every tensor the backward saved
is back; a native matmul saves its inputs before it runs, so the layer's last GEMM (the MLP's
output projection, read only by the residual add) is never re-run. Megatron's own checkpoint
re-runs the whole layer. Compiled recomputations (XLA, torch.compile) keep only what the
backward reads. The first three tests measure the mechanism on the installed torch (eager, and
compiled through AOTAutograd's min-cut partitioner); the rest check that the planner prices
each framework's checkpoint that way.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

from aot_graphs import calls, compiled_graphs
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, TrainJob
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.frameworks import FRAMEWORKS, RECOMPUTE_REPLAY_MODES, get_profile
from flopwise.plan.train.step_time import layer_cost, step_breakdown


class _Block(nn.Module):
    """A Llama-style block: norm, fused QKV, causal SDPA, output projection, norm, SwiGLU."""

    def __init__(self, h: int = 32, f: int = 96) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.unsqueeze(1) for t in self.qkv(self.n1(x)).chunk(3, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1)
        h = x + self.o(a)
        y = self.n2(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


class _MatmulShapes(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func.overloadpacket.__name__ in ("mm", "addmm", "bmm"):
            a, b = args[-2:] if func.overloadpacket.__name__ == "addmm" else args[:2]
            self.shapes.append((tuple(a.shape), tuple(b.shape)))
        return func(*args, **(kwargs or {}))


def _backward_matmuls(reentrant: bool | None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    torch.manual_seed(0)
    block = _Block()
    x = torch.randn(2, 8, 32, requires_grad=True)
    out = block(x) if reentrant is None else checkpoint(block, x, use_reentrant=reentrant)
    mode = _MatmulShapes()
    with mode:
        out.sum().backward()
    return mode.shapes


def test_non_reentrant_checkpoint_skips_the_output_projection() -> None:
    plain = _backward_matmuls(None)  # data and weight gradients of the five linears
    early = _backward_matmuls(False)
    full = _backward_matmuls(True)
    assert len(full) - len(plain) == 5  # the reentrant checkpoint re-runs every linear
    assert len(early) - len(plain) == 4  # the non-reentrant one all but the last
    down_proj = ((16, 96), (96, 32))  # w2's forward: tokens x ffn @ ffn x hidden
    assert Counter(full) - Counter(early) == Counter([down_proj])  # the one left out


def test_the_early_stop_is_pytorchs_default() -> None:
    # the switch exists, and turning it off brings the output projection back
    with torch.utils.checkpoint.set_checkpoint_early_stop(False):
        block = _Block()
        x = torch.randn(2, 8, 32, requires_grad=True)
        out = checkpoint(block, x, use_reentrant=False)
    mode = _MatmulShapes()
    with mode:
        out.sum().backward()
    assert len(mode.shapes) == len(_backward_matmuls(True))


def _compiled_backward_matmuls(ac: bool) -> Counter[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Matmul shapes in the backward graph AOTAutograd's min-cut partitioner (inductor's)
    makes of the block, compiled with or without a full activation checkpoint around it."""
    block = _Block()

    def run(x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=False) if ac else block(x)

    bw = compiled_graphs(run, torch.randn(2, 8, 32, requires_grad=True))["bw"]
    return Counter(
        (tuple(n.args[0].meta["val"].shape), tuple(n.args[1].meta["val"].shape))
        for n in calls(bw, "aten.mm.default")
    )


def test_a_compiled_checkpoint_recomputes_only_what_the_backward_reads() -> None:
    recomputed = _compiled_backward_matmuls(True) - _compiled_backward_matmuls(False)
    # QKV, output, gate and up projections again; not the down projection
    assert recomputed == Counter({((16, 32), (32, 96)): 3, ((16, 32), (32, 32)): 1})


def _ctx(
    framework: str,
    dtype: str = "bf16",
    compile: bool | None = None,
    replay: str | None = None,
) -> ModelContext:
    from flopwise.workload.hf import load_model

    return ModelContext(
        load_model("llama-3.1-8b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(
            gpus=8,
            seq_len=4096,
            global_batch_seqs=16,
            framework=framework,
            dtype=dtype,
            compile=compile,
            recompute_replay=replay,
        ),
    )


def _full(tp: int = 1) -> Layout:
    return Layout(
        tp=tp, pp=1, dp=8 // tp, cp=1, zero=3, microbatch=1, recompute="full",
        sequence_parallel=tp > 1,
    )  # fmt: skip


def test_every_profile_names_a_known_checkpoint() -> None:
    modes = {get_profile(n).recompute_replay for n in FRAMEWORKS}
    assert modes <= set(RECOMPUTE_REPLAY_MODES)
    assert get_profile("megatron-core").recompute_replay == "replay"
    # torchtitan's FullAC passes early_stop=False since 2025-08-29; llm-foundry's Composer
    # checkpoint is non-reentrant on torch >= 2.1
    assert get_profile("torchtitan").recompute_replay == "replay"
    assert get_profile("llm-foundry").recompute_replay == "early-stop"
    assert get_profile("maxtext").recompute_replay == "dce"


@pytest.mark.parametrize("tp", [1, 2])
def test_early_stop_full_recompute_leaves_the_tail_out(tp: int) -> None:
    ctx = _ctx("torchtitan", replay="early-stop")  # torchtitan before 2025-08-29
    lay = _full(tp)
    lc = layer_cost(ctx, tp, 1, 1, tp > 1, 1)
    assert lc.tail_fwd > 0.0
    m = lay.microbatches(ctx.job)
    bd = step_breakdown(ctx, lay, m)
    whole = lc.compute_fwd + lc.tp_fwd + lc.ep_fwd + lc.cp_fwd
    assert bd.recompute == pytest.approx(m * ctx.layers * (whole - lc.tail_fwd))
    # the output projection is h x ffn of the layer's 2h(h + kv) + 3h ffn weights: 30-40% of
    # its GEMMs for Llama 3 8B, so the recompute is clearly, not entirely, cheaper
    assert 0.15 < lc.tail_fwd / whole < 0.45


def test_megatron_replays_the_whole_layer() -> None:
    ctx = _ctx("megatron-core")
    lay = _full()
    lc = layer_cost(ctx, 1, 1, 1, False, 1)
    m = lay.microbatches(ctx.job)
    bd = step_breakdown(ctx, lay, m)
    whole = lc.compute_fwd + lc.tp_fwd + lc.ep_fwd + lc.cp_fwd
    assert bd.recompute == pytest.approx(m * ctx.layers * whole)


def test_eager_fp8_linears_are_replayed_compiled_blocks_are_not() -> None:
    # torchao's eager Float8Linear is an autograd.Function: it saves after its GEMM runs
    assert not _ctx("torchtitan", "fp8", replay="early-stop").job.recompute_skips_tail
    assert _ctx("torchtitan", "bf16", replay="early-stop").job.recompute_skips_tail
    assert not _ctx("llm-foundry", "fp8").job.recompute_skips_tail  # te.Linear
    # --compile compiles torchtitan's blocks: the partitioner decides, early stop or not
    assert _ctx("torchtitan", "fp8", compile=True).job.recompute_replay_mode == "dce"
    assert _ctx("torchtitan", "bf16").job.recompute_replay_mode == "replay"  # today's default
    # Megatron's checkpoint is not compiled by --compile (a torchtitan flag)
    assert not _ctx("nemo", "fp8", compile=True).job.recompute_skips_tail


def test_moe_layers_keep_their_experts_in_the_recompute() -> None:
    from flopwise.workload.hf import load_model

    ctx = ModelContext(
        load_model("qwen3-30b-a3b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=16, framework="torchtitan"),
    )
    assert layer_cost(ctx, 1, 1, 1, False, 8).tail_fwd == 0.0  # every layer is MoE


@pytest.mark.parametrize(
    ("framework", "flag", "mode"),
    [
        ("torchtitan", None, "replay"),
        ("torchtitan", "early-stop", "early-stop"),
        ("megatron-core", None, "replay"),
        ("llm-foundry", "replay", "replay"),  # torch 1.13's non-reentrant checkpoint
        ("megatron-core", "dce", "dce"),
    ],
)
def test_a_plan_says_what_its_full_recompute_re_runs(
    framework: str, flag: str | None, mode: str
) -> None:
    from flopwise.plan.train import LayoutConstraints, plan_training
    from flopwise.workload.hf import load_model

    def plan(recompute: str, replay: str | None) -> dict[str, object]:
        job = TrainJob(
            gpus=8, seq_len=4096, global_batch_seqs=16, framework=framework,
            recompute_replay=replay,
        )  # fmt: skip
        cons = LayoutConstraints(tp=1, pp=1, microbatch=1, recompute=recompute)
        return plan_training(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job,
                             cons).to_dict()  # fmt: skip

    full = plan("full", flag)
    assert full["recompute_replay"]["mode"] == mode  # type: ignore[index]
    assert plan("none", flag)["recompute_replay"] is None
    if flag is not None:  # the flag moves the recompute time as its mode says
        default = plan("full", None)
        faster = mode != "replay"
        rc, rc0 = full["breakdown"]["recompute_s"], default["breakdown"]["recompute_s"]  # type: ignore[index]
        assert (rc < rc0) if faster else (rc > rc0)


def test_hardware_flops_count_the_recompute_that_runs() -> None:
    from flopwise.workload.hf import load_model

    replay, early = _ctx("torchtitan"), _ctx("torchtitan", replay="early-stop")
    m = load_model("llama-3.1-8b")
    skipped = 2.0 * m.hidden * m.ffn * m.layers  # one down projection per layer, per token
    assert replay.recompute_flops_per_token["full"] - early.recompute_flops_per_token[
        "full"
    ] == pytest.approx(skipped)
    assert early.model_flops_per_token == replay.model_flops_per_token  # MFU's count is fixed
