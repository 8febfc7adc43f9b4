"""Memory model: golden numbers from the papers and invariants that must always hold."""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, TrainJob
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.memory import layer_activation_bytes, memory_breakdown, state_bytes
from flopwise.workload.hf import load_model
from flopwise.workload.spec import ModelSpec

GPT3 = ModelSpec(
    name="gpt3-175b",
    model_type="gpt2",
    hidden=12288,
    layers=96,
    heads=96,
    kv_heads=96,
    head_dim=128,
    v_head_dim=128,
    vocab=51200,
    ffn=4 * 12288,
    gated_mlp=False,
    linear_bias=True,
    norm="layernorm",
    tied_embeddings=True,
    learned_positions=2048,
)


def _ctx(
    model: ModelSpec,
    gpus: int,
    acc: str = "a100-sxm-80gb",
    gbs: int = 1536,
    seq: int = 2048,
    **job: object,
) -> ModelContext:
    return ModelContext(
        model,
        hardware_from_catalog(acc),
        TrainJob(gpus=gpus, seq_len=seq, global_batch_seqs=gbs, **job),
    )  # type: ignore[arg-type]


def test_activations_match_korthikanti_table2_tp_sp() -> None:
    # Korthikanti et al. 2022 Table 2, TP + SP, no recompute: (s*b*h/t) * (34 + 5as/h) bytes.
    # FlashAttention drops the 5as/h term; we train without dropout, dropping its 2 bytes of
    # masks: 32 s*b*h/t, plus FlashAttention's log-sum-exp (4a bytes per token, /t).
    ctx = _ctx(GPT3, 8)
    s, b, h, t, a = 2048, 1, 12288, 8, 96
    full, _, layer_input = layer_activation_bytes(ctx, tp=t, cp=1, mb=b, sp=True)
    expected = s * b * h / t * 32 + s * b * 4 * a / t
    assert full == pytest.approx(expected, rel=1e-9)
    # full recompute keeps only the layer input: 2sbh/t with SP (Table 2 last row, SP split)
    assert layer_input == pytest.approx(2 * s * b * h / t)


def test_activations_without_sp_replicate_hidden_tensors() -> None:
    # Korthikanti Table 2, TP without SP: s*b*h*(10 + 24/t); ours has 8 instead of 10 (no
    # dropout masks) and no 5as^2 term.
    ctx = _ctx(GPT3, 8)
    full, _, _ = layer_activation_bytes(ctx, tp=8, cp=1, mb=1, sp=False)
    s, h = 2048, 12288
    assert full == pytest.approx(s * h * (8 + 24 / 8) + s * 4 * 96 / 8, rel=1e-9)


def test_unfused_attention_adds_the_5as2_term() -> None:
    ctx = _ctx(GPT3, 8, attention="unfused")
    flash = layer_activation_bytes(_ctx(GPT3, 8), 8, 1, 1, True)[0]
    unfused = layer_activation_bytes(ctx, 8, 1, 1, True)[0]
    assert unfused - flash == pytest.approx(5 * 96 / 8 * 2048**2)


def test_training_state_is_18_bytes_per_param_without_zero() -> None:
    # Rajbhandari et al. 2020: 2 + 4 + 4 + 8 bytes per parameter with bf16 + fp32 Adam.
    ctx = _ctx(GPT3, 8, gbs=8)
    lay = Layout(tp=8, pp=1, dp=1, zero=0)
    st = state_bytes(ctx, lay)
    assert sum(st.first[:4]) == pytest.approx(18 * ctx.counts.total / 8, rel=1e-6)


def test_zero_stages_shard_what_they_promise() -> None:
    ctx = _ctx(GPT3, 64, gbs=64)
    by_stage = {z: state_bytes(ctx, Layout(tp=8, pp=1, dp=8, zero=z)).first for z in range(4)}
    w0, g0, m0, o0, _ = by_stage[0]
    assert by_stage[1][2] == pytest.approx(m0 / 8) and by_stage[1][3] == pytest.approx(o0 / 8)
    assert by_stage[1][1] == pytest.approx(g0)
    assert by_stage[2][1] == pytest.approx(g0 / 8)
    assert by_stage[3][0] == pytest.approx(w0 / 8)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_zero3_never_uses_more_memory_than_zero1(recompute: str) -> None:
    model = load_model("llama-3.1-8b")
    ctx = _ctx(model, 64, acc="h100-sxm", gbs=256, seq=4096)
    for mb in (1, 2, 4):
        z1 = Layout(tp=1, pp=1, dp=64, microbatch=mb, recompute=recompute, zero=1)
        z3 = Layout(tp=1, pp=1, dp=64, microbatch=mb, recompute=recompute, zero=3)
        m = 256 // (64 * mb)
        assert memory_breakdown(ctx, z3, m).total <= memory_breakdown(ctx, z1, m).total


@pytest.mark.parametrize("zero", [0, 1])
def test_more_gpus_never_raise_memory_for_a_fixed_layout(zero: int) -> None:
    # fixed tp/pp/cp/microbatch/recompute/zero; more GPUs only add data-parallel replicas
    model = load_model("llama-3.1-70b")
    previous = None
    for dp in (1, 2, 4, 8, 16, 32):
        gpus = 8 * 4 * dp
        ctx = _ctx(model, gpus, acc="h100-sxm", gbs=32 * 32, seq=4096)
        lay = Layout(
            tp=8,
            pp=4,
            dp=dp,
            microbatch=1,
            recompute="selective",
            zero=zero,
            sequence_parallel=True,
        )
        total = memory_breakdown(ctx, lay, 1024 // dp).total
        if previous is not None:
            assert total <= previous + 1e-6
        previous = total


def test_full_recompute_needs_less_than_none() -> None:
    ctx = _ctx(GPT3, 64, gbs=64)
    base = dict(tp=8, pp=8, dp=1, microbatch=1, zero=1)
    none = memory_breakdown(ctx, Layout(recompute="none", **base), 64).total  # type: ignore[arg-type]
    full = memory_breakdown(ctx, Layout(recompute="full", **base), 64).total  # type: ignore[arg-type]
    assert full < none


def test_published_megatron_layouts_fit_in_80gb() -> None:
    # Narayanan et al. 2021 trained these on A100-80GB: our memory model must agree they fit.
    for h, layers, heads, tp, pp, dp, mb, gbs in [
        (12288, 80, 96, 8, 8, 24, 2, 2304),
        (20480, 105, 128, 8, 35, 9, 1, 2520),
        (25600, 128, 160, 8, 64, 6, 1, 3072),
    ]:
        spec = ModelSpec(
            name=f"gpt-{h}",
            model_type="gpt2",
            hidden=h,
            layers=layers,
            heads=heads,
            kv_heads=heads,
            head_dim=h // heads,
            v_head_dim=h // heads,
            vocab=51200,
            ffn=4 * h,
            gated_mlp=False,
            linear_bias=True,
            norm="layernorm",
            tied_embeddings=True,
        )
        ctx = _ctx(spec, tp * pp * dp, gbs=gbs, attention="unfused")
        lay = Layout(tp=tp, pp=pp, dp=dp, microbatch=mb, recompute="full", zero=0)
        assert memory_breakdown(ctx, lay, gbs // (dp * mb)).fits


def test_seventy_b_without_sharding_does_not_fit_one_gpu() -> None:
    ctx = _ctx(load_model("llama-3.1-70b"), 1, acc="h100-sxm", gbs=1, seq=4096)
    mem = memory_breakdown(ctx, Layout(tp=1, pp=1, dp=1, recompute="full", zero=0), 1)
    assert mem.fits is False
    assert mem.total > 18 * 70e9
