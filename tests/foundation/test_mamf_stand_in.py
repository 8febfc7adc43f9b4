"""A dtype with no MAMF of its own borrows the fraction of peak a measured dtype of the same
device reaches, instead of a generic fraction of peak."""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.assumptions import hardware_fallbacks
from flopwise.plan.efficiency import GEMM_FRACTION_WITHOUT_MAMF
from flopwise.plan.gemm_ceiling import ceiling_tflops, stand_in_ratio


def test_fp8_without_mamf_reaches_the_fraction_of_peak_bf16_measures() -> None:
    hw = hardware_from_catalog("mi355x", None)
    assert "fp8" not in hw.matmul_tflops and "bf16" in hw.matmul_tflops
    bf16_fraction = hw.matmul_tflops["bf16"] / hw.peak("bf16")
    assert bf16_fraction < 0.7  # MI355X's measured bf16 MAMF: ~63% of peak
    assert ceiling_tflops(hw, "fp8") == pytest.approx(hw.peak("fp8") * bf16_fraction)
    assert ceiling_tflops(hw, "fp8") < hw.peak("fp8") * GEMM_FRACTION_WITHOUT_MAMF
    assumed = hardware_fallbacks(hw, "fp8")["matmul_tflops:fp8"]
    assert "bf16 MAMF" in assumed["source"]


def test_a_measured_mamf_is_used_as_it_is() -> None:
    hw = hardware_from_catalog("h100-sxm", None)
    assert ceiling_tflops(hw, "fp8") == hw.matmul_tflops["fp8"]
    assert "matmul_tflops:fp8" not in hardware_fallbacks(hw, "fp8")


def test_no_measured_sibling_keeps_the_generic_fraction() -> None:
    hw = hardware_from_catalog("l40s", None)
    assert not hw.matmul_tflops
    assert ceiling_tflops(hw, "fp8") == pytest.approx(hw.peak("fp8") * GEMM_FRACTION_WITHOUT_MAMF)


def test_mi300x_fp8_uses_amds_published_max_achievable_flops() -> None:
    # AMD ROCm blog "Measuring Max-Achievable FLOPs - Part 2" (2025-02-28), Table 1: MI300X
    # MAF FP8 1273 TFLOPs (BF16 708): 0.49 of the 2614.9 dense peak, below the 0.51 that the
    # bf16 stand-in (stas00's 668.4 of 1307.4) would have lent it.
    hw = hardware_from_catalog("mi300x", None)
    assert ceiling_tflops(hw, "fp8") == pytest.approx(1273.0)
    assert ceiling_tflops(hw, "fp8") / hw.peak("fp8") == pytest.approx(0.487, abs=0.005)
    assert "matmul_tflops:fp8" not in hardware_fallbacks(hw, "fp8")


def test_b200_fp4_uses_the_published_nvfp4_rate() -> None:
    # pytorch/ao #2427 on an NVIDIA B200: NVFP4 through cuBLAS, best of a square sweep 6144^3 in
    # 84.4 us = 5.50 PFLOP/s, 0.611 of the 9 PFLOPS dense peak; FP8's MAMF reaches 0.763 of its
    # peak, so FP8's fraction would have lent FP4 6,865 TFLOPS, 25% above any published run
    hw = hardware_from_catalog("b200", None)
    assert ceiling_tflops(hw, "fp4") == pytest.approx(5500.0)
    assert ceiling_tflops(hw, "fp4") / hw.peak("fp4") == pytest.approx(0.611, abs=0.001)
    assert "matmul_tflops:fp4" not in hardware_fallbacks(hw, "fp4")
    assert "pytorch/ao" in hw.origins["matmul_tflops:fp4"].detail


def test_fp4_without_mamf_takes_fp8_s_fraction_scaled_as_on_b200() -> None:
    # GB200 (the same die, its own FP8 MAMF 3615.6 of 5000 = 0.723) publishes no FP4 GEMM: its
    # FP4 ceiling is 10,000 x 0.723 x (0.611 / 0.763), not 10,000 x 0.723
    ratio = stand_in_ratio("fp4", "fp8")
    assert ratio is not None and ratio[1] == ("b200",)
    assert ratio[0] == pytest.approx((5500 / 9000) / (3432.5 / 4500), rel=1e-6)
    assert 0.75 < ratio[0] < 0.85
    gb200 = hardware_from_catalog("gb200", None)
    assert "fp4" not in gb200.matmul_tflops
    want = gb200.peak("fp4") * (3615.6 / 5000) * ratio[0]
    assert ceiling_tflops(gb200, "fp4") == pytest.approx(want)
    assert ceiling_tflops(gb200, "fp4") < gb200.peak("fp4") * 3615.6 / 5000
    source = hardware_fallbacks(gb200, "fp4")["matmul_tflops:fp4"]["source"]
    assert "fp8 MAMF" in source and "b200" in source and "FP4_STAND_IN_REFERENCES" in source
    # a user's own FP8 measurement is scaled the same way; their FP4 measurement wins outright
    measured = gb200.with_measurements(**{"matmul_tflops:fp8": (3000.0, "r1")})
    assert ceiling_tflops(measured, "fp4") == pytest.approx(10000 * 3000 / 5000 * ratio[0])
    own = gb200.with_measurements(**{"matmul_tflops:fp4": (4000.0, "r2")})
    assert ceiling_tflops(own, "fp4") == 4000.0


