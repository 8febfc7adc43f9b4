"""Terminal view of `flopwise validate` (the dict of ValidationReport.to_dict() per section)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from flopwise.present.console import console, table


@contextmanager
def section_status(section: str, enabled: bool = True) -> Iterator[None]:
    """A spinner on stderr while one section runs (inference takes a minute or more); nothing
    when disabled (--json) or when stderr is not a terminal."""
    import sys

    if not enabled or not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(f"validating {section} against published runs ..."):
        yield


def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def _score_cells(s: dict[str, Any]) -> list[str]:
    return [
        str(s["n"]),
        _pct(s["mape_pct"]),
        _pct(s["max_abs_error_pct"]),
        _pct(s["bias_pct"], signed=True),
    ]


def show_training_validation(rep: dict[str, Any], rows: bool = False) -> None:
    """Out-of-sample first, in-sample beside it (labelled), per family and accelerator."""
    out = console()
    oos, ins = rep["out_of_sample"], rep["in_sample"]
    head = ["", "n", "MAPE", "worst", "bias"]
    out.print(
        table(
            "Training validation (step time / throughput vs published runs)",
            head,
            [
                ["OUT-OF-SAMPLE (headline)", *_score_cells(oos)],
                ["in-sample (fitted on these rows)", *_score_cells(ins)],
            ],
            caption="out of sample: the fitted compute fraction refitted without the row's "
            "source family (leave one family out); every row is the `flopwise plan train` "
            "command in --json (rows[].command)",
            right=(1, 2, 3, 4),
        )
    )
    for title, key in (
        ("By source family", "by_family"),
        ("By accelerator", "by_accelerator"),
        ("By sequence length (long-context: 32K tokens and more)", "by_sequence_length"),
        (
            "By attention share (attention-bound: the attention core half the step's "
            "compute or more; the intervals' split)",
            "by_attention_share",
        ),
    ):
        if not rep.get(key):
            continue
        out.print(
            table(
                title,
                ["", "n", "MAPE out", "worst out", "bias out", "MAPE in-sample"],
                [
                    [
                        g["name"],
                        *_score_cells(g["out_of_sample"]),
                        _pct(g["in_sample"]["mape_pct"]),
                    ]
                    for g in rep[key]
                ],
                right=(1, 2, 3, 4, 5),
            )
        )
    cov = rep.get("interval_coverage") or {}
    mem = rep.get("memory") or {}
    by_len = cov.get("by_attention_share") or {}
    split = "; ".join(
        f"{name} {_pct(c.get('coverage_pct'))} of {c.get('n', 0)}"
        for name, c in sorted(by_len.items(), reverse=True)
    )
    notes = [
        f"80% intervals cover {_pct(cov.get('coverage_pct'))} of {cov.get('n', 0)} "
        "out-of-sample rows (each family against intervals built without it)"
        + (f" ({split})" if split else ""),
        f"peak memory vs published (n={mem.get('n', 0)}): MAPE {_pct(mem.get('mape_pct'))}, "
        f"worst {_pct(mem.get('max_abs_error_pct'))}",
    ]
    unfit = mem.get("published_layouts_not_fitting") or []
    notes.append(
        "every published layout fits"
        if not unfit
        else f"{len(unfit)} published layout(s) the memory model says do not fit: "
        + ", ".join(unfit[:6])
        + (" ..." if len(unfit) > 6 else "")
    )
    for rid, why in (mem.get("unresolved_misfits") or {}).items():
        notes.append(f"{rid}: {why}")
    fitted = rep.get("fitted_constants", {}).get("sustained_compute_fraction", {})
    if fitted:
        shipped = ", ".join(f"{k} {v:g}" for k, v in fitted.get("shipped", {}).items())
        notes.append(f"fitted constant sustained_compute_fraction (per die): {shipped}")
    for line in notes:
        out.print(f"  {line}")
    if rows:
        out.print(
            table(
                "Rows",
                ["id", "metric", "published", "predicted", "error", "out-of-sample"],
                [
                    (
                        r["id"],
                        r["metric"],
                        f"{r['measured']:.4g}",
                        f"{r['predicted']:.4g}",
                        _pct(r["error_pct"], signed=True),
                        _pct(r["error_out_of_sample_pct"], signed=True),
                    )
                    for r in rep["rows"]
                ],
                right=(2, 3, 4, 5),
            )
        )
    else:
        out.print("  per-row errors: --rows; commands and layouts: --json")
    if rep.get("skipped"):
        out.print(f"  {len(rep['skipped'])} published rows not posed (reasons: --json)")


def show_summary(lines: list[dict[str, Any]]) -> None:
    """Every section's out-of-sample error on one table, before the sections' own tables."""
    if not lines:
        return
    console().print(
        table(
            "Out of sample, every section (what a job the model has not seen can expect)",
            ["section", "published rows", "n", "error", "bias", "in-sample", "80% in"],
            [
                (
                    r["section"],
                    r["what"],
                    str(r["n"]),
                    _pct(r["out_of_sample_mape_pct"]),
                    _pct(r["out_of_sample_bias_pct"], signed=True),
                    "" if r["in_sample_mape_pct"] is None else _pct(r["in_sample_mape_pct"]),
                    "" if r["interval_coverage_pct"] is None else _pct(r["interval_coverage_pct"]),
                )
                for r in lines
            ],
            caption="error: mean absolute error out of sample (no constant fitted on the row, "
            "or refitted without its source family); bias: + where the plan's figure is above "
            "the published one; in-sample: the same rows with the constants fitted on them; "
            "80% in: rows inside their 80% interval. Sections below.",
            right=(2, 3, 4, 5, 6),
        )
    )


def show_validation(doc: dict[str, Any], rows: bool = False) -> None:
    out = console()
    for section, rep in doc.items():
        if section == "summary":
            show_summary(rep)
            continue
        if section == "training":
            show_training_validation(rep, rows)
            continue
        if section == "matmul":
            show_matmul_validation(rep)
            continue
        if section == "attention":
            show_attention_validation(rep, rows)
            continue
        if section == "inference" and "out_of_sample" in rep:
            show_inference_validation(rep, rows)
            continue
        if section == "goodput":
            show_goodput_validation(rep)
            continue
        if section == "online":
            show_online_validation(rep, rows)
            continue
        if section == "training_unseen":
            show_unseen_training_validation(rep)
            continue
        rows_ = [
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
                rows_,
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
    lines.append(
        _stat_line("in sample (MAMF rows = the ceiling; grouped fit rows)", rep["in_sample"])
    )
    lines.append(_stat_line("same rows, leave-one-out", rep["leave_one_out"]))
    gf = rep.get("grouped_fit")
    if gf:
        lines.append(
            f"GROUPED_GEMM_EFFICIENCY {gf['shipped']:.3f} (refit {gf['refit']}) on "
            f"{len(gf['fit_rows'])} DeepGEMM grouped rows:"
        )
        lines.append(_stat_line("  grouped, in sample", gf["in_sample"]))
        lines.append(_stat_line("  grouped, leave-one-out", gf["leave_one_out"]))
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


def show_attention_validation(rep: dict[str, Any], rows: bool = False) -> None:
    """Fused-attention rates against published kernel timings, by device, model and window."""
    out = console()
    labels = {"fit": "in sample", "check": "out of sample", "generation": "older cuDNN"}
    table_rows = [
        (
            labels.get(g["use"], g["use"]),
            g["accelerator"],
            g["model"] + (f" (window {g['window']})" if g["window"] else ""),
            g["direction"],
            g["basis"],
            str(g["n"]),
            f"{g['mape_pct']:.1f}%",
            f"{g['bias_pct']:+.1f}%",
        )
        for g in rep["groups"]
    ]
    lines = [
        _stat_line("out of sample", rep["out_of_sample"]),
        _stat_line("in sample (the Blackwell tables' own rows)", rep["in_sample"]),
        _stat_line("older cuDNN on the same die (not in the headline)", rep["generation"]),
    ]
    out.print(
        table(
            "Validation: attention kernels (TFLOPS by length, head dim, window)",
            ["rows", "device", "model", "pass", "rate from", "n", "error", "bias"],
            table_rows,
            caption="\n".join(lines),
            right=(5, 6, 7),
        )
    )
    if rows:
        out.print(
            table(
                "Attention rows",
                ["id", "published", "predicted", "error"],
                [
                    (
                        r["id"],
                        f"{r['measured_tflops']:.4g}",
                        f"{r['predicted_tflops']:.4g}",
                        f"{r['error_pct']:+.1f}%",
                    )
                    for r in rep["rows"]
                ],
                right=(1, 2, 3),
            )
        )


def show_online_validation(rep: dict[str, Any], rows: bool = False) -> None:
    """Published concurrency sweeps: out of sample by deployment and metric, in sample beside."""
    out = console()
    names = {"ttft_ms": "TTFT", "tpot_ms": "ITL/TPOT", "output_tokens_per_s": "tokens/s"}
    table_rows = []
    for deployment, metrics in rep["by_deployment"].items():
        for metric, st in metrics.items():
            table_rows.append(
                (
                    deployment,
                    names.get(metric, metric),
                    str(st["n"]),
                    f"{st['mape_pct']:.1f}%",
                    f"{st['bias_pct']:+.1f}%",
                    f"{st['max_abs_error_pct']:.1f}%",
                )
            )
    lines = [_stat_line("out of sample", rep["out_of_sample"])]
    lines += [
        _stat_line(f"  {names.get(m, m)}", st) for m, st in rep["by_metric"].items() if st["n"]
    ]
    lines.append(_stat_line("in sample (shaped a modelling choice)", rep["in_sample"]))
    cover = rep.get("interval_coverage") or {}
    if cover.get("coverage_pct") is not None:
        lines.append(
            f"80% intervals cover {cover['coverage_pct']:.1f}% of {cover['n']} points (each "
            "deployment against intervals built from the other deployments)"
        )
    out.print(
        table(
            "Validation: online serving (closed loop, plan infer --concurrency)",
            ["deployment", "metric", "rows", "mean abs error", "bias", "worst"],
            table_rows,
            caption="\n".join(lines),
            right=(2, 3, 4, 5),
        )
    )
    if rows:
        out.print(
            table(
                "Online serving rows",
                ["id", "published", "predicted", "error", ""],
                [
                    (
                        r["id"],
                        f"{r['measured']:.4g}",
                        f"{r['predicted']:.4g}",
                        f"{r['error_pct']:+.1f}%",
                        "in-sample" if r["in_sample"] else "",
                    )
                    for r in rep["rows"]
                ],
                right=(1, 2, 3),
            )
        )


def show_unseen_training_validation(rep: dict[str, Any]) -> None:
    """Newer published training tables, nothing fitted: every row, then dense and MoE apart."""
    out = console()

    def rng(r: dict[str, Any]) -> str:
        iv = r["tokens_per_s_per_gpu_interval"]
        return "" if iv is None else f"{iv[0]:,.0f}-{iv[1]:,.0f}"

    rows_ = [
        (
            r["id"] + (" (in-sample)" if r["in_sample"] else ""),
            r["class"],
            f"{r['measured']:,.0f}",
            f"{r['predicted']:,.0f}",
            rng(r),
            f"{r['error_pct']:+.1f}%",
        )
        for r in rep["rows"]
    ]
    lines = [_stat_line("out of sample", rep["out_of_sample"])]
    lines += [_stat_line(f"  {c}", st) for c, st in rep["by_class"].items() if st["n"]]
    moe = rep["moe_interval"]
    if moe["regime"] is not None:
        loo = moe["coverage_leave_one_out_pct"]
        lines.append(
            f"MoE plans' step interval: {moe['regime']['lo']:.2f}-{moe['regime']['hi']:.2f}x "
            f"(these MoE rows' 10th-90th percentile, n={moe['regime']['n']}); leave-one-out "
            f"coverage {'n/a' if loo is None else f'{loo:.0f}%'}"
        )
    for die, fit in rep.get("fraction_fits", {}).items():
        here = fit["out_of_sample_here"]
        lines.append(
            f"{die} sustained fraction {fit['shipped']:.3f} (refit {fit['refit']:.3f}) fitted on "
            f"{', '.join(fit['fit_rows'])} (in-sample); the die's other runs here: "
            f"{_stat_line('out of sample', here)}; serving rows on it: validate --only inference"
        )
    lines.append(f"{len(rep['skipped'])} published rows not posed (reasons: --json)")
    out.print(
        table(
            "Validation: training runs nothing was fitted to (tokens/s per GPU; in-sample "
            "rows marked)",
            ["id", "class", "published", "predicted", "80% range", "error"],
            rows_,
            caption="\n".join(lines),
            right=(2, 3, 4, 5),
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


def show_inference_validation(rep: dict[str, Any], rows: bool = False) -> None:
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
    unseen = rep.get("unseen") or {}
    for label, key in (
        ("unseen (" + ", ".join(unseen.get("families", {})) + ")", "summary"),
        ("in view", "in_view"),
    ):
        u = unseen.get(key) or {}
        if u.get("n"):
            overall.append(
                (
                    label,
                    str(u["n"]),
                    _pct(u["mape_pct"]),
                    _pct(u["max_abs_error_pct"]),
                    _pct(u["bias_pct"], signed=True),
                    "",
                    "",
                )
            )
    fitted = "; ".join(_fitted_caption(name, f) for name, f in rep.get("fitted", {}).items())
    measured = rep.get("measured", {}).get("POWER_CAPPED_SHARE", {})
    if measured:
        shares = ", ".join(
            f"{die} GEMMs {m['gemm']:.3f}, attention {m['attention']:.3f}"
            for die, m in measured.items()
        )
        fitted += f"; serving kernels at the power cap's measured share ({shares}; not fitted)"
    cov = rep.get("interval_coverage_pct")
    caption = (
        f"out of sample = {rep.get('cross_validation', 'cross-validated')}; "
        f"80% interval coverage out of sample: {_pct(cov)}; {fitted}"
    )
    if unseen.get("families"):
        caption += (
            "; unseen: families added after the modelling choices (nothing fitted or chosen "
            "with them in view); in view: their rows a later choice was made with"
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
    for key, title, heading in (
        ("by_family", "family", "family"),
        ("by_accelerator", "accelerator", "accelerator"),
        ("by_regime", "regime", "weight precision and replica size"),
        ("by_static_batch", "static_batch", "static batch (rows run as one batch)"),
    ):
        if not rep.get(key):
            continue
        cols[0] = title
        out.print(
            table(
                f"Inference by {heading} (out of sample; in-sample beside)",
                cols,
                _group_rows(rep[key], title),
                right=right,
            )
        )
    worst = sorted(rep["rows"], key=lambda r: -abs(r["error_out_of_sample_pct"]))
    shown = len(worst) if rows else min(WORST_ROWS_SHOWN, len(worst))
    out.print(
        table(
            f"Largest out-of-sample errors ({shown} of {len(worst)}; all: --rows; "
            "commands: --json)",
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
                for r in worst[:shown]
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


def _fitted_caption(name: str, f: Mapping[str, Any]) -> str:
    """One constant of `inference.fitted`: a fitted one with its fit rows' errors, a hand-set
    one with what a fit would pick and score."""
    folds = ", ".join(f"{k} {v}" for k, v in f["fit_without_family"].items())
    if f["fitted"]:
        return (
            f"{name} = {f['shipped']} (fitted on {f['in_sample']['n']} targets: in sample "
            f"{_pct(f['in_sample']['mape_pct'])}, refitted without each family ({folds}) "
            f"{_pct(f['out_of_sample']['mape_pct'])} out of sample)"
        )
    return (
        f"{name} = {f['shipped']} (hand-set; a fit per held-out family would pick {folds}, "
        f"out-of-sample MAPE {_pct(f['diagnostic_out_of_sample_if_fitted']['mape_pct'])})"
    )
