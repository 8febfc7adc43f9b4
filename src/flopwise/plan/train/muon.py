"""Muon as Megatron-Core runs it: what it holds and what its update costs a step.

Muon (K. Jordan et al. 2024; "Muon is Scalable for LLM Training", arXiv:2502.16982; Kimi K2,
arXiv:2507.20534) keeps one momentum buffer per hidden weight matrix and replaces the update by
its orthogonalisation, five Newton-Schulz iterations; embeddings, the output layer and every
1-D parameter (norms, biases) stay on AdamW. Megatron-Core's implementation
(megatron/core/optimizer/muon.py ``get_megatron_muon_optimizer``, emerging_optimizers'
``newton_schulz_tp``) is what this module prices:

- which weights: every 2-D parameter that is not the embedding or the output layer
  (``is_embedding_or_output_parameter``), the router included; a fused QKV or gate/up weight is
  one matrix (``split_qkv=False``), each routed expert's weight is its own matrix;
- distribution: Muon runs without Megatron's distributed optimizer; either every data-parallel
  rank updates every matrix (ZeRO-0 here) or ``LayerWiseDistributedOptimizer`` gives each rank
  whole matrices to own, update and all-gather afterwards (ZeRO-1 here: the same reduce-scatter
  and all-gather volume as the distributed optimizer, the state sharded by whole matrices);
  ZeRO-2/3 (a matrix's rows spread over ranks) would need a gather of whole matrices that no
  implementation read here prices, so plans refuse it;
- tensor parallelism: ``muon_tp_mode`` defaults to "duplicated": every TP rank all-gathers its
  matrices' momentum (fp32) and runs the iterations on the whole matrix;
- precision: the iterations run as fp32 matmuls at ``fp32_matmul_prec="medium"``, which PyTorch
  computes on bfloat16 tensor cores (``torch.set_float32_matmul_precision``): priced at the
  16-bit GEMM rate, through the same GEMM model as the layers.

One Newton-Schulz iteration on X (m x n, m <= n, transposed if taller than wide):
A = X X^T (m x n x m), B = b A + c A A (m x m x m), X = a X + B X (m x m x n): 4 m^2 n + 2 m^3
FLOPs (the quintic iteration of Jordan's Muon and Megatron-Core's default ``coefficient_type``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.roofline import Tier, collective_time_s, gemm_time_s
from flopwise.workload.memory_bytes import TrainingRecipe
from flopwise.workload.params import ParamCounts
from flopwise.workload.spec import ModelSpec

#: Optimizers a training plan prices (TrainJob.optimizer).
OPTIMIZERS: tuple[str, ...] = ("adamw", "muon")

#: Newton-Schulz iterations per update: Megatron-Core OptimizerConfig.muon_num_ns_steps default,
#: as Jordan's Muon and Moonlight (arXiv:2502.16982 §2.1) run it.
MUON_NS_STEPS = 5

#: Bytes of the momentum gathered over TP in "duplicated" mode: the fp32 buffer.
MUON_GATHER_BYTES = 4.0

#: Stages ZeRO-sharded Muon is priced for (module docstring).
MUON_ZERO_STAGES: tuple[int, ...] = (0, 1)

MUON_SOURCE = (
    "Megatron-Core megatron/core/optimizer/muon.py (TensorParallelMuon, muon_tp_mode "
    "'duplicated', 5 Newton-Schulz steps) and layer_wise_optimizer.py "
    "(LayerWiseDistributedOptimizer); arXiv:2502.16982"
)


def muon_managed_params(counts: ParamCounts) -> int:
    """Parameters Muon updates: the layers' weight matrices (attention, MLPs, experts, router);
    embeddings, output layer and norms stay on AdamW."""
    return counts.attention + counts.mlp + counts.experts + counts.shared_experts + counts.router


def muon_managed_share(counts: ParamCounts) -> float:
    """The share of the model's parameters Muon updates."""
    return muon_managed_params(counts) / max(counts.total, 1)


def muon_optimizer_bytes(adam_bytes: float, share: float) -> float:
    """Optimizer-state bytes per parameter: one momentum buffer (half of Adam's two moments, same
    dtype) on the managed `share`, Adam's moments on the rest."""
    return adam_bytes * (1.0 - 0.5 * share)


def muon_recipe(recipe: TrainingRecipe, counts: ParamCounts) -> TrainingRecipe:
    """`recipe` with Muon's state (muon_optimizer_bytes), averaged over the model, so a pipeline
    stage holding the embedding is charged the model's mix."""
    share = muon_managed_share(counts)
    return replace(
        recipe,
        name=f"{recipe.name}+muon",
        optimizer=muon_optimizer_bytes(recipe.optimizer, share),
        note=f"{recipe.note}; Muon: one momentum buffer on {share:.1%} of the parameters",
    )


