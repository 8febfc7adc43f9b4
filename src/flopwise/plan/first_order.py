"""The seed's first-order training estimate: time = FLOPs / (GPUs x peak x MFU).

Every output is labelled as a first-order estimate. The memory figure is the seed's rule of
thumb (18 B/param x 1.25 for training), spread evenly over the GPUs as full sharding would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.units import GIB, SECONDS_PER_DAY, SECONDS_PER_HOUR, TERA
from flopwise.workload.flops import train_flops_per_token
from flopwise.workload.memory_bytes import (
    SEED_HEADROOM,
    SEED_INFER_BYTES_PER_PARAM,
    SEED_TRAIN_BYTES_PER_PARAM,
)
from flopwise.workload.params import count_params
from flopwise.workload.spec import ModelSpec

#: Assumed model FLOPs utilisation when the user gives none: the middle of what large dense
#: runs publish (PaLM 46.2%, Llama 3 38-43%, MosaicML MPT 35-50%). Overridable with --mfu.
DEFAULT_MFU = 0.40


@dataclass(frozen=True, kw_only=True, slots=True)
class FirstOrderTrainPlan:
    model: str
    accelerator: str
    dtype: str
    params: int
    active_params: int
    tokens: float
    seq_len: int
    flops_per_token: float
    total_flops: float
    gpus: int
    peak_tflops: float
    mfu: float
    train_s: float
    train_days: float
    gpu_hours: float
    price_per_gpu_hour: float | None
    cost_usd: float | None
    memory_per_gpu_gib: float
    device_memory_gib: float | None
    fits: bool | None
    min_gpus_train: int | None
    min_gpus_infer: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": "first-order",
            "note": "first-order estimate: time = FLOPs / (GPUs x peak x MFU); memory from the "
            "18 B/param x 1.25 rule of thumb",
            "model": self.model,
            "accelerator": self.accelerator,
            "dtype": self.dtype,
            "params": self.params,
            "active_params": self.active_params,
            "tokens": self.tokens,
            "seq_len": self.seq_len,
            "flops_per_token": self.flops_per_token,
            "total_flops": self.total_flops,
            "gpus": self.gpus,
            "peak_tflops": self.peak_tflops,
            "mfu": self.mfu,
            "train_s": self.train_s,
            "train_days": self.train_days,
            "gpu_hours": self.gpu_hours,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "cost_usd": self.cost_usd,
            "memory_per_gpu_gib": self.memory_per_gpu_gib,
            "device_memory_gib": self.device_memory_gib,
            "fits": self.fits,
            "min_gpus_train": self.min_gpus_train,
            "min_gpus_infer": self.min_gpus_infer,
        }


def first_order_train(
    model: ModelSpec,
    hardware: Hardware,
    *,
    gpus: int,
    tokens: float,
    seq_len: int | None = None,
    mfu: float = DEFAULT_MFU,
    dtype: str = "bf16",
    price_per_gpu_hour: float | None = None,
) -> FirstOrderTrainPlan:
    """First-order training time, GPU-hours and cost for `tokens` tokens on `gpus` GPUs."""
    if gpus < 1:
        raise FlopwiseError(f"--gpus must be at least 1, got {gpus}")
    if not 0 < mfu <= 1:
        raise FlopwiseError(f"--mfu must be in (0, 1], got {mfu}")
    if tokens <= 0:
        raise FlopwiseError(f"--tokens must be positive, got {tokens}")
    if price_per_gpu_hour is not None and price_per_gpu_hour < 0:
        raise FlopwiseError(f"--price-per-gpu-hour must not be negative, got {price_per_gpu_hour}")
    seq = seq_len or min(model.max_seq_len, 4096)
    counts = count_params(model)
    per_token = train_flops_per_token(model, seq, counts=counts).model
    total = per_token * tokens
    peak = hardware.peak(dtype)
    seconds = total / (gpus * peak * TERA * mfu)
    gpu_hours = seconds * gpus / SECONDS_PER_HOUR
    mem_gib = counts.total * SEED_TRAIN_BYTES_PER_PARAM * SEED_HEADROOM / gpus / GIB
    dev_gib = None if hardware.memory_bytes is None else hardware.memory_bytes / GIB
    min_train = min_infer = None
    if hardware.memory_bytes:
        min_train = math.ceil(
            counts.total * SEED_TRAIN_BYTES_PER_PARAM * SEED_HEADROOM / hardware.memory_bytes
        )
        min_infer = math.ceil(
            counts.total * SEED_INFER_BYTES_PER_PARAM * SEED_HEADROOM / hardware.memory_bytes
        )
    return FirstOrderTrainPlan(
        model=model.name,
        accelerator=hardware.id,
        dtype=dtype,
        params=counts.total,
        active_params=counts.active,
        tokens=tokens,
        seq_len=seq,
        flops_per_token=per_token,
        total_flops=total,
        gpus=gpus,
        peak_tflops=peak,
        mfu=mfu,
        train_s=seconds,
        train_days=seconds / SECONDS_PER_DAY,
        gpu_hours=gpu_hours,
        price_per_gpu_hour=price_per_gpu_hour,
        cost_usd=None if price_per_gpu_hour is None else gpu_hours * price_per_gpu_hour,
        memory_per_gpu_gib=mem_gib,
        device_memory_gib=dev_gib,
        fits=None if dev_gib is None else mem_gib <= dev_gib,
        min_gpus_train=min_train,
        min_gpus_infer=min_infer,
    )
