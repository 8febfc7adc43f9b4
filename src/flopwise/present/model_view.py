"""Terminal view of `flopwise model`."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, fmt_count, fmt_sci, table
from flopwise.units import GIB


def show_model(doc: dict[str, Any]) -> None:
    arch = doc["architecture"]
    c = console()
    c.print(
        f"[bold]{doc['model']}[/] ({doc['model_type']}, {arch['attention_kind']} attention"
        + (
            f", {arch['experts']} experts top-{arch['experts_per_token']}"
            if arch["experts"]
            else ""
        )
        + f", context {arch['max_seq_len']})"
    )
    params = [(name.replace("_", " "), f"{n:,}") for name, n in doc["breakdown"].items() if n]
    params += [("total", f"{doc['params']:,}"), ("active per token", f"{doc['active_params']:,}")]
    c.print(table("Parameters", ["component", "parameters"], params, right=(1,)))
    s = doc["seq_len"]
    flops = [
        ("training (fwd+bwd), per token", fmt_sci(doc["train_flops_per_token"])),
        (
            "  without attention (6 x matmul weights)",
            fmt_sci(doc["train_flops_per_token_no_attention"]),
        ),
        ("  with selective recompute", fmt_sci(doc["train_flops_per_token_selective_recompute"])),
        ("  with full recompute", fmt_sci(doc["train_flops_per_token_full_recompute"])),
        ("  6N rule of thumb", fmt_sci(doc["six_n_flops_per_token"])),
        ("prefill, per prompt token", fmt_sci(doc["prefill_flops_per_token"])),
        (f"decode, per token at KV length {s}", fmt_sci(doc["decode_flops_per_token"])),
    ]
    c.print(
        table(
            f"FLOPs at sequence length {s}",
            ["", "FLOPs"],
            flops,
            right=(1,),
            caption=f"attention convention: {doc['attention_convention']} "
            "(full = no causal halving, as PaLM/Megatron/MosaicML count MFU)",
        )
    )
    by = [(f"weights {d}", f"{b / GIB:,.2f} GiB") for d, b in doc["weight_bytes"].items()]
    by += [
        (f"KV cache per token {d}", f"{b / 1024:,.1f} KiB")
        for d, b in doc["kv_cache_bytes_per_token_by_dtype"].items()
    ]
    by.append(
        (
            f"KV cache for one {s}-token sequence (bf16)",
            f"{doc['kv_cache_bytes_at_seq_len'] / GIB:,.3f} GiB",
        )
    )
    by += [
        (
            f"training state {name} ({v['bytes_per_param']:g} B/param)",
            f"{v['total_bytes'] / GIB:,.0f} GiB",
        )
        for name, v in doc["training_state_bytes"].items()
    ]
    c.print(table("Bytes", ["", "size"], by, right=(1,)))
    c.print(f"params {fmt_count(doc['params'])}, active {fmt_count(doc['active_params'])}")
