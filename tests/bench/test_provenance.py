"""Provenance: versions, driver, clocks, power limit and tuning switches, None when unknown."""

from __future__ import annotations

import json

from flopwise.bench.device import import_torch, resolve_device
from flopwise.bench.host_state import parse_nvidia_smi, parse_rocm_smi, relevant_env
from flopwise.bench.provenance import provenance


def test_nvidia_smi_line_is_read_into_named_units() -> None:
    # nvidia-smi --query-gpu=... --format=csv,noheader,nounits on an H100 SXM
    line = "550.54.15, 1980, 1980, 2619, 2619, 700.00, 700.00, 34, Enabled, Default"
    s = parse_nvidia_smi(line)
    assert s["driver_version"] == "550.54.15"
    assert s["sm_clock_mhz"] == 1980 and s["max_sm_clock_mhz"] == 1980
    assert s["memory_clock_mhz"] == 2619 and s["power_limit_w"] == 700.0
    assert s["persistence_mode"] == "Enabled"


def test_unsupported_fields_stay_unknown() -> None:
    s = parse_nvidia_smi("535.104.05, [N/A], 1410, N/A, 1593, [Not Supported], 400.00, 30, , ")
    assert s["sm_clock_mhz"] is None and s["memory_clock_mhz"] is None
    assert s["power_limit_w"] is None and s["max_sm_clock_mhz"] == 1410
    assert s["persistence_mode"] is None


def test_rocm_smi_json_is_read() -> None:
    doc = {
        "card0": {
            "sclk clock speed:": "(2100Mhz)",
            "mclk clock speed:": "(1300Mhz)",
            "Max Graphics Package Power (W)": "750.0",
        },
        "system": {"Driver version": "6.7.0"},
    }
    s = parse_rocm_smi(json.dumps(doc), 0)
    assert s == {
        "driver_version": "6.7.0",
        "sm_clock_mhz": 2100,
        "memory_clock_mhz": 1300,
        "power_limit_w": 750.0,
    }
    assert parse_rocm_smi("not json", 0)["driver_version"] is None


def test_relevant_env_keeps_only_what_changes_gemms_and_collectives() -> None:
    env = {"PYTORCH_TUNABLEOP_ENABLED": "1", "NCCL_ALGO": "NVLS", "HOME": "/root", "PATH": "/bin"}
    assert relevant_env(env) == {"NCCL_ALGO": "NVLS", "PYTORCH_TUNABLEOP_ENABLED": "1"}


def test_cpu_provenance_has_every_field_with_unknowns_as_none() -> None:
    prov = provenance(import_torch(), resolve_device("cpu"))
    for key in ("torch_version", "cuda_version", "rocm_version", "device_state", "env"):
        assert key in prov
    assert prov["device_state"]["driver_version"] is None  # a CPU has no GPU driver
    assert prov["device_state"]["power_limit_w"] is None
