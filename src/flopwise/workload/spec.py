"""The one description of a transformer workload that every planner uses.

A ``ModelSpec`` is normalised from a Hugging Face ``config.json`` (see ``hf.py``); it holds only
architecture facts. Accounting (parameters, FLOPs, bytes) lives in small pure functions beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from flopwise.errors import FlopwiseError

NormKind = Literal["rmsnorm", "layernorm", "layernorm_nobias"]
#: How a model's local-attention layers restrict the keys (ModelSpec.local_attention).
LOCAL_ATTENTION_KINDS: tuple[str, ...] = ("sliding", "chunked")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """Architecture of a decoder-only transformer. Sizes are element counts, not bytes."""

    name: str
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int  # query/key head dimension (MLA: nope + rope)
    v_head_dim: int
    vocab: int
    ffn: int  # dense MLP intermediate width (also dense-first layers of MoE models)
    gated_mlp: bool = True  # SwiGLU-style: gate, up, down; else up, down
    linear_bias: bool = False  # bias on attention projections and MLP
    qkv_bias_only: bool = False  # bias on q/k/v only (Qwen2)
    norm: NormKind = "rmsnorm"
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    qk_norm_full: bool = False  # q and k normed over their full width (OLMo 2, Command-R+)
    tied_embeddings: bool = False
    learned_positions: int = 0  # rows of a learned position table (GPT-2/3, OPT)
    embedding_norm: bool = False  # LayerNorm after the embedding (BLOOM)
    max_seq_len: int = 2048
    # Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank == 0 means not MLA.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    # Mixture of experts; experts == 0 means dense.
    experts: int = 0
    experts_per_token: int = 0
    expert_ffn: int = 0
    shared_experts: int = 0  # number of always-on experts, each shared_expert_ffn wide
    shared_expert_ffn: int = 0
    shared_expert_gate: bool = False  # sigmoid gate on the shared expert (Qwen2-MoE)
    dense_layers: tuple[int, ...] = ()  # indices of layers with a dense MLP in an MoE model
    router_bias: bool = False
    # group-limited routing (DeepSeek-V2/V3 n_group / topk_group): the routed experts form
    # `expert_groups` groups and a token's experts come from at most `expert_groups_per_token`
    # of them; 0 = unrestricted
    expert_groups: int = 0
    expert_groups_per_token: int = 0
    expert_bias: bool = False
    # Attention pattern: `sliding_layers` layers attend locally over `sliding_window` tokens:
    # "sliding" = each query sees the last sliding_window keys (Mistral, Gemma, GPT-OSS);
    # "chunked" = the sequence is cut into chunks of sliding_window tokens and each query sees
    # the keys of its own chunk up to itself (Llama 4's attention_chunk_size).
    sliding_window: int = 0
    sliding_layers: int = 0
    local_attention: str = "sliding"
    attention_sinks: bool = False  # one learned logit per head (gpt-oss)
    # tanh soft-capping of attention logits (Gemma 2): no parameters, an elementwise op on the
    # score matrix; kernels without it (FlashAttention < 2.6) fall back to unfused attention.
    attn_logit_softcap: float = 0.0
    extra_layers_excluded: int = 0  # e.g. DeepSeek-V3's multi-token-prediction module

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "kv_heads", "head_dim", "v_head_dim", "vocab"):
            if getattr(self, name) <= 0:
                raise FlopwiseError(f"model {self.name}: {name} must be positive")
        if self.ffn < 0:
            raise FlopwiseError(f"model {self.name}: ffn must not be negative")
        if self.heads % self.kv_heads:
            raise FlopwiseError(
                f"model {self.name}: {self.heads} attention heads are not a multiple of "
                f"{self.kv_heads} key/value heads"
            )
        if self.experts:
            if not 0 < self.experts_per_token <= self.experts:
                raise FlopwiseError(
                    f"model {self.name}: experts_per_token {self.experts_per_token} must be in "
                    f"1..{self.experts}"
                )
            if self.expert_ffn <= 0:
                raise FlopwiseError(f"model {self.name}: expert_ffn must be positive")
        if self.sliding_layers > self.layers:
            raise FlopwiseError(f"model {self.name}: more sliding-window layers than layers")
        if self.local_attention not in LOCAL_ATTENTION_KINDS:
            raise FlopwiseError(
                f"model {self.name}: local_attention {self.local_attention!r} is not one of "
                f"{LOCAL_ATTENTION_KINDS}"
            )

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - len(self.dense_layers) if self.is_moe else 0

    @property
    def attention_kind(self) -> str:
        if self.is_mla:
            return "mla"
        if self.kv_heads == self.heads:
            return "mha"
        return "mqa" if self.kv_heads == 1 else "gqa"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dense_layers"] = list(self.dense_layers)
        d["attention_kind"] = self.attention_kind
        return d
