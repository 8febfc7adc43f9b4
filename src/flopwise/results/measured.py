"""Measured numbers into the hardware description: `--measured [ID|latest]`.

Contract with the benchmarks (the `summary` each stores):
- matmul: ``{"dtype": "bf16", "search": "auto"|"grid", "best_tflops": float, ...}``, read
  per dtype (matmul_by_dtype); the payloads' per-shape ``results`` become
  ``Hardware.matmul_shape_tflops`` (results/matmul_shapes.py). A grouped run (``"groups"``
  G > 1, ``bench matmul --groups``) times MoE expert kernels: its shapes become
  ``Hardware.matmul_grouped_shape_tflops`` (grouped_by_dtype) and never the MAMF
- memory: ``{"triad_gbps": float, ...}`` (BabelStream triad is the bandwidth planners use)
- comms:  ``{"op": "all_reduce", "busbw_gbps": float, "group": "intra"|"inter"|"all",
  "nodes": int, "tier": "intra"|"inter", "busbw_basis": "per_gpu"|"per_node",
  "ranks_per_node": int, "peak_busbw_gbps_by_op": {op: float}}`` (peak busbw over sizes);
  each op's peak applies to that op only, converted to per GPU
- step:   ``{"calibration": measured/predicted tokens/s, "moe": bool, ...}`` (bench step); the
  newest dense step calibrates dense plans, the newest MoE step MoE plans
- sustained: ``{"gemm_share": sustained / burst GEMM rate, "burst_tflops": float, ...}`` (bench
  sustained); serving plans run their GEMMs at that share (plan/sustained.py
  serving_compute_share)
- attention: ``{"dtype": "bf16", "head_dim": 128, "fwd_tflops_inf": float, "fwd_s_half": float,
  "bwd_tflops_inf": float, "bwd_s_half": float, ...}`` (bench attention, 16-bit runs only)
Only complete runs for the same accelerator id are used.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import CPU_ID, Hardware, Origin

# `hardware_for` moved beside Hardware; re-exported for existing imports.
from flopwise.hardware import hardware_for as hardware_for
from flopwise.results.matmul_shapes import (
    GroupedShapeRow,
    ShapeRow,
    grouped_shape_table,
    shape_table,
)
from flopwise.results.store import ResultStore, StoredResult

#: How many stored runs of one kind and device --measured reads (newest first): matmul runs
#: per dtype window, comms runs per tier and collective.
SCAN_ROWS = 200


def apply_measurements(hw: Hardware, selector: str = "latest", db: str | None = None) -> Hardware:
    """Return `hw` with measured matmul TFLOPS, memory bandwidth and busbw where stored.

    `selector` is 'latest' (newest complete run of each kind) or one result id (used for its
    kind; the other kinds then come from their latest runs).
    """
    store = ResultStore(db)
    values: dict[str, tuple[float, str]] = {}
    found = False
    pinned = None if selector == "latest" else _select_any(store, hw.id, selector)
    matmul = [r for r in store.list("matmul", hw.id, limit=SCAN_ROWS) if r.status == "complete"]
    if pinned is not None and pinned.kind == "matmul":
        # the pinned run starts its dtype's window (of dense or of grouped runs); that
        # window's newer runs are not read
        dtype, grouped = pinned.summary.get("dtype", "bf16"), _groups(pinned) > 1
        matmul = [pinned] + [
            r
            for r in matmul
            if r.id < pinned.id
            or r.summary.get("dtype", "bf16") != dtype
            or (_groups(r) > 1) != grouped
        ]
    dense = [r for r in matmul if _groups(r) == 1]
    by_dtype = matmul_by_dtype(dense)
    for grouped_rows, grouped_ref in grouped_by_dtype(matmul).values():
        found = True
        hw = hw.with_grouped_shape_table(grouped_rows, grouped_ref)
    for dtype, (rate, rate_ref, rows, rows_ref) in by_dtype.items():
        found = True
        values[f"matmul_tflops:{dtype}"] = (rate, rate_ref)
        if rows:
            hw = hw.with_shape_table(rows, rows_ref)
    if "bf16" in by_dtype and "fp16" not in by_dtype:
        # fp16 runs on bf16's tensor cores at the same rate: a catalog fp16 MAMF beside a
        # measured bf16 one would price the same device two ways
        rate, rate_ref = values["matmul_tflops:bf16"]
        values["matmul_tflops:fp16"] = (rate, f"{rate_ref}, measured as bf16 (same tensor cores)")
    result = _pinned_or_latest(store, pinned, "memory", hw.id)
    if result is not None:
        found = True
        if result.summary.get("triad_gbps"):
            ref = f"result {result.id} ({result.created_at}, {result.host})"
            values["achievable_bw_gbps"] = (float(result.summary["triad_gbps"]), ref)
    # Comms: per tier and collective, the newest complete run that measured it, per GPU.
    comms = [pinned] if pinned is not None and pinned.kind == "comms" else []
    comms += [r for r in store.list("comms", hw.id, limit=SCAN_ROWS) if r.status == "complete"]
    for result in comms:
        ref = f"result {result.id} ({result.created_at}, {result.host})"
        for key, value, fallback in comms_values(result.summary):
            found = True
            name = f"busbw_gbps:{key}"
            if name not in values:
                values[name] = (value, ref)
            tier = key.split(":", 1)[0]
            has_catalog = hw.scaleup_bw_uni_gbps if tier == "intra" else hw.inter_bw_per_gpu_gbps
            if fallback and not has_catalog and f"{tier}_busbw_gbps" not in values:
                values[f"{tier}_busbw_gbps"] = (value, ref)
    attention = _pinned_or_latest(store, pinned, "attention", hw.id)
    curves = (
        attention_curves(attention.summary, allow_fp32=hw.id == CPU_ID)
        if attention is not None
        else None
    )
    if attention is not None and curves is not None:
        found = True
        hw = hw.with_attention_curve(
            curves,
            int(attention.summary.get("head_dim") or 128),
            f"result {attention.id} ({attention.created_at}, {attention.host}): bench attention "
            f"{attention.summary.get('dtype')}, SDPA backend {attention.summary.get('backend')}",
        )
    # Step calibration: the newest step of a dense model calibrates dense plans, the newest
    # of an MoE model MoE plans (a pinned step stands for its class).
    steps = [pinned] if pinned is not None and pinned.kind == "step" else []
    steps += [r for r in store.list("step", hw.id, limit=SCAN_ROWS) if r.status == "complete"]
    for step in steps:
        s = step.summary
        cal = s.get("calibration")
        name = "step_calibration_moe" if s.get("moe") else "step_calibration"
        if name in values or not isinstance(cal, (int, float)) or cal <= 0:
            continue
        found = True
        values[name] = (
            float(cal),
            f"result {step.id} ({step.created_at}, {step.host}): bench step {s.get('model')} "
            f"x{s.get('layers')} layers, {s.get('dtype')}, measured / predicted tokens/s; "
            "compute and memory-bound time divided by it"
            + (" (MoE plans only)" if s.get("moe") else " (dense plans only)"),
        )
    for name, fp8 in (("power_capped_gemm_share", False), ("power_capped_gemm_share_fp8", True)):
        sustained = _sustained_run(store, pinned, hw.id, fp8)
        share = None if sustained is None else sustained.summary.get("gemm_share")
        if sustained is None or not isinstance(share, (int, float)) or not 0 < share <= 1.5:
            continue
        found = True
        values[name] = (
            float(share),
            f"result {sustained.id} ({sustained.created_at}, {sustained.host}): bench sustained "
            f"{sustained.summary.get('size')}^3 {sustained.summary.get('dtype')} for "
            f"{sustained.summary.get('seconds')} s, sustained / burst GEMM rate (serving and "
            "training plans"
            + (", FP8 GEMMs)" if fp8 else "; FP8 GEMMs too where no fp8 run is stored)"),
        )
    if not found and store.latest("io") is None:  # storage alone: read by goodput
        raise FlopwiseError(
            f"no stored measurements for {hw.id}; run `flopwise bench matmul` and "
            "`flopwise bench memory` on that machine first"
        )
    return hw.with_measurements(**values)


def _sustained_run(
    store: ResultStore, pinned: StoredResult | None, accelerator: str, fp8: bool
) -> StoredResult | None:
    """The bench sustained run of the device that prices its FP8 GEMMs (`fp8`) or its 16-bit
    ones: the pinned run where it is one of that dtype, else the newest complete one."""
    if pinned is not None and pinned.kind == "sustained":
        return pinned if (pinned.summary.get("dtype") == "fp8") == fp8 else None
    for run in store.list("sustained", accelerator, limit=SCAN_ROWS):
        if run.status == "complete" and (run.summary.get("dtype") == "fp8") == fp8:
            return run
    return None


def _pinned_or_latest(
    store: ResultStore, pinned: StoredResult | None, kind: str, accelerator: str
) -> StoredResult | None:
    """The pinned run where it is of `kind`, else the newest complete `kind` run of the device
    (the kinds --measured reads one run of)."""
    if pinned is not None and pinned.kind == kind:
        return pinned
    return store.latest(kind, accelerator)


def matmul_by_dtype(
    runs: list[StoredResult],
) -> dict[str, tuple[float, str, tuple[ShapeRow, ...], str]]:
    """Per dtype: (MAMF, its source, measured shapes, their sources) from complete matmul runs,
    newest first (a pinned run first of all).

    Each dtype is read from its own runs, so a bf16 search followed by an fp8 one keeps both.
    The dtype's newest run starts its window: a directed search (``search`` auto) closes it,
    and grid runs newer than that search join it (``bench matmul --search grid --m ...`` at the
    shapes a job runs). The MAMF is the best rate in the window, since a grid over a few
    serving shapes measures those shapes, not the device's maximum, and cannot lower it; the
    shape table is every shape measured in the window, the newest value of a shape winning."""
    windows: dict[str, list[StoredResult]] = {}
    closed: set[str] = set()
    for run in runs:
        s = run.summary
        if not isinstance(s.get("best_tflops"), (int, float)) or s["best_tflops"] <= 0:
            continue
        dtype = str(s.get("dtype", "bf16"))
        if dtype in closed:
            continue
        windows.setdefault(dtype, []).append(run)
        if s.get("search", "auto") not in ("grid", "shapes"):  # a search closes the window
            closed.add(dtype)
    out: dict[str, tuple[float, str, tuple[ShapeRow, ...], str]] = {}
    for dtype, window in windows.items():
        best = max(window, key=lambda r: float(r.summary["best_tflops"]))
        shapes: dict[tuple[int, int, int], float] = {}
        used: list[str] = []
        for run in reversed(window):  # oldest first: a newer value of a shape overwrites
            rows = shape_table(run.payload, dtype)
            if rows:
                used.append(str(run.id))
            for _, m, n, k, rate in rows:
                shapes[(m, n, k)] = rate
        rows_out = tuple((dtype, m, n, k, t) for (m, n, k), t in sorted(shapes.items()))
        ids = ", ".join(reversed(used))
        out[dtype] = (
            float(best.summary["best_tflops"]),
            f"result {best.id} ({best.created_at}, {best.host})",
            rows_out,
            f"result{'s' if len(used) > 1 else ''} {ids}",
        )
    return out


def _groups(run: StoredResult) -> int:
    """Products per call of a stored matmul run (1: dense; older runs did not say)."""
    return _int(run.summary.get("groups"), 1)


def grouped_by_dtype(
    runs: list[StoredResult],
) -> dict[str, tuple[tuple[GroupedShapeRow, ...], str]]:
    """Per dtype: every grouped shape measured by the complete runs among `runs` (newest first;
    a pinned run first of all): grouped runs (`--groups`) and job runs (`--model`, whose
    payload mixes dense and grouped shapes), the newest value of a (groups, m, n, k) winning,
    and the runs they come from. Each measures the shapes a user asked for, one job's experts,
    so every run adds its shapes; none is a device maximum."""
    shapes: dict[str, dict[tuple[int, int, int, int], float]] = {}
    used: dict[str, list[str]] = {}
    for run in reversed(runs):  # oldest first: newer overwrite (grouped and --model runs)
        dtype = str(run.summary.get("dtype", "bf16"))
        rows = grouped_shape_table(run.payload, dtype)
        if not rows:
            continue
        used.setdefault(dtype, []).append(str(run.id))
        table = shapes.setdefault(dtype, {})
        for _, g, m, n, k, rate in rows:
            table[(g, m, n, k)] = rate
    out: dict[str, tuple[tuple[GroupedShapeRow, ...], str]] = {}
    for dtype, table in shapes.items():
        ids = list(reversed(used[dtype]))
        rows_out = tuple((dtype, g, m, n, k, t) for (g, m, n, k), t in sorted(table.items()))
        out[dtype] = (
            rows_out,
            f"grouped result{'s' if len(ids) > 1 else ''} {', '.join(ids)} (bench matmul --groups)",
        )
    return out


def attention_curves(
    summary: dict[str, Any], allow_fp32: bool = False
) -> dict[str, tuple[float, float]] | None:
    """{"fwd": (TFLOPS at long sequences, s_half), "bwd": ...} of a bench attention run, or None
    when it holds no forward curve or ran in another dtype than the plan computes attention in:
    16 bits on accelerators, fp32 also on a CPU (whose plans run in fp32)."""
    if summary.get("dtype") not in (("bf16", "fp16", "fp32") if allow_fp32 else ("bf16", "fp16")):
        return None
    out: dict[str, tuple[float, float]] = {}
    for d in ("fwd", "bwd"):
        rate, half = summary.get(f"{d}_tflops_inf"), summary.get(f"{d}_s_half")
        if isinstance(rate, (int, float)) and rate > 0 and isinstance(half, (int, float)):
            out[d] = (float(rate), max(0.0, float(half)))
    return out if "fwd" in out else None


def comms_values(summary: dict[str, Any]) -> list[tuple[str, float, bool]]:
    """('tier:op', per-GPU peak busbw GB/s, is the run's headline op) for each op of a comms
    summary. A multi-node `--group all` run measures whole nodes (every GPU of each node drives
    its own NIC), so its busbw is per node: divided by the ranks per node here, because the
    planner multiplies a per-GPU scale-out rate by the GPUs of a group that share a node."""
    tier = str(summary.get("tier") or comms_tier(summary))
    basis, per_node = comms_basis(summary)
    div = per_node if basis == "per_node" else 1
    by_op = summary.get("peak_busbw_gbps_by_op")
    if not isinstance(by_op, dict) or not by_op:
        op = summary.get("op", "all_reduce")
        by_op = {op: summary.get("busbw_gbps")}
    headline = summary.get("op", "all_reduce")
    out = []
    for op, value in by_op.items():
        if isinstance(value, (int, float)) and value > 0:
            out.append((f"{tier}:{op}", float(value) / div, op == headline))
    return out


def comms_basis(summary: dict[str, Any]) -> tuple[str, int]:
    """('per_gpu' | 'per_node', ranks per node) of a stored comms summary (older runs did not
    say: a multi-node --group all run is per node)."""
    nodes = _int(summary.get("nodes"), 1)
    ranks = _int(summary.get("ranks"), nodes)
    per_node = _int(summary.get("ranks_per_node"), max(ranks // max(nodes, 1), 1))
    basis = summary.get("busbw_basis")
    if basis not in ("per_gpu", "per_node"):
        basis = "per_node" if summary.get("group", "all") == "all" and nodes > 1 else "per_gpu"
    return str(basis), per_node


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


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
