"""Measured numbers into the hardware description: `--measured [ID|latest]`.

Contract with the benchmarks (the `summary` each stores):
- matmul: ``{"dtype": "bf16", "best_tflops": float, ...}``; the payload's per-shape
  ``results`` become ``Hardware.matmul_shape_tflops`` (results/matmul_shapes.py)
- memory: ``{"triad_gbps": float, ...}`` (BabelStream triad is the bandwidth planners use)
- comms:  ``{"op": "all_reduce", "busbw_gbps": float, "group": "intra"|"inter"|"all",
  "nodes": int}`` (peak busbw over sizes)
Only complete runs for the same accelerator id are used.
"""

from __future__ import annotations

from types import MappingProxyType

from flopwise.errors import FlopwiseError
from flopwise.hardware import CPU_ID, Hardware, Origin

# `hardware_for` moved beside Hardware; re-exported for existing imports.
from flopwise.hardware import hardware_for as hardware_for
from flopwise.results.matmul_shapes import ShapeRow, shape_table
from flopwise.results.store import ResultStore, StoredResult


def apply_measurements(hw: Hardware, selector: str = "latest", db: str | None = None) -> Hardware:
    """Return `hw` with measured matmul TFLOPS, memory bandwidth and busbw where stored.

    `selector` is 'latest' (newest complete run of each kind) or one result id (used for its
    kind; the other kinds then come from their latest runs).
    """
    store = ResultStore(db)
    values: dict[str, tuple[float, str]] = {}
    shapes: tuple[ShapeRow, ...] = ()
    shapes_ref = ""
    found = False
    pinned = None if selector == "latest" else _select_any(store, hw.id, selector)
    for kind in ("matmul", "memory"):
        result = pinned if pinned is not None and pinned.kind == kind else store.latest(kind, hw.id)
        if result is None:
            continue
        found = True
        ref = f"result {result.id} ({result.created_at}, {result.host})"
        s = result.summary
        if kind == "matmul" and s.get("best_tflops"):
            dtype = str(s.get("dtype", "bf16"))
            values[f"matmul_tflops:{dtype}"] = (float(s["best_tflops"]), ref)
            shapes, shapes_ref = shape_table(result.payload, dtype), ref
        elif kind == "memory" and s.get("triad_gbps"):
            values["achievable_bw_gbps"] = (float(s["triad_gbps"]), ref)
    # Comms: the newest complete run for each tier (intra- and inter-node are separate runs).
    comms = [pinned] if pinned is not None and pinned.kind == "comms" else []
    comms += [r for r in store.list("comms", hw.id, limit=200) if r.status == "complete"]
    for result in comms:
        s = result.summary
        if not s.get("busbw_gbps"):
            continue
        found = True
        name = f"{comms_tier(s)}_busbw_gbps"
        if name not in values:
            ref = f"result {result.id} ({result.created_at}, {result.host})"
            values[name] = (float(s["busbw_gbps"]), ref)
    if not found and store.latest("io") is None:  # storage alone: read by goodput
        raise FlopwiseError(
            f"no stored measurements for {hw.id}; run `flopwise bench matmul` and "
            "`flopwise bench memory` on that machine first"
        )
    hw = hw.with_measurements(**values)
    return hw.with_shape_table(shapes, shapes_ref) if shapes else hw


def comms_tier(summary: dict[str, object]) -> str:
    """'intra' or 'inter': which network tier a comms summary measured.

    --group intra stays inside nodes even on a multi-node run; --group all crosses nodes
    (and is then limited by the slower, inter-node tier) when the run spans more than one.
    """
    group = summary.get("group", "all")
    nodes = summary.get("nodes", 1)
    multi_node = int(nodes if isinstance(nodes, (int, float, str)) else 1) > 1
    return "inter" if group == "inter" or (group == "all" and multi_node) else "intra"


def _select_any(store: ResultStore, accelerator: str, selector: str) -> StoredResult:
    try:
        result_id = int(selector)
    except ValueError:
        raise FlopwiseError(f"--measured takes a result id or 'latest', got {selector!r}") from None
    result = store.get(result_id)
    if result.kind == "io":
        return result  # storage has no accelerator: goodput reads it (results/measured_io.py)
    if result.accelerator != accelerator:
        raise FlopwiseError(
            f"result {result_id} was measured on {result.accelerator or 'an unknown device'}, "
            f"not {accelerator}"
        )
    return result


def cpu_hardware(db: str | None = None, selector: str = "latest") -> Hardware:
    """This machine's CPU as an accelerator: every number comes from stored measurements."""
    base = Hardware(
        id=CPU_ID,
        name="host CPU (measured)",
        peak_tflops=MappingProxyType({}),
        matmul_tflops=MappingProxyType({}),
        memory_bytes=None,
        memory_bw_gbps=None,
        achievable_bw_gbps=None,
        compute_units=None,
        scaleup_bw_uni_gbps=None,
        scaleup_domain=1,
        inter_bw_per_gpu_gbps=None,
        origins=MappingProxyType({"id": Origin("measured", "host CPU")}),
    )
    hw = measured_rate_as_peak(apply_measurements(base, selector, db))
    # Memory capacity of the host, so `fits` is answerable.
    try:
        import os

        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return hw
    return hw.with_measurements(memory_bytes=(float(pages), "os.sysconf physical memory"))


def measured_rate_as_peak(hw: Hardware) -> Hardware:
    """A CPU has no catalog dense peak: use each measured matmul rate (MAMF) as both the peak
    and the ceiling for its dtype, labelled "assumed" so the plan's `assumed` block shows it
    (MFU against it then reads as a fraction of the measured best, not of a datasheet peak)."""
    from dataclasses import replace

    peaks = dict(hw.peak_tflops)
    origins = dict(hw.origins)
    for dtype, rate in hw.matmul_tflops.items():
        if dtype in peaks:
            continue
        peaks[dtype] = rate
        source = hw.origins.get(f"matmul_tflops:{dtype}")
        origins[f"peak_tflops:{dtype}"] = Origin(
            "assumed",
            f"peak = measured matmul rate ({source.detail if source else 'measured'}); no "
            "published dense peak for this device",
        )
    return replace(hw, peak_tflops=MappingProxyType(peaks), origins=MappingProxyType(origins))
