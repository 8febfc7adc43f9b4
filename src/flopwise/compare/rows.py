"""Typed comparison rows: what each offer ran (GPUs, layout, batch), what it costs, and how old
its price is. Built by the engine from planner results; presenters read ``to_dict()``."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, fields
from typing import Any

#: A price published more than this many days before today is flagged as stale: cloud GPU list
#: prices moved by 10-45% within single quarters in 2025 (AWS cut P4/P5 prices by up to 45% in
#: June 2025), so a quarter-old price is a hint, not a quote.
PRICE_STALE_DAYS = 90

#: Fabrics/accelerators sold as fixed slices (whole pods or slices of one), not free GPU counts.
SLICE_FABRICS: tuple[str, ...] = ("ici",)
SLICE_ACCELERATOR_PREFIXES: tuple[str, ...] = ("tpu-", "trainium")

#: Interval keys a plan's to_dict() may carry ([low, high] each); copied onto rows when present.
TRAIN_INTERVALS: tuple[str, ...] = (
    "step_time_s_interval",
    "train_days_interval",
    "tokens_per_s_interval",
)
INFER_INTERVALS: tuple[str, ...] = ("ttft_ms_interval", "tpot_ms_interval")


def price_date(
    published: str | None, kind: str, today: _dt.date | None = None
) -> tuple[str, int | None, bool]:
    """(label, age in days, stale) for a price: its publication date when known, "given" for a
    price the user typed, else "date unknown" (the date a snapshot was read is not its date)."""
    if kind == "given":
        return "given", None, False
    if not published:
        return "date unknown", None, False
    try:
        day = _dt.date.fromisoformat(published[:10])
    except ValueError:
        return "date unknown", None, False
    age = ((today or _dt.date.today()) - day).days
    return day.isoformat(), age, age > PRICE_STALE_DAYS


def is_slice(accelerator: str, fabric: str) -> bool:
    return fabric in SLICE_FABRICS or accelerator.startswith(SLICE_ACCELERATOR_PREFIXES)


def slice_chips(requested: int, slice_size: int) -> tuple[int, str]:
    """Chips to plan on for an accelerator sold in slices of `slice_size`, and the row's note:
    the requested count when it is whole slices, else the nearest whole number of slices."""
    if requested % slice_size == 0:
        n = requested // slice_size
        return requested, f"{n} x {slice_size}-chip slice{'s' if n > 1 else ''}, as asked"
    n = max(1, round(requested / slice_size))
    chips = n * slice_size
    return chips, (
        f"planned at {chips:,} chips ({n} x {slice_size}-chip slice{'s' if n > 1 else ''}), the "
        f"nearest whole slices to the {requested:,} asked"
    )


def layout_summary(layout: dict[str, Any] | None) -> str:
    """'tp8 pp4 dp32' (+ cp/ep/vpp when > 1, zero stage)."""
    if not layout:
        return "layout unknown"
    parts = [f"{k}{layout[k]}" for k in ("tp", "pp", "dp") if k in layout]
    parts += [f"{k}{layout[k]}" for k in ("cp", "ep", "vpp") if (layout.get(k) or 1) > 1]
    if layout.get("zero"):
        parts.append(f"zero{layout['zero']}")
    return " ".join(parts)


def _interval(value: Any) -> tuple[float, float] | None:
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) for v in value)
    ):
        return (float(value[0]), float(value[1]))
    return None


def scaled_interval(value: Any, factor: float | None) -> tuple[float, float] | None:
    iv = _interval(value)
    if iv is None or factor is None:
        return None
    return (iv[0] * factor, iv[1] * factor)


_TRAIN_ONLY: tuple[str, ...] = (
    "step_time_s",
    "mfu",
    "train_days",
    "gpu_hours",
    "cost_usd",
    "global_batch_seqs",
    "seq_len",
    "step_time_s_interval",
    "train_days_interval",
    "tokens_per_s_interval",
    "cost_usd_interval",
    "effective_train_days",
    "effective_cost_usd",
    "goodput_fraction",
    "goodput",
)
_INFER_ONLY: tuple[str, ...] = (
    "batch",
    "gpus_per_replica",
    "replicas",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_s",
    "output_tokens_per_s",
    "cost_per_million_output_tokens",
    "ttft_ms_interval",
    "tpot_ms_interval",
    "output_tokens_per_s_interval",
    "cost_per_million_output_tokens_interval",
    "e2e_latency_s_interval",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompareRow:
    """One offer running the job. Train rows fill the training fields, infer rows the
    inference ones; `to_dict()` leaves out the other kind's."""

    kind: str  # "train" | "infer"
    # where
    provider: str
    instance: str
    region: str
    accelerator: str
    system: str | None
    gpus_per_instance: int
    fabric: str
    offer_network_gbit_s: float | None
    # price
    price_per_hour: float | None
    price_per_gpu_hour: float | None
    price_kind: str
    price_source: str | None
    price_as_of: str | None  # the date the price was read
    price_published: str | None  # the date the price was published, when known
    price_date: str  # published date, "given" or "date unknown"
    price_age_days: int | None
    price_stale: bool
    # what it ran
    gpus: int
    gpus_requested: int
    instances: int
    gpus_billed: int
    chips_note: str | None
    layout: dict[str, Any] | None
    ran: str
    method: str
    fits: bool | None
    memory_per_gpu_gib: float | None
    device_memory_gib: float | None
    breakdown: dict[str, Any] | None
    memory_breakdown: dict[str, Any] | None
    network: dict[str, Any]
    measured: list[str]
    #: Where each hardware number the plan used came from ("catalog: URL (as of date)",
    #: "measured: result id", "assumed: ..."), so every figure a row shows can be traced.
    hardware_sources: dict[str, str] = field(default_factory=dict)
    pareto: bool = False
    # training
    step_time_s: float | None = None
    mfu: float | None = None
    train_days: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    global_batch_seqs: int | None = None
    seq_len: int | None = None
    # inference
    batch: int | None = None
    gpus_per_replica: int | None = None
    replicas: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_latency_s: float | None = None
    output_tokens_per_s: float | None = None
    cost_per_million_output_tokens: float | None = None
    # prediction intervals ([low, high]) when the planner gives them, else None
    step_time_s_interval: tuple[float, float] | None = None
    train_days_interval: tuple[float, float] | None = None
    tokens_per_s_interval: tuple[float, float] | None = None
    cost_usd_interval: tuple[float, float] | None = None
    ttft_ms_interval: tuple[float, float] | None = None
    tpot_ms_interval: tuple[float, float] | None = None
    output_tokens_per_s_interval: tuple[float, float] | None = None
    cost_per_million_output_tokens_interval: tuple[float, float] | None = None
    e2e_latency_s_interval: tuple[float, float] | None = None
    # goodput: expected days and cost with failures and restarts, when the planner gives them
    effective_train_days: float | None = None
    effective_cost_usd: float | None = None
    goodput_fraction: float | None = None
    goodput: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> CompareRow:
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in values.items() if k in names}
        known["extra"] = {k: v for k, v in values.items() if k not in names}
        return cls(**known)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        skip = set(_INFER_ONLY if self.kind == "train" else _TRAIN_ONLY)
        skip.add("extra")
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in skip:
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        out.update(self.extra)
        return out
