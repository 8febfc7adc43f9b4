"""Terminal views of catalog listings."""

from __future__ import annotations

from collections.abc import Sequence

from flopwise.catalog.accelerators import Accelerator
from flopwise.catalog.models import ModelEntry
from flopwise.catalog.systems import System
from flopwise.present.console import console, fmt_count, fmt_num, table
from flopwise.workload.params import ParamCounts
from flopwise.workload.spec import ModelSpec


def show_accelerators(accs: Sequence[Accelerator]) -> None:
    rows = [
        (
            a.id,
            a.vendor,
            fmt_num(a.spec("peak_bf16_tflops")),
            fmt_num(a.spec("peak_fp8_tflops"), unknown="—"),
            fmt_num(a.spec("mamf_bf16_tflops"), unknown="—"),
            fmt_num(a.spec("memory_gb"), 0),
            fmt_num(a.memory_bw_gbps, 0),
            fmt_num(a.spec("scaleup_bw_uni_gbps"), 0),
            fmt_num(a.spec("scaleup_domain"), 0),
            fmt_num(a.spec("tdp_w"), 0),
            a.as_of,
        )
        for a in accs
    ]
    console().print(
        table(
            "Accelerators (dense peaks, no sparsity)",
            [
                "id",
                "vendor",
                "bf16 TFLOPS",
                "fp8 TFLOPS",
                "MAMF bf16",
                "mem GB",
                "mem GB/s",
                "scale-up GB/s (uni)",
                "domain",
                "TDP W",
                "as of",
            ],
            rows,
            right=range(2, 10),
            caption="Every number has a source: flopwise catalog accelerators --json",
        )
    )


def show_systems(systems: Sequence[System]) -> None:
    rows = [
        (
            s.id,
            s.accelerator,
            s.gpus_per_node,
            f"{s.intra_fabric} {fmt_num(s.intra_bw_uni_gbps, 0)}",
            s.scaleup_domain,
            f"{s.nics_per_node}x{fmt_num(s.nic_gbit_s, 0)} Gb/s {s.inter_fabric}"
            if s.nics_per_node
            else s.inter_fabric or "—",
            fmt_num(s.inter_bw_per_gpu_gbps),
            s.as_of,
        )
        for s in systems
    ]
    console().print(
        table(
            "Systems (node types)",
            [
                "id",
                "accelerator",
                "GPUs/node",
                "scale-up (GB/s uni per GPU)",
                "domain",
                "scale-out",
                "scale-out GB/s per GPU",
                "as of",
            ],
            rows,
            right=(2, 4, 6),
        )
    )


def show_models(entries: Sequence[tuple[ModelEntry, ModelSpec, ParamCounts]]) -> None:
    rows = [
        (
            e.id,
            s.model_type,
            fmt_count(c.total),
            fmt_count(c.active) if s.is_moe else "",
            s.layers,
            s.hidden,
            f"{s.heads}/{s.kv_heads}",
            s.attention_kind,
            f"{s.experts}x top-{s.experts_per_token}" if s.is_moe else "",
            s.max_seq_len,
            e.hf_repo or "—",
        )
        for e, s, c in entries
    ]
    console().print(
        table(
            "Models",
            [
                "id",
                "type",
                "params",
                "active",
                "layers",
                "hidden",
                "heads/kv",
                "attn",
                "experts",
                "context",
                "Hugging Face",
            ],
            rows,
            right=(2, 3, 4, 5, 9),
        )
    )
