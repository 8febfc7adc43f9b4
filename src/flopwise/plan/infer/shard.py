"""The model as one GPU of a tensor-parallel x pipeline-parallel group sees it.

Per-layer widths come from the model's config (attention heads, KV heads, MLP / expert widths),
divided by the tensor-parallel degree. KV heads are split across TP ranks when there are at least
as many as ranks and replicated otherwise (Megatron/vLLM/TensorRT-LLM all do this); MLA's
compressed latent is not split by heads, so every TP rank holds the whole latent cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flopwise.plan.binomial import binomial_pmfs
from flopwise.workload.flops import local_pairs
from flopwise.workload.memory_bytes import DTYPE_BYTES, kv_bytes_per_token_per_layer, storage_bytes
from flopwise.workload.params import ParamCounts, attention_params, count_params, mlp_params
from flopwise.workload.spec import ModelSpec

#: Bytes per element of the embedding and output projection (lm_head) in quantized checkpoints:
#: fp8/int8/int4 quantizers leave them in 16 bit by default (NVIDIA ModelOpt FP8 checkpoints
#: list "lm_head" under exclude_modules in hf_quant_config.json; AutoAWQ/GPTQ quantize only the
#: decoder's linear layers). 16-bit deployments are unaffected.
VOCAB_WEIGHT_BYTES = 2.0


@dataclass(frozen=True, slots=True)
class Shard:
    """Per-GPU shapes and bytes of one TP rank in one pipeline stage."""

    spec: ModelSpec
    counts: ParamCounts
    tp: int
    pp: int
    layers: int  # layers on the fullest pipeline stage
    weight_bytes_per_elt: float
    kv_bytes_per_elt: float
    # per-layer GEMM widths on one rank (output features)
    qkv_out: int
    o_in: int
    mlp_up_out: int  # gate+up (gated) or up
    mlp_down_in: int
    expert_up_out: int
    expert_down_in: int
    shared_up_out: int
    shared_down_in: int
    logits_out: int
    kv_per_token_layer_bytes: float  # KV bytes one token adds to one layer on this rank
    attn_flops_per_key: float  # decode attention FLOPs per (query, key) pair on this rank
    #: expert parallelism: the TP group's ranks split into `ep` groups that each hold
    #: experts/ep whole experts, every expert sharded over tp/ep ranks (TensorRT-LLM
    #: moe_ep_size x moe_tp_size = tp_size; vLLM --enable-expert-parallel: ep = tp)
    ep: int = 1
    #: attention data parallelism: every rank holds all attention weights and whole KV heads and
    #: serves 1/attn_dp of the sequences (SGLang --enable-dp-attention, TensorRT-LLM
    #: enable_attention_dp); 1 = attention split by heads over the TP group
    attn_dp: int = 1
    #: under attention data parallelism, whether the dense MLP layers, shared experts, router,
    #: embedding and lm_head are also whole on every rank and run on its own sequences only
    #: (the engine's EngineProfile.attention_dp_whole_dense); False: they are split over the TP
    #: group and run on every rank's tokens, gathered (SGLang's default)
    dense_whole: bool = False
    #: Whether decode steps of chunked-attention layers (Llama 4) attend within their chunk;
    #: False when the engine chunks only context requests and generation attends to every
    #: cached token (EngineProfile.chunked_attention_in_decode). Sliding-window layers always
    #: stay local. (The KV of chunked layers is kept whole either way: memory.py.)
    decode_local: bool = True

    @property
    def moe(self) -> bool:
        return self.spec.is_moe

    @property
    def moe_layers_on_stage(self) -> float:
        s = self.spec
        return s.moe_layers * self.layers / s.layers if s.is_moe else 0.0

    @property
    def dense_layers_on_stage(self) -> float:
        return self.layers - self.moe_layers_on_stage

    @property
    def expert_bytes(self) -> float:
        """Weight bytes of one routed expert on one rank."""
        s = self.spec
        per = mlp_params(s, s.expert_ffn, bias=s.expert_bias) * self.weight_bytes_per_elt
        return per / (self.tp // self.ep)

    @property
    def local_experts(self) -> int:
        """Routed experts held by one rank's expert-parallel group."""
        return self.spec.experts // self.ep

    @property
    def mlp_act_width(self) -> float:
        """Mean MLP intermediate width per token on one rank (active experts for MoE layers)."""
        s = self.spec
        if not s.is_moe:
            return float(self.mlp_down_in)
        moe = self.expert_down_in * s.experts_per_token + self.shared_down_in * (
            1 if s.shared_experts else 0
        )
        frac = s.moe_layers / s.layers
        return frac * moe + (1 - frac) * self.mlp_down_in

    @property
    def vocab_bytes_per_elt(self) -> float:
        """Bytes per element of the embedding and lm_head (see VOCAB_WEIGHT_BYTES)."""
        return max(self.weight_bytes_per_elt, VOCAB_WEIGHT_BYTES)

    def weights_per_gpu_bytes(self) -> float:
        """Weights on the fullest rank: its layers plus the embedding and output projection."""
        c, s = self.counts, self.spec
        rest = c.mlp + c.shared_experts + c.router + c.norms
        # routed experts are always split over the group (expert x tensor parallel); under
        # attention data parallelism the attention weights are whole on every rank, and with
        # an engine that keeps the dense part whole (dense_whole) so is everything else
        split = c.experts + (0 if self.dense_whole else rest)
        whole = 0.0
        if self.attn_dp > 1:
            whole += c.attention
        else:
            split += c.attention
        if self.dense_whole:
            whole += rest
        per_layer = (split / self.tp + whole) / s.layers
        vocab = c.embedding + c.lm_head
        # With pp > 1 the embedding sits on the first stage, the lm_head on the last.
        vocab_on_stage = vocab if self.pp == 1 else max(c.embedding, c.lm_head)
        vocab_tp = 1 if self.dense_whole else self.tp
        layers = per_layer * self.layers * self.weight_bytes_per_elt
        return layers + vocab_on_stage * self.vocab_bytes_per_elt / vocab_tp


