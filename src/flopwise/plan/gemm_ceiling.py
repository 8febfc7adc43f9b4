"""What bounds every GEMM on a device: its large-GEMM ceiling (measured or published MAMF, or
a stand-in), its achievable memory bandwidth, and the kernel family its tile choices follow."""

from __future__ import annotations

from functools import cache

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.efficiency import (
    GEMM_FRACTION_WITHOUT_MAMF,
    HOPPER_OR_NEWER_PREFIXES,
    MEMORY_BW_FRACTION,
)
from flopwise.plan.gemm_constants import GPU_VENDORS
from flopwise.units import GB

#: Dtypes whose measured MAMF, as a fraction of its own peak, stands in for a dtype of the same
#: device with no MAMF (same tensor-core pipeline, same power and clock limits). Where both are
#: published the fp8 fraction is 0.87-1.03x the bf16 one (H100 0.71 vs 0.80, H200 0.73 vs
#: GH200 0.84, B200 0.76 vs 0.78, Gaudi 3 0.70 vs 0.68: ml-engineering MAMF table,
#: published/matmul_runs.csv), much closer than a generic fraction of peak: MI300X's measured
#: bf16 MAMF is 0.51 of its peak, not 0.80. (fp16 takes bf16's MAMF as it is: measured_mamf.)
#: FP4 takes FP8's fraction (the nearest scaled format on the same tensor cores), else bf16's,
#: scaled by FP4_STAND_IN_REFERENCES below.
MAMF_STAND_INS: dict[str, tuple[str, ...]] = {"fp8": ("bf16",), "fp4": ("fp8", "bf16")}

#: Devices whose catalog publishes both a dtype's MAMF and its stand-in dtype's, where the two
#: fractions of peak differ: the stand-in fraction is scaled by their ratio there. FP4 on B200
#: reaches 0.611 of its peak (catalog mamf_fp4_tflops: NVFP4 through cuBLAS, pytorch/ao #2427)
#: where FP8 reaches 0.763 (ml-engineering MAMF): 0.80x, outside the 0.87-1.03x band that lets
#: FP8 stand in for bf16 as it is. Block-scaled FP4 moves a scale byte per 16 elements and
#: writes BF16 at twice FP8's math rate; no device has reached its FP4 peak's FP8 fraction.
FP4_STAND_IN_REFERENCES: dict[str, tuple[str, ...]] = {"fp4": ("b200",)}


#: Devices with no matmul measurement of their own that share the matrix unit of one that has
#: one: the measured device's MAMF/peak stands in before the cross-vendor constant
#: (GEMM_FRACTION_WITHOUT_MAMF, the NVIDIA median). TPU v5p and v5e are one generation with the
#: same matrix units ("4 [MXUs] for TPU v4/5", 128x128 systolic arrays; only v6e moved to
#: 256x256: jax-ml/scaling-book tpus.md) under the same XLA compiler; v5e's XLA matmul rate is
#: measured (catalog mamf_bf16_tflops, JAX Pallas matmul guide).
#: Every other part of the GH100 die (Hopper SMs and tensor cores; the catalog lists each with
#: its own clock-derived peak) takes the H100 SXM's measured fractions: 0.803 bf16, 0.709 FP8
#: (ml-engineering MAMF table; this project's H100 measured 0.86 / 0.77 at 2026 software, an
#: FP8/bf16 ratio of 0.89 against 0.88, docs/measured-h100.md). The generic 0.80 had priced their FP8
#: GEMMs 13% above the die's own measured rate. Meta's 500 W Grand Teton H100 (HBM2e 96 GB) is
#: the SXM part; the H200's FP8 MAMF is its own, and ml-engineering says of its bf16 "H200 is
#: the same" as H100's. The PCIe and NVL cards run the same die below 700 W: their power cap
#: enters the training fraction (efficiency.power_clock_factor), not this ceiling.
#: Not the H800: its only published GEMMs (DeepGEMM's table, published/matmul_runs.csv, FP8 up
#: to 1,520 TFLOPS: the rate this project's own H100 measured, 8% above the catalog's H100 MAMF,
#: docs/measured-h100.md) are the rows GROUPED_GEMM_EFFICIENCY is fitted on against H800's
#: generic ceiling; moving that ceiling would refit the constant (0.88 -> 0.995) on the same
#: rows and make every MoE plan's grouped GEMMs 13% faster. It keeps the generic fraction.
#: Not the H20: its tensor rate is capped far below what its SMs' clock allows (148 TFLOPS
#: over 78 SMs), so no full-rate part's fraction of peak says anything about it.
MAMF_SIBLINGS: dict[str, str] = {
    "tpu-v5p": "tpu-v5e",
    "h100-hbm2e-96gb": "h100-sxm",
    "h200-sxm": "h100-sxm",
    "h100-pcie": "h100-sxm",
    "h100-nvl": "h100-sxm",
    "h200-nvl": "h100-sxm",
}


@cache
def _catalog_fraction(device: str, dtype: str) -> tuple[str, float] | None:
    """(dtype, MAMF/peak) the catalog's `device` measures for `dtype` or a stand-in dtype."""
    from flopwise.hardware import hardware_from_catalog

    hw = hardware_from_catalog(device)
    mamf = measured_mamf(hw, dtype)
    if mamf is not None and dtype in hw.peak_tflops and hw.peak(dtype) > 0:
        return dtype, mamf / hw.peak(dtype)
    return stand_in_fraction(hw, dtype)


def sibling_fraction(hw: Hardware, dtype: str) -> tuple[str, str, float] | None:
    """(sibling id, its dtype, its MAMF/peak) for a device with no MAMF of its own whose
    matrix-unit sibling (MAMF_SIBLINGS) has one."""
    sibling = MAMF_SIBLINGS.get(hw.id)
    if sibling is None:
        return None
    found = _catalog_fraction(sibling, dtype)
    return None if found is None else (sibling, found[0], found[1])


