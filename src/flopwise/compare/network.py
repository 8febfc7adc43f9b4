"""Is the offer's network what the plan assumes? Offer Gb/s per GPU vs the catalog node type's."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

from flopwise.catalog.systems import System, get_system
from flopwise.hardware import Hardware, Origin

#: Offer and system per-GPU scale-out bandwidth within this fraction count as the same network
#: (line rates come in 100/200/400/800 Gb/s steps, so anything closer is rounding).
NETWORK_MATCH_TOLERANCE = 0.05


def network_check(
    hw: Hardware, offer_gbit_s: float | None, gpus_per_instance: int, instances: int
) -> tuple[Hardware, dict[str, Any]]:
    """Hardware to plan with and a verdict on the network.

    When the offer publishes its network, the plan uses it (inter-node bandwidth per GPU =
    offer Gb/s / 8 / GPUs per instance); otherwise the plan keeps the catalog node type's NICs
    and the verdict says that is an assumption.
    """
    system: System | None = get_system(hw.system_id) if hw.system_id else None
    system_node = (system.nics_per_node * system.nic_gbit_s) if system else 0.0
    system_per_gpu = system_node / system.gpus_per_node if system and system_node else None
    offer_per_gpu = offer_gbit_s / gpus_per_instance if offer_gbit_s else None
    verdict: dict[str, Any] = {
        "offer_gbit_s_per_gpu": offer_per_gpu,
        "system_gbit_s_per_gpu": system_per_gpu,
        "system": None if system is None else system.id,
        "planned_with": "system",
    }
    if instances <= 1:
        verdict.update(
            status="not used", note="the job fits in one instance: no inter-node traffic"
        )
        return hw, verdict
    if offer_per_gpu is None:
        assumed = "unknown" if system_per_gpu is None else f"{system_per_gpu:g} Gb/s per GPU"
        verdict.update(
            status="unknown",
            note=f"offer does not publish its network; plan assumes {assumed}"
            + (f" ({system.id})" if system else ""),
        )
        return hw, verdict
    planned = replace(
        hw,
        inter_bw_per_gpu_gbps=offer_per_gpu / 8.0,
        origins=MappingProxyType(
            {**hw.origins, "inter_bw_per_gpu_gbps": Origin("catalog", "offer network_gbit_s")}
        ),
    )
    verdict["planned_with"] = "offer"
    if system_per_gpu is None:
        verdict.update(
            status="offer only", note=f"{offer_per_gpu:g} Gb/s per GPU (no system figure)"
        )
    elif abs(offer_per_gpu - system_per_gpu) <= NETWORK_MATCH_TOLERANCE * system_per_gpu:
        verdict.update(
            status="matches",
            note=f"{offer_per_gpu:g} Gb/s per GPU, as {system.id if system else ''}",
        )
    else:
        word = "slower" if offer_per_gpu < system_per_gpu else "faster"
        verdict.update(
            status=word,
            note=f"{offer_per_gpu:g} Gb/s per GPU vs {system_per_gpu:g} in "
            f"{system.id if system else 'the system'}; planned with the offer's",
        )
    return planned, verdict
