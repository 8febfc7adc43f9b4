"""Terminal view of `flopwise validate` (the dict of ValidationReport.to_dict() per section)."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, table


def show_validation(doc: dict[str, Any]) -> None:
    out = console()
    for section, rep in doc.items():
        rows = [
            (
                r["id"],
                r["metric"],
                f"{r['measured']:.4g}",
                f"{r['predicted']:.4g}",
                f"{r['error_pct']:+.1f}%",
            )
            for r in rep["rows"]
        ]
        mape = rep["mape_pct"]
        worst = rep["max_abs_error_pct"]
        caption = (
            f"{rep['n']} rows, mean absolute error "
            f"{'n/a' if mape is None else f'{mape:.1f}%'}, worst "
            f"{'n/a' if worst is None else f'{worst:.1f}%'}; layouts and notes: --json"
        )
        out.print(
            table(
                f"Validation: {section}",
                ["id", "metric", "published", "predicted", "error"],
                rows,
                caption=caption,
                right=(2, 3, 4),
            )
        )
        if rep.get("skipped"):
            out.print(
                table(
                    f"Not modelled ({section})",
                    ["id", "why"],
                    [(s["id"], s["reason"]) for s in rep["skipped"]],
                )
            )
