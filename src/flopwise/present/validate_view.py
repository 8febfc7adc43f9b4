"""Terminal view of `flopwise validate` (the dict of ValidationReport.to_dict() per section)."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, table


def show_validation(doc: dict[str, Any]) -> None:
    out = console()
    for section, rep in doc.items():
        if section == "inference" and "out_of_sample" in rep:
            show_inference_validation(rep)
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


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.1f}%" if signed else f"{x:.1f}%"


def _group_rows(groups: list[dict[str, Any]], key: str) -> list[tuple[str, ...]]:
    return [
        (
            g[key],
            str(g["n"]),
            _pct(g["mape_pct"]),
            _pct(g["max_abs_error_pct"]),
            _pct(g["bias_pct"], signed=True),
            _pct(g["in_sample"]["mape_pct"]),
            _pct(g["in_sample"]["bias_pct"], signed=True),
        )
        for g in groups
    ]


#: Largest out-of-sample errors listed in the text view (all rows: --json).
WORST_ROWS_SHOWN = 20


def show_inference_validation(rep: dict[str, Any]) -> None:
    """Out-of-sample first, in-sample beside it: overall, per family, per accelerator."""
    out = console()
    oos, ins = rep["out_of_sample"], rep["in_sample"]
    cols = ["", "n", "MAPE", "max |err|", "bias", "in-sample MAPE", "in-sample bias"]
    right = (1, 2, 3, 4, 5, 6)
    overall = [
        (
            "all rows",
            str(oos["n"]),
            _pct(oos["mape_pct"]),
            _pct(oos["max_abs_error_pct"]),
            _pct(oos["bias_pct"], signed=True),
            _pct(ins["mape_pct"]),
            _pct(ins["bias_pct"], signed=True),
        )
    ]
    fitted = "; ".join(
        f"{name} = {f['shipped']} ({'fitted' if f['fitted'] else 'hand-set'}; a fit per "
        "held-out family would pick "
        + ", ".join(f"{k} {v}" for k, v in f["fit_without_family"].items())
        + f", out-of-sample MAPE {_pct(f['diagnostic_out_of_sample_if_fitted']['mape_pct'])})"
        for name, f in rep.get("fitted", {}).items()
    )
    cov = rep.get("interval_coverage_pct")
    caption = (
        f"out of sample = {rep.get('cross_validation', 'cross-validated')}; "
        f"80% interval coverage out of sample: {_pct(cov)}; {fitted}"
    )
    out.print(
        table(
            "Validation: inference (out of sample; in-sample beside)",
            cols,
            overall,
            caption=caption,
            right=right,
        )
    )
    for key, title in (("by_family", "family"), ("by_accelerator", "accelerator")):
        cols[0] = title
        out.print(
            table(
                f"Inference by {title} (out of sample; in-sample beside)",
                cols,
                _group_rows(rep[key], title),
                right=right,
            )
        )
    worst = sorted(rep["rows"], key=lambda r: -abs(r["error_out_of_sample_pct"]))
    out.print(
        table(
            f"Largest out-of-sample errors ({min(WORST_ROWS_SHOWN, len(worst))} of "
            f"{len(worst)}; every row and its command: --json)",
            ["id", "metric", "published", "predicted", "error", "in-sample error"],
            [
                (
                    r["id"],
                    r["metric"],
                    f"{r['measured']:.4g}",
                    f"{r['predicted_out_of_sample']:.4g}",
                    _pct(r["error_out_of_sample_pct"], signed=True),
                    _pct(r["error_pct"], signed=True),
                )
                for r in worst[:WORST_ROWS_SHOWN]
            ],
            right=(2, 3, 4, 5),
        )
    )
    reasons: dict[str, int] = {}
    for s in rep.get("skipped", []):
        reason = s["reason"].split(";")[0]
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        out.print(
            table(
                f"Not scored (inference): {len(rep['skipped'])} rows",
                ["rows", "why"],
                [(str(n), why) for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])],
                right=(0,),
            )
        )
