"""Terminal view of `flopwise validate` (the dict of ValidationReport.to_dict() per section)."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, table


def show_validation(doc: dict[str, Any]) -> None:
    out = console()
    for section, rep in doc.items():
        if section == "matmul":
            show_matmul_validation(rep)
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


def _stat_line(label: str, st: dict[str, Any]) -> str:
    if not st.get("n"):
        return f"{label}: no rows"
    return (
        f"{label}: {st['n']} rows, mean abs error {st['mape_pct']:.1f}%, worst "
        f"{st['max_abs_error_pct']:.1f}%, bias {st['bias_pct']:+.1f}%"
    )


def show_matmul_validation(rep: dict[str, Any]) -> None:
    """GEMM shape model against published GEMM TFLOPS: out-of-sample first, in-sample beside."""
    out = console()
    rows = [
        (
            r["id"],
            r["accelerator"],
            r["dtype"],
            f"{r['m']}x{r['n']}x{r['k']}" + (f" x{r['groups']}" if r["groups"] > 1 else ""),
            f"{r['measured']:.4g}",
            f"{r['predicted']:.4g}",
            f"{r['error_pct']:+.1f}%",
            "in-sample" if r["in_sample"] else "",
        )
        for r in rep["rows"]
    ]
    lines = [_stat_line("out of sample", rep)]
    lines += [_stat_line(f"  {src}", st) for src, st in rep.get("by_source", {}).items()]
    lines.append(_stat_line("in sample (MAMF rows = the ceiling)", rep["in_sample"]))
    lines.append(_stat_line("same rows, leave-one-out ceiling", rep["leave_one_out"]))
    out.print(
        table(
            "Validation: matmul (TFLOPS by shape)",
            ["id", "device", "dtype", "MxNxK", "published", "predicted", "error", ""],
            rows,
            caption="\n".join(lines),
            right=(4, 5, 6),
        )
    )
    if rep.get("skipped"):
        out.print(
            table(
                "Not modelled (matmul)",
                ["id", "why"],
                [(s["id"], s["reason"]) for s in rep["skipped"]],
            )
        )
