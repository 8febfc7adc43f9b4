"""Fallbacks a plan rests on, named so the plan can show them (its ``assumed`` block).

Every value here is used because nothing better is known: no measurement, no validated run, no
node type given. Each entry is ``{"value": ..., "source": ...}`` like the hardware origins.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, Origin
from flopwise.plan.efficiency import GEMM_FRACTION_WITHOUT_MAMF, MEMORY_BW_FRACTION
from flopwise.plan.gemm_ceiling import (
    MAMF_SIBLINGS,
    ceiling_tflops,
    fraction_without_mamf,
    measured_mamf,
    sibling_fraction,
    stand_in_fraction,
    stand_in_ratio,
)


def _entry(value: Any, source: str) -> dict[str, Any]:
    return {"value": value, "source": source}


def hardware_fallbacks(hw: Hardware, dtype: str) -> dict[str, dict[str, Any]]:
    """The GEMM ceiling and HBM bandwidth when assumed from peaks, and the node type when it
    was picked for the user."""
    out: dict[str, dict[str, Any]] = {}
    if measured_mamf(hw, dtype) is None and dtype in hw.peak_tflops:
        sibling = stand_in_fraction(hw, dtype)
        same_unit = None if sibling is not None else sibling_fraction(hw, dtype)
        if sibling is not None:
            ratio = stand_in_ratio(dtype, sibling[0], hw.id)
            if ratio is None:
                how = (
                    f"{dtype} peak x {sibling[1]:.2f}, the fraction of peak its {sibling[0]} "
                    "MAMF reaches (plan/gemm_ceiling.py MAMF_STAND_INS)"
                )
            else:
                how = (
                    f"{dtype} peak x {sibling[1]:.2f}: the fraction of peak its {sibling[0]} "
                    f"MAMF reaches ({sibling[1] / ratio[0]:.2f}, plan/gemm_ceiling.py "
                    f"MAMF_STAND_INS) x {ratio[0]:.2f}, {dtype}'s fraction over {sibling[0]}'s "
                    f"where both are published ({', '.join(ratio[1])}; "
                    + (
                        "its MAMF_SIBLINGS entry)"
                        if ratio[1] == (MAMF_SIBLINGS.get(hw.id),)
                        else "FP4_STAND_IN_REFERENCES)"
                    )
                )
        elif same_unit is not None:
            how = (
                f"{dtype} peak x {same_unit[2]:.3f}, the fraction of peak {same_unit[0]}'s "
                f"{same_unit[1]} MAMF reaches on the same matrix units (plan/gemm_ceiling.py "
                "MAMF_SIBLINGS)"
            )
        else:
            frac, other, refs = fraction_without_mamf(hw, dtype)
            how = (
                f"peak x {GEMM_FRACTION_WITHOUT_MAMF} (plan/efficiency.py "
                "GEMM_FRACTION_WITHOUT_MAMF)"
            )
            if refs:
                how = (
                    f"peak x {frac:.2f}: {GEMM_FRACTION_WITHOUT_MAMF} (plan/efficiency.py "
                    f"GEMM_FRACTION_WITHOUT_MAMF) x {frac / GEMM_FRACTION_WITHOUT_MAMF:.2f}, "
                    f"{dtype}'s fraction of peak over {other}'s where both are published "
                    f"({', '.join(refs)}; plan/gemm_ceiling.py FP4_STAND_IN_REFERENCES)"
                )
        out[f"matmul_tflops:{dtype}"] = _entry(
            ceiling_tflops(hw, dtype),
            f"no MAMF measured or published for {hw.id} {dtype}: {how}; measure it with "
            "flopwise bench matmul",
        )
    if not hw.achievable_bw_gbps and hw.memory_bw_gbps:
        out["achievable_bw_gbps"] = _entry(
            hw.memory_bw_gbps * MEMORY_BW_FRACTION,
            f"HBM bandwidth not measured: peak x {MEMORY_BW_FRACTION} (plan/efficiency.py "
            "MEMORY_BW_FRACTION, STREAM triad on A100/H100); measure it with flopwise bench "
            "memory",
        )
    origin = hw.origins.get("system_id")
    if origin is not None and origin.kind == "assumed":
        out["system_id"] = _entry(hw.system_id, origin.detail)
    return out


def gpus_per_node_fallback(hw: Hardware, gpus_per_node: int, given: bool) -> dict[str, Any]:
    """GPUs per node when neither the job nor a node type says: the scale-up domain."""
    if given or hw.system_id is not None:
        return {}
    return {
        "gpus_per_node": _entry(
            gpus_per_node,
            f"no node type for {hw.id}: one node = its scale-up domain; pass --system or "
            "--gpus-per-node",
        )
    }


def assume_inter_node_bw(hw: Hardware, gbps: float) -> Hardware:
    """`hw` with a user-given per-GPU scale-out bandwidth (GB/s, one direction), labelled as
    an assumption: for accelerators the catalog has no node type for, or to override one."""
    if not gbps > 0:
        raise FlopwiseError(f"--inter-node-gbps must be positive, got {gbps}")
    origins = {k: v for k, v in hw.origins.items() if not k.startswith("busbw_gbps:inter:")}
    origins["inter_bw_per_gpu_gbps"] = Origin(
        "assumed", f"--inter-node-gbps {gbps:g} (per-GPU scale-out GB/s given by the user)"
    )
    by_op = {k: v for k, v in hw.busbw_by_op.items() if not k.startswith("inter:")}
    return replace(
        hw,
        inter_bw_per_gpu_gbps=gbps,
        inter_busbw_gbps=None,
        busbw_by_op=MappingProxyType(by_op),
        origins=MappingProxyType(origins),
    )


def hardware_by_origin(hw: Hardware, kind: str) -> dict[str, Any]:
    """The hardware numbers whose origin is `kind` ("measured", "assumed"), by field."""
    out: dict[str, Any] = {}
    for name, origin in hw.origins.items():
        if origin.kind != kind:
            continue
        out[name] = {"value": hw.value_of(name), "source": origin.detail}
    return out
