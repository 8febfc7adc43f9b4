"""The accelerator code paths, exercised on the CPU with fake torch modules and descriptions.

Each test fails on the code before issue 13: device activation on torch 2.6 (set_device_idx)
and < 2.6 (no torch.accelerator), fp8 on MI300-class, the cache flush, the NT layout.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from flopwise.bench import device as device_mod
from flopwise.bench.device import (
    FALLBACK_FLUSH_BYTES,
    DeviceInfo,
    activate,
    import_torch,
    resolve_device,
    set_current_device,
)
from flopwise.bench.matmul import MatmulKernel, fp8_torch_name, parse_dtype
from flopwise.errors import FlopwiseError

MIB = 2**20


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def setter(self, name: str) -> Any:
        return lambda index: self.calls.append((name, index))


def _fake_torch(accelerator: Any, **backends: Any) -> Any:
    return SimpleNamespace(
        accelerator=accelerator, get_device_module=backends.__getitem__, **backends
    )


def _acc(kind: str | None, **setters: Any) -> Any:
    current = None if kind is None else SimpleNamespace(type=kind)
    return SimpleNamespace(current_accelerator=lambda: current, **setters)


def test_torch_2_7_uses_set_device_index() -> None:
    rec = _Recorder()
    torch = _fake_torch(
        _acc("cuda", set_device_index=rec.setter("index"), set_device_idx=rec.setter("idx"))
    )
    set_current_device(torch, "cuda", 3)
    assert rec.calls == [("index", 3)]


def test_torch_2_6_uses_set_device_idx() -> None:
    # torch 2.6's torch.accelerator has set_device_idx and no set_device_index (the old code
    # called set_device_index and failed with AttributeError)
    rec = _Recorder()
    torch = _fake_torch(_acc("cuda", set_device_idx=rec.setter("idx")))
    set_current_device(torch, "cuda", 1)
    assert rec.calls == [("idx", 1)]


def test_torch_before_accelerator_uses_the_backend_module() -> None:
    rec = _Recorder()
    cuda = SimpleNamespace(set_device=rec.setter("cuda.set_device"))
    torch = SimpleNamespace(cuda=cuda, get_device_module=lambda kind: {"cuda": cuda}[kind])
    set_current_device(torch, "cuda", 2)
    assert rec.calls == [("cuda.set_device", 2)]


def test_another_accelerator_type_falls_back_to_its_module() -> None:
    rec = _Recorder()
    xpu = SimpleNamespace(set_device=rec.setter("xpu.set_device"))
    torch = _fake_torch(_acc("cuda", set_device_index=rec.setter("index")), xpu=xpu)
    set_current_device(torch, "xpu", 0)
    assert rec.calls == [("xpu.set_device", 0)]


def test_cpu_and_mps_have_nothing_to_select_and_no_setter_is_an_error() -> None:
    set_current_device(SimpleNamespace(), "cpu", None)
    set_current_device(SimpleNamespace(), "mps", None)
    torch = SimpleNamespace(get_device_module=lambda kind: SimpleNamespace())
    with pytest.raises(FlopwiseError, match="cannot select hpu:1"):
        set_current_device(torch, "hpu", 1)


def test_bench_memory_makes_the_measured_device_current(monkeypatch: pytest.MonkeyPatch) -> None:
    from flopwise.bench import memory

    seen: list[DeviceInfo] = []
    monkeypatch.setattr(memory, "activate", lambda torch, info: seen.append(info))
    info = resolve_device("cpu")
    memory.run_memory(
        memory.MemoryConfig(device="cpu", array_bytes=64 * 1024, iterations=1, warmup=0),
        info=info,
    )
    assert seen == [info]


def test_activate_selects_the_index_of_an_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int | None]] = []
    monkeypatch.setattr(device_mod, "set_current_device", lambda t, k, i: calls.append((k, i)))
    gpu = dataclasses.replace(resolve_device("cpu"), spec="cuda:1", type="cuda", index=1)
    activate(None, gpu)
    activate(None, resolve_device("cpu"))
    assert calls == [("cuda", 1)]


def _gpu(name: str, backend: str, arch: str | None) -> DeviceInfo:
    return DeviceInfo(
        spec="cuda:0", type="cuda", index=0, name=name, compute_units=304, llc_bytes=4 * MIB,
        llc_source="cuda device properties", memory_bytes=192 * 2**30,
        backend_version=backend, arch=arch,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "backend", "arch", "expected"),
    [
        ("AMD Instinct MI300X", "hip 6.2.41133", "gfx942", "float8_e4m3fnuz"),
        ("AMD Instinct MI325X", "hip 6.3", "gfx942", "float8_e4m3fnuz"),
        ("AMD Instinct MI300X", "hip 6.2", None, "float8_e4m3fnuz"),  # arch unknown: by name
        ("AMD Instinct MI355X", "hip 7.0", "gfx950", "float8_e4m3fn"),  # OCP fp8 on CDNA 4
        ("NVIDIA H100 80GB HBM3", "cuda 12.4", "sm_90", "float8_e4m3fn"),
    ],
)
def test_fp8_dtype_follows_the_vendor(
    name: str, backend: str, arch: str | None, expected: str
) -> None:
    assert fp8_torch_name(_gpu(name, backend, arch)) == expected


def test_flush_is_at_least_256_mib_and_twice_the_last_level_cache() -> None:
    # MI300X: L2 4 MB reported; its 256 MB Infinity Cache is not. The old flush was 2 x L2 = 8 MB.
    assert _gpu("AMD Instinct MI300X", "hip 6.2", "gfx942").flush_bytes == FALLBACK_FLUSH_BYTES
    assert FALLBACK_FLUSH_BYTES == 256 * MIB
    big = dataclasses.replace(_gpu("x", "cuda 12", None), llc_bytes=192 * MIB)
    assert big.flush_bytes == 384 * MIB
    assert dataclasses.replace(big, llc_bytes=None).flush_bytes == 256 * MIB


def test_matmul_inputs_are_in_the_nt_layout() -> None:
    torch = import_torch()
    kernel = MatmulKernel(torch, resolve_device("cpu"), parse_dtype("fp32"))
    a, b, c = kernel.prepare(64, 32, 16)
    assert tuple(a.shape) == (64, 16) and a.is_contiguous()
    # B is (K x N) seen through the transpose of an (N x K) row-major weight: y = x W^T
    assert tuple(b.shape) == (16, 32) and not b.is_contiguous() and b.t().is_contiguous()
    out = kernel.run_once(a, b, c)
    assert torch.allclose(out, a @ b.t().contiguous().t())
