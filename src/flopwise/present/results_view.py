"""Terminal, JSON and CSV views of stored results."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence

from flopwise.present.console import console, fmt_rate, table
from flopwise.present.jsonout import emit
from flopwise.results.store import StoredResult


def _headline(r: StoredResult) -> str | None:
    """One readable line for the kinds whose summary keys are known."""
    s = r.summary
    if r.kind == "matmul" and isinstance(s.get("best_tflops"), (int, float)):
        shape = "x".join(str(v) for v in s.get("best_shape") or [])
        groups = s.get("groups") or 1
        what = f"grouped x{groups} ({s.get('grouped_kernel')}), " if groups > 1 else ""
        return (
            f"{s['best_tflops']:,.3f} TFLOPS {s.get('dtype', '')} at {shape} "
            f"({what}{s.get('shapes_tried', '?')} shapes, {s.get('search', '')})"
        )
    if r.kind == "memory" and isinstance(s.get("triad_gbps"), (int, float)):
        return f"triad {s['triad_gbps']:,.1f} GB/s, copy {s.get('copy_gbps') or 0:,.1f} GB/s"
    if r.kind == "attention" and isinstance(s.get("fwd_tflops_inf"), (int, float)):
        bwd = s.get("bwd_tflops_inf")
        return (
            f"causal attention {s.get('dtype')} d={s.get('head_dim')}: forward "
            f"{fmt_rate(s['fwd_tflops_inf'])} TFLOPS (half at {s.get('fwd_s_half') or 0:,.0f} "
            "tokens)"
            + (f", backward {fmt_rate(bwd)}" if isinstance(bwd, (int, float)) else "")
            + f", backend {s.get('backend')}"
        )
    if r.kind == "step" and isinstance(s.get("tokens_per_s"), (int, float)):
        ratio = s.get("calibration")
        return (
            f"{s.get('model')} x{s.get('layers')} layers {s.get('dtype')}: "
            f"{s['tokens_per_s']:,.1f} tokens/s, predicted {s.get('predicted_tokens_per_s') or 0:,.1f}"
            + (f", measured/predicted {ratio:.3f}" if isinstance(ratio, (int, float)) else "")
        )
    return None


def _summary_text(r: StoredResult) -> str:
    headline = _headline(r)
    if headline is not None:
        return headline
    parts = []
    for key, value in r.summary.items():
        if isinstance(value, float):
            parts.append(f"{key}={value:,.2f}")
        elif value is not None and not isinstance(value, (dict, list)):
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def show_list(results: Sequence[StoredResult], as_json: bool) -> None:
    if as_json:
        emit({"results": [r.to_dict(with_payload=False) for r in results]})
        return
    if not results:
        console().print(
            "no stored results yet: run `flopwise bench matmul` or `flopwise bench memory`"
        )
        return
    console().print(
        table(
            "Stored results (newest first)",
            ["id", "kind", "status", "when (UTC)", "host", "device", "accelerator", "summary"],
            [
                (
                    r.id,
                    r.kind,
                    r.status,
                    r.created_at,
                    r.host,
                    r.device_name or r.device or "",
                    r.accelerator or "unknown",
                    _summary_text(r),
                )
                for r in results
            ],
            right=(0,),
        )
    )


def show_one(result: StoredResult, as_json: bool) -> None:
    if as_json:
        emit(result.to_dict())
        return
    console().print(
        table(
            f"Result {result.id} ({result.kind}, {result.status})",
            ["", ""],
            [
                ("when (UTC)", result.created_at),
                ("host", result.host),
                ("device", f"{result.device} {result.device_name or ''}"),
                ("accelerator", result.accelerator or "unknown"),
                *[
                    (k, json.dumps(v) if isinstance(v, (dict, list)) else v)
                    for k, v in result.summary.items()
                ],
            ],
        )
    )


def export(results: Sequence[StoredResult], as_csv: bool) -> None:
    if not as_csv:
        emit({"results": [r.to_dict() for r in results]})
        return
    keys = sorted({k for r in results for k in r.summary})
    writer = csv.writer(sys.stdout)
    writer.writerow(
        [
            "id",
            "kind",
            "status",
            "created_at",
            "host",
            "device",
            "device_name",
            "accelerator",
            *keys,
        ]
    )
    for r in results:
        writer.writerow(
            [
                r.id,
                r.kind,
                r.status,
                r.created_at,
                r.host,
                r.device or "",
                r.device_name or "",
                r.accelerator or "",
                *[
                    json.dumps(r.summary.get(k))
                    if isinstance(r.summary.get(k), (dict, list))
                    else ("" if r.summary.get(k) is None else r.summary.get(k))
                    for k in keys
                ],
            ]
        )
