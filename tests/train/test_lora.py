"""LoRA fine-tuning (`--lora-rank`, `--lora-targets`) and packed documents (`--document-len`):
frozen base weights priced as what a step skips, attention inside each packed document."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, TrainJob
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.lora import adapter_params_per_layer, parse_lora_targets
from flopwise.plan.train.memory import memory_breakdown
from flopwise.plan.train.step_time import _gemm, step_breakdown
from flopwise.workload.hf import load_model

#: Hugging Face PEFT on Llama-2-7b, LoRA r=8 on q/k/v/o/gate/up/down_proj, as its
#: print_trainable_parameters() reports it in PEFT's and TRL's tutorials:
#: "trainable params: 19,988,480 || all params: 6,758,404,096".
PEFT_LLAMA2_7B_R8_ALL_LINEAR = 19_988_480
#: ... and Llama-2-7b's own parameter count in the same line (all params - trainable).
LLAMA2_7B_PARAMS = 6_758_404_096 - PEFT_LLAMA2_7B_R8_ALL_LINEAR


def _ctx(
    lora: int = 0,
    targets: tuple[str, ...] | None = None,
    framework: str = "nemo",
    doc: int | None = None,
    dtype: str = "bf16",
) -> ModelContext:
    return ModelContext(
        load_model("llama-2-7b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(
            gpus=8, seq_len=4096, global_batch_seqs=32, dtype=dtype, framework=framework,
            lora_rank=lora, lora_targets=targets, document_len=doc,
        ),
    )  # fmt: skip


def test_adapter_count_matches_peft_on_separate_projections() -> None:
    # Hugging Face's Llama keeps q/k/v and gate/up apart, as torchtitan's model code does
    m = load_model("llama-2-7b")
    per_layer = adapter_params_per_layer(m, 8, parse_lora_targets("all"), separate=True)
    assert per_layer * m.layers == PEFT_LLAMA2_7B_R8_ALL_LINEAR
    ctx = _ctx(8, framework="torchtitan")
    assert ctx.counts.total == LLAMA2_7B_PARAMS
    assert ctx.adapter_params_per_layer * m.layers == PEFT_LLAMA2_7B_R8_ALL_LINEAR


def test_fused_linears_share_one_adapter() -> None:
    # Megatron-Core's fused linear_qkv and linear_fc1 carry one A each: fewer parameters
    m = load_model("llama-2-7b")
    fused = adapter_params_per_layer(m, 8, parse_lora_targets("all"))
    separate = adapter_params_per_layer(m, 8, parse_lora_targets("all"), separate=True)
    assert fused < separate
    # r x (in + out) of each fused linear: 4096->12288, 4096->4096, 4096->22016, 11008->4096
    assert fused == 8 * ((4096 + 12288) + (4096 + 4096) + (4096 + 22016) + (11008 + 4096))


def test_flops_leave_out_the_frozen_weight_gradients() -> None:
    full, lora = _ctx(), _ctx(32)
    c = full.counts
    adapters = lora.adapter_params_per_layer * lora.model.layers
    expected = full.model_flops_per_token - 2 * c.matmul_active + 6 * adapters
    assert lora.model_flops_per_token == pytest.approx(expected)
    # about 4N + attention per token instead of 6N + attention
    assert 0.6 < lora.model_flops_per_token / full.model_flops_per_token < 0.75


def test_frozen_gemm_backward_is_the_data_gradient_only() -> None:
    full, lora = _ctx(), _ctx(32)
    f_full, b_full = _gemm(full, 4096, 4096, 4096)
    f_lora, b_lora = _gemm(lora, 4096, 4096, 4096)
    assert f_lora == f_full
    # a square GEMM's data and weight gradients cost the same: half the backward is left
    assert b_lora == pytest.approx(b_full / 2, rel=0.02)


def test_step_trains_only_the_adapters() -> None:
    lay = Layout(tp=1, pp=1, dp=8, microbatch=1, zero=1)
    full = step_breakdown(_ctx(), lay, 4)
    lora = step_breakdown(_ctx(32), lay, 4)
    assert lora.compute < full.compute
    # the optimizer touches ~1% of the weights, the gradient all-reduce likewise
    assert lora.optimizer < 0.05 * full.optimizer
    assert lora.dp_comm < full.dp_comm
    # fewer targets, fewer adapter GEMMs
    qkv = step_breakdown(_ctx(32, ("qkv",)), lay, 4)
    assert qkv.compute < lora.compute


def test_memory_keeps_frozen_weights_without_their_state() -> None:
    lay = Layout(tp=1, pp=1, dp=8, microbatch=1, zero=1)
    full = memory_breakdown(_ctx(), lay, 4)
    ctx = _ctx(32)
    lora = memory_breakdown(ctx, lay, 4)
    adapters = ctx.adapter_params_per_layer * ctx.model.layers
    r = ctx.recipe
    # every base weight stays at its stored bytes, plus the adapters' own copy
    assert lora.weights == pytest.approx(full.weights + r.weights * adapters)
    # gradients only for the adapters; master and optimizer state sharded over the 8 ranks
    assert lora.grads == pytest.approx(r.grads * adapters)
    assert lora.optimizer == pytest.approx(r.optimizer * adapters / 8)
    assert lora.total < full.total


def test_zero3_gathers_the_frozen_weights_but_reduces_adapter_gradients() -> None:
    lay = Layout(tp=1, pp=1, dp=8, microbatch=1, zero=3)
    ctx_full, ctx_lora = _ctx(framework="torchtitan"), _ctx(16, framework="torchtitan")
    full = step_breakdown(ctx_full, lay, 4)
    lora = step_breakdown(ctx_lora, lay, 4)
    assert 0 < lora.dp_comm < full.dp_comm
    mem = memory_breakdown(ctx_lora, lay, 4)
    # the frozen base sharded over the 8 ranks at 16 bits
    assert mem.weights == pytest.approx(2 * ctx_lora.counts.total / 8, rel=1e-4)


def test_document_len_prices_attention_inside_each_document() -> None:
    packed, short = _ctx(doc=1024), None
    short = ModelContext(
        load_model("llama-2-7b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=8, seq_len=1024, global_batch_seqs=128, framework="nemo"),
    )
    # a token of a 1,024-token document packed in 4,096 sees what a 1,024-token sequence's does
    assert packed.model_flops_per_token == pytest.approx(short.model_flops_per_token)
    full = _ctx()
    assert packed.model_flops_per_token < full.model_flops_per_token
    lay = Layout(tp=1, pp=1, dp=8, microbatch=1, zero=1)
    assert step_breakdown(packed, lay, 4).attention < step_breakdown(full, lay, 4).attention
    # documents as long as the sequence change nothing
    assert _ctx(doc=4096).model == full.model


def test_bad_inputs_are_one_line_errors() -> None:
    with pytest.raises(FlopwiseError, match="needs --lora-rank"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, lora_targets=("qkv",))
    with pytest.raises(FlopwiseError, match="'fc3' is not one of qkv, proj, fc1, fc2"):
        parse_lora_targets("qkv,fc3")
    with pytest.raises(FlopwiseError, match="--document-len must be at least 1"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, document_len=0)
    with pytest.raises(FlopwiseError, match="not low rank"):
        _ctx(4096)
    with pytest.raises(FlopwiseError, match="multi-head latent attention"):
        ModelContext(
            load_model("deepseek-v3"),
            hardware_from_catalog("h100-sxm"),
            TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, lora_rank=16),
        )


_CMD = (
    "plan", "train", "llama-2-7b", "-a", "h100-sxm", "--system", "dgx-h100", "--gpus", "8",
    "--tokens", "10M", "--seq-len", "4096", "--global-batch-seqs", "32", "--dtype", "fp8",
    "--framework", "nemo", "--tp", "1", "--pp", "1", "--dp", "8", "--microbatch", "1",
    "--zero", "1", "--json",
)  # fmt: skip


def test_cli_json_and_job_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    extra = ("--lora-rank", "32", "--lora-targets", "qkv", "--document-len", "512")
    r = run_cli(*_CMD, *extra)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["lora"]["rank"] == 32 and doc["lora"]["targets"] == ["qkv"]
    assert doc["lora"]["trainable_params"] == 32 * (4096 + 12288) * 32
    assert doc["document_len"] == 512
    job = tmp_path / "job.toml"
    job.write_text('lora-rank = 32\nlora-targets = "qkv"\ndocument-len = 512\n')
    r2 = run_cli(*_CMD, "--config", str(job))
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["tokens_per_s"] == doc["tokens_per_s"]
    text = run_cli(*_CMD[:-1], *extra)
    assert "LoRA rank 32" in text.stdout
    e = run_cli(*_CMD, "--lora-rank", "8", "--lora-targets", "fc9")
    assert e.returncode == 2 and "Traceback" not in e.stderr
    assert "fc9" in e.stderr and len(e.stderr.strip().splitlines()) == 1


def test_frozen_untargeted_linears_keep_no_input() -> None:
    lay = Layout(tp=1, pp=1, dp=8, microbatch=1, zero=1)
    full = memory_breakdown(_ctx(), lay, 4).activations
    every = memory_breakdown(_ctx(32), lay, 4).activations
    qkv = memory_breakdown(_ctx(32, ("qkv",)), lay, 4).activations
    # 16-bit: every linear targeted keeps what full training keeps; Q/K/V alone drops the
    # MLP norm's output (h) and the activation's output (ffn) per token and layer
    assert every == pytest.approx(full)
    m = load_model("llama-2-7b")
    dropped = (m.hidden + m.ffn) * 4096 * 2 * m.layers  # bytes, 4,096 tokens, every layer
    assert full - qkv == pytest.approx(dropped, rel=1e-6)
    # Transformer Engine FP8: the adapters keep 16-bit inputs where TE kept an FP8 copy
    fp8_full = memory_breakdown(_ctx(dtype="fp8"), lay, 4).activations
    fp8_every = memory_breakdown(_ctx(32, dtype="fp8"), lay, 4).activations
    assert fp8_every > fp8_full


#: LLaMA-65B's Hugging Face config (huggyllama/llama-65b config.json; Touvron et al. 2023 Table 2:
#: 65.2B parameters, dimension 8,192, 64 heads, 80 layers).
LLAMA_65B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 22016, "num_attention_heads": 64, "num_hidden_layers": 80,
    "num_key_value_heads": 64, "vocab_size": 32000, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "hidden_act": "silu",
}  # fmt: skip


def _qlora_65b(tmp_path, qlora: bool):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_65B_CONFIG))
    m = load_model(str(path))
    job = TrainJob(
        gpus=1, seq_len=512, global_batch_seqs=16, lora_rank=64, qlora=qlora,
        memory_headroom_gib=0.0,
    )  # fmt: skip
    ctx = ModelContext(m, hardware_from_catalog("l40s"), job)
    lay = Layout(tp=1, pp=1, dp=1, microbatch=1, zero=0, recompute="full")
    return ctx, memory_breakdown(ctx, lay, 16)


def test_qlora_fits_65b_on_one_48gb_gpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # QLoRA's abstract: "finetune a 65B parameter model on a single 48GB GPU" (r = 64 on every
    # linear layer, gradient checkpointing, batch 1 per step of accumulation; the adapters in
    # bf16 with 32-bit Adam, as its code trains them: recipe qlora-bf16-adam). Its paged
    # optimizer could move the Adam state to the host on a spike; the plan keeps it on the GPU
    ctx, mem = _qlora_65b(tmp_path, qlora=True)
    assert ctx.counts.total == pytest.approx(65.2e9, rel=0.01)
    assert mem.fits
    # 16-bit LoRA holds 130 GB of base weights: it does not
    _, mem16 = _qlora_65b(tmp_path, qlora=False)
    assert not mem16.fits
    # the base: its layer linears at 4.127 bits (§3: 0.127 bits of double-quantized constants),
    # embedding and head at 16 bits, and the adapters' bf16 copy
    c = ctx.counts
    linears = ctx.nf4_params_per_layer * ctx.model.layers
    rest = c.total - linears - c.norms
    adapters = ctx.adapter_params_per_layer * ctx.model.layers
    expected = linears * 4.127 / 8 + rest * 2 + adapters * ctx.recipe.weights
    assert mem.weights == pytest.approx(expected, rel=0.002)


def test_qlora_pays_the_dequantization() -> None:
    def step(qlora: bool) -> float:
        ctx = ModelContext(
            load_model("llama-2-7b"),
            hardware_from_catalog("h100-sxm"),
            TrainJob(gpus=1, seq_len=2048, global_batch_seqs=8, lora_rank=16, qlora=qlora),
        )
        return step_breakdown(ctx, Layout(tp=1, pp=1, dp=1, microbatch=1, zero=0), 8).compute

    # each linear's NF4 weight read and its 16-bit copy written, forward and backward: 6.5B
    # weights x 2.52 B x 2 passes x 8 microbatches through ~2.8 TB/s, about 0.09 s
    extra = step(True) - step(False)
    assert 0.05 < extra < 0.15


def test_qlora_needs_lora_and_16_bit_compute() -> None:
    m = load_model("llama-2-7b")
    hw = hardware_from_catalog("h100-sxm")
    with pytest.raises(FlopwiseError, match="--qlora needs --lora-rank"):
        ModelContext(m, hw, TrainJob(gpus=1, seq_len=2048, global_batch_seqs=8, qlora=True))
    with pytest.raises(FlopwiseError, match="use bf16 or fp16"):
        ModelContext(
            m,
            hw,
            TrainJob(
                gpus=1, seq_len=2048, global_batch_seqs=8, lora_rank=8, qlora=True, dtype="fp8"
            ),
        )


def _moe(lora: int = 0, targets: tuple[str, ...] | None = None, model: str = "mixtral-8x7b"):  # type: ignore[no-untyped-def]
    return ModelContext(
        load_model(model),
        hardware_from_catalog("h100-sxm"),
        TrainJob(
            gpus=8, seq_len=4096, global_batch_seqs=64, framework="nemo", lora_rank=lora,
            lora_targets=targets,
        ),
    )  # fmt: skip


def test_moe_lora_adapts_every_routed_expert() -> None:
    ctx = _moe(16)
    m = ctx.model
    h, eff = m.hidden, m.expert_ffn
    per_expert = 16 * ((h + 2 * eff) + (eff + h))  # fused gate/up FC1 and FC2 of one expert
    assert ctx.expert_adapter_params_per_layer * m.layers == m.layers * m.experts * per_expert
    # a token passes through its top-2 experts' adapters only
    full = _moe()
    attention = ctx.adapters.attention if ctx.adapters else 0.0
    active = m.layers * (attention + m.experts_per_token * per_expert)
    expected = full.model_flops_per_token - 2 * full.counts.matmul_active + 6 * active
    assert ctx.model_flops_per_token == pytest.approx(expected)


def test_moe_lora_state_is_sharded_like_the_experts() -> None:
    lay = Layout(tp=1, pp=1, dp=8, ep=8, microbatch=1, zero=1)
    ctx = _moe(16)
    mem = memory_breakdown(ctx, lay, 8)
    non_expert = ctx.adapter_params_per_layer * ctx.model.layers
    expert = ctx.expert_adapter_params_per_layer * ctx.model.layers / 8  # EP 8
    # gradients only for the adapters a GPU holds: its share of the experts' ones
    assert mem.grads == pytest.approx(ctx.recipe.grads * (non_expert + expert))
    full = memory_breakdown(_moe(), lay, 8)
    assert mem.total < full.total
    lora, base = step_breakdown(ctx, lay, 8), step_breakdown(_moe(), lay, 8)
    assert lora.compute < base.compute and lora.optimizer < 0.05 * base.optimizer


def test_moe_lora_on_mla_models_targets_the_experts_only() -> None:
    ctx = _moe(16, ("fc1", "fc2"), model="deepseek-v3")
    assert ctx.expert_adapter_params_per_layer > 0
    assert ctx.adapters is not None and ctx.adapters.attention == 0.0
