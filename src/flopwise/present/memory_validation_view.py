"""Terminal view of the memory section of `flopwise validate` (MemoryReport.to_dict())."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, table


def _gib(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def show_memory_validation(rep: dict[str, Any]) -> None:
    out = console()
    rows = [
        (
            r["id"],
            _gib(r["published_gib"]),
            _gib(r["predicted_gib"]),
            "-" if r["error_pct"] is None else f"{r['error_pct']:+.1f}%",
            _gib(r["capacity_gib"]),
            {True: "yes", False: "NO", None: "?"}[r["fits"]],
        )
        for r in rep["rows"]
    ]
    mape, worst, bias = rep["mape_pct"], rep["max_abs_error_pct"], rep["bias_pct"]
    caption = (
        f"{rep['layouts_posed']} published layouts posed against device capacity, "
        f"{len(rep['layouts_not_fitting'])} said not to fit; peak memory published for "
        f"{rep['n']}: MAPE {'n/a' if mape is None else f'{mape:.1f}%'}, worst "
        f"{'n/a' if worst is None else f'{worst:.1f}%'}, bias "
        f"{'n/a' if bias is None else f'{bias:+.1f}%'}"
    )
    out.print(
        table(
            "Validation: peak memory per GPU (GiB)",
            ["id", "published", "predicted", "error", "capacity", "fits"],
            rows,
            caption=caption,
            right=(1, 2, 3, 4),
        )
    )
