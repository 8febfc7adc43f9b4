"""Time primitives every planner uses: GEMMs, memory-bound ops and collectives.
nccl-tests bus-bandwidth factors live in flopwise.collectives (shared with bench comms).

All functions are pure: shapes and a Hardware in, seconds out. Units: bytes, FLOPs, seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from flopwise.catalog.collectives import intra_collective
from flopwise.collectives import BUSBW_FACTORS
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan import gemm, gemm_ceiling, nccl_latency
from flopwise.plan.efficiency import (
    GEMM_TILE,
    KERNEL_LAUNCH_S,
    SCALEOUT_ALPHA_S,
    SCALEOUT_LINK_FRACTION,
    SCALEUP_ALPHA_S,
    scaleup_link_fraction,
)
from flopwise.units import GB


def achievable_matmul_tflops(hw: Hardware, dtype: str) -> float:
    """Large-GEMM ceiling: measured or published MAMF, else peak x GEMM_FRACTION_WITHOUT_MAMF."""
    return gemm_ceiling.ceiling_tflops(hw, dtype)


def gemm_shape_efficiency(
    m: int, n: int, hw: Hardware, tile: int = GEMM_TILE, batch: int = 1
) -> float:
    """Tile and wave quantization: useful fraction of the work the GPU actually schedules.

    tiles = batch*ceil(M/T)*ceil(N/T); waves = ceil(tiles/SMs); efficiency = useful MN area
    over scheduled area, times tiles/(waves*SMs) (NVIDIA Matrix Multiplication Background
    guide). A batched GEMM schedules the tiles of all its members in one grid.
    """
    if m <= 0 or n <= 0:
        raise FlopwiseError(f"GEMM dimensions must be positive, got m={m} n={n}")
    tm, tn = math.ceil(m / tile), math.ceil(n / tile)
    tile_eff = (m * n) / (tm * tile * tn * tile)
    units = hw.compute_units
    if not units:
        return tile_eff
    tiles = tm * tn * max(batch, 1)
    waves = math.ceil(tiles / units)
    return tile_eff * tiles / (waves * units)


def memory_bw_bytes_per_s(hw: Hardware) -> float:
    """Achievable memory bandwidth: measured when known, else peak x MEMORY_BW_FRACTION."""
    return gemm_ceiling.bandwidth_bytes_per_s(hw)


def gemm_time_s(
    m: int,
    n: int,
    k: int,
    hw: Hardware,
    dtype: str = "bf16",
    batch: int = 1,
    weight_dtype: str | None = None,
    scaling: str | None = None,
    grouped: bool = False,
) -> float:
    """Time of `batch` GEMMs (m x k) @ (k x n): the shape model of ``flopwise.plan.gemm``.

    Compute at the MAMF ceiling x the library's best tile/wave/split-K efficiency (x
    GROUPED_GEMM_EFFICIENCY for one grouped MoE kernel), smoothly maxed with reading the inputs,
    plus the epilogue's output write and a launch; corrected to measured shapes when the
    hardware carries a `bench matmul` shape table.
    """
    return gemm.gemm_time_s(m, n, k, hw, dtype, batch, weight_dtype, scaling, grouped)


def memory_time_s(n_bytes: float, hw: Hardware, kernels: int = 1) -> float:
    """Time of memory-bound work moving n_bytes, plus one launch per kernel."""
    return n_bytes / memory_bw_bytes_per_s(hw) + kernels * KERNEL_LAUNCH_S


@dataclass(frozen=True, slots=True)
class Tier:
    """One network tier as a collective sees it: per-GPU per-direction bandwidth and latency."""

    name: str  # "scale-up" | "scale-out"
    bw_gbps: float  # achievable bus bandwidth, GB/s, for collectives not measured one by one
    alpha_s: float  # latency per ring step where NCCL's tuner model does not apply
    by_op: Mapping[str, float] = field(default_factory=dict)  # measured busbw per collective
    # NCCL/RCCL groups: latency by NCCL's own tuner (plan/nccl_latency.py), not alpha x steps
    nccl: bool = False
    # ranks of the group sharing a node (0: the whole group, as inside one node); a scale-out
    # group's rings cross the network only between nodes
    ranks_per_node: int = 0
    # where bw_gbps comes from: "link" (the catalog's link rate x the usable fraction), "pcie"
    # (the node type's published NCCL row), "measured" (a bench comms fallback)
    source: str = "link"

    def bw_for(self, op: str) -> float:
        """Bus bandwidth of one collective: measured for that op when known, else the tier's."""
        return self.by_op.get(op, self.bw_gbps)

    def with_op(self, op: str, bw_gbps: float) -> Tier:
        """The tier with one collective's bus bandwidth set."""
        return replace(self, by_op=MappingProxyType({**self.by_op, op: bw_gbps}))

    def scaled(self, factor: float, cap: Tier) -> Tier:
        """The tier with every bandwidth x factor, each capped by the same op's in `cap`."""
        ops = set(self.by_op) | set(cap.by_op)
        return Tier(
            self.name,
            min(factor * self.bw_gbps, cap.bw_gbps),
            self.alpha_s,
            {op: min(factor * self.bw_for(op), cap.bw_for(op)) for op in ops},
            self.nccl,
            self.ranks_per_node,
            self.source,
        )


