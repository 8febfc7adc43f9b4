"""BabelStream kernels through torch on the CPU, tiny arrays."""

from __future__ import annotations

import pytest

from flopwise.bench.device import resolve_device
from flopwise.bench.memory import (
    BYTES_PER_ELEMENT_MOVED,
    KERNELS,
    MIN_ARRAY_BYTES,
    MemoryConfig,
    default_array_bytes,
    run_memory,
)
from flopwise.errors import FlopwiseError


def test_memory_run_reports_every_kernel_with_babelstream_bytes() -> None:
    run = run_memory(MemoryConfig(device="cpu", array_bytes=2**20, iterations=3))
    n = 2**20 // 4
    assert set(run.kernels) == set(KERNELS)
    for name, k in run.kernels.items():
        assert k.bytes_moved == BYTES_PER_ELEMENT_MOVED[name] * n * 4
        assert k.runs == 3 and k.min_s <= k.median_s
        assert k.gbps == pytest.approx(k.bytes_moved / k.min_s / 1e9)
    s = run.summary()
    for name in KERNELS:
        assert s[f"{name}_gbps"] > 0
    assert s["h2d_gbps"] is None and s["spec_gbps"] is None and s["efficiency"] is None
    assert BYTES_PER_ELEMENT_MOVED == {"copy": 2, "mul": 2, "add": 3, "triad": 3, "dot": 2}


def test_default_arrays_are_well_beyond_the_last_level_cache() -> None:
    info = resolve_device("cpu")
    size = default_array_bytes(info)
    assert size >= MIN_ARRAY_BYTES
    assert size >= 4 * (info.llc_bytes or 0)


def test_interrupted_memory_run_keeps_completed_rounds() -> None:
    def stop(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    run = run_memory(MemoryConfig(device="cpu", array_bytes=2**16, iterations=10), stop)
    assert run.status == "interrupted"
    assert all(k.runs == 2 for k in run.kernels.values())  # first round is the warm-up


def test_bad_memory_config() -> None:
    with pytest.raises(FlopwiseError, match="valid: fp32, fp64"):
        MemoryConfig(dtype="fp8")
    with pytest.raises(FlopwiseError, match="at least 4 KiB"):
        MemoryConfig(array_bytes=10)
