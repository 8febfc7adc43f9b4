"""Matmul validation: the GEMM shape model (plan/gemm.py) against published GEMM TFLOPS.

Every row of catalog/data/published/matmul_runs.csv (NOTES.md there) is posed as the planner
would see it: the catalog hardware of its accelerator, its dtype, (M, N, K) and, for grouped
GEMMs, the number of groups. What is compared is the kernel's rate (FLOPs / kernel time), as
mamf-finder and DeepGEMM report it.

Honesty: a MAMF row whose value *is* the catalog ceiling of its device (the current table's
best shape) is in-sample: the model's ceiling is that very number. Those rows are labelled
`in_sample` and also scored leave-one-out, with the ceiling every device without a MAMF gets
(peak x GEMM_FRACTION_WITHOUT_MAMF). The grouped rows (DeepGEMM's MoE kernels) are in-sample
too: GROUPED_GEMM_EFFICIENCY (plan/gemm_constants.py) is fitted on them (``fit_grouped``); each is
scored leave-one-out with the constant refitted on the other grouped rows. The headline (n,
mape_pct, ...) is over the other rows.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, hardware_from_catalog
from flopwise.plan.gemm import gemm_estimate
from flopwise.plan.gemm_constants import GROUPED_GEMM_EFFICIENCY

#: A row is in-sample when the catalog ceiling equals its measured value within this share.
IN_SAMPLE_TOLERANCE = 0.001

#: Accelerator names in the file that the catalog cannot describe as measured.
_NOT_POSABLE = {
    "AMD MI250X (1 GCD)": "one GCD of an MI250X; the catalog describes the two-GCD package",
}


#: The grid GROUPED_GEMM_EFFICIENCY is fitted on: 0.700 to 1.000 in steps of 0.005 (the
#: sustained fraction's rule: least mean |log(predicted / measured)|).
GROUPED_FIT_GRID: tuple[float, ...] = tuple(round(0.7 + 0.005 * i, 3) for i in range(61))

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
    grouped: bool = False  # one grouped (MoE) kernel: GROUPED_GEMM_EFFICIENCY applies

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
            "grouped": self.grouped,
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
    #: GROUPED_GEMM_EFFICIENCY as shipped and as refitted on this file's grouped rows.
    grouped_shipped: float = GROUPED_GEMM_EFFICIENCY
    grouped_refit: float | None = None

    @property
    def out_of_sample(self) -> dict[str, Any]:
        return _stats([r.error_pct for r in self.rows if not r.in_sample])

    def grouped_fit(self) -> dict[str, Any]:
        """The grouped-kernel constant: shipped, refitted, its fit rows and their errors."""
        grouped = [r for r in self.rows if r.grouped]
        return {
            "constant": "GROUPED_GEMM_EFFICIENCY (plan/gemm_constants.py)",
            "shipped": self.grouped_shipped,
            "refit": self.grouped_refit,
            "rule": "least mean |log(predicted / measured)| over the grouped rows, 0.005 grid",
            "fit_rows": [r.id for r in grouped],
            "in_sample": _stats([r.error_pct for r in grouped]),
            "leave_one_out": _stats(
                [e for r in grouped if (e := r.error_leave_one_out_pct) is not None]
            ),
            "out_of_sample_elsewhere": "every MoE serving and training row (validate --only "
            "inference, training-unseen): their expert GEMMs run at this share of the dense "
            "roof, and no fit sees them",
        }

    def to_dict(self) -> dict[str, Any]:
        ins = [r for r in self.rows if r.in_sample]
        by_source: dict[str, list[float]] = {}
        for r in self.rows:
            if not r.in_sample:
                by_source.setdefault(r.source, []).append(r.error_pct)
        return {
            **self.out_of_sample,
            "scope": "rows nothing was fitted on and whose shape is not the device ceiling's "
            "own row (out of sample)",
            "in_sample": {
                **_stats([r.error_pct for r in ins]),
                "scope": "MAMF best-shape rows that are the catalog ceiling itself, and the "
                "grouped rows GROUPED_GEMM_EFFICIENCY is fitted on",
            },
            "leave_one_out": {
                **_stats([e for r in ins if (e := r.error_leave_one_out_pct) is not None]),
                "scope": "the in-sample rows, each without what was fitted on it: a MAMF row "
                "with the no-MAMF ceiling (peak x GEMM_FRACTION_WITHOUT_MAMF), a grouped row "
                "with GROUPED_GEMM_EFFICIENCY refitted on the other grouped rows",
            },
            "grouped_fit": self.grouped_fit(),
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


@dataclass(frozen=True, slots=True)
class _Posed:
    """One published row as the planner sees it."""

    row: dict[str, str]
    hw: Hardware
    dtype: str
    scaling: str | None
    m: int
    n: int
    k: int
    groups: int
    grouped: bool
    measured: float

    def predict(
        self, hw: Hardware | None = None, grouped_efficiency: float = GROUPED_GEMM_EFFICIENCY
    ) -> float:
        return gemm_estimate(
            self.m,
            self.n,
            self.k,
            hw or self.hw,
            self.dtype,
            batch=self.groups,
            scaling=self.scaling,
            grouped=self.grouped,
            grouped_efficiency=grouped_efficiency,
        ).tflops


def _pose(row: dict[str, str]) -> _Posed:
    hw = hardware_from_catalog(ACCELERATOR_IDS.get(row["accelerator"], row["accelerator"]))
    dtype, scaling = _dtype(row["dtype"])
    groups_match = re.search(r"#Groups=(\d+)", row["notes"])
    return _Posed(
        row=row,
        hw=hw,
        dtype=dtype,
        scaling=scaling,
        m=int(row["m"]),
        n=int(row["n"]),
        k=int(row["k"]),
        groups=int(groups_match.group(1)) if groups_match else 1,
        # DeepGEMM's grouped kernels, a single group (masked, 1 group) included
        grouped=row["notes"].startswith("GROUPED GEMM"),
        measured=float(row["measured_tflops"]),
    )


def fit_grouped(posed: list[_Posed]) -> float | None:
    """GROUPED_GEMM_EFFICIENCY by its rule: the grid value with the least mean
    |log(predicted / measured)| over `posed` (grouped rows); None without rows."""
    if not posed:
        return None

    def loss(eff: float) -> float:
        return sum(abs(math.log(p.predict(grouped_efficiency=eff) / p.measured)) for p in posed)

    return min(GROUPED_FIT_GRID, key=loss)


def _score(p: _Posed, loo_grouped: float | None = None) -> MatmulRow:
    row, hw, dtype = p.row, p.hw, p.dtype
    pred = p.predict()
    ceiling = hw.matmul_tflops.get(dtype)
    in_sample = (
        ceiling is not None and abs(ceiling - p.measured) <= IN_SAMPLE_TOLERANCE * p.measured
    )
    loo = None
    notes = []
    if in_sample:
        loo = p.predict(hw=_without_mamf(hw, dtype))
        notes.append("in-sample: this row is the catalog MAMF ceiling of the device")
    elif ceiling is None:
        notes.append("no MAMF in the catalog: ceiling = peak x GEMM_FRACTION_WITHOUT_MAMF")
    if p.grouped:
        in_sample = True
        if loo_grouped is not None:
            loo = p.predict(grouped_efficiency=loo_grouped)
        notes.append(
            "in-sample: a fit row of GROUPED_GEMM_EFFICIENCY (leave-one-out: refitted "
            f"without it, {loo_grouped})"
        )
    if "AMBIGUOUS" in row["notes"]:
        notes.append("N/K order ambiguous in the source; scored as first published")
    if p.groups > 1:
        notes.append(f"grouped GEMM, {p.groups} groups of M={p.m}")
    return MatmulRow(
        id=row["id"],
        source=_source(row["id"]),
        accelerator=hw.id,
        dtype=dtype + (f" ({p.scaling})" if p.scaling else ""),
        m=p.m,
        n=p.n,
        k=p.k,
        groups=p.groups,
        measured=p.measured,
        predicted=pred,
        in_sample=in_sample,
        predicted_leave_one_out=loo,
        note="; ".join(notes),
        grouped=p.grouped,
    )


def validate_matmul() -> MatmulReport:
    """Score every published matmul row; rows the catalog cannot pose are skipped with why.
    The grouped rows are GROUPED_GEMM_EFFICIENCY's fit rows: each is also scored with the
    constant refitted on the others (leave-one-out)."""
    posed: list[_Posed] = []
    skipped: list[tuple[str, str]] = []
    for row in published_matmul_rows():
        why = _NOT_POSABLE.get(row["accelerator"])
        if why is not None:
            skipped.append((row["id"], why))
            continue
        try:
            posed.append(_pose(row))
        except FlopwiseError as exc:
            skipped.append((row["id"], str(exc)))
    grouped = [p for p in posed if p.grouped]
    rows: list[MatmulRow] = []
    for p in posed:
        loo_eff = fit_grouped([q for q in grouped if q is not p]) if p.grouped else None
        try:
            rows.append(_score(p, loo_eff))
        except FlopwiseError as exc:
            skipped.append((p.row["id"], str(exc)))
    return MatmulReport(tuple(rows), tuple(skipped), grouped_refit=fit_grouped(grouped))
