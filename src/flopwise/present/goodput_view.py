"""Terminal view of a plan's goodput (the dict Goodput.to_dict() returns). No computing."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, fmt_money, fmt_num, table


def _s(value: float | None) -> str:
    if value is None:
        return "unknown"
    if value >= 3600:
        return f"{value / 3600:,.1f} h"
    if value >= 120:
        return f"{value / 60:,.1f} min"
    return f"{value:,.2f} s"


def _tb(n_bytes: float | None) -> str:
    return "unknown" if n_bytes is None else f"{n_bytes / 1e12:,.2f} TB"


def show_goodput(g: dict[str, Any]) -> None:
    d = g["detail"]
    frac = g["goodput_fraction"]
    mode = "async (host snapshot, drain overlaps)" if d["async_checkpoint"] else "synchronous"
    rows = [
        (
            "interruptions per day",
            f"{g['interruptions_per_day']:.3g} ({d['unexpected_per_day']:.3g} unexpected)",
        ),
        (
            "job MTBF",
            "none expected" if g["job_mtbf_h"] is None else f"{fmt_num(g['job_mtbf_h'], 2)} h",
        ),
        (
            "checkpoint size",
            f"{_tb(g['checkpoint_bytes'])} "
            f"({d['checkpoint_bytes_per_gpu'] / 2**30:,.2f} GiB on the busiest GPU)",
        ),
        (
            "checkpoint write / load",
            f"{_s(g['checkpoint_write_s'])} / {_s(d['checkpoint_read_s'])}",
        ),
        ("checkpoint stall", f"{_s(g['checkpoint_stall_s'])} per checkpoint, {mode}"),
        ("checkpoint interval", f"{_s(g['checkpoint_interval_s'])} (Young/Daly unless given)"),
        ("lost work per failure", _s(g["lost_work_per_failure_s"])),
        ("restart", f"{_s(g['restart_s'])} (detection, relaunch, load, warm-up)"),
        ("goodput", "unknown" if frac is None else f"{frac:.1%}"),
        (
            "time",
            f"{fmt_num(d['ideal_train_days'])} ideal -> "
            f"{fmt_num(g['effective_train_days'])} effective days",
        ),
        (
            "GPU-hours",
            f"{fmt_num(d['ideal_gpu_hours'], 0)} ideal -> "
            f"{fmt_num(g['effective_gpu_hours'], 0)} effective",
        ),
        (
            "cost",
            f"{fmt_money(d['ideal_cost_usd'])} ideal -> "
            f"{fmt_money(g['effective_cost_usd'])} effective",
        ),
    ]
    caption = f"failures: {d['failure_source']}. storage: {d['storage_source']}."
    out = console()
    out.print(table("Goodput", ["", ""], rows, caption=caption))
    for note in g.get("notes", []):
        out.print(f"  {note}", markup=False)
