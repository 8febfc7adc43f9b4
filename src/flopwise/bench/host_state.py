"""What the accelerator was running at: driver, clocks, power limit, tuning switches.

Read from `nvidia-smi` (NVIDIA) or `amd-smi`/`rocm-smi` (AMD) when they are on PATH; every field
is None when the tool is missing or does not say. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

#: nvidia-smi --query-gpu fields (nvidia-smi --help-query-gpu), in this order.
NVIDIA_FIELDS: tuple[str, ...] = (
    "driver_version",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks.max.mem",
    "power.limit",
    "power.max_limit",
    "temperature.gpu",
    "persistence_mode",
    "compute_mode",
)
_NVIDIA_KEYS: tuple[str, ...] = (
    "driver_version",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "memory_clock_mhz",
    "max_memory_clock_mhz",
    "power_limit_w",
    "max_power_limit_w",
    "temperature_c",
    "persistence_mode",
    "compute_mode",
)
#: Environment variables that change what a GEMM or collective benchmark measures.
RELEVANT_ENV_PREFIXES: tuple[str, ...] = (
    "PYTORCH_TUNABLEOP",
    "TORCH_BLAS",
    "HIPBLASLT",
    "ROCBLAS",
    "CUBLAS",
    "CUBLASLT",
    "NVIDIA_TF32",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "NCCL_",
    "RCCL_",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)
SMI_TIMEOUT_S = 10


def _number(text: str) -> float | None:
    try:
        value = float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None
    return value


def parse_nvidia_smi(line: str) -> dict[str, Any]:
    """One CSV line of `nvidia-smi --query-gpu=<NVIDIA_FIELDS> --format=csv,noheader,nounits`."""
    parts = [p.strip() for p in line.strip().split(",")]
    out: dict[str, Any] = dict.fromkeys(_NVIDIA_KEYS)
    for key, value in zip(_NVIDIA_KEYS, parts, strict=False):
        if not value or value.startswith("[") or value.upper() == "N/A":
            continue
        if key in ("driver_version", "persistence_mode", "compute_mode"):
            out[key] = value
        else:
            out[key] = _number(value)
    return out


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def nvidia_state(index: int) -> dict[str, Any] | None:
    out = _run(
        [
            "nvidia-smi",
            f"--query-gpu={','.join(NVIDIA_FIELDS)}",
            "--format=csv,noheader,nounits",
            "-i",
            str(index),
        ]
    )
    if not out or not out.strip():
        return None
    return {"tool": "nvidia-smi", **parse_nvidia_smi(out.strip().splitlines()[0])}


def parse_rocm_smi(text: str, index: int) -> dict[str, Any]:
    """`rocm-smi --showdriverversion --showclocks --showmaxpower --json` for card `index`."""
    out: dict[str, Any] = {
        "driver_version": None,
        "sm_clock_mhz": None,
        "memory_clock_mhz": None,
        "power_limit_w": None,
    }
    try:
        doc = json.loads(text)
    except ValueError:
        return out
    if not isinstance(doc, dict):
        return out
    system = doc.get("system", {})
    if isinstance(system, dict):
        out["driver_version"] = system.get("Driver version")
    card = doc.get(f"card{index}", {})
    if not isinstance(card, dict):
        return out
    for key, value in card.items():
        low = key.lower()
        text_value = str(value).strip("()Mhz ")
        if low.startswith("sclk"):
            out["sm_clock_mhz"] = _number(text_value)
        elif low.startswith("mclk"):
            out["memory_clock_mhz"] = _number(text_value)
        elif "max graphics package power" in low:
            out["power_limit_w"] = _number(str(value))
    return out


def rocm_state(index: int) -> dict[str, Any] | None:
    out = _run(["rocm-smi", "--showdriverversion", "--showclocks", "--showmaxpower", "--json"])
    if not out:
        return None
    return {"tool": "rocm-smi", **parse_rocm_smi(out, index)}


def relevant_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables that change GEMM/collective behaviour, as set for this run."""
    env = dict(os.environ) if env is None else env
    return {k: v for k, v in sorted(env.items()) if k.startswith(RELEVANT_ENV_PREFIXES)}


def tunableop_state(torch: Any) -> dict[str, Any]:
    """PyTorch TunableOp (GEMM autotuning on ROCm and CUDA): enabled, tuning, results file."""
    tunable = getattr(getattr(torch, "cuda", None), "tunable", None)
    state: dict[str, Any] = {"enabled": None, "tuning_enabled": None, "filename": None}
    if tunable is None:
        return state
    for key, fn in (
        ("enabled", "is_enabled"),
        ("tuning_enabled", "tuning_is_enabled"),
        ("filename", "get_filename"),
    ):
        try:
            state[key] = getattr(tunable, fn)()
        except Exception:
            state[key] = None
    return state


def accelerator_state(kind: str, index: int | None, rocm: bool) -> dict[str, Any]:
    """Driver, clocks and power limit of one device; every value None when no tool says."""
    empty: dict[str, Any] = {
        "tool": None,
        "driver_version": None,
        "sm_clock_mhz": None,
        "memory_clock_mhz": None,
        "power_limit_w": None,
    }
    if kind != "cuda":
        return empty
    idx = index or 0
    state = rocm_state(idx) if rocm else nvidia_state(idx)
    return {**empty, **state} if state else empty
