"""Tensor-parallel communication of a serving engine: which GPUs share a scale-up fabric, and
what one all-reduce costs as the engine dispatches it (NCCL ring or its custom kernels)."""

from __future__ import annotations

from flopwise.hardware import Hardware
from flopwise.plan.efficiency import scaleup_link_basis
from flopwise.plan.infer.constants import TRTLLM_ALLREDUCE_ONESHOT_BELOW, EngineProfile
from flopwise.plan.roofline import Tier, collective_time_s, tier_for
from flopwise.units import GB


def node_gpus(hw: Hardware) -> int:
    """GPUs that talk without the scale-out network: the scale-up domain, or the whole node.

    PCIe cards (L40S, A100 PCIe) have a scale-up domain of one card, yet tensor parallelism
    inside their 8-GPU server runs over PCIe (the card's scale-up link rate) rather than the
    NICs; the node type (``--system``, or the catalog's first node for the card) says how many.
    """
    domain = max(1, hw.scaleup_domain)
    if hw.system_id is None:
        return domain
    from flopwise.catalog.systems import get_system

    return max(domain, get_system(hw.system_id).gpus_per_node)


def _tp_tier(hw: Hardware, tp: int) -> tuple[bool, Tier]:
    """(whether the group spans nodes, the tier its collectives run over) for TP `tp`."""
    spans = tp > node_gpus(hw)
    return spans, tier_for(hw, tp, spans_nodes=spans)


def tp_comm_note(hw: Hardware, tp: int) -> str | None:
    """Where a tensor-parallel group's all-reduce bandwidth comes from, in one line (None for a
    group of one): measured, the node type's published PCIe row, or the link rate x its usable
    fraction (roofline.Tier.source; plan/efficiency.py)."""
    if tp <= 1:
        return None
    spans, tier = _tp_tier(hw, tp)
    if "all_reduce" in tier.by_op or tier.source == "measured":
        basis = "measured with flopwise bench comms"
    elif tier.source == "pcie":
        basis = f"over PCIe: {hw.system_id}'s published NCCL busbw for {tp} GPUs"
    elif spans:
        basis = "across nodes: the NICs' line rate x the scale-out fraction"
    else:
        fraction, source = scaleup_link_basis(hw.id)
        if not tier.nccl:  # TPU ICI, Gaudi RoCE: no library model of their own links here
            source += ", taken for lack of one for this device's links"
        basis = (
            f"{fraction:.2f} of the {hw.scaleup_bw_uni_gbps or 0:,.0f} GB/s scale-up link rate: "
            f"{source}; flopwise bench comms measures it"
        )
    bw = tier.bw_for("all_reduce")
    return f"tensor-parallel all-reduce at {bw:,.0f} GB/s bus bandwidth ({basis})"


def allreduce_s(n_bytes: float, tp: int, hw: Hardware, engine: EngineProfile) -> float:
    """One TP all-reduce as the engine dispatches it: the cheapest of ring (NCCL) and the
    one-/two-shot custom kernels, or TensorRT-LLM's AUTO rule (one-shot below a size threshold,
    NCCL above: constants.TRTLLM_ALLREDUCE_ONESHOT_BELOW).

    The custom kernels need every rank's buffer reachable over NVLink: TensorRT-LLM's
    AllreducePlugin::selectImplementation falls back to NCCL when peer access is missing and,
    under the default AUTO strategy, whenever the group is not NVLink-connected
    (cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp); vLLM and SGLang disable their
    custom all-reduce on more than two PCIe-only GPUs. A group larger than the scale-up domain
    therefore pays NCCL's ring (over PCIe inside a node, the network across nodes).
    """
    if tp <= 1 or n_bytes <= 0:
        return 0.0
    spans, tier = _tp_tier(hw, tp)
    ring = collective_time_s("all_reduce", n_bytes, tp, tier)
    if spans or tp > max(1, hw.scaleup_domain):
        return ring
    limit = engine.custom_allreduce_max_bytes
    if limit is not None and n_bytes >= limit:
        return ring  # beyond the custom kernel's buffer: NCCL/RCCL
    bw = tier.bw_for("all_reduce") * GB
    one_shot = engine.allreduce_latency_s + (tp - 1) * n_bytes / bw
    if engine.allreduce_policy == "trtllm":
        below = next(b for group, b in TRTLLM_ALLREDUCE_ONESHOT_BELOW if tp <= group)
        return one_shot if n_bytes < below else ring
    two_shot = 2 * engine.allreduce_latency_s + 2 * (tp - 1) / tp * n_bytes / bw
    return min(ring, one_shot, two_shot)
