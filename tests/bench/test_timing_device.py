"""Timers and device discovery."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest

from flopwise.bench.device import (
    FALLBACK_FLUSH_BYTES,
    DeviceInfo,
    accelerator_id,
    cpu_llc_bytes,
    import_torch,
    parse_device_spec,
    resolve_device,
)
from flopwise.bench.timing import IterationTimer, warm_up
from flopwise.errors import FlopwiseError


def test_timer_measures_a_known_sleep() -> None:
    torch = import_torch()
    timer = IterationTimer(torch, resolve_device("cpu"))
    flushed: list[int] = []
    t = timer.time(lambda: time.sleep(0.02), 3, before_each=lambda: flushed.append(1))
    assert len(t.seconds) == 3 and len(flushed) == 3
    assert all(0.019 <= s < 0.5 for s in t.seconds)
    assert t.min_s <= t.median_s


def test_timer_excludes_the_before_each_work() -> None:
    torch = import_torch()
    timer = IterationTimer(torch, resolve_device("cpu"))
    t = timer.time(lambda: None, 2, before_each=lambda: time.sleep(0.05))
    assert t.median_s < 0.04  # the 50 ms sleep happens outside the timed window


def test_warm_up_runs_for_about_the_time_asked() -> None:
    calls = warm_up(lambda: time.sleep(0.001), 0.02, lambda: None)
    assert calls >= 4


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("auto", ("auto", None)),
        ("cpu", ("cpu", None)),
        ("cuda:1", ("cuda", 1)),
        ("MPS", ("mps", None)),
    ],
)
def test_device_specs(text: str, parsed: tuple[str, int | None]) -> None:
    assert parse_device_spec(text) == parsed


@pytest.mark.parametrize("bad", ["tpu", "cuda:x", "cpu:1", "cuda:-1", ""])
def test_bad_device_spec_is_one_line(bad: str) -> None:
    with pytest.raises(FlopwiseError, match="valid: auto, cpu"):
        parse_device_spec(bad)


def test_asking_for_a_missing_accelerator_is_a_clear_error() -> None:
    torch = import_torch()
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(FlopwiseError, match="no cuda device available"):
        resolve_device("cuda:0")


def test_cpu_device_description() -> None:
    info = resolve_device("cpu")
    assert info.type == "cpu" and not info.is_accelerator
    assert info.compute_units and info.compute_units >= 1
    assert info.flush_bytes >= (info.llc_bytes or 0)
    assert accelerator_id(info) == "cpu"


def test_llc_from_sysfs_layout(tmp_path: Path) -> None:
    for idx, (level, size) in enumerate([(1, "48K"), (2, "1024K"), (3, "32768K")]):
        d = tmp_path / f"index{idx}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    assert cpu_llc_bytes(tmp_path) == (32 * 2**20, "sysfs L3")


def test_unknown_cache_falls_back_to_a_recorded_assumption() -> None:
    info = dataclasses.replace(resolve_device("cpu"), llc_bytes=None, llc_source="unknown")
    assert info.flush_bytes == FALLBACK_FLUSH_BYTES


def test_catalog_id_from_device_name() -> None:
    gpu = DeviceInfo("cuda:0", "cuda", 0, "NVIDIA H100 80GB HBM3", 132, 50 * 2**20, "x", None, "")
    assert accelerator_id(gpu) == "h100-sxm"
    odd = dataclasses.replace(gpu, name="Imaginary GPU 9000")
    assert accelerator_id(odd) is None


def test_missing_torch_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(FlopwiseError, match=r"pip install 'flopwise\[bench\]'"):
        import_torch()
