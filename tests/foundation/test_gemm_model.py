"""The GEMM shape model (plan/gemm.py) against published GEMM rates, with stated tolerances.

Golden numbers: DeepGEMM README "Performance" tables (H800 SXM5, FP8 block-scaled, Apr 2025)
and stas00/ml-engineering's MAMF table, as shipped in catalog/data/published/matmul_runs.csv.
"""

from __future__ import annotations

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.gemm import gemm_estimate
from flopwise.plan.roofline import gemm_time_s


def _h800_fp8(m: int, n: int, k: int, groups: int = 1, grouped: bool = False) -> float:
    hw = hardware_from_catalog("h800")
    return gemm_estimate(
        m, n, k, hw, "fp8", batch=groups, scaling="block128", grouped=grouped
    ).tflops


def test_large_fp8_gemm_reaches_the_ceiling() -> None:
    # DeepGEMM 4096x7168x16384: 1520 TFLOPS; within 10%
    assert _h800_fp8(4096, 7168, 16384) == pytest.approx(1520, rel=0.10)


def test_small_m_gemm_is_bound_by_reading_its_weights() -> None:
    hw = hardware_from_catalog("h800")
    est = gemm_estimate(64, 7168, 16384, hw, "fp8", scaling="block128")
    assert est.bound == "memory"
    # DeepGEMM 64x7168x16384: 336 TFLOPS (2668 GB/s); within 15%
    assert est.tflops == pytest.approx(336, rel=0.15)


def test_rate_rises_with_k() -> None:
    rates = [_h800_fp8(4096, 7168, k) for k in (512, 2048, 16384)]
    assert rates[0] < rates[1] < rates[2]
    # DeepGEMM: 4096x32768x512 runs at 775 of the 1520 of 4096x7168x16384 (0.51); within 20%
    ratio = _h800_fp8(4096, 32768, 512) / _h800_fp8(4096, 7168, 16384)
    assert ratio == pytest.approx(775 / 1520, rel=0.20)


def test_grouped_gemm_with_few_tokens_per_expert_is_slower() -> None:
    few = _h800_fp8(256, 4096, 7168, groups=4, grouped=True)
    many = _h800_fp8(8192, 4096, 7168, groups=4, grouped=True)
    assert few < many
    # DeepGEMM masked grouped 4 x 256 rows: 932; contiguous 4 x 8192 rows: 1346; within 20%
    assert few == pytest.approx(932, rel=0.20)
    assert many == pytest.approx(1346, rel=0.20)


def test_library_tile_choice_beats_one_fixed_tile_on_awkward_shapes() -> None:
    """A 4096x2112 output is 544 tiles of 128x128 (4.1 waves on 132 SMs): the library's other
    tiles and stream-K keep the rate above the single-tile quantization of 0.82."""
    hw = hardware_from_catalog("h100-sxm")
    est = gemm_estimate(4096, 2112, 7168, hw, "bf16")
    assert est.shape_efficiency > 0.9


def test_roofline_gemm_time_delegates_and_counts_the_launch() -> None:
    hw = hardware_from_catalog("h100-sxm")
    est = gemm_estimate(8192, 8192, 8192, hw, "bf16")
    assert gemm_time_s(8192, 8192, 8192, hw, "bf16") == est.time_s
    assert est.time_s > est.kernel_s
    # a large bf16 GEMM runs near the H100's published MAMF (794.5 TFLOPS)
    assert est.tflops == pytest.approx(794.5, rel=0.08)


def test_bad_shapes_and_scalings_are_one_line_errors() -> None:
    hw = hardware_from_catalog("h100-sxm")
    with pytest.raises(FlopwiseError, match="positive"):
        gemm_estimate(0, 1, 1, hw)
    with pytest.raises(FlopwiseError, match="valid"):
        gemm_estimate(64, 64, 64, hw, "fp8", scaling="per_row")


