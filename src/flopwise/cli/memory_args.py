"""`--memory-headroom`: the memory the training layout search leaves free on each GPU.

A small group of its own so it can move into the shared job flags in one line.
"""

from __future__ import annotations

import argparse

from flopwise.cli._args import non_negative_float, typed


def add_memory_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--memory-headroom",
        type=typed(non_negative_float),
        metavar="GIB",
        dest="memory_headroom_gib",
        help="GiB per GPU the layout search leaves free (default: 5%% of device memory, "
        "4.0 GiB on an 80 GB H100, for allocator variance and model error); a layout fixed in "
        "full (every degree, microbatch, recompute and ZeRO given) is judged against the "
        "device capacity; 0 judges any layout against the capacity",
    )
    p.add_argument(
        "--fused-loss",
        action="store_true",
        help="the loss is one fused cross-entropy kernel (torch.compile of the loss, "
        "FlashAttention's Triton cross-entropy as llm-foundry uses): no fp32 copies of the "
        "logits on the PyTorch-native (fsdp-*) recipes",
    )
