"""Time primitives every planner uses: GEMMs, memory-bound ops and collectives.
nccl-tests bus-bandwidth factors live in flopwise.collectives (shared with bench comms).

All functions are pure: shapes and a Hardware in, seconds out. Units: bytes, FLOPs, seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flopwise.collectives import BUSBW_FACTORS
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.efficiency import (
    GEMM_FRACTION_WITHOUT_MAMF,
    GEMM_TILE,
    KERNEL_LAUNCH_S,
    MEMORY_BW_FRACTION,
    SCALEOUT_ALPHA_S,
    SCALEOUT_LINK_FRACTION,
    SCALEUP_ALPHA_S,
    SCALEUP_LINK_FRACTION,
)
from flopwise.units import GB, TERA
from flopwise.workload.memory_bytes import DTYPE_BYTES


def achievable_matmul_tflops(hw: Hardware, dtype: str) -> float:
    """Large-GEMM ceiling: measured or published MAMF, else peak x GEMM_FRACTION_WITHOUT_MAMF."""
    mamf = hw.matmul_tflops.get(dtype)
    if mamf is None and dtype == "fp16":
        mamf = hw.matmul_tflops.get("bf16")
    if mamf is not None:
        return mamf
    return hw.peak(dtype) * GEMM_FRACTION_WITHOUT_MAMF


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
    if hw.achievable_bw_gbps:
        return hw.achievable_bw_gbps * GB
    if not hw.memory_bw_gbps:
        raise FlopwiseError(
            f"{hw.id} has no published memory bandwidth; measure it with flopwise bench memory"
        )
    return hw.memory_bw_gbps * GB * MEMORY_BW_FRACTION


def gemm_time_s(
    m: int,
    n: int,
    k: int,
    hw: Hardware,
    dtype: str = "bf16",
    batch: int = 1,
    weight_dtype: str | None = None,
) -> float:
    """Time of `batch` GEMMs (m x k) @ (k x n): the slower of compute and memory, plus launch."""
    flops = 2.0 * m * n * k * batch
    rate = achievable_matmul_tflops(hw, dtype) * TERA * gemm_shape_efficiency(m, n, hw, batch=batch)
    a = DTYPE_BYTES[dtype]
    w = DTYPE_BYTES[weight_dtype or dtype]
    moved = batch * (m * k * a + k * n * w + m * n * a)
    return max(flops / rate, moved / memory_bw_bytes_per_s(hw)) + KERNEL_LAUNCH_S


def memory_time_s(n_bytes: float, hw: Hardware, kernels: int = 1) -> float:
    """Time of memory-bound work moving n_bytes, plus one launch per kernel."""
    return n_bytes / memory_bw_bytes_per_s(hw) + kernels * KERNEL_LAUNCH_S


@dataclass(frozen=True, slots=True)
class Tier:
    """One network tier as a collective sees it: per-GPU per-direction bandwidth and latency."""

    name: str  # "scale-up" | "scale-out"
    bw_gbps: float  # achievable bus bandwidth, GB/s
    alpha_s: float


def tier_for(hw: Hardware, group_size: int, spans_nodes: bool) -> Tier:
    """The tier a group of `group_size` GPUs communicates over, with achievable busbw."""
    if not spans_nodes:
        if hw.intra_busbw_gbps:
            return Tier("scale-up", hw.intra_busbw_gbps, SCALEUP_ALPHA_S)
        if not hw.scaleup_bw_uni_gbps:
            raise FlopwiseError(f"{hw.id} has no published scale-up bandwidth")
        return Tier("scale-up", hw.scaleup_bw_uni_gbps * SCALEUP_LINK_FRACTION, SCALEUP_ALPHA_S)
    if hw.inter_busbw_gbps:
        return Tier("scale-out", hw.inter_busbw_gbps, SCALEOUT_ALPHA_S)
    if not hw.inter_bw_per_gpu_gbps:
        raise FlopwiseError(
            f"{hw.id} has no known scale-out network; pass --system with a node type"
        )
    return Tier("scale-out", hw.inter_bw_per_gpu_gbps * SCALEOUT_LINK_FRACTION, SCALEOUT_ALPHA_S)


def collective_time_s(op: str, n_bytes: float, group_size: int, tier: Tier) -> float:
    """Alpha-beta time of one collective on `n_bytes` (the whole array, as nccl-tests counts).

    time = steps*alpha + busbw_factor(n) * S / busbw, with ring steps (n-1) (2(n-1) for
    all-reduce). A group of one costs nothing.
    """
    if group_size <= 1 or n_bytes <= 0:
        return 0.0
    factor = BUSBW_FACTORS[op](group_size)
    steps = 2 * (group_size - 1) if op == "all_reduce" else group_size - 1
    if op in ("broadcast", "reduce", "send_recv"):
        steps = 1
    return steps * tier.alpha_s + factor * n_bytes / (tier.bw_gbps * GB)
