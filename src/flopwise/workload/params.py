"""Parameter counts with a per-component breakdown (total and active per token)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.workload.spec import ModelSpec


def norm_params(spec: ModelSpec, width: int) -> int:
    """One normalisation layer over `width` features: scale (and bias for LayerNorm)."""
    return 2 * width if spec.norm == "layernorm" else width


def attention_params(spec: ModelSpec) -> int:
    """One attention block: projections, biases, per-head q/k norms, sinks (MLA-aware)."""
    h, nh = spec.hidden, spec.heads
    if spec.is_mla:
        q_dim = nh * spec.head_dim
        q = (
            h * q_dim
            if not spec.q_lora_rank
            else (h * spec.q_lora_rank + spec.q_lora_rank + spec.q_lora_rank * q_dim)
        )
        kv_a = h * (spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.kv_lora_rank
        kv_b = spec.kv_lora_rank * nh * (spec.head_dim - spec.qk_rope_head_dim + spec.v_head_dim)
        out = nh * spec.v_head_dim * h
        return q + kv_a + kv_b + out
    q_out = nh * spec.head_dim
    kv_out = spec.kv_heads * (spec.head_dim + spec.v_head_dim)
    o_in = nh * spec.v_head_dim
    total = h * (q_out + kv_out) + o_in * h
    if spec.linear_bias:
        total += q_out + kv_out + h
    elif spec.qkv_bias_only:
        total += q_out + kv_out
    if spec.qk_norm:
        total += 2 * spec.head_dim
    if spec.qk_norm_full:
        total += (nh + spec.kv_heads) * spec.head_dim
    if spec.attention_sinks:
        total += nh
    return total


def mlp_params(spec: ModelSpec, width: int, bias: bool | None = None) -> int:
    """One MLP of intermediate width `width` (gated: 3 matrices, plain: 2)."""
    h = spec.hidden
    mats = 3 if spec.gated_mlp else 2
    total = mats * h * width
    if spec.linear_bias if bias is None else bias:
        total += (2 if spec.gated_mlp else 1) * width + h
    return total


def router_params(spec: ModelSpec) -> int:
    return spec.hidden * spec.experts + (spec.experts if spec.router_bias else 0)


@dataclass(frozen=True, slots=True)
class ParamCounts:
    """Totals and per-component counts. `active` counts what one token uses (top-k experts)."""

    total: int
    active: int
    embedding: int
    lm_head: int
    attention: int
    mlp: int  # dense MLPs
    experts: int  # routed experts, all of them
    experts_active: int  # routed experts one token uses
    shared_experts: int
    router: int
    norms: int

    output_projection: int  # vocab x hidden used by the logits (the lm_head or tied embedding)

    @property
    def matmul_active(self) -> int:
        """Weights one token multiplies through: layers' projections, active experts, logits."""
        return (
            self.attention
            + self.mlp
            + self.experts_active
            + self.shared_experts
            + (self.router + self.output_projection)
        )

    @property
    def layer_matmul_active(self) -> int:
        """As matmul_active but without the logits (what activation recompute re-runs)."""
        return self.matmul_active - self.output_projection

    def breakdown(self) -> dict[str, int]:
        return {
            "embedding": self.embedding,
            "attention": self.attention,
            "mlp": self.mlp,
            "experts": self.experts,
            "shared_experts": self.shared_experts,
            "router": self.router,
            "norms": self.norms,
            "lm_head": self.lm_head,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "active": self.active, "breakdown": self.breakdown()}


def count_params(spec: ModelSpec) -> ParamCounts:
    """Count parameters the way the checkpoints hold them (MTP modules excluded)."""
    h, n = spec.hidden, spec.layers
    embedding = spec.vocab * h + spec.learned_positions * h
    if spec.embedding_norm:
        embedding += norm_params(spec, h)
    lm_head = 0 if spec.tied_embeddings else spec.vocab * h
    attention = n * attention_params(spec)
    # MLA's q_a/kv_a norms are counted inside attention_params.
    norms = n * spec.norms_per_layer * norm_params(spec, h) + norm_params(spec, h)

    dense_layers = len(spec.dense_layers) if spec.is_moe else n
    mlp = dense_layers * mlp_params(spec, spec.ffn)
    experts = experts_active = shared = router = 0
    if spec.is_moe:
        moe_layers = spec.moe_layers
        one_expert = mlp_params(spec, spec.expert_ffn, bias=spec.expert_bias)
        experts = moe_layers * spec.experts * one_expert
        experts_active = moe_layers * spec.experts_per_token * one_expert
        shared = (
            moe_layers * spec.shared_experts * mlp_params(spec, spec.shared_expert_ffn, bias=False)
        )
        if spec.shared_expert_gate:
            shared += moe_layers * h
        router = moe_layers * router_params(spec)
    common = embedding + lm_head + attention + norms + mlp + shared + router
    return ParamCounts(
        total=common + experts,
        active=common + experts_active,
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        mlp=mlp,
        experts=experts,
        experts_active=experts_active,
        shared_experts=shared,
        router=router,
        norms=norms,
        output_projection=spec.vocab * h,
    )
