"""What a training plan records about its context: the fallbacks it rests on, parameter and
FLOP counts, the peak it measures MFU against, the node and the device memory."""

from __future__ import annotations

from typing import Any

from flopwise.plan.assumptions import gpus_per_node_fallback, hardware_fallbacks
from flopwise.plan.sustained import sustained_fraction_fallback, sustained_gemm_fraction
from flopwise.units import GIB

from .context import ModelContext


def assumed_fallbacks(ctx: ModelContext) -> dict[str, Any]:
    """The fallbacks this plan rests on (plan/assumptions.py), by name."""
    out = hardware_fallbacks(ctx.hw, ctx.gemm_dtype)
    out.update(gpus_per_node_fallback(ctx.hw, ctx.gpus_per_node, ctx.job.gpus_per_node is not None))
    if ctx.job.sustained_compute_fraction is None:
        fallback = sustained_fraction_fallback(ctx.hw, ctx.compute_fraction)
        if fallback and ctx.fraction_note is not None:
            entry = fallback["sustained_compute_fraction"]
            if ctx.compute_fraction != sustained_gemm_fraction(ctx.hw):
                entry["source"] = ctx.fraction_note  # the measurement replaced the default
            else:  # the fit was kept: what it rests on, then why the measurement did not move it
                entry["source"] = f"{entry['source']}; with --measured: {ctx.fraction_note}"
        out.update(fallback)
    return out


def context_summary(ctx: ModelContext) -> dict[str, Any]:
    return {
        "assumed": assumed_fallbacks(ctx),
        "sustained_compute_fraction": ctx.compute_fraction,
        "fraction_note": ctx.fraction_note,
        "params": ctx.counts.total,
        "active_params": ctx.counts.active,
        "model_flops_per_token": ctx.model_flops_per_token,
        "recompute_flops_per_token": dict(ctx.recompute_flops_per_token),
        "peak_tflops": ctx.peak_flops / 1e12,
        "peak16_tflops": ctx.peak16_flops / 1e12,
        "gpus_per_node": ctx.gpus_per_node,
        "scaleup_domain": ctx.domain,
        "device_memory_gib": None if ctx.capacity_bytes is None else ctx.capacity_bytes / GIB,
        "adapter_params": (ctx.adapter_params_per_layer + ctx.expert_adapter_params_per_layer)
        * ctx.model.layers,
    }