def _measured_ops(hw: Hardware, tier: str) -> dict[str, float]:
    prefix = f"{tier}:"
    return {k[len(prefix) :]: v for k, v in hw.busbw_by_op.items() if k.startswith(prefix)}


def tier_for(hw: Hardware, group_size: int, spans_nodes: bool) -> Tier:
    """The tier a group of `group_size` GPUs communicates over, with achievable busbw.

    Measured per-collective busbw (bench comms) applies to that collective only: an all-reduce
    that NVLS accelerates says nothing about all-gather. Collectives not measured use the
    catalog's link rate x the achievable fraction; only where the catalog has no link rate
    does the tier's measured fallback (all-reduce) stand in.
    """
    if not spans_nodes:
        ops = _measured_ops(hw, "intra")
        pcie = _pcie_tier(hw, group_size, ops)
        if pcie is not None:
            return pcie
        source = "link"
        if hw.scaleup_bw_uni_gbps:
            base = hw.scaleup_bw_uni_gbps * scaleup_link_fraction(hw.id)
        elif hw.intra_busbw_gbps or ops:
            base, source = hw.intra_busbw_gbps or min(ops.values()), "measured"
        else:
            raise FlopwiseError(f"{hw.id} has no published scale-up bandwidth")
        return Tier("scale-up", base, SCALEUP_ALPHA_S, ops, _uses_nccl(hw), 0, source)
    ops = _measured_ops(hw, "inter")
    source = "link"
    if hw.inter_bw_per_gpu_gbps:
        base = hw.inter_bw_per_gpu_gbps * SCALEOUT_LINK_FRACTION
    elif hw.inter_busbw_gbps or ops:
        base, source = hw.inter_busbw_gbps or min(ops.values()), "measured"
    else:
        raise FlopwiseError(
            f"{hw.id} has no known scale-out network; pass --system with a node type"
        )
    return Tier("scale-out", base, SCALEOUT_ALPHA_S, ops, _uses_nccl(hw), 1, source)


#: Vendors whose collectives run on NCCL or its fork RCCL (same tuner model).
NCCL_VENDORS: tuple[str, ...] = ("NVIDIA", "AMD")


def _uses_nccl(hw: Hardware) -> bool:
    acc = hw.accelerator
    return acc is not None and acc.vendor in NCCL_VENDORS


def _pcie_tier(hw: Hardware, group_size: int, ops: dict[str, float]) -> Tier | None:
    """A group larger than the scale-up domain inside one node talks over PCIe: the node type's
    published NCCL busbw and latency for that group size (catalog intra_collectives.csv), the
    same busbw for every collective on those links; measured collectives still win per op."""
    if group_size <= max(1, hw.scaleup_domain):
        return None
    row = intra_collective(hw.system_id, "all_reduce", group_size)
    if row is None:
        return None
    steps = 2 * (group_size - 1)  # the ring all-reduce's latency terms (collective_time_s)
    alpha = SCALEUP_ALPHA_S if row.latency_us is None else row.latency_us * 1e-6 / steps
    return Tier("scale-up", row.busbw_gbps, alpha, ops, source="pcie")


def collective_time_s(op: str, n_bytes: float, group_size: int, tier: Tier) -> float:
    """Alpha-beta time of one collective on `n_bytes` (the whole array, as nccl-tests counts).

    time = steps*alpha + busbw_factor(n) * S / busbw, with ring steps (n-1) (2(n-1) for
    all-reduce). A group of one costs nothing.
    """
    if group_size <= 1 or n_bytes <= 0:
        return 0.0
    factor = BUSBW_FACTORS[op](group_size)
    if tier.nccl:
        ppn = tier.ranks_per_node or group_size
        bw = tier.bw_for(op) * GB
        return nccl_latency.collective_s(op, n_bytes, group_size, ppn, bw, factor)
    steps = 2 * (group_size - 1) if op == "all_reduce" else group_size - 1
    if op in ("broadcast", "reduce", "send_recv"):
        steps = 1
    return steps * tier.alpha_s + factor * n_bytes / (tier.bw_for(op) * GB)
