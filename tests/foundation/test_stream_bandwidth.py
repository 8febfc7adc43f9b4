"""A published STREAM-class HBM measurement (catalog stream_bw_gbps) is the achievable
bandwidth; a device without one falls back to a fraction of its peak, and a local
measurement still wins over the catalog."""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.assumptions import hardware_fallbacks
from flopwise.plan.efficiency import MEMORY_BW_FRACTION
from flopwise.plan.gemm_ceiling import bandwidth_bytes_per_s
from flopwise.units import GB


def test_mi300x_streams_at_the_published_babelstream_rate() -> None:
    hw = hardware_from_catalog("mi300x")
    # arXiv:2510.27583: BabelStream reaches 81% of the 5.3 TB/s peak
    assert hw.achievable_bw_gbps == pytest.approx(0.81 * 5300, rel=0.01)
    assert bandwidth_bytes_per_s(hw) == pytest.approx(hw.achievable_bw_gbps * GB)
    origin = hw.origins["achievable_bw_gbps"]
    assert origin.kind == "catalog" and "2510.27583" in origin.detail
    # nothing assumed about the bandwidth any more
    assert "achievable_bw_gbps" not in hardware_fallbacks(hw, "bf16")


def test_a_device_without_a_published_stream_rate_assumes_a_fraction_of_peak() -> None:
    hw = hardware_from_catalog("a100-sxm-80gb")
    assert hw.achievable_bw_gbps is None
    assert bandwidth_bytes_per_s(hw) == pytest.approx(hw.memory_bw_gbps * MEMORY_BW_FRACTION * GB)
    assert "achievable_bw_gbps" in hardware_fallbacks(hw, "bf16")


def test_a_local_measurement_overrides_the_published_rate() -> None:
    hw = hardware_from_catalog("mi300x").with_measurements(achievable_bw_gbps=(3900.0, "r1"))
    assert hw.achievable_bw_gbps == 3900.0
    assert hw.origins["achievable_bw_gbps"].kind == "measured"
