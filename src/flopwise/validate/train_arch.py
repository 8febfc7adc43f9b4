"""The machine and model half of posing a published training row: its architecture as a
Hugging Face config (a stock catalog model when one matches, else a shipped ``pub-*`` config)
and its hardware as `flopwise plan train` flags (accelerator, node type, network). The layout
and metric half is validate/train_rows.py."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Row = Mapping[str, str]


def _num(row: Row, key: str) -> float | None:
    v = (row.get(key) or "").strip()
    return float(v) if v else None


def _int(row: Row, key: str) -> int | None:
    v = _num(row, key)
    return None if v is None else int(v)


# --- architecture --------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def arch_config(row: Row, family: str) -> dict[str, Any] | str:
    """The row's architecture as a Hugging Face config.json dict, or why there is none."""
    h, layers, heads = _int(row, "hidden"), _int(row, "layers"), _int(row, "heads")
    vocab = _int(row, "vocab")
    if not (h and layers and heads and vocab):
        return "architecture (hidden, layers, heads, vocab) not published"
    if "mixtral" in row["model"].lower() or "moe" in row["model"].lower():
        return "MoE: expert count and routing are not in the published row's shape"
    kv = _int(row, "kv_heads") or heads
    ffn = _int(row, "ffn_hidden") or 4 * h
    seq = _int(row, "seq_len") or 2048
    notes = row.get("notes", "")
    if family == "megatron-lm-2021":
        return {
            "model_type": "gpt2",
            "n_embd": h,
            "n_layer": layers,
            "n_head": heads,
            "n_inner": ffn,
            "vocab_size": vocab,
            "n_positions": seq,
            "tie_word_embeddings": True,
        }
    if family == "bloom":
        return {
            "model_type": "bloom",
            "hidden_size": h,
            "n_layer": layers,
            "n_head": heads,
            "vocab_size": vocab,
            "seq_length": max(seq, 2048),
            "tie_word_embeddings": True,
        }
    if family == "llm-foundry":
        return {
            "model_type": "mpt",
            "d_model": h,
            "n_layers": layers,
            "n_heads": heads,
            "ffn_hidden_size": ffn,
            "vocab_size": vocab,
            "max_seq_len": max(seq, 2048),  # ALiBi: the run's training length
            "no_bias": True,
            "attn_config": {"alibi": True},
        }
    max_pos = max(seq, 2048)
    head_dim = None
    m = re.search(r"head_dim (\d+)", notes)
    if m and int(m.group(1)) * heads != h:
        head_dim = int(m.group(1))
    gated = "gated SwiGLU" in notes or family == "torchtitan" or "Llama" in row["model"]
    gated = gated or row["model"].upper().startswith(("LLAMA", "MIXTRAL"))
    if gated and head_dim is None:
        return {
            "model_type": "llama",
            "hidden_size": h,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "intermediate_size": ffn,
            "vocab_size": vocab,
            "max_position_embeddings": max_pos,
            "tie_word_embeddings": False,
        }
    cfg: dict[str, Any] = {
        "model_type": "gpt_neox",
        "hidden_size": h,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "tie_word_embeddings": row["model"].startswith("GPT3"),
    }
    if kv != heads:
        cfg["num_key_value_heads"] = kv
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    if family == "maxtext":
        cfg["attention_bias"] = False  # MaxText dense layers carry no bias
    return cfg


def published_model_id(row: Row, cfg: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(catalog id, config): a stock catalog model when one has the same network and enough
    context, else the ``pub-*`` architecture shipped for validation. A run longer than the
    stock model's context (NeMo and torchtitan long-context runs extend RoPE) uses a copy of
    the stock config with the run's context, as the run's own config did."""
    from flopwise.catalog.models import load_model_index, read_config_file
    from flopwise.workload.hf import spec_from_config

    seq = _int(row, "seq_len") or 0
    for entry in load_model_index().values():
        if entry.id.startswith("pub-"):
            continue
        stock = read_config_file(entry.config_path)
        if _same_arch(stock, cfg):
            if spec_from_config(entry.id, stock).max_seq_len >= seq:
                return entry.id, stock
            longer = {**stock, "max_position_embeddings": seq}
            return f"pub-{entry.id}-ctx{seq}", longer
    base = "pub-" + _slug(row["model"].split("(")[0]) + f"-{cfg_key(cfg)}"
    ctx = cfg.get("max_seq_len") or cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if isinstance(ctx, int) and ctx > 2048:
        base += f"-ctx{ctx}"
    return base, dict(cfg)


def cfg_key(cfg: Mapping[str, Any]) -> str:
    """A short stable tag of an architecture (layers x hidden), to keep ids apart."""
    layers = cfg.get("n_layer") or cfg.get("num_hidden_layers") or cfg.get("n_layers")
    hidden = cfg.get("n_embd") or cfg.get("hidden_size") or cfg.get("d_model")
    return f"l{layers}h{hidden}"


def _same_arch(stock: Mapping[str, Any], cfg: Mapping[str, Any]) -> bool:
    """Whether a stock config describes the same network (ignoring context length)."""
    from flopwise.workload.hf import spec_from_config

    if stock.get("model_type") != cfg.get("model_type"):
        return False
    try:
        a = spec_from_config("a", dict(stock))
        b = spec_from_config("b", dict(cfg))
    except Exception:
        return False
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        d.pop("name", None)
        d.pop("max_seq_len", None)
    return da == db


# --- hardware ------------------------------------------------------------------------------


def hardware_flags(row: Row, family: str) -> tuple[str, list[str], str] | str:
    """(accelerator id, hardware flags, note) for the row's machine, or why unknown."""
    acc = row["accelerator"]
    low = acc.lower()
    if "jean zay" in low:
        # tr11-176B-ml README: 4 Omni-Path 100 Gb/s links per 8-GPU node = 6.25 GB/s per GPU
        return (
            "a100-sxm-80gb",
            ["--inter-node-gbps", "6.25", "--gpus-per-node", "8"],
            "Jean Zay: 4 x 100 Gb/s Omni-Path per 8-GPU node (tr11-176B-ml README)",
        )
    if "b200" in low:
        return "b200", ["--system", "dgx-b200"], ""
    if "tpu v5e" in low:
        return "tpu-v5e", ["--system", "tpu-v5e-slice"], ""
    if "tpu v5p" in low:
        return "tpu-v5p", ["--system", "tpu-v5p-slice"], ""
    if "tpu v6e" in low or "trillium" in low:
        return "tpu-v6e", ["--system", "tpu-v6e-slice"], ""
    if "tpu" in low or "v100" in low:
        return f"accelerator {acc!r} has no modelled layout in this source"
    if "hbm2e" in low and "h100" in low:
        return (
            "h100-hbm2e-96gb",
            ["--system", "grand-teton-h100-hbm2e"],
            "Meta Grand Teton H100 96GB HBM2e at 500 W (torchtitan benchmarks)",
        )
    if "h200" in low:
        return "h200-sxm", ["--system", "hgx-h200"], ""
    if "h100" in low:
        note = "" if "dgx" in low else "node network not published: DGX H100 (8 x 400 Gb/s) assumed"
        return "h100-sxm", ["--system", "dgx-h100"], note
    if "a100" in low and "40" in low:
        return "a100-sxm-40gb", ["--system", "hgx-a100-40gb"], ""
    if "a100" in low:
        note = ""
        if family == "torchtitan":
            note = "node network not published: DGX A100 (8 x 200 Gb/s) assumed"
        return "a100-sxm-80gb", ["--system", "dgx-a100"], note
    return f"accelerator {acc!r} is not modelled"
