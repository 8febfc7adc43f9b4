"""Terminal view of `flopwise bench step` (the dict bench.step.run_step returns). No computing."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import console, fmt_num, table


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{100 * value:.1f}%"


def show_step(doc: dict[str, Any]) -> None:
    pred = doc.get("predicted") or {}
    rows = [
        ("model", f"{doc['model']}: {doc['reduced']}"),
        (
            "job",
            f"{doc['world_size']} x {doc['device']} ({doc['device_name']}), {doc['dtype']}, "
            f"microbatch {doc['microbatch']} x {doc['seq_len']} tokens, {doc['layers']} layer(s), "
            f"{doc['params']:,} params",
        ),
        (
            "measured",
            f"{fmt_num(doc['step_time_s'], 4)} s/step (median of {doc['steps']}), "
            f"{fmt_num(doc['tokens_per_s'], 1)} tokens/s, "
            f"{fmt_num(doc['tflops_per_device'], 3)} TFLOPS/device, MFU {_pct(doc['mfu'])}",
        ),
        (
            "predicted",
            f"{fmt_num(pred.get('step_time_s'), 4)} s/step, "
            f"{fmt_num(pred.get('tokens_per_s'), 1)} tokens/s, MFU {_pct(pred.get('mfu'))}",
        ),
        ("measured / predicted", fmt_num(doc.get("calibration"), 3)),
        ("MFU peak", f"{fmt_num(doc.get('peak_tflops'), 3)} TFLOPS: {doc['peak_source']}"),
        ("prediction basis", str(pred.get("note", ""))),
    ]
    c = console()
    c.print(table("Training step, measured and predicted", ["", ""], rows))
    if doc.get("status") == "interrupted":
        c.print("[bold]interrupted[/bold]: these are the steps timed before Ctrl-C")
    if doc.get("result_id") is not None:
        c.print(
            f"stored as result {doc['result_id']}; plan train --measured uses the ratio as this "
            "device's calibration"
        )
