"""Terminal view of a comparison (rows from CompareResult.to_dict(); nothing is computed here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flopwise.present.console import console, fmt_count, fmt_money, fmt_num, table

_NET = {
    "matches": "ok",
    "slower": "SLOWER",
    "faster": "faster",
    "unknown": "?",
    "not used": "—",
    "offer only": "offer",
}


def layout_text(layout: dict[str, Any] | None) -> str:
    """'tp8 pp4 dp32 zero1' (+ cp/ep/vpp when > 1, recompute when not none)."""
    if not layout:
        return "—"
    parts = [f"{k}{layout[k]}" for k in ("tp", "pp", "dp") if k in layout]
    parts += [f"{k}{layout[k]}" for k in ("cp", "ep", "vpp") if (layout.get(k) or 1) > 1]
    if "zero" in layout:
        parts.append(f"zero{layout['zero']}")
    if layout.get("recompute") not in (None, "none"):
        block = f"{layout['recompute_layers']}" if layout.get("recompute_layers") else ""
        parts.append(f"rc-{layout['recompute']}{block}")
    return " ".join(parts)


def _where(r: dict[str, Any]) -> str:
    return f"{r['provider']} {r['instance']}"


def _price(r: dict[str, Any], dated: bool) -> str:
    if r["price_per_gpu_hour"] is None:
        return "unknown"
    text = f"{r['price_per_gpu_hour']:.2f}" + (" !" if r.get("price_stale") else "")
    return f"{text} ({_price_date(r)})" if dated else text


def _price_date(r: dict[str, Any]) -> str:
    return str(r.get("price_date") or r.get("price_published") or "date unknown")


def _range(iv: list[float] | None, fmt: Callable[[float], str] = fmt_num) -> str:
    """' (150-180)' when the plan gives a prediction interval, each end written by `fmt`,
    else nothing."""
    return "" if not iv else f" ({fmt(iv[0])}-{fmt(iv[1])})"


def _per_million(value: float) -> str:
    return f"{value:.3f}"


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1e6:
        return f"${value / 1e6:,.2f}M"
    return fmt_money(value)


def _train_rows(
    doc: dict[str, Any], dated: bool
) -> tuple[list[str], list[tuple[Any, ...]], tuple[int, ...]]:
    planned = any(r["layout"] for r in doc["rows"])
    goodput = any(r.get("effective_train_days") is not None for r in doc["rows"])
    cols = ["", "offer", "GPUs"] + (["layout", "step s"] if planned else [])
    cols += ["days", "cost"] + (["eff. days", "goodput", "eff. cost"] if goodput else [])
    cols += ["$/GPU-h" + (" (price date)" if dated else ""), "MFU", "net"]
    rows = [
        (
            "★" if r["pareto"] else "",
            _where(r),
            f"{r['instances']}x{r['gpus_per_instance']} {r['accelerator']}"
            + (" *" if r.get("gpus", 0) != r.get("gpus_requested", r.get("gpus")) else ""),
            *((layout_text(r["layout"]), fmt_num(r["step_time_s"], 2)) if planned else ()),
            fmt_num(r["train_days"]) + _range(r.get("train_days_interval")),
            _money(r["cost_usd"]) + _range(r.get("cost_usd_interval"), _money),
            *((*_effective(r), _money(r.get("effective_cost_usd"))) if goodput else ()),
            _price(r, dated),
            "—" if r["mfu"] is None else f"{r['mfu']:.0%}",
            _NET.get(r["network"]["status"], r["network"]["status"]),
        )
        for r in doc["rows"]
    ]
    right = tuple(
        i
        for i, c in enumerate(cols)
        if c in ("step s", "days", "cost", "eff. days", "goodput", "eff. cost", "MFU")
    )
    return cols, rows, right


def _effective(r: dict[str, Any]) -> tuple[str, str]:
    """Effective days and goodput cells (— where the row has no goodput)."""
    frac = r.get("goodput_fraction")
    return fmt_num(r.get("effective_train_days"), unknown="—"), (
        "—" if frac is None else f"{frac:.0%}"
    )


def _infer_rows(
    doc: dict[str, Any], dated: bool
) -> tuple[list[str], list[tuple[Any, ...]], tuple[int, ...]]:
    if doc["job"].get("num_requests") is not None:
        return _offline_rows(doc, dated)
    cols = ["", "offer", "GPUs", "batch", "TTFT ms", "TPOT ms", "tok/s", "$/M tok"]
    cols.append("$/GPU-h" + (" (price date)" if dated else ""))
    rows = [
        (
            "★" if r["pareto"] else "",
            _where(r),
            f"{r['replicas']}x{r['gpus_per_replica']} {r['accelerator']}",
            str(r["batch"]),
            fmt_num(r["ttft_ms"]) + _range(r.get("ttft_ms_interval")),
            fmt_num(r["tpot_ms"], 2) + _range(r.get("tpot_ms_interval")),
            fmt_num(r["output_tokens_per_s"], 0) + _range(r.get("output_tokens_per_s_interval")),
            "—"
            if r["cost_per_million_output_tokens"] is None
            else _per_million(r["cost_per_million_output_tokens"])
            + _range(r.get("cost_per_million_output_tokens_interval"), _per_million),
            _price(r, dated),
        )
        for r in doc["rows"]
    ]
    return cols, rows, (3, 4, 5, 6, 7)


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return fmt_num(seconds / 60, 1) + " min" if seconds >= 120 else fmt_num(seconds, 1) + " s"


def _offline_rows(
    doc: dict[str, Any], dated: bool
) -> tuple[list[str], list[tuple[Any, ...]], tuple[int, ...]]:
    """An offline batch per instance: when it is done and what the whole batch costs."""
    cols = ["", "offer", "GPUs", "running", "done in", "80% range", "tok/s", "batch $"]
    cols.append("$/GPU-h" + (" (price date)" if dated else ""))
    rows = []
    for r in doc["rows"]:
        iv = r.get("makespan_s_interval")
        cost = r.get("batch_cost_usd")
        rows.append(
            (
                "★" if r["pareto"] else "",
                _where(r),
                f"{r['replicas']}x{r['gpus_per_replica']} {r['accelerator']}",
                fmt_num(r.get("mean_running"), 0, unknown="—"),
                _span(r.get("makespan_s")),
                "—" if not iv else f"{_span(iv[0])}–{_span(iv[1])}",
                fmt_num(r["output_tokens_per_s"], 0),
                "—" if cost is None else f"{cost:,.2f}",
                _price(r, dated),
            )
        )
    return cols, rows, (3, 4, 5, 6, 7)


def show_compare(doc: dict[str, Any]) -> None:
    dates = {_price_date(r) for r in doc["rows"] if r["price_per_gpu_hour"] is not None}
    dated = len(dates) > 1
    job = doc["job"]
    model = doc["model"]
    if doc["kind"] == "train":
        title = (
            f"Training {model['name']} ({fmt_count(model['params'])} params) on "
            f"{fmt_count(job['tokens'])} tokens with {job['gpus']} GPUs, by {doc['sort']}"
        )
        cols, rows, right = _train_rows(doc, dated)
    else:
        title = (
            f"Serving {model['name']}: {job['input_len']} in / {job['output_len']} out tokens, "
            f"by {doc['sort']}; {job.get('batch_rule') or 'batch ' + str(job['batch'])}"
        )
        cols, rows, right = _infer_rows(doc, dated)
    planner = "training planner" if doc["kind"] == "train" else "inference planner"
    names = {"model": planner, "first-order": "first-order (assumed MFU)"}
    methods = sorted({names.get(r["method"], r["method"]) for r in doc["rows"]})
    as_of = ""
    if dates and not dated:
        only = next(iter(dates))
        as_of = {
            "date unknown": "Price publication dates unknown (snapshots; verify before use). ",
            "given": "Prices given on the command line. ",
        }.get(only, f"Prices published {only}. ")
    if any(r.get("price_stale") for r in doc["rows"]):
        as_of += "! price published over 90 days ago. "
    notes = sorted(
        {r["chips_note"] for r in doc["rows"] if r.get("gpus") != r.get("gpus_requested")}
    )
    if notes:
        as_of += "* " + "; ".join(notes) + ". "
    kinds = sorted({r["price_kind"] for r in doc["rows"]} - {"on_demand"})
    if kinds:
        as_of += f"Price kinds other than on-demand: {', '.join(kinds)}. "
    caption = as_of + (
        f"★ Pareto-optimal (no other row both faster and cheaper); ranked by "
        f"{doc['time_metric'].replace('_', ' ')} / {doc['cost_metric'].replace('_', ' ')}; "
        "--json 'ran' states what each row ran. Estimates: "
        f"{', '.join(methods) or 'none'}. net: offer network vs the plan's node type "
        "(ok/SLOWER/faster, ? = not published). "
        f"{len(doc['excluded'])} offers cannot run this job (see --json 'excluded')."
    )
    console().print(table(title, cols, rows, right=right, caption=caption))
    close = doc.get("within_error_of_first") or []
    if close:
        ranks = ", ".join(str(i) for i in close[:12]) + (" ..." if len(close) > 12 else "")
        console().print(
            f"  within the model's error of the first row (80% ranges of "
            f"{doc['ranking_metric'].replace('_', ' ')} overlap): rows {ranks}",
            markup=False,
        )
    _show_excluded(doc["excluded"])


def _show_excluded(excluded: list[dict[str, Any]], limit: int = 6) -> None:
    """Why offers cannot run the job: one line per distinct reason."""
    by_reason: dict[str, list[str]] = {}
    for e in excluded:
        by_reason.setdefault(e["reason"], []).append(f"{e['provider']} {e['instance']}")
    for reason, names in list(by_reason.items())[:limit]:
        shown = ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
        console().print(f"  not listed: {shown}: {reason}", markup=False)
    if len(by_reason) > limit:
        console().print(f"  ... {len(by_reason) - limit} more reasons in --json 'excluded'")
