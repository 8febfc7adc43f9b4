"""Time of one NCCL collective as NCCL's own tuner predicts it: per-protocol latency and bandwidth.

A collective is not one alpha per ring step. NCCL's tuner (src/graph/tuning.cc) prices each
(algorithm, protocol) pair as a base latency, plus a per-step hardware latency that differs by
link (NVLink, PCIe, network) and protocol, plus the bytes over the protocol's share of the bus
bandwidth, and runs the cheapest. LL (8-byte flag/data lines) starts fastest and moves data at
half the bus rate; LL128 at 92% of it; Simple at full rate with the highest latency. Small
messages therefore cost a few to tens of microseconds, large ones their bandwidth, and a ring
over many nodes pays the network latency only on its node-crossing steps.

The constants are ncclTunerConstantsDefaults of NVIDIA/nccl src/graph/tuning.cc at 5067397c
(2026-06-11): baseLatencies, hwLatencies, the ring LL/LL128 bandwidth refinements and
getNetOverhead (1 us on x86 Intel and other CPUs, 2 us on AMD x86; x3 with Simple). All
microseconds. Rings serve every collective; all-reduce over several nodes may also take the
tree (latency 2 x ((ppn - 1) intra + log2(nodes) inter)), as NCCL does. NVLS, CollNet and PAT
are not modelled (their absence can only make a prediction slower, never faster).
"""

from __future__ import annotations

import math

PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
NCCL_TUNING_SOURCE = (
    "NVIDIA/nccl src/graph/tuning.cc @5067397c (2026-06-11): ncclTunerConstantsDefaults "
    "baseLatencies / hwLatencies, ring LL x0.5 and LL128 x0.92 bandwidth, getNetOverhead"
)

#: baseLatencies[algorithm][protocol], us.
BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
}
#: hwLatencies[link][algorithm][protocol], us per step.
HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
#: getNetOverhead: the floor of a node-local step of a multi-node ring (x3 with Simple), us.
NET_OVERHEAD_US = 1.0
#: Share of the bus bandwidth each protocol moves data at on a ring (LL: busBw * .5; LL128:
#: busBw * 0.92 = 120/128) and on an all-reduce tree (Simple .92, LL 1/3.8, LL128 120/128).
RING_BW_RATIO: tuple[float, float, float] = (0.5, 0.92, 1.0)
TREE_BW_RATIO: tuple[float, float, float] = (1.0 / 3.8, 120.0 / 128.0, 0.92)


def ring_steps(op: str, n: int) -> int:
    """Steps of NCCL's ring (or of one hop for point-to-point and rooted collectives)."""
    if op in ("broadcast", "reduce", "send_recv"):
        return 1
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def collective_s(
    op: str,
    n_bytes: float,
    n: int,
    ranks_per_node: int,
    busbw_bytes_s: float,
    bus_factor: float,
    link: str = "nvlink",
) -> float:
    """Cheapest (algorithm, protocol) time of one collective of `n_bytes` over `n` ranks.

    `ranks_per_node`: ranks sharing a node (n for a group inside one node; 1 when every rank
    is on its own node). `bus_factor`: nccl-tests' busbw/algbw factor of the op. `link`: the
    node-local link ("nvlink" or "pci").
    """
    if n <= 1 or n_bytes <= 0:
        return 0.0
    ppn = max(1, min(ranks_per_node, n))
    nodes = math.ceil(n / ppn)
    steps = ring_steps(op, n)
    inter_steps = 0 if nodes == 1 else (2 if op == "all_reduce" else 1) * (nodes - 1)
    inter_steps = min(inter_steps, steps)
    best = math.inf
    for i, proto in enumerate(PROTOCOLS):
        intra = HW_LATENCY_US[link]["ring"][i]
        if nodes > 1:
            intra = max(intra, NET_OVERHEAD_US * (3.0 if proto == "Simple" else 1.0))
        # with one rank per node every step crosses the network: NCCL uses the tree latency
        inter = HW_LATENCY_US["net"]["tree" if ppn == 1 else "ring"][i]
        lat_us = BASE_LATENCY_US["ring"][i] + (steps - inter_steps) * intra + inter_steps * inter
        t = lat_us * 1e-6 + bus_factor * n_bytes / (busbw_bytes_s * RING_BW_RATIO[i])
        best = min(best, t)
        if op == "all_reduce" and nodes > 1:
            tree_lat = BASE_LATENCY_US["tree"][i] + 2.0 * (
                (ppn - 1) * HW_LATENCY_US[link]["tree"][i]
                + math.log2(nodes) * HW_LATENCY_US["net"]["tree"][i]
            )
            # a tree all-reduce moves 2 x the bytes at its bus rate (NCCL's algbw = busBw / 2)
            t = tree_lat * 1e-6 + 2.0 * n_bytes / (busbw_bytes_s * TREE_BW_RATIO[i])
            best = min(best, t)
    return best
