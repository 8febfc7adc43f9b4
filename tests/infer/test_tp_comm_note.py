"""Every tensor-parallel plan says where its all-reduce bandwidth comes from."""

from __future__ import annotations

from pathlib import Path

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer.comm import tp_comm_note
from flopwise.results.measured import apply_measurements
from flopwise.results.store import ResultStore


def test_one_gpu_has_no_collective() -> None:
    assert tp_comm_note(hardware_from_catalog("h100-sxm"), 1) is None


def test_nvlink_group_names_nccls_usable_link_rate() -> None:
    note = tp_comm_note(hardware_from_catalog("h100-sxm"), 4)
    assert note is not None
    # 450 GB/s NVLink x 0.80 (NCCL topo.h: 20.0 of 25 GB/s per link)
    assert "at 360 GB/s" in note and "NCCL's usable NVLink rate" in note


def test_mi300x_group_names_rccls_usable_link_rate() -> None:
    note = tp_comm_note(hardware_from_catalog("mi300x"), 8)
    assert note is not None
    # 448 GB/s xGMI x 0.75 (RCCL: 48 of 64 GB/s per link, ROCm/rccl#1210)
    assert "at 336 GB/s" in note and "RCCL's usable xGMI rate" in note


def test_pcie_group_names_the_node_types_published_row() -> None:
    note = tp_comm_note(hardware_from_catalog("l40s"), 4)
    assert note is not None
    assert "over PCIe" in note and "for 4 GPUs" in note


def test_a_measured_busbw_is_named_as_measured(isolated_home: Path) -> None:
    summary = {"op": "all_reduce", "busbw_gbps": 300.0, "group": "intra", "nodes": 1}
    ResultStore().add("comms", summary, {"rows": []}, accelerator="h100-sxm")
    note = tp_comm_note(apply_measurements(hardware_from_catalog("h100-sxm")), 8)
    assert note is not None
    assert "at 300 GB/s" in note and "measured with flopwise bench comms" in note


def test_the_plan_carries_the_note() -> None:
    from flopwise.plan.infer import InferJob, plan_inference
    from flopwise.workload.hf import load_model

    hw = hardware_from_catalog("mi300x")
    plan = plan_inference(load_model("llama-3.1-70b"), hw, InferJob(tp=8, weight_dtype="fp8"))
    assert any("RCCL's usable xGMI rate" in a for a in plan.assumptions)


def test_a_measured_fallback_rate_is_named_as_measured() -> None:
    from dataclasses import replace

    # no catalog link rate: the tier's measured fallback busbw stands in (roofline.tier_for)
    hw = replace(
        hardware_from_catalog("h100-sxm"), scaleup_bw_uni_gbps=None, intra_busbw_gbps=200.0
    )
    note = tp_comm_note(hw, 8)
    assert note is not None
    assert "at 200 GB/s" in note and "measured with flopwise bench comms" in note
