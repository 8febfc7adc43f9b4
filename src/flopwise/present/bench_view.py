"""Terminal views of benchmark runs, and the progress bar (on stderr, so --json stays clean)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flopwise.present.console import console, fmt_num, fmt_rate, table

#: Rows of the per-shape table in the terminal view (JSON has them all).
TOP_SHAPES = 10


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@contextmanager
def matmul_progress(
    search: str, total_shapes: int | None, budget_s: float | None, enabled: bool = True
) -> Iterator[Callable[[Any, float], None]]:
    """Yield an on_shape(result, elapsed_s) callback that drives a progress bar on stderr.

    Grid: one step per shape. Directed search: the bar fills with the time budget. The text
    shows shapes done, the best median TFLOPS so far and the time left of the budget.
    """
    if not enabled:
        yield lambda _r, _e: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    best = [0.0]
    count = [0]
    budget = budget_s
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=_stderr_console(),
        transient=True,
    ) as bar:
        by_time = search not in ("grid", "shapes") and budget_s is not None
        total = budget_s if by_time else total_shapes
        task = bar.add_task(f"matmul {search}", total=total, info="")

        def on_shape(result: Any, elapsed_s: float) -> None:
            count[0] += 1
            if result.median_tflops:
                best[0] = max(best[0], result.median_tflops)
            shape = f"{result.m}x{result.n}x{result.k}"
            info = f"{count[0]} shapes, last {shape} {result.status}, best {best[0]:.3f} TFLOPS"
            if budget is not None:
                info += f", {max(budget - elapsed_s, 0.0):.0f} s left"
            if by_time:
                bar.update(task, completed=min(elapsed_s, total or elapsed_s), info=info)
            else:
                bar.update(task, advance=1, info=info)

        yield on_shape


@contextmanager
def rounds_progress(what: str, enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """Yield an on_round(done, total) callback: rounds done of total, elapsed and time left."""
    if not enabled:
        yield lambda _d, _t: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn(f"[bold]{what}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=_stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=None)

        def on_round(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield on_round


@contextmanager
def comms_progress(enabled: bool = True) -> Iterator[Callable[[Any, int, int], None]]:
    """Yield on_row(row, done, total): sizes done, best busbw so far per op, time left."""
    if not enabled:
        yield lambda _r, _d, _t: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    best: dict[str, float] = {}
    with Progress(
        TextColumn("[bold]comms"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        console=_stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("comms", total=None, info="")

        def on_row(row: Any, done: int, total: int) -> None:
            best[row.op] = max(best.get(row.op, 0.0), row.busbw_gbps)
            info = f"{row.op} {row.bytes} B, best busbw {best[row.op]:.2f} GB/s"
            bar.update(task, completed=done, total=total, info=info)

        yield on_row


def _shape(s: Any) -> str:
    return "—" if not s else "x".join(str(v) for v in s)


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{100 * value:.1f}%"


def _grouped_shape(r: dict[str, Any]) -> str:
    """'MxNxK', or 'G x MxNxK' for a grouped GEMM of G experts (M: tokens per expert)."""
    shape = _shape((r["m"], r["n"], r["k"]))
    groups = r.get("groups") or 1
    return f"{groups} x {shape}" if groups > 1 else shape


def show_matmul(doc: dict[str, Any], result_id: int | None = None) -> None:
    """Headline and the best shapes of one matmul run."""
    ok = [r for r in doc["results"] if r["status"] == "ok"]
    skipped = [r for r in doc["results"] if r["status"] != "ok"]
    listed = doc.get("search") == "shapes"  # a job's shapes: all of them, in the job's order
    top = ok if listed else sorted(ok, key=lambda r: r["median_tflops"] or 0.0, reverse=True)
    top = top if listed else top[:TOP_SHAPES]
    rows = [
        (
            _grouped_shape(r),
            fmt_num(r["median_tflops"], 3),
            fmt_num(r["max_tflops"], 3),
            _pct(r.get("spread")),
            f"{1e3 * r['median_s']:.3f}",
        )
        for r in top
    ]
    c = console()
    grouped = (
        f" (grouped, {doc['groups']} experts per call)" if (doc.get("groups") or 1) > 1 else ""
    )
    what = f"GEMMs of {doc['label']}" if listed and doc.get("label") else f"Best shapes{grouped}"
    c.print(
        table(
            f"{what}: {len(doc['results'])} tried on {doc['device']} "
            f"({doc['device_name']}), {doc['dtype']}, search {doc['search']}",
            ["[G x] M x N x K", "median TFLOPS", "max TFLOPS", "spread", "median ms"],
            rows,
            right=(1, 2, 3, 4),
        )
    )
    if skipped:
        c.print(
            f"skipped {len(skipped)} shape(s): "
            + ", ".join(f"{_shape((r['m'], r['n'], r['k']))} ({r['status']})" for r in skipped[:5])
            + (" ..." if len(skipped) > 5 else "")
        )
    groups = int(doc.get("groups") or 1)
    if listed:
        c.print(
            "--measured prices these shapes at these rates (grouped ones in the grouped kernel's "
            f"table; grouped kernel {doc.get('grouped_kernel') or 'none used'}); the best dense "
            "rate joins the device's MAMF window like a grid run's"
        )
    elif groups > 1:
        c.print(
            f"grouped GEMM: {groups} experts per call, each M x N x K (M: tokens per expert), "
            f"kernel {doc.get('grouped_kernel')}; TFLOPS count all {groups} products. "
            "--measured prices expert GEMMs from these shapes; the dense MAMF is not changed"
        )
    spec = doc.get("spec_tflops")
    c.print(
        f"best {fmt_num(doc['best_tflops'], 3)} TFLOPS (median over iterations, NT layout) at "
        f"{_shape(doc['best_shape'])} (fastest iteration there "
        f"{fmt_num(doc.get('best_max_tflops'), 3)}); "
        f"spec {fmt_num(spec, 1)} TFLOPS, efficiency {_pct(doc.get('efficiency'))}; "
        f"{doc['shapes_tried']} shapes in {doc['elapsed_s']:.1f} s ({doc['stop_reason']})"
    )
    if doc.get("stop_reason") == "budget":
        c.print(
            f"[bold]stopped by the budget[/bold] of {fmt_num(doc.get('budget_s'), 1)} s: "
            f"{doc.get('shapes_skipped_for_budget', 0)} shape(s) not started because they could "
            "not finish in the time left; these are the shapes measured (raise --budget-s for more)"
        )
    _footer(doc, result_id)


def show_matmul_devices(doc: dict[str, Any]) -> None:
    rows = [
        (
            r.get("device"),
            r.get("device_name", ""),
            fmt_num(r.get("best_tflops"), 3),
            _shape(r.get("best_shape")),
            r.get("status"),
            r.get("result_id", ""),
        )
        for r in doc["devices"]
    ]
    c = console()
    c.print(
        table(
            "Matmul TFLOPS per device",
            ["device", "name", "best TFLOPS", "at M x N x K", "status", "result id"],
            rows,
            right=(2,),
        )
    )
    slow = doc.get("slowest")
    if slow:
        c.print(
            f"slowest {slow['device']} at {fmt_num(slow['best_tflops'], 3)} TFLOPS; "
            f"spread {_pct(doc.get('spread'))} (fastest vs slowest)"
        )


def show_memory(doc: dict[str, Any], result_id: int | None = None) -> None:
    kernels = doc["kernels"]
    rows = [
        (
            name,
            fmt_num(k["gbps"], 1),
            fmt_num(k["median_gbps"], 1),
            f"{k['bytes_moved'] / 2**20:,.0f}",
            k["runs"],
        )
        for name, k in kernels.items()
    ]
    for label, key in (("host→device (pinned)", "h2d_gbps"), ("device→host (pinned)", "d2h_gbps")):
        if doc.get(key) is not None:
            rows.append((label, fmt_num(doc[key], 1), "", "", ""))
    c = console()
    c.print(
        table(
            f"Memory bandwidth on {doc['device']} ({doc['device_name']}), "
            f"arrays of {doc['array_bytes'] / 2**20:,.0f} MiB {doc['dtype']}",
            ["kernel", "best GB/s", "median GB/s", "MiB moved", "runs"],
            rows,
            right=(1, 2, 3, 4),
        )
    )
    c.print(
        f"triad {fmt_num(doc.get('triad_gbps'), 1)} GB/s; spec {fmt_num(doc.get('spec_gbps'), 0)}"
        f" GB/s, efficiency {_pct(doc.get('efficiency'))} (GB = 1e9 bytes)"
    )
    _footer(doc, result_id)


def _curve_text(fit: dict[str, Any] | None, peak: float | None, what: str) -> str:
    if not fit:
        return f"{what}: too few lengths to fit"
    frac = "" if not peak else f", {100 * fit['tflops_inf'] / peak:.0f}% of the dense peak"
    return (
        f"{what}: {fmt_rate(fit['tflops_inf'])} TFLOPS at long sequences{frac}, half of that at "
        f"{fit['s_half']:,.0f} tokens (fit within {100 * fit['mean_abs_log_error']:.1f}% on "
        "average)"
    )


def show_attention(doc: dict[str, Any], result_id: int | None = None) -> None:
    """Per sequence length: forward and backward time and TFLOPS, then the fitted curves."""
    peak = doc.get("peak_tflops")
    rows = [
        (
            f"{r['seq_len']:,}",
            r["batch"],
            f"{r['fwd_ms']:.3f}",
            fmt_rate(r["fwd_tflops"]),
            f"{r['bwd_ms']:.3f}",
            fmt_rate(r["bwd_tflops"]),
        )
        for r in doc["results"]
    ]
    for s, why in doc.get("skipped", {}).items():
        rows.append((f"{int(s):,}", "", "skipped", why, "", ""))
    c = console()
    c.print(
        table(
            f"Causal attention on {doc['device']} ({doc['device_name']}), {doc['dtype']}, "
            f"{doc['heads']} heads x {doc['head_dim']}, {doc['tokens_per_call']:,} tokens per "
            f"call, SDPA backend {doc['backend']}",
            ["seq len", "batch", "fwd ms", "fwd TFLOPS", "bwd ms", "bwd TFLOPS"],
            rows,
            right=(0, 1, 2, 3, 4, 5),
        )
    )
    c.print(_curve_text(doc.get("fwd_fit"), peak, "forward"))
    c.print(_curve_text(doc.get("bwd_fit"), peak, "backward"))
    c.print(
        "TFLOPS count the causal half of the square, backward 2.5x the forward; "
        "`flopwise plan train ... --measured latest` uses these curves"
    )
    _footer(doc, result_id)


def show_sustained(doc: dict[str, Any], result_id: int | None = None) -> None:
    rows = [
        (
            f"{w['t_s']:.1f}",
            fmt_rate(w["tflops"]),
            fmt_num(w.get("sm_clock_mhz"), 0, "—"),
            fmt_num(w.get("power_w"), 0, "—"),
            w["calls"],
        )
        for w in doc.get("windows", [])
    ]
    c = console()
    c.print(
        table(
            f"Sustained GEMM on {doc['device']} ({doc['device_name']}), {doc['size']:,}^3 "
            f"{doc['dtype']}, {doc['seconds']:g} s",
            ["t (s)", "TFLOPS", "SM clock (MHz)", "power (W)", "calls"],
            rows,
            right=(0, 1, 2, 3, 4),
        )
    )
    share = doc.get("gemm_share")
    burst, sustained = doc.get("burst_tflops"), doc.get("sustained_tflops")
    c.print(
        f"burst {'unknown' if burst is None else fmt_rate(burst)} TFLOPS, sustained (second "
        f"half) {'unknown' if sustained is None else fmt_rate(sustained)}: the device keeps "
        + ("an unknown share" if share is None else f"{share:.3f}")
        + " of its burst GEMM rate under load; `flopwise plan infer ... --measured latest` "
        "runs serving GEMMs at that share"
    )
    _footer(doc, result_id)


def _footer(doc: dict[str, Any], result_id: int | None) -> None:
    c = console()
    if doc.get("status") == "interrupted":
        c.print("[bold]interrupted[/bold]: these are the results measured before Ctrl-C")
    if result_id is not None:
        c.print(f"stored as result {result_id} (flopwise results show {result_id})")
