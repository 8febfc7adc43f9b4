"""The inverse question: what memory bandwidth and how many GPUs reach a target TPOT?

At small batch a decode step reads every weight (and the batch's KV cache) once, so
TPOT >= bytes per step / bandwidth. ``plan_for_target_tpot`` reports that roofline bandwidth
(100% of peak, no overhead), the peak bandwidth a real GPU needs once the achievable fraction and
the engine's per-step time are charged, and the smallest tensor-parallel group of the given
accelerator whose planned TPOT meets the target.

The seed's claim, "a 70B model at human reading speed needs ~2100 GB/s", is 70e9 parameters x
2 bytes (bf16) x 15 tokens/s = 2100 GB/s: it assumes batch 1, 16-bit weights, no KV cache and
15 tokens/s. Silent reading of English non-fiction averages 238 words/min (Brysbaert 2019,
J. Memory and Language 109:104047), about 5.3 tokens/s at 0.75 words per token (OpenAI's rule
of thumb), which needs about a third of that bandwidth; 15 tokens/s is closer to skimming.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.efficiency import MEMORY_BW_FRACTION
from flopwise.plan.infer.context import make_context
from flopwise.plan.infer.job import InferJob
from flopwise.plan.infer.phases import decode_phase
from flopwise.plan.infer.planner import plan_static
from flopwise.plan.infer.result import InferPlan
from flopwise.plan.infer.uncertainty import plan_intervals
from flopwise.units import GB
from flopwise.workload.memory_bytes import storage_bytes
from flopwise.workload.params import count_params
from flopwise.workload.spec import ModelSpec

#: Silent reading rate of English non-fiction, words per minute (Brysbaert 2019 meta-analysis).
READING_WORDS_PER_MIN = 238.0
#: Words per token for English with GPT-style BPE tokenizers (OpenAI: "~0.75 words per token").
WORDS_PER_TOKEN = 0.75
#: The token rate implied by the seed's 2100 GB/s for 70B parameters in 2 bytes.
SEED_TOKENS_PER_S = 15.0


def reading_tokens_per_s() -> float:
    return READING_WORDS_PER_MIN / 60.0 / WORDS_PER_TOKEN


def weights_only_bandwidth_gbps(params: float, weight_bytes: float, tokens_per_s: float) -> float:
    """The seed's arithmetic: every weight read once per token, nothing else."""
    return params * weight_bytes * tokens_per_s / GB


@dataclass(frozen=True, slots=True)
class TargetPlan:
    target_tpot_s: float
    batch: int
    bytes_per_step: float  # whole model, one replica: weights + KV at the mean context
    roofline_bw_gbps: float  # bytes / target (100% of peak, no overhead)
    required_peak_bw_gbps: float | None  # with achievable fraction and engine step time
    gpus: int | None  # smallest tp x pp group meeting the target (None: none up to the limit)
    tp: int | None
    pp: int | None
    plan: InferPlan | None
    best_tpot_s: float | None  # best TPOT tried when no group meets the target
    seed_check: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_tpot_ms": self.target_tpot_s * 1e3,
            "target_tokens_per_s_per_user": 1.0 / self.target_tpot_s,
            "batch": self.batch,
            "bytes_per_step_gb": self.bytes_per_step / GB,
            "roofline_bw_gbps": self.roofline_bw_gbps,
            "required_peak_bw_gbps": self.required_peak_bw_gbps,
            "gpus": self.gpus,
            "tp": self.tp,
            "pp": self.pp,
            "planned_tpot_ms": None if self.plan is None else self.plan.tpot_s * 1e3,
            "best_tpot_ms": None if self.best_tpot_s is None else self.best_tpot_s * 1e3,
            "plan": None if self.plan is None else self.plan.to_dict(),
            "seed_check": self.seed_check,
        }


def seed_check(model: ModelSpec, weight_dtype: str = "bf16") -> dict[str, Any]:
    """The seed's 2100 GB/s claim recomputed for `model`, with its assumptions spelled out."""
    params = float(count_params(model).total)
    b = storage_bytes(weight_dtype)
    reading = reading_tokens_per_s()
    return {
        "claim": "70B at human reading speed needs ~2100 GB/s",
        "assumptions": (
            f"batch 1, {weight_dtype} weights read once per token, KV cache and overheads "
            "ignored; the claim's 2100 GB/s = 70e9 x 2 B x 15 tokens/s"
        ),
        "params": params,
        "seed_tokens_per_s": SEED_TOKENS_PER_S,
        "seed_rate_bw_gbps": weights_only_bandwidth_gbps(params, b, SEED_TOKENS_PER_S),
        "reading_tokens_per_s": reading,
        "reading_speed_bw_gbps": weights_only_bandwidth_gbps(params, b, reading),
        "reading_speed_source": "238 words/min (Brysbaert 2019) at 0.75 words/token",
    }


def plan_for_target_tpot(
    model: ModelSpec, hardware: Hardware, job: InferJob, target_tpot_s: float, max_gpus: int = 64
) -> TargetPlan:
    """Bandwidth and GPUs needed for TPOT <= target at the job's batch (default 1) and lengths."""
    if target_tpot_s <= 0:
        raise FlopwiseError(f"--target-tpot-ms must be positive, got {target_tpot_s * 1e3:g}")
    batch = job.batch or 1
    base = replace(job, batch=batch, tp=1, pp=1, replicas=1)
    ctx = make_context(model, hardware, base)
    step = decode_phase(ctx, batch).breakdown
    n_bytes = step.weight_bytes + step.kv_bytes
    budget = target_tpot_s - ctx.engine.step_overhead_s
    peak_needed = None if budget <= 0 else n_bytes / budget / MEMORY_BW_FRACTION / GB
    found: InferPlan | None = None
    best: float | None = None
    domain = max(1, hardware.scaleup_domain)
    total = 1
    while total <= max_gpus:
        tp = min(total, domain)
        pp = total // tp
        trial = replace(base, tp=tp, pp=pp)
        try:
            plan = plan_static(make_context(model, hardware, trial), batch)
        except FlopwiseError:
            total *= 2
            continue
        if plan.fits is not False:
            best = plan.tpot_s if best is None else min(best, plan.tpot_s)
            if plan.tpot_s <= target_tpot_s:
                ranges = plan_intervals(hardware.id, ctx.engine.name, model.is_moe)
                found = replace(plan, intervals=ranges)
                break
        total *= 2
    return TargetPlan(
        target_tpot_s=target_tpot_s,
        batch=batch,
        bytes_per_step=n_bytes,
        roofline_bw_gbps=n_bytes / target_tpot_s / GB,
        required_peak_bw_gbps=peak_needed,
        gpus=None if found is None else found.job.tp * found.job.pp,
        tp=None if found is None else found.job.tp,
        pp=None if found is None else found.job.pp,
        plan=found,
        best_tpot_s=best,
        seed_check=seed_check(model, ctx.precision.weight),
    )
