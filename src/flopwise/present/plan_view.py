"""Terminal view of the first-order training estimate."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, fmt_count, fmt_money, fmt_num, fmt_sci, table


def show_first_order(doc: dict[str, Any]) -> None:
    fits = {True: "yes", False: "NO", None: "unknown"}[doc["fits"]]
    rows = [
        (
            "model",
            f"{doc['model']} ({fmt_count(doc['params'])} params, "
            f"{fmt_count(doc['active_params'])} active)",
        ),
        (
            "accelerator",
            f"{doc['gpus']} x {doc['accelerator']} "
            f"({fmt_num(doc['peak_tflops'])} {doc['dtype']} TFLOPS peak, dense)",
        ),
        ("tokens", f"{fmt_count(doc['tokens'])} at sequence length {doc['seq_len']}"),
        (
            "training FLOPs",
            f"{fmt_sci(doc['total_flops'])} ({fmt_sci(doc['flops_per_token'])} per token)",
        ),
        ("assumed MFU", f"{doc['mfu']:.0%}"),
        ("time", f"{doc['train_days']:,.1f} days"),
        ("GPU-hours", f"{doc['gpu_hours']:,.0f}"),
        (
            "cost",
            fmt_money(doc["cost_usd"])
            + (
                f" at ${doc['price_per_gpu_hour']:.2f}/GPU-h"
                if doc["price_per_gpu_hour"] is not None
                else " (give --price-per-gpu-hour)"
            ),
        ),
        (
            "memory per GPU",
            f"{doc['memory_per_gpu_gib']:,.1f} GiB of "
            f"{fmt_num(doc['device_memory_gib'])} GiB (fits: {fits})",
        ),
        ("minimum GPUs", f"training {doc['min_gpus_train']}, inference {doc['min_gpus_infer']}"),
    ]
    console().print(
        table(
            "Training plan — first-order estimate",
            ["", ""],
            rows,
            caption=doc["note"],
        )
    )
