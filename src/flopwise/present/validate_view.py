"""Terminal view of `flopwise validate` (the dict of ValidationReport.to_dict() per section)."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, table


def show_validation(doc: dict[str, Any]) -> None:
    out = console()
    for section, rep in doc.items():
        if section == "goodput":
            show_goodput_validation(rep)
            continue
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


def show_goodput_validation(rep: dict[str, Any]) -> None:
    """The goodput section: point rows with their error, range rows met or not."""
    out = console()

    def published(r: dict[str, Any]) -> str:
        if r["measured"] is not None:
            return f"{r['measured']:.4g}"
        lo, hi = r["published_low"], r["published_high"]
        return f"[{'' if lo is None else f'{lo:.4g}'}, {'' if hi is None else f'{hi:.4g}'}]"

    def error(r: dict[str, Any]) -> str:
        if r["within_range"] is not None:
            return "in range" if r["within_range"] else f"{r['error_pct']:+.1f}% outside"
        return f"{r['error_pct']:+.1f}%"

    rows = [
        (
            r["id"] + (" (in-sample)" if r["in_sample"] else ""),
            r["metric"],
            published(r),
            f"{r['predicted']:.4g}",
            error(r),
        )
        for r in rep["rows"]
    ]
    oos = rep["mape_out_of_sample_pct"]
    caption = (
        f"{rep['n']} rows ({rep['n_in_sample']} in-sample: a default constant comes from the "
        f"same source); {rep['ranges_met']}/{rep['ranges']} published ranges met; out-of-sample "
        f"mean absolute error {'n/a' if oos is None else f'{oos:.1f}%'}; notes: --json"
    )
    out.print(
        table(
            "Validation: goodput",
            ["id", "metric", "published", "predicted", "error"],
            rows,
            caption=caption,
            right=(2, 3, 4),
        )
    )
    if rep.get("skipped"):
        out.print(
            table(
                "Not modelled (goodput)",
                ["id", "why"],
                [(s["id"], s["reason"]) for s in rep["skipped"]],
            )
        )
