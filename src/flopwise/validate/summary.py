"""One line per validation section: what a job the model has never seen can expect.

`flopwise validate` runs six sections (training, training runs nothing was fitted to, serving,
online serving, GEMM rates, goodput), each with its own tables. A reader who stops at the first
one sees training's out-of-sample error and nothing of the sections where the model does worst.
``summary_lines`` picks from each section's own report (``to_dict()`` of its validation) the
out-of-sample figure, the in-sample one where a constant was fitted there, the 80% interval
coverage where the section scores intervals, and splits the sections whose parts differ by more
than a few points (dense and MoE training runs; online TTFT, TPOT and tokens/s). Nothing is
recomputed: every number is one the section reports, so the summary cannot drift from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SummaryLine:
    """One scored set of published rows: its out-of-sample error and where it comes from."""

    section: str  # the `validate --only` section it comes from
    what: str  # what is compared, in words
    n: int
    mape_pct: float | None  # out of sample
    bias_pct: float | None  # out of sample, + where the plan's figure is above the published
    in_sample_mape_pct: float | None = None  # where a constant was fitted on these rows
    interval_coverage_pct: float | None = None  # share of rows inside their 80% interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "what": self.what,
            "n": self.n,
            "out_of_sample_mape_pct": self.mape_pct,
            "out_of_sample_bias_pct": self.bias_pct,
            "in_sample_mape_pct": self.in_sample_mape_pct,
            "interval_coverage_pct": self.interval_coverage_pct,
        }


def _line(
    section: str,
    what: str,
    stats: Mapping[str, Any] | None,
    in_sample: Mapping[str, Any] | None = None,
    coverage: float | None = None,
) -> SummaryLine | None:
    if not stats or not stats.get("n"):
        return None
    return SummaryLine(
        section=section,
        what=what,
        n=int(stats["n"]),
        mape_pct=stats.get("mape_pct"),
        bias_pct=stats.get("bias_pct"),
        in_sample_mape_pct=None if in_sample is None else in_sample.get("mape_pct"),
        interval_coverage_pct=coverage
        if coverage is not None
        else stats.get("interval_coverage_pct"),
    )


def _training(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    cov = rep.get("interval_coverage", {})
    return [
        _line(
            "training",
            "step time of published runs",
            rep.get("out_of_sample"),
            rep.get("in_sample"),
            cov.get("coverage_pct") if isinstance(cov, Mapping) else None,
        )
    ]


def _training_unseen(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    by_class = rep.get("by_class", {})
    return [
        _line(
            "training-unseen",
            f"newer tables, {kind} (nothing fitted)",
            by_class.get(kind),
        )
        for kind in ("dense", "moe")
    ]


def _inference(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    unseen = rep.get("unseen", {})
    families = ", ".join(sorted(unseen.get("families", {}))) or "unseen family"
    return [
        _line(
            "inference",
            "throughput and TTFT",
            rep.get("out_of_sample"),
            rep.get("in_sample"),
            rep.get("interval_coverage_pct"),
        ),
        _line("inference", f"{families} (unseen family)", unseen.get("summary")),
    ]


ONLINE_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "output_tokens_per_s": "tokens/s"}


def _online(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    by_metric = rep.get("by_metric", {})
    return [
        _line("online", f"closed loop: {ONLINE_NAMES.get(m, m)}", st) for m, st in by_metric.items()
    ]


def _matmul(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    # its in-sample rows are other rows (the ceilings' own shapes, the grouped fit's rows)
    return [_line("matmul", "GEMM TFLOPS by shape", rep)]


def _attention(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    # the Blackwell tables' own rows are in sample; the headline is the other published timings
    return [_line("attention", "attention kernel TFLOPS", rep.get("out_of_sample", {}))]


def _goodput(rep: Mapping[str, Any]) -> list[SummaryLine | None]:
    if not rep.get("n"):
        return []
    oos = rep.get("mape_out_of_sample_pct")
    stats = {"n": rep["n"] - int(rep.get("n_in_sample", 0)), "mape_pct": oos, "bias_pct": None}
    return [
        _line(
            "goodput",
            "failures, checkpoints, restarts",
            stats,
        )
    ]


_SECTIONS = {
    "training": _training,
    "training_unseen": _training_unseen,
    "inference": _inference,
    "online": _online,
    "matmul": _matmul,
    "attention": _attention,
    "goodput": _goodput,
}


def summary_lines(doc: Mapping[str, Mapping[str, Any]]) -> list[SummaryLine]:
    """The summary of the sections in `doc` (``validate --json``'s section reports), in the
    order they ran."""
    out: list[SummaryLine] = []
    for section, rep in doc.items():
        pick = _SECTIONS.get(section)
        if pick is None or not isinstance(rep, Mapping):
            continue
        out += [line for line in pick(rep) if line is not None]
    return out
