"""Attention-kernel validation: the fused-attention rates the planners use against published
kernel timings.

Every row of catalog/data/published/attention_runs.csv (NOTES.md there) is one timed fused
causal attention call (cuDNN's SDPA, or PyTorch's FlashAttention-2 backend; NVIDIA's
cudnn-frontend benchmarks): a device, a
sequence length, query-key and value head dimensions, a sliding window or none, and forward or
backward TFLOPS counted as the planner counts them (causal half of the square, the backward
2.5x the forward). Each is posed as the planner sees it (plan/attention_rate.py
``fused_attention_rate`` on the catalog hardware, at ``local_kernel_length`` of its window), and
the kernel's rate compared, without the sustained fraction a training step adds on top.

Honesty: the Blackwell tables (plan/efficiency.py BLACKWELL_ATTENTION, BLACKWELL_FA2_ATTENTION)
are these files' Llama 3.1 rows on GB200 and GB300 and B200's FlashAttention-2 rows at 2K-32K
(``use`` = fit): in sample, reported apart. Out of sample (``use`` = check): the same files'
other models on those parts (GPT-OSS's sliding window at head dim 64, DeepSeek-V3's 192/128
heads), FlashAttention-2 on B200 below 2K and above 32K, and NVIDIA's H200 timings against the
GH100 curve this project measured on an H100. ``use`` = generation rows are an older cuDNN on the same die
(B200, cuDNN 9.10, 2025): what the current table overstates for that software, kept out of
the headline because it is a kernel release, not the model, that differs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.attention_rate import fused_attention_rate, local_kernel_length
from flopwise.units import TERA
from flopwise.validate.scoring import error_pct, summarize

USES: tuple[str, ...] = ("fit", "check", "generation")


@dataclass(frozen=True, slots=True)
class AttentionRow:
    id: str
    accelerator: str
    model: str
    seq_len: int
    head_dim_qk: int
    head_dim_vo: int
    window: int
    direction: str
    kernel: str
    use: str
    source: str
    measured_tflops: float
    predicted_tflops: float
    basis: str

    @property
    def error_pct(self) -> float:
        return error_pct(self.measured_tflops, self.predicted_tflops)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "accelerator": self.accelerator,
            "model": self.model,
            "seq_len": self.seq_len,
            "head_dim_qk": self.head_dim_qk,
            "head_dim_vo": self.head_dim_vo,
            "window": self.window,
            "direction": self.direction,
            "kernel": self.kernel,
            "use": self.use,
            "source": self.source,
            "measured_tflops": self.measured_tflops,
            "predicted_tflops": self.predicted_tflops,
            "error_pct": self.error_pct,
            "basis": self.basis,
        }


def _stats(errors: list[float]) -> dict[str, Any]:
    return summarize(errors).to_dict()


@dataclass(frozen=True, slots=True)
class AttentionReport:
    rows: tuple[AttentionRow, ...]

    def _of(self, use: str) -> list[AttentionRow]:
        return [r for r in self.rows if r.use == use]

    @property
    def out_of_sample(self) -> dict[str, Any]:
        return _stats([r.error_pct for r in self._of("check")])

    def groups(self) -> list[dict[str, Any]]:
        """Errors per (use, accelerator, model, window, direction), in the file's order."""
        by_key: dict[tuple[str, str, str, int, str], list[AttentionRow]] = {}
        for r in self.rows:
            by_key.setdefault((r.use, r.accelerator, r.model, r.window, r.direction), []).append(r)
        return [
            {
                "use": use,
                "accelerator": acc,
                "model": model,
                "window": window,
                "direction": direction,
                "basis": rows[0].basis,
                **_stats([r.error_pct for r in rows]),
            }
            for (use, acc, model, window, direction), rows in by_key.items()
        ]

    def to_dict(self) -> dict[str, Any]:
        oos = self.out_of_sample
        return {
            "what": "fused causal attention TFLOPS by device, length, head dim and window",
            "method": "each published kernel timing posed through plan/attention_rate.py "
            "fused_attention_rate on the catalog hardware (no sustained fraction); 'fit' rows "
            "are the Blackwell tables themselves, 'check' rows are out of sample, "
            "'generation' rows an older cuDNN release on the same die",
            **oos,
            "out_of_sample": oos,
            "in_sample": _stats([r.error_pct for r in self._of("fit")]),
            "generation": _stats([r.error_pct for r in self._of("generation")]),
            "groups": self.groups(),
            "rows": [r.to_dict() for r in self.rows],
        }


def load_rows() -> list[dict[str, str]]:
    path = resources.files("flopwise.catalog.data.published") / "attention_runs.csv"
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def validate_attention() -> AttentionReport:
    """Every published attention-kernel timing against the planner's rate for it."""
    out: list[AttentionRow] = []
    for raw in load_rows():
        use = raw["use"]
        if use not in USES:
            raise FlopwiseError(f"attention_runs.csv row {raw['id']}: use {use!r} not in {USES}")
        hw = hardware_from_catalog(raw["accelerator"])
        peak16 = hw.peak("bf16") * TERA
        s = int(raw["seq_len"])
        window = int(raw["window"] or 0)
        d_qk, d_vo = int(raw["head_dim_qk"]), int(raw["head_dim_vo"])
        # cuDNN rows are the device's best fused kernel ("flash"), FlashAttention-2's "flash2"
        kernel = "flash2" if raw["kernel"].startswith("flash-attention-2") else "flash"
        rate = fused_attention_rate(
            hw,
            kernel,
            raw["direction"],
            local_kernel_length(s, window),
            peak16,
            d_qk,
            d_vo,
        )
        out.append(
            AttentionRow(
                id=raw["id"],
                accelerator=raw["accelerator"],
                model=raw["model"],
                seq_len=s,
                head_dim_qk=d_qk,
                head_dim_vo=d_vo,
                window=window,
                direction=raw["direction"],
                kernel=raw["kernel"],
                use=use,
                source=raw["source"],
                measured_tflops=float(raw["tflops"]),
                predicted_tflops=rate.fraction * peak16 / TERA,
                basis=rate.basis,
            )
        )
    return AttentionReport(tuple(out))
