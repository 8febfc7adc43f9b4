"""Which device to measure, what it is, and how to wait for it.

Everything goes through torch's device-agnostic APIs (``torch.accelerator``,
``torch.get_device_module``, ``torch.Event``) so CUDA, ROCm, XPU, HPU and MPS share one path;
the CPU is a device like the others. torch is imported only when a benchmark runs.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.errors import FlopwiseError

INSTALL_HINT = "pip install 'flopwise[bench]'"
DEVICE_TYPES: tuple[str, ...] = ("cpu", "cuda", "xpu", "hpu", "mps")

#: Smallest cache-flush buffer: the 256 MiB mamf-finder.py zeroes between iterations on every
#: device (stas00/ml-engineering compute/accelerator/benchmarks/mamf-finder.py). It also covers
#: caches the device properties do not report, such as MI300X's 256 MB Infinity Cache (AMD
#: CDNA 3 white paper), which sits behind the 4 MB L2 that `L2_cache_size` gives.
FALLBACK_FLUSH_BYTES = 256 * 2**20

#: The flush buffer is at least this many times the last-level cache, so nothing of the inputs
#: survives: max(FALLBACK_FLUSH_BYTES, FLUSH_CACHE_MULTIPLE x LLC).
FLUSH_CACHE_MULTIPLE = 2

_SPEC = re.compile(r"^(auto|cpu|cuda|xpu|hpu|mps)(?::(\d+))?$")


def import_torch() -> Any:
    """Import torch, or fail with one line saying how to install it."""
    try:
        with warnings.catch_warnings():
            # CPU wheels warn at import when numpy is absent; the benchmarks never need numpy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        raise FlopwiseError(f"the benchmarks need PyTorch: {INSTALL_HINT}") from None
    return torch


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One device as the benchmarks see it. None = the backend does not say."""

    spec: str  # "cpu", "cuda:0", ...
    type: str
    index: int | None
    name: str
    compute_units: int | None  # SMs, CUs, Xe cores; CPU: threads torch uses
    llc_bytes: int | None  # last-level cache (GPU L2, CPU L3)
    llc_source: str
    memory_bytes: int | None
    backend_version: str
    arch: str | None = None  # e.g. "gfx942" (ROCm gcnArchName) or "sm_90"; None if unknown

    @property
    def is_accelerator(self) -> bool:
        return self.type != "cpu"

    @property
    def is_rocm(self) -> bool:
        return self.backend_version.startswith("hip")

    @property
    def flush_bytes(self) -> int:
        """Buffer written between timed iterations to evict the caches:
        max(256 MiB, 2 x last-level cache), as mamf-finder flushes 256 MiB on every device."""
        return max(FALLBACK_FLUSH_BYTES, FLUSH_CACHE_MULTIPLE * (self.llc_bytes or 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.spec,
            "device_name": self.name,
            "compute_units": self.compute_units,
            "llc_bytes": self.llc_bytes,
            "llc_source": self.llc_source,
            "flush_bytes": self.flush_bytes,
            "memory_bytes": self.memory_bytes,
            "backend_version": self.backend_version,
            "arch": self.arch,
        }


def parse_device_spec(text: str) -> tuple[str, int | None]:
    """'cuda:1' -> ('cuda', 1); bad text is a one-line error."""
    m = _SPEC.match(text.strip().lower())
    if not m or (m.group(1) in ("auto", "cpu") and m.group(2) is not None):
        raise FlopwiseError(
            f"unknown device {text!r}; valid: auto, cpu, cuda[:i], xpu[:i], hpu[:i], mps"
        )
    return m.group(1), None if m.group(2) is None else int(m.group(2))


def _load_backend(torch: Any, kind: str) -> Any | None:
    """The torch device module for kind, importing vendor plug-ins (Gaudi) when needed."""
    if kind == "hpu" and not hasattr(torch, "hpu"):
        try:
            import habana_frameworks.torch.core  # noqa: F401
        except ImportError:
            return None
    try:
        return torch.get_device_module(kind)
    except (RuntimeError, AttributeError):
        return getattr(torch, kind, None)  # torch < 2.3 has no get_device_module


def _available(torch: Any, kind: str) -> int:
    """How many devices of a kind this process can see (0 when the backend is missing)."""
    if kind == "cpu":
        return 1
    mod = _load_backend(torch, kind)
    if mod is None:
        return 0
    try:
        if not mod.is_available():
            return 0
        count = mod.device_count() if hasattr(mod, "device_count") else 1
    except (RuntimeError, AssertionError):
        return 0
    return int(count)


def accelerator_type(torch: Any) -> str | None:
    """The accelerator type torch would use, or None on a CPU-only machine."""
    current = getattr(torch, "accelerator", None)
    if current is not None:
        acc = current.current_accelerator()
        if acc is not None:
            return str(acc.type)
    for kind in ("cuda", "xpu", "hpu", "mps"):
        if _available(torch, kind):
            return kind
    return None


def resolve_device(text: str = "auto") -> DeviceInfo:
    """Pick and describe a device: auto = the accelerator when there is one, else the CPU."""
    kind, index = parse_device_spec(text)
    torch = import_torch()
    if kind == "auto":
        kind = accelerator_type(torch) or "cpu"
    if kind == "cpu":
        return _cpu_info(torch)
    count = _available(torch, kind)
    if count == 0:
        found = accelerator_type(torch)
        hint = f"found: {found}" if found else "this machine has none (use --device cpu)"
        raise FlopwiseError(f"no {kind} device available; {hint}")
    idx = 0 if index is None else index
    if idx >= count:
        raise FlopwiseError(f"device {kind}:{idx} does not exist; {kind} has {count} device(s)")
    return _accelerator_info(torch, kind, idx)


def local_devices(kind: str | None = None) -> list[str]:
    """Specs of every local accelerator of one type (`--devices all`)."""
    torch = import_torch()
    kind = kind or accelerator_type(torch)
    if kind is None or kind == "cpu":
        return []
    if kind == "mps":
        return ["mps"] if _available(torch, "mps") else []
    return [f"{kind}:{i}" for i in range(_available(torch, kind))]


def _accelerator_info(torch: Any, kind: str, idx: int) -> DeviceInfo:
    mod = _load_backend(torch, kind)
    if mod is None:
        raise FlopwiseError(f"torch has no {kind} backend")
    name = kind
    units: int | None = None
    llc: int | None = None
    mem: int | None = None
    props: Any = None
    arch: str | None = None
    try:
        props = mod.get_device_properties(idx) if hasattr(mod, "get_device_properties") else None
    except (RuntimeError, AssertionError, TypeError):
        props = None
    if props is not None:
        name = str(getattr(props, "name", name))
        for attr in ("multi_processor_count", "gpu_subslice_count", "max_compute_units"):
            if getattr(props, attr, None):
                units = int(getattr(props, attr))
                break
        llc = int(getattr(props, "L2_cache_size", 0) or 0) or None
        mem = int(getattr(props, "total_memory", 0) or 0) or None
        arch = _arch_of(props)
    elif hasattr(mod, "get_device_name"):
        name = str(mod.get_device_name(idx))
    if kind == "mps":
        name = f"Apple {platform.machine()} GPU (MPS)"
        mem = _host_memory_bytes()
    spec = "mps" if kind == "mps" else f"{kind}:{idx}"
    version = _backend_version(torch, kind)
    return DeviceInfo(
        spec=spec,
        type=kind,
        index=None if kind == "mps" else idx,
        name=name,
        compute_units=units,
        llc_bytes=llc,
        llc_source=f"{kind} device properties" if llc else "unknown",
        memory_bytes=mem,
        backend_version=version,
        arch=arch,
    )


def activate(torch: Any, info: DeviceInfo) -> None:
    """Make the measured device current, so events, streams and allocations belong to it."""
    if info.is_accelerator:
        set_current_device(torch, info.type, info.index)


def _arch_of(props: Any) -> str | None:
    """ROCm's gcnArchName ('gfx942:sramecc+:xnack-' -> 'gfx942'), else CUDA's sm_XY."""
    gcn = getattr(props, "gcnArchName", None)
    if gcn:
        return str(gcn).split(":", 1)[0]
    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    if isinstance(major, int) and isinstance(minor, int) and major > 0:
        return f"sm_{major}{minor}"
    return None


def set_current_device(torch: Any, kind: str, index: int | None) -> None:
    """Make device `index` of `kind` current, on every supported torch version.

    torch >= 2.7 has torch.accelerator.set_device_index; torch 2.6 named it set_device_idx;
    before torch.accelerator (< 2.6) each backend module has set_device. MPS and the CPU have a
    single device and nothing to set.
    """
    if kind in ("cpu", "mps") or index is None:
        return
    acc = getattr(torch, "accelerator", None)
    current = acc.current_accelerator() if acc is not None else None
    if current is not None and str(current.type) == kind:
        for name in ("set_device_index", "set_device_idx"):
            setter = getattr(acc, name, None)
            if setter is not None:
                setter(index)
                return
    mod = _load_backend(torch, kind)
    if mod is None or not hasattr(mod, "set_device"):
        raise FlopwiseError(f"this torch build cannot select {kind}:{index} (no set_device)")
    mod.set_device(index)


def _backend_version(torch: Any, kind: str) -> str:
    if kind == "cuda":
        if getattr(torch.version, "hip", None):
            return f"hip {torch.version.hip}"
        return f"cuda {torch.version.cuda}"
    if kind == "xpu":
        return f"xpu {getattr(torch.version, 'xpu', None) or 'unknown'}"
    if kind == "cpu":
        cap = torch.backends.cpu.get_cpu_capability()
        blas = "mkl" if torch.backends.mkl.is_available() else "no-mkl"
        dnn = "onednn" if torch.backends.mkldnn.is_available() else "no-onednn"
        return f"cpu {cap} {blas} {dnn}"
    return kind


def _cpu_info(torch: Any) -> DeviceInfo:
    llc, source = cpu_llc_bytes()
    return DeviceInfo(
        spec="cpu",
        type="cpu",
        index=None,
        name=cpu_model_name(),
        compute_units=int(torch.get_num_threads()),
        llc_bytes=llc,
        llc_source=source,
        memory_bytes=_host_memory_bytes(),
        backend_version=_backend_version(torch, "cpu"),
    )


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _parse_cache_size(text: str) -> int | None:
    m = re.match(r"^\s*([\d.]+)\s*([KMG]i?B?)?", text.strip(), re.IGNORECASE)
    if not m:
        return None
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get((m.group(2) or "B")[0].upper(), 1)
    return int(float(m.group(1)) * scale)


def cpu_llc_bytes(
    root: Path = Path("/sys/devices/system/cpu/cpu0/cache"),
) -> tuple[int | None, str]:
    """Largest cache level of cpu0 from sysfs, else lscpu; (None, 'unknown') when neither says."""
    best: tuple[int, int] | None = None
    if root.is_dir():
        for idx in sorted(root.glob("index*")):
            try:
                level = int((idx / "level").read_text())
                size = _parse_cache_size((idx / "size").read_text())
            except (OSError, ValueError):
                continue
            if size and (best is None or level > best[0]):
                best = (level, size)
    if best is not None:
        return best[1], f"sysfs L{best[0]}"
    try:
        out = subprocess.run(
            ["lscpu"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for label in ("L3 cache", "L2 cache"):
        for line in out.splitlines():
            if line.startswith(label):
                size = _parse_cache_size(line.split(":", 1)[1])
                if size:
                    return size, f"lscpu {label}"
    return None, "unknown"


def _host_memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def torch_device(torch: Any, info: DeviceInfo) -> Any:
    return torch.device(info.spec)


def synchronize(torch: Any, info: DeviceInfo) -> None:
    """Wait until the device has finished its queued work (no-op on the CPU)."""
    if info.type == "cpu":
        return
    mod = _load_backend(torch, info.type)
    if mod is not None and hasattr(mod, "synchronize"):
        if info.index is None:
            mod.synchronize()
        else:
            mod.synchronize(info.index)


def empty_cache(torch: Any, info: DeviceInfo) -> None:
    """Release cached device memory after an out-of-memory shape."""
    if info.type == "cpu":
        return
    mod = _load_backend(torch, info.type)
    if mod is not None and hasattr(mod, "empty_cache"):
        mod.empty_cache()


def is_out_of_memory(exc: BaseException) -> bool:
    """True for the out-of-memory errors of every backend (and the CPU allocator)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and (
        "out of memory" in text or "can't allocate memory" in text or isinstance(exc, MemoryError)
    )


def accelerator_id(info: DeviceInfo) -> str | None:
    """Catalog id for the device ('cpu' for the host CPU), or None when the catalog lacks it."""
    if info.type == "cpu":
        return "cpu"
    from flopwise.catalog import get_accelerator

    try:
        return get_accelerator(info.name).id
    except FlopwiseError:
        return None