def make_shard(
    spec: ModelSpec,
    tp: int,
    pp: int,
    weight_dtype: str,
    kv_dtype: str,
    ep: int = 1,
    attention_dp: bool = False,
    whole_dense: bool = False,
    chunked_decode: bool = True,
) -> Shard:
    """One rank's shard; `whole_dense`: under `attention_dp`, the engine keeps the dense MLP,
    shared experts and vocabulary layers whole on every rank (Shard.dense_whole);
    `chunked_decode`: the engine's generation steps honour chunked attention (Shard.decode_local)."""
    s = spec
    dense_whole = attention_dp and whole_dense and tp > 1
    dtp = 1 if dense_whole else tp  # ranks the dense MLP, shared experts and vocab split over
    counts = count_params(s)
    layers = math.ceil(s.layers / pp)
    o_in = s.heads * s.v_head_dim
    atp = 1 if attention_dp else tp  # ranks the attention heads are split over
    if s.is_mla:
        qkv_total = attention_params(s) - o_in * s.hidden
        qkv_out = max(1, round(qkv_total / s.hidden / atp))
        kv_layer = kv_bytes_per_token_per_layer(s, kv_dtype)  # latent replicated on every rank
        # absorbed MLA decode: q.(latent, rope) then weights over the latent, per head
        per_key = 2.0 * s.heads * (2 * s.kv_lora_rank + s.qk_rope_head_dim) / atp
    else:
        kv_heads_rank = math.ceil(s.kv_heads / atp)
        qkv_out = (s.heads * s.head_dim) // atp + kv_heads_rank * (s.head_dim + s.v_head_dim)
        kv_layer = kv_bytes_per_token_per_layer(s, kv_dtype) * kv_heads_rank / s.kv_heads
        per_key = 2.0 * s.heads * (s.head_dim + s.v_head_dim) / atp
    up = 2 if s.gated_mlp else 1
    etp = tp // ep  # ranks one expert is sharded over
    return Shard(
        spec=s,
        counts=counts,
        tp=tp,
        pp=pp,
        layers=layers,
        weight_bytes_per_elt=storage_bytes(weight_dtype),
        kv_bytes_per_elt=DTYPE_BYTES[kv_dtype],
        qkv_out=qkv_out,
        o_in=max(1, o_in // atp),
        mlp_up_out=max(1, up * s.ffn // dtp),
        mlp_down_in=max(1, s.ffn // dtp),
        expert_up_out=max(1, up * s.expert_ffn // etp),
        expert_down_in=max(1, s.expert_ffn // etp),
        shared_up_out=max(1, up * s.shared_experts * s.shared_expert_ffn // dtp),
        shared_down_in=max(1, s.shared_experts * s.shared_expert_ffn // dtp),
        logits_out=max(1, s.vocab // dtp),
        kv_per_token_layer_bytes=kv_layer,
        attn_flops_per_key=per_key,
        ep=ep,
        attn_dp=tp if attention_dp else 1,
        dense_whole=dense_whole,
        decode_local=chunked_decode or s.local_attention != "chunked",
    )


def touch_probability(experts: int, top_k: int, tokens: float) -> float:
    """Probability that a batch of `tokens` routes at least one token to a given expert under
    uniform top-k routing: 1 - (1 - k/E)^T."""
    return 1.0 - (1.0 - top_k / experts) ** tokens


def expected_distinct_experts(experts: int, top_k: int, tokens: float) -> float:
    """Experts a batch of `tokens` touches with uniform top-k routing: E(1 - (1 - k/E)^T)."""
    if tokens <= 0:
        return 0.0
    return experts * touch_probability(experts, top_k, tokens)


def busiest_group_experts(experts: int, top_k: int, tokens: float, groups: int) -> float:
    """Touched experts on the busiest of `groups` expert-parallel ranks, expected.

    Each expert is touched by a batch of `tokens` with probability q = 1 - (1 - k/E)^T
    (uniform top-k routing), so a rank holding n = E / groups experts touches Binomial(n, q) of
    them, and the step waits for the rank that touched the most: E[max of `groups` such
    counts] = sum over x of (1 - F(x - 1)^groups), F the Binomial CDF (the ranks taken as
    independent). At a large batch every expert is touched (q -> 1) and this is E / groups; at
    a small one the busiest rank reads more expert weights than the mean share. One group, or
    experts that do not split evenly: the mean share."""
    if tokens <= 0:
        return 0.0
    if groups <= 1 or experts < groups or experts % groups:
        return expected_distinct_experts(experts, top_k, tokens) / max(1, groups)
    n = experts // groups
    q = touch_probability(experts, top_k, tokens)
    if q >= 1.0:
        return float(n)
    cdf = 0.0
    expected_max = 0.0
    for _, pmf in binomial_pmfs(n, q, 0, n - 1):  # P(max >= x + 1) = 1 - P(count <= x)^groups
        cdf += pmf
        expected_max += 1.0 - min(1.0, cdf) ** groups
    return expected_max


def mean_decode_keys(spec: ModelSpec, input_len: int, output_len: int) -> tuple[float, float]:
    """Mean keys a decode step attends to over the generation: (full layers, local layers).

    Decode steps 1..output_len-1 run with input_len + i tokens cached; each step is charged only
    the KV cache it has at that step, so the mean is input_len + output_len/2.
    """
    steps = max(1, output_len - 1)
    lo, hi = input_len + 1, input_len + steps  # context of the first and last decode step
    full = (lo + hi) / 2.0
    w = spec.sliding_window
    if not spec.sliding_layers or not w:
        return full, full
    # the keys of positions lo..hi in a local layer (a sliding window or Llama 4's chunks)
    chunked = spec.local_attention == "chunked"
    sliding = (local_pairs(hi, w, chunked) - local_pairs(lo - 1, w, chunked)) / (hi - lo + 1)
    return full, sliding


def prefill_pairs(spec: ModelSpec, prompt_len: int) -> tuple[float, float]:
    """(query, key) pairs of one causal prompt: (per full layer, per local layer)."""
    n = float(prompt_len)
    full = n * (n + 1) / 2.0
    if not spec.sliding_layers:
        return full, full
    # local_pairs is the whole causal triangle where there is no window or n is within it
    return full, local_pairs(n, spec.sliding_window, spec.local_attention == "chunked")