def measured_mamf(hw: Hardware, dtype: str) -> float | None:
    """The measured or published MAMF of `dtype` (fp16 runs on bf16's tensor cores), or None."""
    mamf = hw.matmul_tflops.get(dtype)
    if mamf is None and dtype == "fp16":
        mamf = hw.matmul_tflops.get("bf16")
    return mamf


@cache
def stand_in_ratio(
    dtype: str, other: str, exclude: str | None = None
) -> tuple[float, tuple[str, ...]] | None:
    """(mean of `dtype`'s MAMF/peak over `other`'s, the devices it comes from): the matrix-unit
    sibling of `exclude` (MAMF_SIBLINGS) where its catalog publishes both dtypes (a Grand Teton
    H100 with only its bf16 measured scales it by the H100 SXM's FP8/bf16, 0.88), else the
    FP4_STAND_IN_REFERENCES devices that publish both, `exclude` left out (a device never
    borrows its own ratio); None when none does."""
    from flopwise.hardware import hardware_from_catalog

    def ratio(device: str) -> float | None:
        hw = hardware_from_catalog(device)
        own, theirs = hw.matmul_tflops.get(dtype), hw.matmul_tflops.get(other)
        if own is None or theirs is None:
            return None
        if not hw.peak_tflops.get(dtype) or not hw.peak_tflops.get(other):
            return None
        return (own / hw.peak(dtype)) / (theirs / hw.peak(other))

    sibling = MAMF_SIBLINGS.get(exclude) if exclude is not None else None
    if sibling is not None and (same_unit := ratio(sibling)) is not None:
        return same_unit, (sibling,)
    ratios: list[float] = []
    devices: list[str] = []
    for device in FP4_STAND_IN_REFERENCES.get(dtype, ()):
        if device == exclude or (r := ratio(device)) is None:
            continue
        ratios.append(r)
        devices.append(device)
    if not ratios:
        return None
    return sum(ratios) / len(ratios), tuple(devices)


def stand_in_fraction(hw: Hardware, dtype: str) -> tuple[str, float] | None:
    """(dtype, MAMF/peak) of a measured sibling dtype on the same device, when `dtype` has no
    MAMF of its own (MAMF_STAND_INS), scaled by the two dtypes' ratio where the device's
    matrix-unit sibling (MAMF_SIBLINGS) or a reference device (FP4_STAND_IN_REFERENCES)
    publishes both (stand_in_ratio)."""
    for other in MAMF_STAND_INS.get(dtype, ()):
        mamf = hw.matmul_tflops.get(other)
        if mamf is not None and other in hw.peak_tflops and hw.peak(other) > 0:
            ratio = stand_in_ratio(dtype, other, hw.id)
            return other, mamf / hw.peak(other) * (1.0 if ratio is None else ratio[0])
    return None


def ceiling_tflops(hw: Hardware, dtype: str) -> float:
    """Large-GEMM ceiling: measured or published MAMF; else the same fraction of this dtype's
    peak that a measured sibling dtype reaches on this device (bf16 for fp8); else the fraction
    a device with the same matrix units measures (MAMF_SIBLINGS); else peak x
    GEMM_FRACTION_WITHOUT_MAMF."""
    mamf = measured_mamf(hw, dtype)
    if mamf is not None:
        return mamf
    sibling = stand_in_fraction(hw, dtype)
    if sibling is not None:
        return hw.peak(dtype) * sibling[1]
    same_unit = sibling_fraction(hw, dtype)
    if same_unit is not None:
        return hw.peak(dtype) * same_unit[2]
    return hw.peak(dtype) * fraction_without_mamf(hw, dtype)[0]


def fraction_without_mamf(hw: Hardware, dtype: str) -> tuple[float, str, tuple[str, ...]]:
    """(fraction of peak, the dtype whose ratio scales it, the reference devices) for a device
    with no MAMF of any dtype: GEMM_FRACTION_WITHOUT_MAMF, times `dtype`'s fraction over its
    stand-in dtype's on the reference devices where it has them (FP4_STAND_IN_REFERENCES), as a
    device with an FP8 MAMF scales it: the generic fraction is a 16-bit/FP8 one, and no device
    reaches it at its FP4 peak."""
    if dtype in FP4_STAND_IN_REFERENCES:
        for other in MAMF_STAND_INS.get(dtype, ()):
            ratio = stand_in_ratio(dtype, other, hw.id)
            if ratio is not None:
                return GEMM_FRACTION_WITHOUT_MAMF * ratio[0], other, ratio[1]
    return GEMM_FRACTION_WITHOUT_MAMF, dtype, ()


def bandwidth_bytes_per_s(hw: Hardware) -> float:
    """Achievable memory bandwidth: measured when known, else peak x MEMORY_BW_FRACTION."""
    if hw.achievable_bw_gbps:
        return hw.achievable_bw_gbps * GB
    if not hw.memory_bw_gbps:
        raise FlopwiseError(
            f"{hw.id} has no published memory bandwidth; measure it with flopwise bench memory"
        )
    return hw.memory_bw_gbps * GB * MEMORY_BW_FRACTION


def gpu_family(hw: Hardware) -> str:
    """'hopper' (wgmma, stream-K), 'gpu' (mma-class tiles), or 'other' (one 128 tile)."""
    acc = hw.accelerator
    if acc is None or not hw.compute_units:
        return "other" if hw.compute_units else "none"
    if acc.vendor.strip().lower() not in GPU_VENDORS:
        return "other"
    if acc.id.startswith(HOPPER_OR_NEWER_PREFIXES):
        return "hopper"
    return "gpu"
