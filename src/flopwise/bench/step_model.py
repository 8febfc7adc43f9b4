"""A decoder-only transformer in plain PyTorch, built from a ModelSpec (a HF config.json).

The same architecture facts the planner counts: embeddings (tied or not, learned positions),
pre-norm layers of GQA attention with rotary positions and a (gated) MLP, a final norm and the
vocabulary projection. Attention runs through `scaled_dot_product_attention` (the fused kernel
torch picks: FlashAttention/cuDNN on NVIDIA, CK/AOTriton on ROCm, a math kernel on the CPU).
Dense models only: MoE routing and MLA would need their own kernels to be timed fairly.
torch is imported only when this module is.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopwise.errors import FlopwiseError
from flopwise.workload.spec import ModelSpec

#: RoPE base when the config does not give one (Llama's rope_theta before Llama 3).
ROPE_BASE = 10000.0
#: Normal init std (HF `initializer_range` default); values do not change the timing.
INIT_STD = 0.02
_NO_ROPE = ("bloom", "mpt", "gpt2", "opt", "falcon_alibi")


def check_supported(spec: ModelSpec) -> None:
    if spec.experts or spec.kv_lora_rank:
        kind = "mixture-of-experts" if spec.experts else "multi-head latent attention"
        raise FlopwiseError(
            f"bench step builds dense decoder models; {spec.name} uses {kind} (not supported yet)"
        )


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def _norm(spec: ModelSpec, dim: int) -> nn.Module:
    if spec.norm == "rmsnorm":
        return _RMSNorm(dim)
    return nn.LayerNorm(dim, bias=spec.norm == "layernorm")


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class _Attention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, s = spec.hidden, spec
        qkv_bias = s.linear_bias or s.qkv_bias_only
        self.heads, self.kv_heads = s.heads, s.kv_heads
        self.head_dim, self.v_head_dim = s.head_dim, s.v_head_dim
        self.q = nn.Linear(h, s.heads * s.head_dim, bias=qkv_bias)
        self.k = nn.Linear(h, s.kv_heads * s.head_dim, bias=qkv_bias)
        self.v = nn.Linear(h, s.kv_heads * s.v_head_dim, bias=qkv_bias)
        self.o = nn.Linear(s.heads * s.v_head_dim, h, bias=s.linear_bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> Any:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.v_head_dim).transpose(1, 2)
        if rope is not None:
            q, k = _rope(q, *rope), _rope(k, *rope)
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, self.heads * self.v_head_dim))


class _MLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, f, bias = spec.hidden, spec.ffn, spec.linear_bias
        self.gated = spec.gated_mlp
        self.up = nn.Linear(h, f, bias=bias)
        self.gate = nn.Linear(h, f, bias=bias) if self.gated else None
        self.down = nn.Linear(f, h, bias=bias)

    def forward(self, x: torch.Tensor) -> Any:
        if self.gate is not None:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x)))


class _Layer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.norm1, self.norm2 = _norm(spec, spec.hidden), _norm(spec, spec.hidden)
        self.attn, self.mlp = _Attention(spec), _MLP(spec)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> Any:
        x = x + self.attn(self.norm1(x), rope)
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """Decoder-only language model; forward(tokens) returns the mean next-token loss."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        check_supported(spec)
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.pos = (
            nn.Embedding(spec.learned_positions, spec.hidden) if spec.learned_positions else None
        )
        self.embed_norm = _norm(spec, spec.hidden) if spec.embedding_norm else None
        self.layers = nn.ModuleList(_Layer(spec) for _ in range(spec.layers))
        self.norm = _norm(spec, spec.hidden)
        self.head = nn.Linear(spec.hidden, spec.vocab, bias=False)
        if spec.tied_embeddings:
            self.head.weight = self.embed.weight
        self.rope = spec.learned_positions == 0 and spec.model_type not in _NO_ROPE

    def init_weights(self) -> None:
        """HF-style init: matrices N(0, INIT_STD), norm scales 1, biases 0."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, std=INIT_STD)
                elif name.endswith("weight"):
                    nn.init.ones_(p)
                else:
                    nn.init.zeros_(p)

    def _rope_tables(self, t: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        dim = self.spec.head_dim
        inv = 1.0 / (ROPE_BASE ** (torch.arange(0, dim, 2, device=device).float() / dim))
        freqs = torch.outer(torch.arange(t, device=device).float(), inv)
        return freqs.cos(), freqs.sin()

    def forward(self, tokens: torch.Tensor) -> Any:
        _b, t = tokens.shape
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(t, device=tokens.device) % self.pos.num_embeddings)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        rope = self._rope_tables(t, tokens.device) if self.rope else None
        for layer in self.layers:
            x = layer(x, rope)
        logits = self.head(self.norm(x))
        # next-token loss over the sequence (targets: the input shifted by one, wrapped)
        targets = torch.roll(tokens, -1, dims=1)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def build(spec: ModelSpec, device: Any) -> Transformer:
    """The model, allocated once on `device` and initialised there (built on the meta device
    first, so the default per-layer init does not run on billions of weights twice)."""
    with torch.device("meta"):
        model = Transformer(spec)
    model = model.to_empty(device=device)
    if spec.tied_embeddings:
        model.head.weight = model.embed.weight
    model.init_weights()
    return model


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


#: fp32 weights + fp32 gradients + AdamW's two fp32 moments; bf16 autocast keeps the fp32
#: weights as the master copy, so mixed precision holds the same 16 B per parameter.
STATE_BYTES_PER_PARAM = 16


def activation_bytes_per_layer(spec: ModelSpec, tokens: int, element_bytes: int) -> int:
    """Activations one layer keeps for backward, roughly: the layer inputs, norms, q/k/v,
    attention output and MLP intermediates (fused attention stores no s x s scores)."""
    mult = 3 if spec.gated_mlp else 2
    return tokens * (18 * spec.hidden + 2 * mult * spec.ffn) * element_bytes
