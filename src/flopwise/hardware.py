"""The one description of hardware: catalog values, overridden by measurements.

Planners read accelerator numbers only through ``Hardware``; each number carries its origin
(``catalog`` with a source, or ``measured`` with a results-store id) so a plan can say where
every input came from. Unknown stays ``None``; nothing falls back to another accelerator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from flopwise.catalog.accelerators import (
    MAMF_FIELD_BY_DTYPE,
    PEAK_FIELD_BY_DTYPE,
    Accelerator,
    get_accelerator,
)
from flopwise.catalog.systems import System, systems_for
from flopwise.errors import FlopwiseError


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a hardware number came from."""

    kind: str  # "catalog" | "measured" | "derived" | "assumed" (given by the user)
    detail: str  # source URL, result id, or derivation

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


@dataclass(frozen=True, kw_only=True, slots=True)
class Hardware:
    """What one accelerator can do, as planners see it. Units in names; None = unknown."""

    id: str
    name: str
    peak_tflops: Mapping[str, float]  # dense peak per dtype (bf16, fp8, ...)
    matmul_tflops: Mapping[str, float]  # achievable (MAMF) per dtype: published or measured
    memory_bytes: float | None
    memory_bw_gbps: float | None  # peak
    # STREAM-class HBM rate: measured here (bench memory) or published (catalog
    # stream_bw_gbps); None if neither, and planners then take a fraction of the peak
    achievable_bw_gbps: float | None
    compute_units: int | None
    scaleup_bw_uni_gbps: float | None
    scaleup_domain: int
    inter_bw_per_gpu_gbps: float | None  # per GPU per direction, from the node type
    intra_busbw_gbps: float | None = None  # measured busbw inside a node (tier fallback)
    inter_busbw_gbps: float | None = None  # measured per-GPU busbw across nodes (fallback)
    # measured per-GPU busbw per tier and collective: {"intra:all_reduce": 480.0, ...}
    busbw_by_op: Mapping[str, float] = field(default_factory=dict)
    step_calibration: float | None = None  # bench step: measured / predicted tokens/s
    step_calibration_moe: float | None = None  # the same from a step of an MoE model
    #: bench sustained: the share of its burst GEMM rate this device keeps under load (16-bit
    #: GEMMs, and every GEMM where no FP8 run is stored) ...
    power_capped_gemm_share: float | None = None
    #: ... and of its per-tensor scaled FP8 GEMMs (bench sustained --dtype fp8)
    power_capped_gemm_share_fp8: float | None = None
    system_id: str | None = None
    origins: Mapping[str, Origin] = field(default_factory=dict)
    accelerator: Accelerator | None = None
    #: measured GEMM rates by shape, (dtype, m, n, k, tflops) rows from `flopwise bench matmul`
    #: (origin key "matmul_shape_tflops:<dtype>"); empty when none were measured
    matmul_shape_tflops: tuple[tuple[str, int, int, int, float], ...] = ()
    #: measured grouped GEMM (MoE expert kernel) rates by shape, (dtype, groups, m, n, k,
    #: tflops) rows from `flopwise bench matmul --groups` (origin key
    #: "matmul_grouped_shape_tflops:<dtype>"); empty when none were measured
    matmul_grouped_shape_tflops: tuple[tuple[str, int, int, int, int, float], ...] = ()
    #: measured fused causal attention from `flopwise bench attention`: per direction ("fwd",
    #: "bwd") the fitted (TFLOPS at long sequences, s_half tokens) of rate x s / (s + s_half),
    #: at head dimension `attention_head_dim` (origin key "attention_tflops_curve"); empty
    #: when none was measured
    attention_tflops_curve: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    attention_head_dim: int | None = None

    def peak(self, dtype: str) -> float:
        """Dense peak TFLOPS for dtype; a one-line error when the catalog does not know it."""
        value = self.peak_tflops.get(dtype)
        if value is None:
            raise FlopwiseError(
                f"{self.id} has no published dense {dtype} peak; known: "
                f"{', '.join(sorted(self.peak_tflops)) or 'none'}"
            )
        return value

    def gemm_share_run(self, dtype: str | None = None) -> str | None:
        """Which bench sustained run prices this device's `dtype` GEMMs: "fp8" (its FP8 run, for
        fp8 GEMMs where one is stored), else "16-bit" (None: no run stored)."""
        if dtype == "fp8" and self.power_capped_gemm_share_fp8 is not None:
            return "fp8"
        return None if self.power_capped_gemm_share is None else "16-bit"

    def gemm_share(self, dtype: str | None = None) -> float | None:
        """The measured power-capped share of this device's `dtype` GEMMs (gemm_share_run's)."""
        if self.gemm_share_run(dtype) == "fp8":
            return self.power_capped_gemm_share_fp8
        return self.power_capped_gemm_share

    def with_measurements(self, **values: tuple[float, str]) -> Hardware:
        """Override fields with measured values: name=(value, result_id)."""
        origins = dict(self.origins)
        changes: dict[str, Any] = {}
        for name, (value, result_id) in values.items():
            if name.startswith("matmul_tflops:"):
                dtype = name.split(":", 1)[1]
                mm = dict(changes.get("matmul_tflops", self.matmul_tflops))
                mm[dtype] = value
                changes["matmul_tflops"] = MappingProxyType(mm)
            elif name.startswith("busbw_gbps:"):
                by_op = dict(changes.get("busbw_by_op", self.busbw_by_op))
                by_op[name.split(":", 1)[1]] = value
                changes["busbw_by_op"] = MappingProxyType(by_op)
            else:
                changes[name] = value
            origins[name] = Origin("measured", result_id)
        changes["origins"] = MappingProxyType(origins)
        return replace(self, **changes)

    def value_of(self, name: str) -> Any:
        """The value behind an origins key ('matmul_tflops:bf16', 'busbw_gbps:intra:all_reduce',
        or a field name)."""
        if name.startswith("matmul_tflops:"):
            return self.matmul_tflops.get(name.split(":", 1)[1])
        if name.startswith("peak_tflops:"):
            return self.peak_tflops.get(name.split(":", 1)[1])
        if name.startswith("busbw_gbps:"):
            return self.busbw_by_op.get(name.split(":", 1)[1])
        if name.startswith("intra_collective:"):
            from flopwise.catalog.collectives import load_intra_collectives

            _, op, gpus = name.split(":")
            row = load_intra_collectives().get(((self.system_id or "").lower(), op, int(gpus)))
            return None if row is None else row.busbw_gbps
        if name == "attention_tflops_curve":
            return {k: list(v) for k, v in self.attention_tflops_curve.items()}
        table, _, dtype = name.partition(":")
        if dtype and table in ("matmul_shape_tflops", "matmul_grouped_shape_tflops"):
            return sum(1 for row in getattr(self, table) if row[0] == dtype)  # shapes measured
        return getattr(self, name, None)

    def _with_table(
        self, field_name: str, rows: tuple[tuple[Any, ...], ...], result_id: str
    ) -> Hardware:
        """`field_name`'s rows of the dtypes in `rows` replaced by `rows` (dtype first in each
        row), each dtype's origin the measurement `result_id`."""
        dtypes = {row[0] for row in rows}
        kept = tuple(row for row in getattr(self, field_name) if row[0] not in dtypes)
        origins = dict(self.origins)
        for dtype in sorted(dtypes):
            origins[f"{field_name}:{dtype}"] = Origin("measured", result_id)
        changes: dict[str, Any] = {field_name: kept + tuple(rows)}
        return replace(self, origins=MappingProxyType(origins), **changes)

    def with_shape_table(
        self, rows: tuple[tuple[str, int, int, int, float], ...], result_id: str
    ) -> Hardware:
        """Add measured GEMM rates by shape (replacing earlier rows of the same dtypes)."""
        return self._with_table("matmul_shape_tflops", rows, result_id)

    def with_grouped_shape_table(
        self, rows: tuple[tuple[str, int, int, int, int, float], ...], result_id: str
    ) -> Hardware:
        """Add measured grouped GEMM rates by shape (replacing earlier rows of the same dtypes)."""
        return self._with_table("matmul_grouped_shape_tflops", rows, result_id)

    def with_attention_curve(
        self, curves: Mapping[str, tuple[float, float]], head_dim: int, result_id: str
    ) -> Hardware:
        """Add a measured attention curve (bench attention), replacing any earlier one."""
        origins = dict(self.origins)
        origins["attention_tflops_curve"] = Origin("measured", result_id)
        return replace(
            self,
            attention_tflops_curve=MappingProxyType(dict(curves)),
            attention_head_dim=head_dim,
            origins=MappingProxyType(origins),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "peak_tflops": dict(self.peak_tflops),
            "matmul_tflops": dict(self.matmul_tflops),
            "memory_gib": None if self.memory_bytes is None else self.memory_bytes / 2**30,
            "memory_bw_gbps": self.memory_bw_gbps,
            "achievable_bw_gbps": self.achievable_bw_gbps,
            "compute_units": self.compute_units,
            "scaleup_bw_uni_gbps": self.scaleup_bw_uni_gbps,
            "scaleup_domain": self.scaleup_domain,
            "inter_bw_per_gpu_gbps": self.inter_bw_per_gpu_gbps,
            "intra_busbw_gbps": self.intra_busbw_gbps,
            "inter_busbw_gbps": self.inter_busbw_gbps,
            "busbw_by_op": dict(self.busbw_by_op),
            "step_calibration": self.step_calibration,
            "step_calibration_moe": self.step_calibration_moe,
            "power_capped_gemm_share": self.power_capped_gemm_share,
            "power_capped_gemm_share_fp8": self.power_capped_gemm_share_fp8,
            "system": self.system_id,
            "matmul_shape_tflops": [list(row) for row in self.matmul_shape_tflops],
            "matmul_grouped_shape_tflops": [list(r) for r in self.matmul_grouped_shape_tflops],
            "attention_tflops_curve": self.value_of("attention_tflops_curve"),
            "attention_head_dim": self.attention_head_dim,
            "origins": {k: v.to_dict() for k, v in self.origins.items()},
        }


