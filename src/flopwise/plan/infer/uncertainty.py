"""80% prediction intervals of an inference plan: which regime it falls in, and its factors.

The regime is (accelerator validated by published serving rows or not) x (engine named or
``generic``) x (dense or MoE); the factors come from ``catalog/data/intervals_inference.json``
(out-of-sample residuals, see ``flopwise.validate.intervals_fit``). TTFT and output tokens/s have
their own residuals; TPOT takes the inverse of the tokens/s interval (at a fixed running batch,
time per token is batch / tokens per second). A regime without enough residuals of its own
borrows the dense one of the same accelerator/engine class and says so in ``source``.
Closed-loop plans (``--concurrency``) take, per metric, the residuals of published closed-loop
sweeps of their model class where at least two deployments were scored (``online_intervals``):
TTFT there includes the queueing and cold start the offline residuals never saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopwise.plan.intervals import Interval, interval_for, load_interval_file

KIND = "inference"


def regime_name(validated: bool, engine_known: bool, moe: bool) -> str:
    return "/".join(
        (
            "validated-accelerator" if validated else "unvalidated-accelerator",
            "named-engine" if engine_known else "generic-engine",
            "moe" if moe else "dense",
        )
    )


def is_validated(accelerator_id: str) -> bool:
    """Whether published serving rows of this accelerator were scored (intervals file)."""
    return accelerator_id in load_interval_file(KIND).get("validated_accelerators", ())


def _lookup(validated: bool, engine_known: bool, moe: bool, metric: str) -> Interval | None:
    found = interval_for(KIND, regime_name(validated, engine_known, moe), metric)
    if found is not None or not moe:
        return found
    dense = interval_for(KIND, regime_name(validated, engine_known, False), metric)
    if dense is None:
        return None
    return replace(
        dense,
        regime=regime_name(validated, engine_known, True),
        source=f"no MoE residuals for this metric; dense regime's used ({dense.source})",
    )


def plan_intervals(accelerator_id: str, engine_name: str, moe: bool) -> dict[str, Interval]:
    """Intervals by metric (ttft_ms, tpot_ms, output_tokens_per_s); empty without data."""
    validated = is_validated(accelerator_id)
    known = engine_name != "generic"
    scored = load_interval_file(KIND).get("scored_engines", ())
    out: dict[str, Interval] = {}
    tok = _lookup(validated, known, moe, "output_tokens_per_s")
    if tok is not None:
        out["output_tokens_per_s"] = tok
        inv = tok.inverse()
        out["tpot_ms"] = replace(inv, source=f"inverse of the tokens/s interval ({tok.source})")
    ttft = _lookup(validated, known, moe, "ttft_ms")
    if ttft is not None:
        out["ttft_ms"] = ttft
    if known and scored and engine_name not in scored:
        note = f"no scored rows of {engine_name}: residuals of {', '.join(scored)} rows; "
        out = {m: replace(iv, source=note + iv.source) for m, iv in out.items()}
    return out


def online_regime_name(moe: bool) -> str:
    """The intervals file's regime of closed-loop plans of a model class."""
    return f"online/{'moe' if moe else 'dense'}"


def online_intervals(moe: bool) -> dict[str, Interval]:
    """Intervals of a closed-loop plan (``--concurrency``) by metric (ttft_ms, tpot_ms,
    output_tokens_per_s), from the published closed-loop sweeps of its model class (the
    intervals file's ``online/dense`` and ``online/moe`` regimes); empty where too few
    deployments were scored for a metric."""
    regime = online_regime_name(moe)
    out: dict[str, Interval] = {}
    for metric in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        found = interval_for(KIND, regime, metric)
        if found is not None:
            out[metric] = found
    return out


def interval_fields(
    intervals: Mapping[str, Interval], values: Mapping[str, float]
) -> dict[str, Any]:
    """``<metric>_interval: [lo, hi]`` (None without residuals) per value, and the details."""
    out: dict[str, Any] = {
        f"{metric}_interval": (
            list(intervals[metric].around(value)) if metric in intervals else None
        )
        for metric, value in values.items()
    }
    out["intervals"] = {m: iv.to_dict() for m, iv in intervals.items()}
    return out


def deployment_name(accelerator_id: str, engine: str, moe: bool) -> str:
    return f"{accelerator_id}/{engine}/{'moe' if moe else 'dense'}"


def validation_assumptions(
    accelerator_id: str,
    weight_dtype: str | None = None,
    engine: str | None = None,
    moe: bool = False,
) -> tuple[str, ...]:
    """The assumptions lines of a plan on an accelerator, with a weight dtype, or with an
    engine and model class on that accelerator, that no published serving row validates."""
    out: list[str] = []
    if not is_validated(accelerator_id):
        out.append(
            f"assumed: no published serving runs validate {accelerator_id}; its rates come from "
            "the spec sheet and MAMF (or peak x the default fraction), and its intervals from "
            "residuals of accelerators scored as if unseen"
        )
    else:
        deployments = set(load_interval_file(KIND).get("scored_deployments", ()))
        name = deployment_name(accelerator_id, engine or "", moe)
        if engine not in (None, "generic") and deployments and name not in deployments:
            here = sorted(
                d.split("/", 1)[1].replace("/", " ")
                for d in deployments
                if d.startswith(f"{accelerator_id}/")
            )
            out.append(
                f"assumed: no published {engine} run of a{' mixture-of-experts' if moe else ' dense'}"
                f" model on {accelerator_id} was scored (scored there: {', '.join(here)}); the "
                "engine profile's constants come from its cited sources, and its intervals from "
                "the deployments that were scored"
            )
    scored = sorted(
        {weight_class(d) for d in load_interval_file(KIND).get("validated_weight_dtypes", ())}
    )
    if weight_dtype is not None and scored and weight_class(weight_dtype) not in scored:
        out.append(
            f"assumed: no published serving run with {weight_dtype} weights was scored (scored: "
            f"{', '.join(scored)}); its GEMM rates and kernels are modelled, not validated, and "
            "its intervals are those of the scored precisions"
        )
    return tuple(out)


def deployment_record_key(accelerator_id: str, engine: str, moe: bool, weight_dtype: str) -> str:
    """accelerator/engine/dense|moe/weight class: the key of the intervals file's
    ``deployment_records``, written by validate.intervals_fit and read by deployment_record."""
    return f"{deployment_name(accelerator_id, engine, moe)}/{weight_class(weight_dtype)}"


def deployment_record(accelerator_id: str, engine: str, moe: bool, weight_dtype: str) -> str | None:
    """One line on how this deployment's published runs compared with the plan (the intervals
    file's ``deployment_records``: measured / planned output tokens/s, at least MIN_RESIDUALS
    runs), or None when none were scored."""
    key = deployment_record_key(accelerator_id, engine, moe, weight_dtype)
    rec = load_interval_file(KIND).get("deployment_records", {}).get(key)
    if not rec:
        return None
    return (
        f"published runs of this deployment ({key}): {int(rec['n'])} scored, measured/planned "
        f"output tokens/s median {rec['median']:.2f} (10th-90th percentile {rec['lo']:.2f}-"
        f"{rec['hi']:.2f}); flopwise validate --only inference lists them"
    )


def weight_class(dtype: str) -> str:
    """bf16 and fp16 weights run the same 16-bit kernels: one class."""
    return "16-bit" if dtype in ("bf16", "fp16") else dtype