def test_fp4_without_any_mamf_scales_the_generic_fraction_as_on_b200() -> None:
    # GB300 publishes no MAMF at all: its FP8 and 16-bit GEMMs take the generic 0.80 of peak,
    # and its FP4 ones that fraction x B200's FP4/FP8 ratio, as a device with an FP8 MAMF does
    # (15,000 x 0.64 = 9,614, not 12,000)
    ratio = stand_in_ratio("fp4", "fp8")
    assert ratio is not None
    gb300 = hardware_from_catalog("gb300", None)
    assert not gb300.matmul_tflops
    assert ceiling_tflops(gb300, "fp8") == pytest.approx(gb300.peak("fp8") * 0.80)
    want = gb300.peak("fp4") * GEMM_FRACTION_WITHOUT_MAMF * ratio[0]
    assert ceiling_tflops(gb300, "fp4") == pytest.approx(want)
    source = hardware_fallbacks(gb300, "fp4")["matmul_tflops:fp4"]["source"]
    assert "GEMM_FRACTION_WITHOUT_MAMF" in source and "b200" in source
    # B200 itself, the reference, never borrows its own ratio; a device without an FP4 peak
    # keeps the generic fraction for every dtype
    assert ceiling_tflops(hardware_from_catalog("b200", None), "fp4") == pytest.approx(5500.0)
    l40s = hardware_from_catalog("l40s", None)
    assert ceiling_tflops(l40s, "fp8") == pytest.approx(l40s.peak("fp8") * 0.80)


def test_fp4_gemms_take_the_scaled_low_precision_fraction() -> None:
    # NVFP4 GEMMs carry block scales and a dequantizing epilogue like FP8's: the engine's
    # fp8_gemm_fraction applies to both, its 16-bit gemm_fraction to neither; all of them on top
    # of the share of the ceiling the die sustains (plan/sustained.py), as in training
    from dataclasses import replace

    from flopwise.plan.infer.constants import get_engine
    from flopwise.plan.infer.latency import make_rates
    from flopwise.plan.sustained import SUSTAINED_COMPUTE_FRACTION_DEFAULT

    hw = hardware_from_catalog("b200", None)
    trt = replace(get_engine("tensorrt-llm"), gemm_fraction=0.9, fp8_gemm_fraction=0.7)
    sustained = SUSTAINED_COMPUTE_FRACTION_DEFAULT  # no fitted fraction for B200's die
    for dtype in ("fp8", "fp4"):
        rates = make_rates(hw, trt, dtype, dtype)
        assert rates.gemm_flops_s == pytest.approx(
            ceiling_tflops(hw, dtype) * 1e12 * sustained * 0.7
        )
    bf16 = make_rates(hw, trt, "bf16", "bf16")
    assert bf16.gemm_flops_s == pytest.approx(ceiling_tflops(hw, "bf16") * 1e12 * sustained * 0.9)


def test_serving_gemms_run_at_the_die_s_sustained_share() -> None:
    # the power cap's measured share on a die with a sustained-load run (GH100), else the fitted
    # fraction a training step's GEMMs run at, slowed like training's on a part capped below its
    # die's reference power (A100 PCIe 300 W against the SXM's 400 W)
    from flopwise.plan.efficiency import power_clock_factor
    from flopwise.plan.infer.constants import get_engine
    from flopwise.plan.infer.latency import make_rates
    from flopwise.plan.sustained import POWER_CAPPED_SHARE, SUSTAINED_COMPUTE_FRACTION

    trt = get_engine("tensorrt-llm")
    h100 = hardware_from_catalog("h100-sxm", None)
    got = make_rates(h100, trt, "bf16", "bf16").gemm_flops_s
    assert got == pytest.approx(
        ceiling_tflops(h100, "bf16")
        * 1e12
        * POWER_CAPPED_SHARE["gh100"]["gemm"]
        * trt.gemm_fraction
    )
    a100 = hardware_from_catalog("a100-sxm-80gb", None)
    assert make_rates(a100, trt, "bf16", "bf16").gemm_flops_s == pytest.approx(
        ceiling_tflops(a100, "bf16")
        * 1e12
        * SUSTAINED_COMPUTE_FRACTION["ga100"]
        * trt.gemm_fraction
    )
    sxm = hardware_from_catalog("a100-sxm-80gb", None)
    pcie = hardware_from_catalog("a100-pcie-80gb", None)
    ratio = (make_rates(pcie, trt, "bf16", "bf16").gemm_flops_s / ceiling_tflops(pcie, "bf16")) / (
        make_rates(sxm, trt, "bf16", "bf16").gemm_flops_s / ceiling_tflops(sxm, "bf16")
    )
    assert ratio == pytest.approx(power_clock_factor(300.0, "ga100"))
    assert ratio < 1.0