def _catalog_origin(acc: Accelerator, spec_field: str) -> Origin:
    item = acc.specs[spec_field]
    return Origin("catalog", f"{item.source} (as of {item.as_of})")


def hardware_from_catalog(accelerator: str, system: str | None = None) -> Hardware:
    """Build the hardware description of an accelerator (and node type) from the catalog."""
    acc = get_accelerator(accelerator)
    node: System | None = None
    if system is not None:
        from flopwise.catalog.systems import get_system

        node = get_system(system)
        if node.accelerator != acc.id:
            raise FlopwiseError(
                f"system {node.id} holds {node.accelerator}, not {acc.id}; pick a system "
                f"built from {acc.id} or leave --system out"
            )
    else:
        candidates = systems_for(acc.id)
        node = candidates[0] if candidates else None
    origins: dict[str, Origin] = {}
    if system is None and node is not None:
        origins["system_id"] = Origin(
            "assumed",
            f"no --system given: the catalog's first node type for {acc.id} "
            f"({', '.join(c.id for c in candidates)}); pass --system ID",
        )
    peaks: dict[str, float] = {}
    for dtype, spec_field in PEAK_FIELD_BY_DTYPE.items():
        if (v := acc.spec(spec_field)) is not None:
            peaks[dtype] = v
            origins[f"peak_tflops:{dtype}"] = _catalog_origin(acc, spec_field)
    matmul: dict[str, float] = {}
    for dtype, spec_field in MAMF_FIELD_BY_DTYPE.items():
        if (v := acc.spec(spec_field)) is not None:
            matmul[dtype] = v
            origins[f"matmul_tflops:{dtype}"] = _catalog_origin(acc, spec_field)
    for spec_field in ("memory_bw_gbps", "compute_units", "scaleup_bw_uni_gbps", "scaleup_domain"):
        if spec_field in acc.specs:
            origins[spec_field] = _catalog_origin(acc, spec_field)
    # a published STREAM-class measurement of the HBM (catalog stream_bw_gbps) is what
    # streaming kernels reach; without one the planners assume a fraction of the peak
    stream = acc.spec("stream_bw_gbps")
    if stream is not None:
        origins["achievable_bw_gbps"] = _catalog_origin(acc, "stream_bw_gbps")
    domain = acc.spec("scaleup_domain")
    inter = None
    if node is not None:
        inter = node.inter_bw_per_gpu_gbps or None
        origins["inter_bw_per_gpu_gbps"] = Origin("catalog", f"system {node.id}: {node.source}")
        origins.update(_intra_collective_origins(node.id))
    cu = acc.spec("compute_units")
    return Hardware(
        id=acc.id,
        name=acc.name,
        peak_tflops=MappingProxyType(peaks),
        matmul_tflops=MappingProxyType(matmul),
        memory_bytes=acc.memory_bytes,
        memory_bw_gbps=acc.memory_bw_gbps,
        achievable_bw_gbps=stream,
        compute_units=None if cu is None else int(cu),
        scaleup_bw_uni_gbps=acc.spec("scaleup_bw_uni_gbps")
        or (node.intra_bw_uni_gbps if node else None),
        scaleup_domain=int(domain) if domain else (node.scaleup_domain if node else 1),
        inter_bw_per_gpu_gbps=inter,
        system_id=None if node is None else node.id,
        origins=MappingProxyType(origins),
        accelerator=acc,
    )


def _intra_collective_origins(system_id: str) -> dict[str, Origin]:
    """Published PCIe collective rows of the node type (catalog intra_collectives.csv)."""
    from flopwise.catalog.collectives import load_intra_collectives

    return {
        f"intra_collective:{op}:{gpus}": Origin("catalog", row.describe())
        for (sys_id, op, gpus), row in sorted(load_intra_collectives().items())
        if sys_id == system_id
    }


#: The accelerator id that means "this host's CPU", described only by measurements.
CPU_ID = "cpu"


def hardware_for(
    accelerator: str,
    system: str | None = None,
    measured: str | None = None,
    db: str | None = None,
) -> Hardware:
    """The hardware description planners use: catalog values, then measurements if asked
    (`measured` = a result id or "latest"; the results store is read only then)."""
    if accelerator.strip().lower() == CPU_ID:
        if measured is None:
            raise FlopwiseError(
                "--accelerator cpu needs --measured latest (run flopwise bench matmul/memory first)"
            )
        from flopwise.results.measured import cpu_hardware

        return cpu_hardware(db, measured)
    hw = hardware_from_catalog(accelerator, system)
    if measured is None:
        return hw
    from flopwise.results.measured import apply_measurements

    return apply_measurements(hw, measured, db)
