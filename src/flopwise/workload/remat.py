"""MaxText's rematerialisation (activation checkpointing) policies, as data.

MaxText (AI-Hypercomputer/maxtext) names the tensors of a decoder layer with
``jax.ad_checkpoint.checkpoint_name`` and picks, per ``remat_policy``, which of them the
backward pass may keep in HBM, which it moves to pinned host memory, and which it recomputes
(``Decoder.get_remat_policy`` in src/MaxText/layers/decoders.py; the offloading presets in
``maxtext_utils.get_save_and_offload_names``; the per-tensor ``custom`` keys in
configs/base.yml, all at commit 92e59fdf, Sep 2025). The tags (same commit):

- ``decoder_layer_input``: the layer's input, the scan carry (layers/llama2.py); it "cannot be
  rematerialized - it serves as periodic checkpoints" (base.yml), so it stays on the device
  unless offloaded;
- ``query_proj``/``key_proj``/``value_proj`` (``qkv_proj`` when fused): the projections after
  RoPE (layers/attentions.py); ``context``: the attention output, the input of ``out_proj``;
  ``out_proj``: the attention block's output;
- ``mlpwi_0``/``mlpwi_1`` (gated) or ``mlpwi`` (one activation, or ``fused_mlp``): the MLP's
  input projections before the activation; ``mlpwo``: the MLP's output (layers/linears.py).

A policy only makes values *saveable*: ``jax.checkpoint`` keeps a value only when the backward
needs it. ``mlpwo`` feeds the residual add alone, so it is never kept; ``out_proj`` is kept
because the second norm's backward needs its input (input + out_proj) in the pre-norm block.
The Dec 2023 ``minimal`` (``checkpoint_dots_with_no_batch_dims``, MaxText/layers/models.py at
76bd53b) saves the same projection outputs as today's ``minimal``.

What the backward re-runs follows from what is kept: the attention core unless ``context`` is
kept; the q/k/v projections when they are not kept and the attention core (or ``out_proj``'s
weight gradient, which needs ``context``) must be rebuilt; ``out_proj`` when it is not kept
(the second norm needs it); the MLP input projections when they are not kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from flopwise.errors import FlopwiseError
from flopwise.workload.spec import ModelSpec

#: The named tensors of a MaxText decoder layer that ``remat_policy=custom`` takes, in base.yml
#: order (dense models; MoE's moe_mlpwi_* and MLA's names map onto mlpwi/query/key below).
TENSORS: tuple[str, ...] = (
    "decoder_layer_input",
    "context",
    "mlpwi",
    "mlpwi_0",
    "mlpwi_1",
    "mlpwo",
    "query_proj",
    "key_proj",
    "value_proj",
    "qkv_proj",
    "out_proj",
)
PLACES: tuple[str, ...] = ("device", "offload", "remat")

_QKV = ("query_proj", "key_proj", "value_proj", "qkv_proj")
_MLPWI = ("mlpwi", "mlpwi_0", "mlpwi_1")

#: MaxText's named policies: (names kept in HBM, names offloaded to pinned host memory), besides
#: decoder_layer_input (always kept, on the device). decoders.py get_remat_policy and
#: maxtext_utils.get_save_and_offload_names at 92e59fdf.
PRESETS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = MappingProxyType(
    {
        "minimal": (frozenset((*_QKV, "out_proj", *_MLPWI, "mlpwo")), frozenset()),
        "minimal_with_context": (
            frozenset((*_QKV, "out_proj", *_MLPWI, "mlpwo", "context")),
            frozenset(),
        ),
        "save_dot_with_context_except_mlp": (
            frozenset((*_QKV, "context", "out_proj")),
            frozenset(),
        ),
        "save_dot_except_mlpwi": (frozenset((*_QKV, "out_proj", "mlpwo")), frozenset()),
        "save_dot_except_mlp": (frozenset((*_QKV, "out_proj")), frozenset()),
        "save_qkv_proj": (frozenset(_QKV), frozenset()),
        "save_out_proj": (frozenset(("out_proj",)), frozenset()),
        "qkv_proj_offloaded": (
            frozenset(),
            frozenset(("query_proj", "value_proj", "key_proj", "kv_proj")),
        ),
        "minimal_offloaded": (frozenset(), frozenset((*_QKV, "out_proj", *_MLPWI, "mlpwo"))),
    }
)

#: Every MaxText policy name a plan accepts as ``--recompute``; "full" and "none" are the
#: generic modes (MaxText's remat_policy=full keeps only decoder_layer_input, as full
#: recompute does); "custom" reads the per-tensor choices of ``--remat-tensors``.
POLICIES: tuple[str, ...] = (*PRESETS, "custom")


def parse_remat_tensors(text: str) -> tuple[tuple[str, str], ...]:
    """``name=place,...`` (MaxText's custom remat keys) as sorted pairs; one-line errors."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, place = (s.strip() for s in part.partition("="))
        if not sep or name not in TENSORS or place not in PLACES:
            raise FlopwiseError(
                f"--remat-tensors {part!r}: give NAME=PLACE with NAME one of "
                f"{', '.join(TENSORS)} and PLACE one of {', '.join(PLACES)}"
            )
        if name == "decoder_layer_input" and place == "remat":
            raise FlopwiseError(
                "--remat-tensors decoder_layer_input=remat: MaxText keeps the layer input "
                "(device or offload); it is where recomputation starts"
            )
        out[name] = place
    return tuple(sorted(out.items()))


def policy_sets(
    policy: str, custom: Iterable[tuple[str, str]] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    """(names kept in HBM, names offloaded to host) for a policy, decoder_layer_input included
    in one of them."""
    if policy == "custom":
        places = dict(custom)
        inp = places.get("decoder_layer_input", "device")
        device = {n for n, p in places.items() if p == "device"} | {"decoder_layer_input"}
        offload = {n for n, p in places.items() if p == "offload"}
        if inp == "offload":
            device.discard("decoder_layer_input")
        return frozenset(device), frozenset(offload)
    if policy not in PRESETS:
        raise FlopwiseError(f"remat policy {policy!r} is not one of {', '.join(POLICIES)}")
    kept, moved = PRESETS[policy]
    return kept | {"decoder_layer_input"}, moved


def _mlp_width(spec: ModelSpec) -> float:
    """MLP intermediate width a token goes through (MoE: its routed and shared experts)."""
    if spec.is_moe:
        return float(
            spec.experts_per_token * spec.expert_ffn + spec.shared_experts * spec.shared_expert_ffn
        )
    return float(spec.ffn)


def tensor_elements(spec: ModelSpec, tp: int, sp: bool) -> dict[str, float]:
    """Elements per token of each kept residual on one device: heads and the MLP width split
    over TP; hidden-sized tensors too where sequence parallelism shards them (MaxText maps
    activation_embed onto the tensor axis)."""
    hidden = spec.hidden / (tp if sp else 1)
    kv_local = max(spec.kv_heads / tp, 1.0)
    q = spec.heads / tp * spec.head_dim
    k = kv_local * spec.head_dim
    v = kv_local * spec.v_head_dim
    mlp_in = (2.0 if spec.gated_mlp else 1.0) * _mlp_width(spec) / tp
    return {
        "decoder_layer_input": hidden,
        "query_proj": q,
        "key_proj": k,
        "value_proj": v,
        "context": spec.heads / tp * spec.v_head_dim,
        "out_proj": hidden,
        "mlp_in": mlp_in,
    }


def _kept(names: frozenset[str]) -> dict[str, bool]:
    """Which residuals the backward keeps (mlpwo is never one: it only feeds the residual)."""
    return {
        "decoder_layer_input": "decoder_layer_input" in names,
        "query_proj": bool(names & {"query_proj", "qkv_proj"}),
        "key_proj": bool(names & {"key_proj", "kv_proj", "qkv_proj"}),
        "value_proj": bool(names & {"value_proj", "kv_proj", "qkv_proj"}),
        "context": "context" in names,
        "out_proj": "out_proj" in names,
        "mlp_in": bool(names & set(_MLPWI)),
    }


def residual_elements(
    spec: ModelSpec, tp: int, sp: bool, policy: str, custom: Iterable[tuple[str, str]] = ()
) -> tuple[float, float]:
    """(elements per token kept in HBM, elements per token offloaded to host) for one layer."""
    device, offload = policy_sets(policy, custom)
    sizes = tensor_elements(spec, tp, sp)
    on_device = sum(sizes[n] for n, k in _kept(device).items() if k)
    on_host = sum(sizes[n] for n, k in _kept(offload - device).items() if k)
    return on_device, on_host


def recomputed(policy: str, custom: Iterable[tuple[str, str]] = ()) -> dict[str, bool]:
    """Which forward computations of a layer the backward re-runs under a policy."""
    device, offload = policy_sets(policy, custom)
    kept = _kept(device | offload)
    # the attention backward (and out_proj's weight gradient) needs the attention output:
    # without context kept, the attention core runs again, from q, k and v
    attention = not kept["context"]
    return {
        "attention": attention,
        "query_proj": attention and not kept["query_proj"],
        "key_proj": attention and not kept["key_proj"],
        "value_proj": attention and not kept["value_proj"],
        "out_proj": not kept["out_proj"],
        "mlp_in": not kept["mlp_in"],
    }


def recompute_matmul_params(
    spec: ModelSpec, policy: str, custom: Iterable[tuple[str, str]] = ()
) -> float:
    """Weights per token, all layers, whose matmuls the backward re-runs under a policy (MoE:
    the experts a token is routed to)."""
    rc = recomputed(policy, custom)
    h = spec.hidden
    per_layer = 0.0
    if rc["query_proj"]:
        per_layer += h * spec.heads * spec.head_dim
    if rc["key_proj"]:
        per_layer += h * spec.kv_heads * spec.head_dim
    if rc["value_proj"]:
        per_layer += h * spec.kv_heads * spec.v_head_dim
    if rc["out_proj"]:
        per_layer += spec.heads * spec.v_head_dim * h
    if rc["mlp_in"]:
        per_layer += (2.0 if spec.gated_mlp else 1.0) * h * _mlp_width(spec)
    return spec.layers * per_layer


def recomputes_attention(policy: str, custom: Iterable[tuple[str, str]] = ()) -> bool:
    return recomputed(policy, custom)["attention"]