def test_validate_matmul_scores_every_row_and_labels_the_in_sample_ones() -> None:
    from flopwise.validate.matmul import published_matmul_rows, validate_matmul

    rep = validate_matmul()
    doc = rep.to_dict()
    assert len(rep.rows) + len(rep.skipped) == len(published_matmul_rows()) == 65
    assert len(rep.skipped) <= 1
    # DeepGEMM's dense rows are out of sample; its grouped rows are GROUPED_GEMM_EFFICIENCY's
    # fit rows, in sample and scored leave-one-out
    deepgemm = [r for r in rep.rows if r.id.startswith("deepgemm_")]
    assert not any(r.in_sample for r in deepgemm if not r.grouped)
    assert all(r.in_sample for r in deepgemm if r.grouped)
    assert sum(r.grouped for r in deepgemm) == 10
    assert all(r.predicted_leave_one_out is not None for r in deepgemm if r.grouped)
    assert all(r.in_sample for r in rep.rows if r.id.startswith("mamf_master_"))
    assert doc["n"] == sum(1 for r in rep.rows if not r.in_sample)
    assert doc["in_sample"]["n"] + doc["n"] == len(rep.rows)
    # the out-of-sample error the model was reported with (docs/validation); a regression
    # beyond 15% mean absolute error fails
    assert doc["mape_pct"] < 15.0
    for key in ("mape_pct", "max_abs_error_pct", "bias_pct", "rows", "skipped"):
        assert key in doc


def test_b200_nvfp4_gemms_match_their_published_rates() -> None:
    # pytorch/ao #2427 (cuBLAS NVFP4, 8192^3: 5.37 PFLOP/s) and flashinfer #1979 (TensorRT-LLM's
    # CUTLASS NVFP4 kernel, 1024x7168x4608: 3,370 TFLOPS), both on a B200: the 8192^3 row within
    # 10%, the CUTLASS one within 15% (its 224 tiles of 128x256 fill 1.5 waves of 148 SMs, and
    # the kernel's persistent scheduler splits no K to fill the second)
    from flopwise.validate.matmul import validate_matmul

    rows = {r.id: r for r in validate_matmul().rows}
    big = rows["nvfp4_ao2427_b200_8192cubed"]
    assert abs(big.error_pct) < 10.0
    cutlass = rows["nvfp4_fi1979_b200_1024x7168x4608"]
    assert abs(cutlass.error_pct) < 15.0
    assert rows["nvfp4_ao2427_b200_6144cubed"].in_sample


def test_fp4_gemms_pay_their_tail_wave_in_full() -> None:
    # TensorRT-LLM's and vLLM's SM100 NVFP4 CUTLASS GEMMs run cutlass::gemm::PersistentScheduler
    # (whole tiles, no split-K or stream-K): a shape whose tiles fill 1.5 waves keeps 1/3 of the
    # SMs idle in the second, where an FP8 GEMM of the same shape may stream-K the tail
    from flopwise.plan.gemm_constants import DATA_PARALLEL_DTYPES

    hw = hardware_from_catalog("b200")
    assert hw.compute_units == 148
    assert "fp4" in DATA_PARALLEL_DTYPES
    fp4 = gemm_estimate(1024, 7168, 4608, hw, "fp4", scaling="nvfp4")
    fp8 = gemm_estimate(1024, 7168, 4608, hw, "fp8")
    assert fp4.split_k == 1
    assert fp4.shape_efficiency < 0.85
    assert fp8.shape_efficiency > fp4.shape_efficiency
    # a shape of whole waves loses nothing to the scheduler
    whole = gemm_estimate(128 * 4, 256 * 37, 8192, hw, "fp4", scaling="nvfp4")
    assert whole.shape_efficiency > 0.95


def test_grouped_gemm_constant_is_what_its_rule_fits_on_its_rows() -> None:
    """GROUPED_GEMM_EFFICIENCY is the refit of its own rule on DeepGEMM's grouped rows (a
    hand-edited constant fails), it lowers the FLOP roof (a grouped kernel below the dense
    model of the same shapes, as DeepGEMM's grouped tables ran), and its leave-one-out error
    is reported beside the in-sample one."""
    from flopwise.plan.gemm_constants import GROUPED_GEMM_EFFICIENCY
    from flopwise.validate.matmul import validate_matmul

    rep = validate_matmul()
    fit = rep.to_dict()["grouped_fit"]
    assert fit["refit"] == pytest.approx(GROUPED_GEMM_EFFICIENCY, abs=1e-9)
    assert fit["shipped"] == GROUPED_GEMM_EFFICIENCY
    assert 0.7 < GROUPED_GEMM_EFFICIENCY < 1.0
    assert len(fit["fit_rows"]) == 10
    # DeepGEMM's grouped rows: each within 20% once the constant is refitted without it
    assert fit["leave_one_out"]["max_abs_error_pct"] < 20.0
    assert fit["leave_one_out"]["mape_pct"] < 10.0
    # the same shapes as one grouped kernel run slower than as a plain batch at the dense roof
    compute_bound = (8192, 4096, 7168)
    assert _h800_fp8(*compute_bound, groups=4, grouped=True) < _h800_fp8(*compute_bound, groups=4)
