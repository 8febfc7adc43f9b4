"""A decoder-only transformer in plain PyTorch, built from a ModelSpec (a HF config.json).

The same architecture facts the planner counts: embeddings (tied or not, learned positions),
pre-norm layers of GQA attention with rotary positions and a (gated) MLP, a final norm and the
vocabulary projection. Attention runs through `scaled_dot_product_attention` (the fused kernel
torch picks: FlashAttention/cuDNN on NVIDIA, CK/AOTriton on ROCm, a math kernel on the CPU).
Mixture-of-experts layers run as frameworks run them (torchtitan's GroupedExperts, Megatron's
grouped MLP): a router and top-k, the routed tokens sorted by expert into one buffer (each
expert's rows padded to a multiple of MOE_ALIGN_ROWS, as torchtitan pads for the grouped
kernel), the experts' gate/up and down projections as two grouped GEMMs
(``torch._grouped_mm``; one ``torch.mm`` per expert where this torch or device lacks it), and
the outputs weighted and added back per token; shared experts as a dense MLP beside them. The
router is softmax, top-k and renormalised for every MoE family: routing math is a sliver of the
step, and with random weights the load is near uniform, as the planner assumes. Multi-head
latent attention is not built. torch is imported only when this module is.
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


#: Rows each expert's group is padded to in the grouped GEMMs' input (torchtitan pads token
#: groups to 16 rows for torch._grouped_mm's kernels; the planner pads each expert's last tile).
MOE_ALIGN_ROWS = 16

#: What the MoE layers ran their expert GEMMs with (reported by `bench step`).
MOE_GROUPED_MM = "torch._grouped_mm"
MOE_LOOP_MM = "torch.mm per expert"


def check_supported(spec: ModelSpec) -> None:
    if spec.kv_lora_rank:
        raise FlopwiseError(
            f"bench step builds decoder models with multi-head, grouped-query or multi-query "
            f"attention; {spec.name} uses multi-head latent attention (not supported yet)"
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
        # query/key norms: per head over head_dim (Qwen3, Gemma 3) or over all heads (OLMo 2)
        self.q_norm: nn.Module | None = None
        self.k_norm: nn.Module | None = None
        if s.qk_norm:
            self.q_norm, self.k_norm = _norm(s, s.head_dim), _norm(s, s.head_dim)
        elif s.qk_norm_full:
            self.q_norm = _norm(s, s.heads * s.head_dim)
            self.k_norm = _norm(s, s.kv_heads * s.head_dim)
        self.per_head_norm = s.qk_norm

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> Any:
        b, t, _ = x.shape
        q, k = self.q(x), self.k(x)
        if self.q_norm is not None and self.k_norm is not None and not self.per_head_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, self.heads, self.head_dim)
        k = k.view(b, t, self.kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None and self.per_head_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.v_head_dim).transpose(1, 2)
        if rope is not None:
            q, k = _rope(q, *rope), _rope(k, *rope)
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, self.heads * self.v_head_dim))


class _MLP(nn.Module):
    def __init__(self, spec: ModelSpec, width: int = 0, bias: bool | None = None) -> None:
        super().__init__()
        h, f = spec.hidden, width or spec.ffn
        bias = spec.linear_bias if bias is None else bias
        self.gated = spec.gated_mlp
        self.up = nn.Linear(h, f, bias=bias)
        self.gate = nn.Linear(h, f, bias=bias) if self.gated else None
        self.down = nn.Linear(f, h, bias=bias)

    def forward(self, x: torch.Tensor) -> Any:
        if self.gate is not None:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x)))


class ExpertParallel:
    """The expert-parallel group a layer's experts are sharded over: `size` ranks (every rank
    of the torchrun job), this one `rank` among them, holding experts [rank*L, (rank+1)*L)."""

    def __init__(self, group: Any, rank: int, size: int) -> None:
        self.group, self.rank, self.size = group, rank, size

    def exchange(self, x: torch.Tensor, send: list[int], receive: list[int]) -> Any:
        """All-to-all of rows (`send[j]` to rank j, `receive[j]` from it), differentiable."""
        from torch.distributed._functional_collectives import all_to_all_single_autograd

        out = all_to_all_single_autograd(x.contiguous(), receive, send, self.group)
        return out.wait() if hasattr(out, "wait") else out


class _MoE(nn.Module):
    """Routed experts (and shared ones) of one MoE layer; see the module docstring. With an
    expert-parallel group each rank holds `experts / size` experts and the routed tokens travel
    to them and back by all-to-all, the counts exchanged first (Megatron's alltoall dispatcher)."""

    #: the kernel the expert GEMMs run with; falls back to a loop once if the grouped one fails
    kernel: str = MOE_GROUPED_MM

    def __init__(self, spec: ModelSpec, ep: ExpertParallel | None = None) -> None:
        super().__init__()
        h, f, e = spec.hidden, spec.expert_ffn, spec.experts
        self.experts, self.top_k, self.gated = e, spec.experts_per_token, spec.gated_mlp
        self.ep = ep
        local = e // ep.size if ep is not None else e
        up = 2 * f if self.gated else f
        self.router = nn.Linear(h, e, bias=spec.router_bias)
        # expert weights stored out x in, as a linear layer's (the NT layout of the GEMMs)
        self.w_up = nn.Parameter(torch.empty(local, up, h))
        self.w_down = nn.Parameter(torch.empty(local, h, f))
        self.b_up = nn.Parameter(torch.empty(local, up)) if spec.expert_bias else None
        self.b_down = nn.Parameter(torch.empty(local, h)) if spec.expert_bias else None
        shared = spec.shared_experts * spec.shared_expert_ffn
        self.shared = _MLP(spec, shared, bias=False) if shared else None
        self.shared_gate = nn.Linear(h, 1, bias=False) if spec.shared_expert_gate else None
        if not hasattr(torch, "_grouped_mm"):
            self.kernel = MOE_LOOP_MM

    def _expert_mm(self, x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> Any:
        kind = x.device.type
        if torch.is_autocast_enabled(kind):
            # autocast does not cover the grouped kernel: run it in the autocast dtype, as
            # frameworks run their experts (bf16 weights and tokens, fp32 master weights)
            dt = torch.get_autocast_dtype(kind)
            x, w = x.to(dt), w.to(dt)
        if self.kernel == MOE_GROUPED_MM:
            try:
                return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
            except (RuntimeError, NotImplementedError):
                self.kernel = MOE_LOOP_MM  # this device or dtype has no grouped kernel
        ends = offs.tolist()
        starts = [0, *ends[:-1]]
        out = [x[a:b] @ w[i].t() for i, (a, b) in enumerate(zip(starts, ends, strict=True))]
        out.append(x.new_zeros(x.shape[0] - ends[-1], w.shape[1]))  # rows past the last group
        return torch.cat(out)

    def _local_experts(self, rows: torch.Tensor, ids: torch.Tensor, counts: torch.Tensor) -> Any:
        """This rank's experts on `rows`, sorted by local expert `ids` (`counts` per expert):
        each expert's rows padded to the alignment, gate/up and down as grouped GEMMs; the
        outputs in the order of `rows`."""
        n, local = rows.shape[0], counts.shape[0]
        padded = (counts + MOE_ALIGN_ROWS - 1) // MOE_ALIGN_ROWS * MOE_ALIGN_ROWS
        offs = torch.cumsum(padded, 0).to(torch.int32)
        rank = torch.arange(n, device=rows.device) - (torch.cumsum(counts, 0) - counts)[ids]
        dest = (offs - padded)[ids] + rank
        bound = n + MOE_ALIGN_ROWS * local  # a bound on the padded rows: no host sync for it
        routed = rows.new_zeros(bound, rows.shape[-1]).index_put((dest,), rows)
        # rows past the last group belong to no expert: the grouped kernel leaves them
        # unwritten, so they are zeroed (forward) and kept out of the biases' gradients
        positions = torch.arange(bound, device=rows.device)
        valid = (positions < offs[-1]).unsqueeze(-1)
        hidden = torch.where(valid, self._expert_mm(routed, self.w_up, offs), 0.0)
        if self.b_up is not None and self.b_down is not None:
            row_expert = torch.bucketize(positions, offs, right=True).clamp(max=local - 1)
            hidden = hidden + torch.where(valid, self.b_up[row_expert], 0.0)
        if self.gated:
            gate, up = hidden.chunk(2, dim=-1)
            hidden = F.silu(gate) * up
        else:
            hidden = F.gelu(hidden)
        out = torch.where(valid, self._expert_mm(hidden, self.w_down, offs), 0.0)
        if self.b_down is not None:
            out = out + torch.where(valid, self.b_down[row_expert], 0.0)
        return out[dest]

    def _dispatch(self, rows: torch.Tensor, ids: torch.Tensor, counts: torch.Tensor) -> Any:
        """`rows` sorted by global expert (`counts` per expert) to the ranks holding their
        experts, through them, and back, in the order of `rows`."""
        ep = self.ep
        assert ep is not None
        local = self.experts // ep.size
        import torch.distributed as dist

        received = torch.empty_like(counts)  # per source rank, the counts of my experts
        dist.all_to_all_single(received, counts, group=ep.group)
        send = counts.view(ep.size, local).sum(1).tolist()  # the host sync of the dispatcher
        receive = received.view(ep.size, local).sum(1).tolist()
        arrived = ep.exchange(rows, send, receive)  # by source rank, then by local expert
        local_ids = torch.arange(local, device=rows.device).repeat(ep.size)
        local_ids = local_ids.repeat_interleave(received)
        by_expert = local_ids.argsort(stable=True)
        done = self._local_experts(
            arrived[by_expert], local_ids[by_expert], received.view(ep.size, local).sum(0)
        )
        back = torch.empty_like(done).index_put((by_expert,), done)  # source order again
        return ep.exchange(back, receive, send)

    def forward(self, x: torch.Tensor) -> Any:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        k, e = self.top_k, self.experts
        probs = F.softmax(self.router(flat).float(), dim=-1)
        weight, expert = probs.topk(k, dim=-1)
        weight = (weight / weight.sum(-1, keepdim=True)).to(x.dtype)
        # sort the (token, choice) pairs by expert
        order = expert.reshape(-1).argsort(stable=True)
        ids = expert.reshape(-1)[order]
        counts = torch.bincount(ids, minlength=e)
        rows = flat[order // k]
        if self.ep is None:
            out = self._local_experts(rows, ids, counts)
        else:
            out = self._dispatch(rows, ids, counts)
        picked = out * weight.reshape(-1)[order].unsqueeze(-1)
        y = flat.new_zeros(flat.shape).index_add(0, order // k, picked)
        if self.shared is not None:
            s = self.shared(flat)
            if self.shared_gate is not None:
                s = torch.sigmoid(self.shared_gate(flat)) * s
            y = y + s
        return y.reshape(shape)


class _Layer(nn.Module):
    def __init__(self, spec: ModelSpec, index: int = 0, ep: ExpertParallel | None = None) -> None:
        super().__init__()
        self.norm1, self.norm2 = _norm(spec, spec.hidden), _norm(spec, spec.hidden)
        self.attn = _Attention(spec)
        moe = spec.is_moe and index not in spec.dense_layers
        self.mlp: nn.Module = _MoE(spec, ep) if moe else _MLP(spec)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> Any:
        x = x + self.attn(self.norm1(x), rope)
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """Decoder-only language model; forward(tokens) returns the mean next-token loss."""

    def __init__(self, spec: ModelSpec, ep: ExpertParallel | None = None) -> None:
        super().__init__()
        check_supported(spec)
        if ep is not None and (not spec.is_moe or spec.experts % ep.size):
            raise FlopwiseError(
                f"expert parallelism {ep.size} needs an MoE model whose experts it divides; "
                f"{spec.name} has {spec.experts or 'no'} experts"
            )
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.pos = (
            nn.Embedding(spec.learned_positions, spec.hidden) if spec.learned_positions else None
        )
        self.embed_norm = _norm(spec, spec.hidden) if spec.embedding_norm else None
        self.layers = nn.ModuleList(_Layer(spec, i, ep) for i in range(spec.layers))
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


def build(spec: ModelSpec, device: Any, ep: ExpertParallel | None = None) -> Transformer:
    """The model, allocated once on `device` and initialised there (built on the meta device
    first, so the default per-layer init does not run on billions of weights twice); with `ep`
    its experts sharded over the expert-parallel group."""
    with torch.device("meta"):
        model = Transformer(spec, ep)
    model = model.to_empty(device=device)
    if spec.tied_embeddings:
        model.head.weight = model.embed.weight
    model.init_weights()
    return model


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def expert_parameter_names(model: nn.Module) -> list[str]:
    """Names of the routed experts' parameters: sharded by expert parallelism, so each rank's
    are its own and data parallelism must not average them."""
    names = []
    for name, module in model.named_modules():
        if isinstance(module, _MoE):
            names += [f"{name}.{p}" for p, v in module.named_parameters(recurse=False)
                      if p.startswith(("w_", "b_")) and v is not None]  # fmt: skip
    return names


#: fp32 weights + fp32 gradients + AdamW's two fp32 moments; bf16 autocast keeps the fp32
#: weights as the master copy, so mixed precision holds the same 16 B per parameter.
STATE_BYTES_PER_PARAM = 16


def activation_bytes_per_layer(spec: ModelSpec, tokens: int, element_bytes: int) -> int:
    """Activations one layer keeps for backward, roughly: the layer inputs, norms, q/k/v,
    attention output and MLP intermediates (fused attention stores no s x s scores); an MoE
    layer keeps its routed copies (inputs and outputs of top-k experts per token, padded) and
    their intermediates instead of a dense MLP's, plus the shared experts'."""
    mult = 3 if spec.gated_mlp else 2
    if not spec.is_moe:
        return tokens * (18 * spec.hidden + 2 * mult * spec.ffn) * element_bytes
    routed = tokens * spec.experts_per_token + MOE_ALIGN_ROWS * spec.experts
    shared = spec.shared_experts * spec.shared_expert_ffn
    per_token = 18 * spec.hidden + 2 * mult * max(spec.ffn if spec.dense_layers else 0, shared)
    moe = routed * (2 * spec.hidden + 2 * mult * spec.expert_ffn)
    return (tokens * per_token + moe) * element_bytes