def test_tpu_v5p_borrows_v5e_s_measured_xla_matmul_fraction() -> None:
    # v5p publishes no matmul measurement; v5e (same 128x128 MXUs, four per TensorCore) has
    # XLA's 181.8 of 197 TFLOPS: v5p's ceiling is 459 x 0.923, not the NVIDIA-median 0.80
    v5p = hardware_from_catalog("tpu-v5p", None)
    assert not v5p.matmul_tflops
    assert ceiling_tflops(v5p, "bf16") == pytest.approx(459 * 181.8 / 197, rel=1e-3)
    source = hardware_fallbacks(v5p, "bf16")["matmul_tflops:bf16"]["source"]
    assert "tpu-v5e" in source and "same matrix units" in source
    # a device without a sibling keeps the generic fraction; a measured one its own
    assert ceiling_tflops(hardware_from_catalog("tpu-v4", None), "bf16") == pytest.approx(
        hardware_from_catalog("tpu-v4", None).peak("bf16") * GEMM_FRACTION_WITHOUT_MAMF
    )
    measured = v5p.with_measurements(**{"matmul_tflops:bf16": (400.0, "r1")})
    assert ceiling_tflops(measured, "bf16") == 400.0


@pytest.mark.parametrize("part", ["h100-hbm2e-96gb", "h100-pcie", "h100-nvl", "h200-nvl"])
def test_gh100_parts_without_a_mamf_take_the_h100_sxm_measured_fractions(part: str) -> None:
    # one die, one tensor core: the H100 SXM's measured MAMF over its peak (ml-engineering:
    # bf16 794.5 and FP8 1402.6 of 989.4 / 1978.9) stands in, not the generic 0.80, which put
    # their FP8 GEMMs 13% above what the die itself measures
    sxm = hardware_from_catalog("h100-sxm", None)
    hw = hardware_from_catalog(part, None)
    assert not hw.matmul_tflops
    for dtype in ("bf16", "fp8"):
        own = sxm.matmul_tflops[dtype] / sxm.peak(dtype)
        assert ceiling_tflops(hw, dtype) == pytest.approx(hw.peak(dtype) * own)
        source = hardware_fallbacks(hw, dtype)[f"matmul_tflops:{dtype}"]["source"]
        assert "h100-sxm" in source and "same matrix units" in source
    assert ceiling_tflops(hw, "fp8") < 0.9 * hw.peak("fp8") * GEMM_FRACTION_WITHOUT_MAMF


def test_h200_keeps_its_own_fp8_mamf_and_borrows_the_h100_bf16_one() -> None:
    h200 = hardware_from_catalog("h200-sxm", None)
    sxm = hardware_from_catalog("h100-sxm", None)
    assert ceiling_tflops(h200, "fp8") == h200.matmul_tflops["fp8"]
    assert ceiling_tflops(h200, "bf16") == pytest.approx(
        h200.peak("bf16") * sxm.matmul_tflops["bf16"] / sxm.peak("bf16")
    )


@pytest.mark.parametrize("part", ["h800", "h20"])
def test_h800_and_h20_keep_the_generic_fraction(part: str) -> None:
    # H800: its only published GEMMs (DeepGEMM's) are what GROUPED_GEMM_EFFICIENCY is fitted
    # against; H20: a tensor rate capped far below its SMs' clock (gemm_ceiling.MAMF_SIBLINGS)
    hw = hardware_from_catalog(part, None)
    assert ceiling_tflops(hw, "fp8") == pytest.approx(hw.peak("fp8") * GEMM_FRACTION_WITHOUT_MAMF)


def test_a_measured_bf16_on_a_gh100_part_lends_fp8_the_die_s_fp8_over_bf16_ratio() -> None:
    # a Grand Teton H100 that measured only its bf16 (bench matmul, --measured): its FP8
    # ceiling is its own bf16 fraction times the H100 SXM's FP8/bf16 fraction (0.709 / 0.803),
    # not the bf16 fraction as it is, which would put FP8 12% above what the die reaches
    sxm = hardware_from_catalog("h100-sxm", None)
    die = (sxm.matmul_tflops["fp8"] / sxm.peak("fp8")) / (
        sxm.matmul_tflops["bf16"] / sxm.peak("bf16")
    )
    assert die == pytest.approx(0.88, abs=0.01)
    hw = hardware_from_catalog("h100-hbm2e-96gb", None).with_measurements(
        **{"matmul_tflops:bf16": (850.0, "r1")}
    )
    assert ceiling_tflops(hw, "fp8") == pytest.approx(
        hw.peak("fp8") * 850.0 / hw.peak("bf16") * die
    )
    source = hardware_fallbacks(hw, "fp8")["matmul_tflops:fp8"]["source"]
    assert "h100-sxm" in source and "MAMF_SIBLINGS" in source
    # a device without a sibling keeps its own bf16 fraction as the FP8 stand-in
    mi = hardware_from_catalog("mi355x", None)
    assert ceiling_tflops(mi, "fp8") == pytest.approx(
        mi.peak("fp8") * mi.matmul_tflops["bf16"] / mi.peak("bf16")
    )
