"""`bench step` on mixture-of-experts models: routed experts as grouped GEMMs, checked against a
token-by-token reference, timed on the CPU beside the planner, and calibrating MoE plans only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from flopwise.results.store import ResultStore

torch = pytest.importorskip("torch")

BASE = {
    "hidden_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 256,
}
#: Mixtral (gated experts), Qwen2-MoE (shared expert with a sigmoid gate), GPT-OSS (router and
#: expert biases), Qwen3-MoE (per-head q/k norms)
CONFIGS: dict[str, dict[str, Any]] = {
    "mixtral": {
        **BASE, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"],
        "intermediate_size": 96, "num_local_experts": 8, "num_experts_per_tok": 2,
    },
    "qwen2_moe": {
        **BASE, "model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"],
        "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 16,
        "num_experts_per_tok": 4, "shared_expert_intermediate_size": 128,
    },
    "gpt_oss": {
        **BASE, "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"],
        "intermediate_size": 48, "num_local_experts": 8, "num_experts_per_tok": 2,
        "head_dim": 16, "sliding_window": 128, "layer_types": ["full_attention"] * 3,
    },
    "qwen3_moe": {
        **BASE, "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
        "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 16,
        "num_experts_per_tok": 4, "head_dim": 16, "norm_topk_prob": True,
    },
}  # fmt: skip


def _spec(kind: str, layers: int = 3) -> Any:
    from flopwise.bench.step import reduced_model
    from flopwise.workload.hf import spec_from_config

    return reduced_model(spec_from_config(kind, CONFIGS[kind]), layers, 256)


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_moe_model_has_the_parameters_the_planner_counts(kind: str) -> None:
    from flopwise.bench.step_model import build, parameter_count
    from flopwise.workload.params import count_params

    spec = _spec(kind)
    assert spec.is_moe
    model = build(spec, "cpu")
    expected = count_params(spec).total
    if spec.attention_sinks:  # one logit per head that SDPA has no input for: not built
        expected -= spec.layers * spec.heads
    assert parameter_count(model) == expected


def _reference(moe: Any, x: Any) -> Any:
    """The MoE layer token by token: softmax router, top-k renormalised, each chosen expert's
    MLP on the token, weighted sum; the shared expert beside it."""
    import torch.nn.functional as F

    flat = x.reshape(-1, x.shape[-1])
    probs = F.softmax(moe.router(flat).float(), dim=-1)
    weight, expert = probs.topk(moe.top_k, dim=-1)
    weight = weight / weight.sum(-1, keepdim=True)
    rows = []
    for t in range(flat.shape[0]):
        acc = torch.zeros_like(flat[t])
        for w, e in zip(weight[t], expert[t], strict=True):
            h = moe.w_up[e] @ flat[t]
            if moe.b_up is not None:
                h = h + moe.b_up[e]
            if moe.gated:
                g, u = h.chunk(2)
                h = F.silu(g) * u
            else:
                h = F.gelu(h)
            y = moe.w_down[e] @ h
            if moe.b_down is not None:
                y = y + moe.b_down[e]
            acc = acc + w * y
        if moe.shared is not None:
            s = moe.shared(flat[t : t + 1])[0]
            if moe.shared_gate is not None:
                s = torch.sigmoid(moe.shared_gate(flat[t : t + 1]))[0] * s
            acc = acc + s
        rows.append(acc)
    return torch.stack(rows).reshape(x.shape)


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_grouped_routing_computes_what_the_experts_compute_token_by_token(kind: str) -> None:
    from flopwise.bench.step_model import MOE_GROUPED_MM, MOE_LOOP_MM, _MoE, build

    torch.manual_seed(1)
    model = build(_spec(kind), "cpu")
    moe = next(m for m in model.modules() if isinstance(m, _MoE))
    x = torch.randn(2, 12, 64)
    want = _reference(moe, x)
    got = moe(x)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)
    # the fallback (one torch.mm per expert) computes the same
    moe.kernel = MOE_LOOP_MM
    assert torch.allclose(moe(x), want, atol=1e-5, rtol=1e-4)
    # and the experts' gradients (weights and biases) are the token-by-token ones
    moe.kernel = MOE_GROUPED_MM
    params = [p for n, p in moe.named_parameters(recurse=False) if n.startswith(("w_", "b_"))]
    grads = torch.autograd.grad(moe(x).pow(2).sum(), params)
    ref = torch.autograd.grad(_reference(moe, x).pow(2).sum(), params)
    for g, r in zip(grads, ref, strict=True):
        assert torch.isfinite(g).all() and torch.allclose(g, r, atol=1e-4, rtol=1e-3)


def test_reduced_moe_model_keeps_only_its_own_dense_layers() -> None:
    from flopwise.bench.step import reduced_model
    from flopwise.workload.hf import load_model

    spec = load_model("deepseek-v3")  # three dense layers first
    assert reduced_model(spec, 2, 512).dense_layers == (0, 1)
    assert reduced_model(spec, 5, 512).dense_layers == (0, 1, 2)


def _store_cpu(home: Path) -> None:
    store = ResultStore(home / "results.sqlite")
    store.add("matmul", {"dtype": "fp32", "best_tflops": 0.05}, {}, accelerator="cpu")
    store.add("memory", {"triad_gbps": 10.0}, {}, accelerator="cpu")


def test_cli_moe_step_on_the_cpu_is_timed_predicted_and_stored(
    tmp_path: Path, isolated_home: Path
) -> None:
    _store_cpu(isolated_home)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIGS["qwen3_moe"]))
    r = run_cli("bench", "step", str(cfg), "--device", "cpu", "--layers", "2", "--seq-len", "32",
                "--steps", "2", "--warmup", "1", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["moe"] is True and doc["moe_kernel"] in ("torch._grouped_mm", "torch.mm per expert")
    assert doc["tokens_per_s"] > 0 and doc["predicted"]["tokens_per_s"] > 0
    assert doc["calibration"] == pytest.approx(
        doc["tokens_per_s"] / doc["predicted"]["tokens_per_s"]
    )
    stored = ResultStore(isolated_home / "results.sqlite").get(doc["result_id"])
    assert stored.summary["moe"] is True and stored.summary["calibration"] == doc["calibration"]


def _plan(model: str) -> dict[str, Any]:
    r = run_cli("plan", "train", model, "-a", "h100-sxm", "--gpus", "16", "--tokens", "1B",
                "--measured", "--json")  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_a_moe_step_calibrates_moe_plans_and_a_dense_step_dense_ones(isolated_home: Path) -> None:
    store = ResultStore(isolated_home / "results.sqlite")
    dense = store.add("step", {"calibration": 0.8, "model": "llama-3.1-8b"}, {},
                      accelerator="h100-sxm")  # fmt: skip
    moe = store.add("step", {"calibration": 0.5, "model": "mixtral-8x7b", "moe": True}, {},
                    accelerator="h100-sxm")  # fmt: skip
    store.add("step", {"calibration": 0.9, "model": "x", "moe": True}, {}, accelerator="h100-sxm",
              status="interrupted")  # fmt: skip
    from flopwise.results.measured import hardware_for

    hw = hardware_for("h100-sxm", measured="latest", db=str(isolated_home / "results.sqlite"))
    assert hw.step_calibration == 0.8 and hw.step_calibration_moe == 0.5
    assert f"result {dense} " in hw.origins["step_calibration"].detail
    assert f"result {moe} " in hw.origins["step_calibration_moe"].detail
    moe_plan, dense_plan = _plan("mixtral-8x7b"), _plan("llama-3.1-8b")
    assert moe_plan["measured"]["step_calibration_moe"]["value"] == 0.5
    assert dense_plan["measured"]["step_calibration"]["value"] == 0.8
    # each plan lists the calibration it used, not the other class's
    assert "step_calibration" not in moe_plan["measured"]
    assert "step_calibration_moe" not in dense_plan["measured"]
    # and the MoE step slows the MoE plan's device work, not the dense plan's
    store.add("step", {"calibration": 1.0, "model": "llama-3.1-8b"}, {}, accelerator="h100-sxm")
    assert _plan("llama-3.1-8b")["step_time_s"] == pytest.approx(_no_measured("llama-3.1-8b"))
    assert _plan("mixtral-8x7b")["step_time_s"] > 1.5 * _no_measured("mixtral-8x7b")


def _no_measured(model: str) -> float:
    r = run_cli(
        "plan", "train", model, "-a", "h100-sxm", "--gpus", "16", "--tokens", "1B", "--json"
    )
    assert r.returncode in (0, 1), r.stderr
    return float(json.loads(r.stdout)["step_time_s"])


def test_under_bf16_autocast_the_experts_stay_on_the_grouped_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Accelerator steps run under bf16 autocast, which does not cover the grouped kernel: the
    layer casts tokens and expert weights itself, so the grouped kernel gets bf16 operands (as
    CUDA's requires), runs (no fallback), and the fp32 master weights get fp32 gradients."""
    from flopwise.bench.step_model import MOE_GROUPED_MM, _MoE, build

    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("this torch has no grouped kernel")
    seen: list[tuple[Any, Any]] = []
    real = torch._grouped_mm

    def spy(a: Any, b: Any, **kw: Any) -> Any:
        seen.append((a.dtype, b.dtype))
        return real(a, b, **kw)

    monkeypatch.setattr(torch, "_grouped_mm", spy)
    model = build(_spec("mixtral"), "cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(torch.randint(0, 256, (2, 16)))
    loss.backward()
    assert seen and set(seen) == {(torch.bfloat16, torch.bfloat16)}
    moes = [m for m in model.modules() if isinstance(m, _MoE)]
    assert moes and all(m.kernel == MOE_GROUPED_MM for m in moes)
    assert moes[0].w_up.grad is not None and moes[0].w_up.grad.dtype == torch.float32


def test_expert_parallelism_outside_torchrun_is_refused_in_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIGS["qwen3_moe"]))
    r = run_cli("bench", "step", str(cfg), "--device", "cpu", "--ep", "2")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--ep 2" in r.stderr and "--ep 1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
