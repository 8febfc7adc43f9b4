"""Matmul validation: the GEMM shape model (plan/gemm.py) against published GEMM TFLOPS.

Every row of catalog/data/published/matmul_runs.csv (NOTES.md there) is posed as the planner
would see it: the catalog hardware of its accelerator, its dtype, (M, N, K) and, for grouped
GEMMs, the number of groups. What is compared is the kernel's rate (FLOPs / kernel time), as
mamf-finder and DeepGEMM report it.

Honesty: a MAMF row whose value *is* the catalog ceiling of its device (the current table's
best shape) is in-sample: the model's ceiling is that very number. Those rows are labelled
`in_sample` and also scored leave-one-out, with the ceiling every device without a MAMF gets
(peak x GEMM_FRACTION_WITHOUT_MAMF). The headline (n, mape_pct, ...) is over the other rows.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, hardware_from_catalog
from flopwise.plan.gemm import gemm_estimate

#: A row is in-sample when the catalog ceiling equals its measured value within this share.
IN_SAMPLE_TOLERANCE = 0.001

#: Accelerator names in the file that the catalog cannot describe as measured.
_NOT_POSABLE = {
    "AMD MI250X (1 GCD)": "one GCD of an MI250X; the catalog describes the two-GCD package",
}


#: The file's accelerator names as catalog ids. mamf-finder's table does not state the A100's
#: memory size; the catalog gives the 40 and 80 GB parts the same published MAMF.
ACCELERATOR_IDS = {
    "NVIDIA A100 SXM": "a100-sxm-80gb",
    "NVIDIA A100 PCIe": "a100-pcie-80gb",
    "NVIDIA H100 SXM": "h100-sxm",
    "NVIDIA H200 SXM": "h200-sxm",
    "NVIDIA GH200 SXM": "gh200",
    "NVIDIA B200 SXM": "b200",
    "NVIDIA B300 SXM": "b300",
    "NVIDIA GB200 SXM": "gb200",
    "H800 SXM5": "h800",
    "AMD MI300X": "mi300x",
    "AMD MI325X": "mi325x",
    "AMD MI355X": "mi355x",
    "Intel Gaudi 2": "gaudi2",
    "Intel Gaudi 3": "gaudi3",
}


@dataclass(frozen=True, slots=True)
class MatmulRow:
    id: str
    source: str
    accelerator: str
    dtype: str
    m: int
    n: int
    k: int
    groups: int
    measured: float
    predicted: float
    in_sample: bool
    predicted_leave_one_out: float | None
    note: str = ""

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.measured) / self.measured

    @property
    def error_leave_one_out_pct(self) -> float | None:
        if self.predicted_leave_one_out is None:
            return None
        return 100.0 * (self.predicted_leave_one_out - self.measured) / self.measured

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "accelerator": self.accelerator,
            "dtype": self.dtype,
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "groups": self.groups,
            "measured": self.measured,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
            "in_sample": self.in_sample,
            "predicted_leave_one_out": self.predicted_leave_one_out,
            "error_leave_one_out_pct": self.error_leave_one_out_pct,
            "note": self.note,
        }


def _stats(errors: list[float]) -> dict[str, Any]:
    if not errors:
        return {"n": 0, "mape_pct": None, "max_abs_error_pct": None, "bias_pct": None}
    return {
        "n": len(errors),
        "mape_pct": sum(abs(e) for e in errors) / len(errors),
        "max_abs_error_pct": max(abs(e) for e in errors),
        "bias_pct": sum(errors) / len(errors),
    }


@dataclass(frozen=True, slots=True)
class MatmulReport:
    rows: tuple[MatmulRow, ...]
    skipped: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def out_of_sample(self) -> dict[str, Any]:
        return _stats([r.error_pct for r in self.rows if not r.in_sample])

    def to_dict(self) -> dict[str, Any]:
        ins = [r for r in self.rows if r.in_sample]
        by_source: dict[str, list[float]] = {}
        for r in self.rows:
            if not r.in_sample:
                by_source.setdefault(r.source, []).append(r.error_pct)
        return {
            **self.out_of_sample,
            "scope": "rows whose shape is not the device ceiling's own row (out of sample)",
            "in_sample": {
                **_stats([r.error_pct for r in ins]),
                "scope": "MAMF best-shape rows that are the catalog ceiling itself",
            },
            "leave_one_out": {
                **_stats([e for r in ins if (e := r.error_leave_one_out_pct) is not None]),
                "scope": "the in-sample rows with the no-MAMF ceiling (peak x "
                "GEMM_FRACTION_WITHOUT_MAMF) instead of their own value",
            },
            "by_source": {k: _stats(v) for k, v in sorted(by_source.items())},
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
        }


def published_matmul_rows() -> list[dict[str, str]]:
    """The published matmul rows shipped with the package (catalog/data/published)."""
    path = resources.files("flopwise.catalog").joinpath("data/published/matmul_runs.csv")
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _source(row_id: str) -> str:
    if row_id.startswith("deepgemm_"):
        return "deepgemm_grouped" if "_grouped_" in row_id else "deepgemm_dense"
    if row_id.startswith("mamf_master_"):
        return "mamf_master"
    if row_id.startswith("nvfp4_"):
        return "nvfp4_b200"
    return "mamf_old"


def _dtype(text: str) -> tuple[str, str | None]:
    low = text.lower()
    if low.startswith("fp8"):
        return "fp8", ("block128" if "block" in low else "per_tensor")
    if low.startswith("bf16"):
        return "bf16", None
    if low.startswith("fp4 nvfp4"):
        return "fp4", "nvfp4"
    raise FlopwiseError(f"unknown matmul dtype {text!r}")


def _without_mamf(hw: Hardware, dtype: str) -> Hardware:
    mm = {
        k: v
        for k, v in hw.matmul_tflops.items()
        if k != dtype and not (dtype == "bf16" and k == "fp16")
    }
    return replace(hw, matmul_tflops=MappingProxyType(mm))


def _score(row: dict[str, str]) -> MatmulRow:
    hw = hardware_from_catalog(ACCELERATOR_IDS.get(row["accelerator"], row["accelerator"]))
    dtype, scaling = _dtype(row["dtype"])
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    groups_match = re.search(r"#Groups=(\d+)", row["notes"])
    groups = int(groups_match.group(1)) if groups_match else 1
    measured = float(row["measured_tflops"])
    pred = gemm_estimate(m, n, k, hw, dtype, batch=groups, scaling=scaling).tflops
    ceiling = hw.matmul_tflops.get(dtype)
    in_sample = ceiling is not None and abs(ceiling - measured) <= IN_SAMPLE_TOLERANCE * measured
    loo = None
    notes = []
    if in_sample:
        loo = gemm_estimate(
            m, n, k, _without_mamf(hw, dtype), dtype, batch=groups, scaling=scaling
        ).tflops
        notes.append("in-sample: this row is the catalog MAMF ceiling of the device")
    elif ceiling is None:
        notes.append("no MAMF in the catalog: ceiling = peak x GEMM_FRACTION_WITHOUT_MAMF")
    if "AMBIGUOUS" in row["notes"]:
        notes.append("N/K order ambiguous in the source; scored as first published")
    if groups > 1:
        notes.append(f"grouped GEMM, {groups} groups of M={m}")
    return MatmulRow(
        id=row["id"],
        source=_source(row["id"]),
        accelerator=hw.id,
        dtype=dtype + (f" ({scaling})" if scaling else ""),
        m=m,
        n=n,
        k=k,
        groups=groups,
        measured=measured,
        predicted=pred,
        in_sample=in_sample,
        predicted_leave_one_out=loo,
        note="; ".join(notes),
    )


def validate_matmul() -> MatmulReport:
    """Score every published matmul row; rows the catalog cannot pose are skipped with why."""
    rows: list[MatmulRow] = []
    skipped: list[tuple[str, str]] = []
    for row in published_matmul_rows():
        why = _NOT_POSABLE.get(row["accelerator"])
        if why is not None:
            skipped.append((row["id"], why))
            continue
        try:
            rows.append(_score(row))
        except FlopwiseError as exc:
            skipped.append((row["id"], str(exc)))
    return MatmulReport(tuple(rows), tuple(skipped))
