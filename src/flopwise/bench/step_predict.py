"""The planner's prediction for the job `bench step` measures, on the same hardware.

Torch-free: the planner sees the reduced model (the layers and vocabulary the step ran), one
data-parallel replica per rank with the microbatch and sequence length the step used, no
recompute and no sharding — the job the benchmark actually ran. The hardware is the catalog's
with this device's stored measurements (matmul, memory, comms) and never a previous step
calibration, so the ratio measured / predicted is a fresh calibration of this device.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, Origin
from flopwise.workload.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Prediction:
    """What the planner predicts for the measured job; all None with a reason when it cannot."""

    tokens_per_s: float | None
    step_time_s: float | None
    mfu: float | None
    peak_tflops: float | None
    dtype: str | None
    note: str
    hardware: dict[str, Any] | None = None
    peak_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens_per_s": self.tokens_per_s,
            "step_time_s": self.step_time_s,
            "mfu": self.mfu,
            "peak_tflops": self.peak_tflops,
            "dtype": self.dtype,
            "note": self.note,
            "peak_source": self.peak_source,
            "measured_inputs": self.hardware,
        }


def _none(note: str) -> Prediction:
    return Prediction(None, None, None, None, None, note)


def prediction_hardware(
    accelerator: str | None, db: str | None, run_dtype: str = "bf16"
) -> tuple[Hardware, str]:
    """Catalog hardware plus stored measurements of this device, without a step calibration.

    The CPU has no published peak: where the hardware has none for bf16, the measured matmul
    rate stands in for it (labelled), so MFU is relative to what this CPU's GEMMs reach."""
    from flopwise.results.measured import hardware_for

    if accelerator is None:
        raise FlopwiseError("the device is not in the catalog, so there is nothing to predict on")
    try:
        hw = hardware_for(accelerator, None, "latest", db)
        note = "catalog + stored measurements of this device"
    except FlopwiseError:
        if accelerator == "cpu":
            raise FlopwiseError(
                "no stored matmul/memory measurements of this CPU: run `flopwise bench matmul` "
                "and `flopwise bench memory` first"
            ) from None
        hw = hardware_for(accelerator, None, None, db)
        note = "catalog values (no stored measurements of this device)"
    calibrations = ("step_calibration", "step_calibration_moe")
    origins = {k: v for k, v in hw.origins.items() if k not in calibrations}
    hw = replace(
        hw, step_calibration=None, step_calibration_moe=None, origins=MappingProxyType(origins)
    )
    if "bf16" not in hw.peak_tflops:
        other = "fp32" if run_dtype == "bf16" else "bf16"
        key = run_dtype if run_dtype in hw.matmul_tflops else other
        rate = hw.matmul_tflops.get(key)
        if not rate:
            raise FlopwiseError(
                f"{hw.id} has no bf16 peak and no measured matmul rate (run flopwise bench matmul)"
            )
        src = hw.origins.get(f"matmul_tflops:{key}")
        detail = f"measured {key} matmul rate used as the peak ({src.detail if src else 'stored'})"
        peaks = {**hw.peak_tflops, "bf16": rate}
        mm = {**hw.matmul_tflops, "bf16": rate}
        origins = {**hw.origins, "peak_tflops:bf16": Origin("measured", detail)}
        hw = replace(
            hw,
            peak_tflops=MappingProxyType(peaks),
            matmul_tflops=MappingProxyType(mm),
            origins=MappingProxyType(origins),
        )
        note += "; no published peak: the measured matmul rate is the MFU denominator"
    return hw, note


def predict_step(
    model: ModelSpec,
    accelerator: str | None,
    *,
    world_size: int,
    microbatch: int,
    seq_len: int,
    on_cpu: bool,
    db: str | None = None,
    ep: int = 1,
) -> Prediction:
    """The planner's tokens/s and MFU for this data-parallel job (its experts sharded `ep`
    ways), or None and why not."""
    from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training

    try:
        hw, note = prediction_hardware(accelerator, db, "fp32" if on_cpu else "bf16")
        job = TrainJob(
            gpus=world_size,
            seq_len=seq_len,
            global_batch_seqs=microbatch * world_size,
            dtype="bf16",
            gpus_per_node=world_size,
        )
        cons = LayoutConstraints(
            tp=1, pp=1, dp=world_size, cp=1, ep=ep, microbatch=microbatch, recompute="none",
            zero=0,
        )  # fmt: skip
        plan = plan_training(model, hw, job, cons)
    except FlopwiseError as exc:
        return _none(f"no prediction: {exc}")
    if on_cpu:
        note += (
            "; the planner models 16-bit training: on the CPU the step runs fp32, so GEMMs are "
            "at the measured fp32 rate and memory-bound bytes are counted at 16 bits"
        )
    from flopwise.plan.assumptions import hardware_by_origin

    return Prediction(
        tokens_per_s=plan.tokens_per_s,
        step_time_s=plan.step_time_s,
        mfu=plan.mfu,
        peak_tflops=float(plan.ctx_summary["peak_tflops"]),
        dtype=job.dtype,
        note=note,
        hardware=hardware_by_origin(hw, "measured"),
        peak_source=_peak_source(hw),
    )


def _peak_source(hw: Hardware) -> str:
    origin = hw.origins.get("peak_tflops:bf16")
    return "unknown" if origin is None else f"{origin.kind}: {origin.detail}"
