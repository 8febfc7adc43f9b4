"""Chips people rent now (RTX PRO 6000, A10G, V100, T4, H20) and block-scaled formats."""

from __future__ import annotations

import pytest

from flopwise.catalog.accelerators import get_accelerator
from flopwise.catalog.systems import get_system
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.job import resolve_precision
from flopwise.workload.hf import load_model
from flopwise.workload.params import count_params


@pytest.mark.parametrize(
    ("name", "acc_id", "memory_gb", "bw_gbps"),
    [
        # NVIDIA V100 datasheet (SXM2 32 GB): 900 GB/s; T4 datasheet: 16 GB, 320 GB/s;
        # A10G: 24 GB GDDR6, 600 GB/s; H20: 96 GB, 4.0 TB/s; RTX PRO 6000 Server: 96 GB GDDR7
        ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb", 32, 900),
        ("Tesla T4", "t4", 16, 320),
        ("NVIDIA A10G", "a10g", 24, 600),
        ("NVIDIA H20", "h20", 96, 4000),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000", 96, 1597),
    ],
)
def test_new_accelerators_resolve_by_device_name(
    name: str, acc_id: str, memory_gb: float, bw_gbps: float
) -> None:
    acc = get_accelerator(name)
    assert acc.id == acc_id
    hw = hardware_from_catalog(acc_id)
    assert hw.memory_bytes == pytest.approx(memory_gb * 1e9)
    assert hw.memory_bw_gbps == bw_gbps
    catalog = [o for o in hw.origins.values() if o.kind == "catalog"]
    assert catalog and all("https://" in o.detail for o in catalog)


@pytest.mark.parametrize(
    ("system", "acc_id"),
    [
        ("aws-p3dn", "v100-sxm2-32gb"),
        ("aws-g4dn-metal", "t4"),
        ("aws-g5-48xlarge", "a10g"),
        ("hgx-h20", "h20"),
        ("rtx-pro-server", "rtx-pro-6000"),
    ],
)
def test_node_types(system: str, acc_id: str) -> None:
    s = get_system(system)
    assert s.accelerator == acc_id and s.gpus_per_node == 8


def _job(weight: str, act: str | None = None) -> InferJob:
    return InferJob(batch=8, input_len=1024, output_len=128, weight_dtype=weight, act_dtype=act)


@pytest.mark.parametrize(("name", "stored"), [("nvfp4", "fp4"), ("fp4", "fp4"), ("mxfp4", "mxfp4")])
def test_fp4_weights_run_w4a4_on_blackwell(name: str, stored: str) -> None:
    for acc in ("b200", "rtx-pro-6000"):
        p = resolve_precision(_job(name), hardware_from_catalog(acc))
        assert (p.weight, p.act, p.mode) == (stored, "fp4", "weight+activation")
        assert ("MXFP4" in p.note) == (name == "mxfp4")


def test_fp4_weights_carry_their_block_scales() -> None:
    """NVFP4 stores one E4M3 scale per 16 elements, MXFP4 one E8M0 per 32: the same model's
    weights differ by (1/16 - 1/32) byte for every quantized (non-vocabulary) parameter."""
    model = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("b200")
    nv = plan_inference(model, hw, _job("nvfp4")).to_dict()["memory"]["weights_gib"]
    mx = plan_inference(model, hw, _job("mxfp4")).to_dict()["memory"]["weights_gib"]
    c = count_params(model)
    quantized = c.total - c.embedding - c.lm_head
    assert (nv - mx) * 2**30 == pytest.approx(quantized * (1 / 16 - 1 / 32), rel=1e-6)


def test_fp4_weights_hold_half_the_bytes_of_fp8() -> None:
    model = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("b200")
    fp4 = plan_inference(model, hw, _job("nvfp4")).to_dict()["memory"]["weights_gib"]
    fp8 = plan_inference(model, hw, _job("fp8")).to_dict()["memory"]["weights_gib"]
    # the quantised layers halve (embeddings and norms may stay 16-bit in the planner)
    assert fp8 / 2 < fp4 < 0.6 * fp8
    assert fp4 * 2**30 > 0.5 * count_params(model).total


@pytest.mark.parametrize("acc", ["h100-sxm", "h20", "a100-sxm-80gb", "a10g", "mi300x"])
@pytest.mark.parametrize("weight", ["nvfp4", "mxfp8"])
def test_block_scaled_formats_are_refused_without_blackwell(acc: str, weight: str) -> None:
    with pytest.raises(FlopwiseError, match="needs Blackwell-class tensor cores"):
        resolve_precision(_job(weight), hardware_from_catalog(acc))


def test_mxfp8_runs_at_the_fp8_rate_on_blackwell() -> None:
    p = resolve_precision(_job("mxfp8"), hardware_from_catalog("b200"))
    assert (p.weight, p.act) == ("mxfp8", "fp8") and "MXFP8" in p.note


def test_volta_and_turing_have_no_bf16() -> None:
    for acc in ("v100-sxm2-32gb", "t4"):
        with pytest.raises(FlopwiseError, match="no matmul rate for bf16"):
            resolve_precision(_job("bf16"), hardware_from_catalog(acc))
        assert resolve_precision(_job("fp16"), hardware_from_catalog(acc)).act == "fp16"


def test_fp4_on_amd_says_that_cdna4_takes_mxfp4() -> None:
    hw = hardware_from_catalog("mi355x")
    p = resolve_precision(_job("fp4"), hw)
    assert p.weight == "fp4" and "mxfp4" in p.note
    assert "NVFP4" not in resolve_precision(_job("mxfp4"), hw).note
    assert resolve_precision(_job("fp4"), hardware_from_catalog("b200")).note == ""