def check_muon_sharding(
    zero: int | None, hsdp: bool | None, framework: str, framework_zero_stages: tuple[int, ...]
) -> None:
    """A one-line error for a sharding Muon is not priced for: ZeRO-2/3 or HSDP asked for, or a
    framework that runs only those."""
    if not set(framework_zero_stages) & set(MUON_ZERO_STAGES):
        stages = ", ".join(map(str, framework_zero_stages))
        raise FlopwiseError(
            f"--optimizer muon: framework {framework} runs ZeRO stage(s) {stages}, "
            "and Muon is priced for ZeRO 0 or 1 (whole matrices per rank)"
        )
    if hsdp:
        raise FlopwiseError(
            "--hsdp with --optimizer muon: HSDP shards like ZeRO-3, and Muon is priced with "
            "whole matrices per rank (ZeRO 0 or 1); drop --hsdp"
        )
    if zero is not None and zero not in MUON_ZERO_STAGES:
        raise FlopwiseError(
            f"--zero {zero} with --optimizer muon: Muon is priced with whole matrices per rank "
            "(ZeRO 0, or 1 as Megatron-Core's layer-wise distributed optimizer); use --zero 0 or 1"
        )


@dataclass(frozen=True, slots=True)
class MuonMatrices:
    """Weight matrices (rows, cols) Muon orthogonalises in one layer of each kind."""

    dense_layer: tuple[tuple[int, int], ...]  # attention + dense MLP
    moe_layer: tuple[tuple[int, int], ...]  # attention + shared experts + router
    expert: tuple[tuple[int, int], ...]  # one routed expert


def layer_matrices(m: ModelSpec) -> MuonMatrices:
    """Megatron-Core's weight matrices of one layer (linear_qkv fused; MLA's four projections;
    fc1 fusing gate and up)."""
    h = m.hidden
    if m.is_mla:
        q_cols = m.heads * m.head_dim
        attn = [
            *([(m.q_lora_rank, h), (q_cols, m.q_lora_rank)] if m.q_lora_rank else [(q_cols, h)]),
            (m.kv_lora_rank + m.qk_rope_head_dim, h),
            (m.heads * (m.head_dim - m.qk_rope_head_dim + m.v_head_dim), m.kv_lora_rank),
        ]
    else:
        qkv = m.heads * m.head_dim + m.kv_heads * (m.head_dim + m.v_head_dim)
        attn = [(qkv, h)]
    attn.append((h, m.heads * m.v_head_dim))
    mult = 2 if m.gated_mlp else 1
    dense = [(mult * m.ffn, h), (h, m.ffn)] if m.ffn else []
    moe: list[tuple[int, int]] = []
    expert: list[tuple[int, int]] = []
    if m.is_moe:
        moe.append((m.experts, h))
        if m.shared_experts:
            sf = m.shared_experts * m.shared_expert_ffn
            moe += [(mult * sf, h), (h, sf)]
        expert = [(mult * m.expert_ffn, h), (h, m.expert_ffn)]
    return MuonMatrices(tuple(attn + dense), tuple(attn + moe), tuple(expert))


def newton_schulz_flops(rows: int, cols: int, steps: int = MUON_NS_STEPS) -> float:
    """FLOPs of `steps` quintic Newton-Schulz iterations on a rows x cols matrix."""
    m, n = sorted((rows, cols))
    return steps * (4.0 * m * m * n + 2.0 * m**3)


def newton_schulz_s(rows: int, cols: int, hw: Hardware, compute_fraction: float) -> float:
    """Seconds of the iterations on one matrix at the 16-bit GEMM rate of `hw`, through the
    GEMM shape model (tile and wave quantisation of the small m x m products)."""
    m, n = sorted((rows, cols))
    one = (
        gemm_time_s(m, m, n, hw, "bf16")  # X X^T
        + gemm_time_s(m, m, m, hw, "bf16")  # A A
        + gemm_time_s(m, n, m, hw, "bf16")  # B X
    )
    return MUON_NS_STEPS * one / compute_fraction


def tp_gather_s(rows: int, cols: int, tp: int, tier: Tier) -> float:
    """The "duplicated" mode's all-gather of one matrix's fp32 momentum over its TP group."""
    if tp <= 1:
        return 0.0
    return collective_time_s("all_gather", rows * cols * MUON_GATHER_BYTES, tp, tier)
