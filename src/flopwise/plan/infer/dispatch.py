"""Host time of an eagerly dispatched serving pass: the ops a layer runs from Python, each at the
host's measured dispatch cost.

An engine that runs a pass from Python without a CUDA graph (TensorRT-LLM's PyTorch backend for
every pass that carries prompt tokens, and for a decode-only pass larger than every batch it
captured: ``EngineProfile.eager_python_dispatch``) makes the host call each op of each layer: module call, PyTorch dispatcher, kernel launch. The GPU cannot run
ahead of that: the pass takes at least the host's time, which the overlap scheduler puts beside
the GPU's under one max (``latency.engine_overhead``). TensorRT-LLM's own guide says so: its
piecewise CUDA graphs exist "to reduce context-phase launch overhead" and "primarily benefit
host-bound iterations in the context phase" (docs/source/torch/features/
torch_compile_and_piecewise_cuda_graph.md, 2025-10; off by default).

The ops are counted from how the backend's modules call them, one per call that reaches the
dispatcher (the guide's FX graph of an NVFP4 MLP lists ``fp4_quantize``, ``nvfp4_gemm``,
``silu_and_mul``, ``fp4_quantize``, ``nvfp4_gemm``; the decoder layers of
``tensorrt_llm/_torch/models``, e.g. ``Qwen3MoEDecoderLayer.forward``, call a fused
residual-add + RMSNorm before attention and before the MLP, the attention module, the router and
the fused MoE op):

- every norm: one op (residual add fused in; under tensor parallelism the norm fuses into the
  all-reduce instead, still one op);
- every linear layer: its GEMM, and a quantize op for its input when activations are
  quantized (FP8/FP4 weight+activation);
- attention: one op (RoPE, KV-cache write and the kernel inside it), plus the Q/K norm where the
  model has one, plus the low-rank projections' norms of MLA;
- a dense MLP: up (gate and up fused), activation, down;
- an MoE MLP: router GEMM and the fused MoE op (routing, permutation, both grouped GEMMs and the
  combine run inside one C++ op); shared experts as a dense MLP, their sigmoid gate two more.

SGLang's modules make more calls per counted op (a Python module per op, separate quantize and
view ops around each GEMM): ``EngineProfile.calls_per_counted_op`` scales the count, from one
measured eager SGLang pass (constants.SGLANG_CALLS_PER_COUNTED_OP). Which passes run eagerly
is plan/infer/prefill_graphs.py's question.

It is a lower bound: the guide adds that "bubbles in the context (prefill) phase" remain "due to
the attention operator's substantial host-side overhead", which one op does not price. Each op
costs ``constants.host_s_per_op`` (a PyTorch ``Linear`` forward's CPU time measured on an x86
DGX and on Grace). Nothing here is fitted.
"""

from __future__ import annotations

from flopwise.plan.infer.constants import host_s_per_op
from flopwise.plan.infer.job import Precision
from flopwise.workload.spec import ModelSpec


def _linear_ops(precision: Precision) -> int:
    """Ops one linear layer dispatches: its GEMM, and the quantize of its input when activations
    are quantized."""
    return 2 if precision.mode == "weight+activation" else 1


def _mlp_ops(precision: Precision) -> int:
    """A dense MLP: up (gate and up as one GEMM), activation, down."""
    return 2 * _linear_ops(precision) + 1


def eager_ops_per_layer(spec: ModelSpec, precision: Precision) -> float:
    """Ops one decoder layer dispatches from Python in an eager pass, averaged over the model's
    dense and MoE layers (see the module docstring for what is counted)."""
    lin = _linear_ops(precision)
    if spec.is_mla:
        # q (or q_a + q_b with a low-rank query), kv_a, kv_b, o; the low-rank norms
        projections = (3 if spec.q_lora_rank else 2) + 2
        attention = projections * lin + (2 if spec.q_lora_rank else 1) + 1
    else:
        attention = 2 * lin + 1  # QKV, attention op, O
        if spec.qk_norm or spec.qk_norm_full:
            attention += 1
    ops = spec.norms_per_layer + attention
    dense = _mlp_ops(precision)
    if not spec.is_moe:
        return float(ops + dense)
    moe = 2 + (_mlp_ops(precision) if spec.shared_experts else 0)
    if spec.shared_expert_gate:
        moe += 2
    frac = spec.moe_layers / spec.layers
    return ops + (1 - frac) * dense + frac * moe


def eager_dispatch_s(
    spec: ModelSpec,
    precision: Precision,
    accelerator_id: str,
    layers: float,
    calls_per_op: float = 1.0,
) -> float:
    """Host seconds to dispatch one eager pass over `layers` layers (one pipeline stage's) on
    the host of `accelerator_id`, by an engine whose modules make `calls_per_op` PyTorch calls
    per counted op (EngineProfile.calls_per_counted_op)."""
    per_layer = eager_ops_per_layer(spec, precision) * calls_per_op
    return layers * per_layer * host_s_per_op(accelerator_id)
