"""The training plan: best layout, memory and time breakdowns, MFU, days, GPU-hours, dollars."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.assumptions import hardware_by_origin
from flopwise.plan.attention_rate import ATTENTION_BASIS_SOURCES, chunk_attention_rates
from flopwise.units import GIB, SECONDS_PER_DAY, SECONDS_PER_HOUR
from flopwise.workload.spec import ModelSpec

from .context import ModelContext
from .frameworks import RECOMPUTE_REPLAY_TEXT, constrain
from .interval import StepInterval, is_attention_bound, step_interval
from .job import TrainJob
from .layout import (
    Layout,
    LayoutConstraints,
    explain_constraints,
    layout_problem,
    zero_shard_gpus,
)
from .muon import MUON_SOURCE, check_muon_sharding, muon_managed_share
from .pipeline_layout import parse_pipeline_layout
from .pointwise import pointwise_summary
from .search import Candidate, SearchOutcome, search
from .summary import context_summary

FLOPS_CONVENTION = (
    "model FLOPs = 3 passes x (2 x active matmul weights incl. logits + attention "
    "QK^T/PV over the full sequence, causal mask not halved), as Megatron-LM Eq. 3, PaLM "
    "App. B and MosaicML count; hw FLOPs add the recompute forward"
)


@dataclass(frozen=True, slots=True)
class TrainPlan:
    """One planned training job. `to_dict()` is the JSON form `flopwise plan train` prints."""

    model: ModelSpec
    hardware: Hardware
    job: TrainJob
    ctx_summary: dict[str, Any]
    best: Candidate
    fits: bool | None
    outcome: SearchOutcome
    searched: bool
    why_not: str | None = None  # when nothing fits: why, and what would
    suggestions: tuple[str, ...] = ()

    # ---- derived metrics -------------------------------------------------------------------
    @property
    def step_time_s(self) -> float:
        return self.best.step_time_s

    @property
    def tokens_per_s(self) -> float:
        return self.job.tokens_per_step / self.step_time_s

    @property
    def model_flops_per_step(self) -> float:
        return float(self.ctx_summary["model_flops_per_token"]) * self.job.tokens_per_step

    @property
    def hw_flops_per_step(self) -> float:
        lay = self.best.layout
        rc = float(self.ctx_summary["recompute_flops_per_token"][lay.recompute])
        if lay.recompute == "full":
            rc *= lay.recompute_share(self.model.layers)  # block recompute: some layers
        return self.model_flops_per_step + rc * self.job.tokens_per_step

    @property
    def tflops_per_gpu(self) -> float:
        return self.model_flops_per_step / self.step_time_s / self.job.gpus / 1e12

    @property
    def hw_tflops_per_gpu(self) -> float:
        return self.hw_flops_per_step / self.step_time_s / self.job.gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.tflops_per_gpu / float(self.ctx_summary["peak_tflops"])

    @property
    def hfu(self) -> float:
        return self.hw_tflops_per_gpu / float(self.ctx_summary["peak_tflops"])

    @property
    def train_s(self) -> float | None:
        return None if self.job.tokens is None else self.job.tokens / self.tokens_per_s

    @property
    def gpu_hours(self) -> float | None:
        s = self.train_s
        return None if s is None else s * self.job.gpus / SECONDS_PER_HOUR

    @property
    def cost_usd(self) -> float | None:
        gh, price = self.gpu_hours, self.job.price_per_gpu_hour
        return None if gh is None or price is None else gh * price

    @property
    def interval(self) -> StepInterval | None:
        """80% interval on the step time from out-of-sample validation residuals."""
        from flopwise.plan.sustained import has_calibrated_compute_fraction

        # a die fitted by a training family (not one whose fraction rests on an unseen run)
        return step_interval(
            has_calibrated_compute_fraction(self.hardware.id),
            self.job.framework != "generic",
            self.model.is_moe,
            attention_bound=is_attention_bound(self.attention_share),
        )

    @property
    def attention_share(self) -> float:
        """The attention core's share of the best layout's step compute (recompute included)."""
        return self.best.step.attention_share

    def _intervals(self) -> dict[str, Any]:
        """Every time-derived figure as [lo, hi] (None without an interval or the figure)."""
        iv = self.interval
        keys = ("step_time_s", "tokens_per_s", "train_days", "gpu_hours", "cost_usd", "mfu")
        if iv is None:
            return {f"{k}_interval": None for k in keys} | {"interval": None}
        train_s = self.train_s

        def scaled(v: float | None) -> list[float] | None:
            return None if v is None else [v * iv.lo, v * iv.hi]

        def inverse(v: float) -> list[float]:
            return [v / iv.hi, v / iv.lo]

        return {
            "step_time_s_interval": scaled(self.step_time_s),
            "tokens_per_s_interval": inverse(self.tokens_per_s),
            "mfu_interval": inverse(self.mfu),
            "train_days_interval": scaled(None if train_s is None else train_s / SECONDS_PER_DAY),
            "gpu_hours_interval": scaled(self.gpu_hours),
            "cost_usd_interval": scaled(self.cost_usd),
            "interval": iv.to_dict(),
        }

    def _measured_inputs(self) -> dict[str, Any]:
        """The measured hardware numbers this plan used: a bench step calibrates plans of its
        own class (dense or MoE), so the other class's calibration is not listed."""
        unused = "step_calibration" if self.model.is_moe else "step_calibration_moe"
        measured = hardware_by_origin(self.hardware, "measured")
        out = {k: v for k, v in measured.items() if k != unused}
        note = self.ctx_summary.get("fraction_note")
        for key in ("power_capped_gemm_share", "power_capped_gemm_share_fp8"):
            if key in out and note:
                # how the measured power-cap shares priced this plan's GEMMs and attention
                out[key] = {**out[key], "training": note}
        return out

    def to_dict(self) -> dict[str, Any]:
        job, best = self.job, self.best
        train_s = self.train_s
        c = self.ctx_summary
        mem = best.memory.to_dict()
        notes = self._notes()
        return {
            **({"notes": notes} if notes else {}),
            "method": "model",
            "note": "step-time model: GEMMs by shape, attention, memory-bound ops, exposed "
            "communication per parallel dimension, pipeline bubble, optimizer",
            "model": self.model.name,
            "accelerator": self.hardware.id,
            "system": self.hardware.system_id,
            "measured": self._measured_inputs(),
            "assumed": {**hardware_by_origin(self.hardware, "assumed"), **c.get("assumed", {})},
            "gpus_per_node": c["gpus_per_node"],
            "dtype": job.dtype,
            "recipe": job.recipe_name,
            "fp8_recipe": job.fp8_recipe_name if job.dtype == "fp8" else None,
            "params": c["params"],
            "active_params": c["active_params"],
            "tokens": job.tokens,
            "seq_len": job.seq_len,
            "global_batch_seqs": job.global_batch_seqs,
            "global_batch_tokens": job.tokens_per_step,
            "flops_per_token": c["model_flops_per_token"],
            "flops_convention": FLOPS_CONVENTION,
            "total_flops": None if job.tokens is None else c["model_flops_per_token"] * job.tokens,
            "gpus": job.gpus,
            "layout": {
                **best.layout.to_dict(),
                "microbatches_per_step": best.microbatches,
                "zero_shard_gpus": self._shard_gpus(best.layout),
            },
            "fits": self.fits,
            "memory_per_gpu_gib": best.memory.total / GIB,
            "device_memory_gib": c["device_memory_gib"],
            "memory_margin_gib": self._margin_gib(),
            "memory_headroom_gib": c.get("memory_headroom_gib"),
            "memory_breakdown": mem,
            "step_time_s": self.step_time_s,
            "breakdown": best.step.to_dict(),
            "attention_share": self.attention_share,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "hw_tflops_per_gpu": self.hw_tflops_per_gpu,
            "peak_tflops": c["peak_tflops"],
            "mfu": self.mfu,
            "hfu": self.hfu,
            "train_s": train_s,
            "train_days": None if train_s is None else train_s / SECONDS_PER_DAY,
            "gpu_hours": self.gpu_hours,
            "price_per_gpu_hour": job.price_per_gpu_hour,
            "cost_usd": self.cost_usd,
            **self._intervals(),
            "framework": job.profile.to_dict(),
            "attention": self._attention_dict(),
            "pointwise": pointwise_summary(job),
            "recompute_replay": self._recompute_replay_dict(),
            "optimizer": self._optimizer_dict(),
            "ep_dispatcher": job.ep_dispatcher,
            "pipeline_layout": self._pipeline_layout_dict(),
            "mtp_layers": job.mtp_layers,
            "lora": self._lora_dict(),
            "document_len": job.document_len,
            "objective": job.objective,
            "search": self._search_dict(),
        }

    def _attention_dict(self) -> dict[str, Any]:
        """The attention kernel the step prices and where its rate comes from
        (plan/attention_rate.py): for a fused kernel, the fractions of the dense 16-bit peak it
        reaches forward and backward over the kernel's sequence (one context-parallel chunk), at
        the model's head dimension, before the sustained fraction the step multiplies them by."""
        kernel = self.job.attention_kernel
        if kernel not in ("flash", "flash2"):
            return {
                "kernel": kernel,
                "basis": "gemms",
                "source": "unfused: QK^T and PV as batched GEMMs at the GEMM model's rate, "
                "plus the score matrix's HBM traffic",
            }
        cp = self.best.layout.cp
        peak16 = float(self.ctx_summary["peak16_tflops"]) * 1e12
        fwd, bwd = chunk_attention_rates(
            self.hardware, kernel, self.job.seq_len, cp, peak16, self.model
        )
        return {
            "kernel": kernel,
            "basis": fwd.basis,
            "source": ATTENTION_BASIS_SOURCES[fwd.basis],
            "kernel_len_tokens": self.job.seq_len / cp,
            "fwd_fraction_of_peak16": fwd.fraction,
            "bwd_fraction_of_peak16": bwd.fraction,
            "sustained_fraction": self.ctx_summary["sustained_compute_fraction"],
        }

    def _recompute_replay_dict(self) -> dict[str, str] | None:
        """What the best layout's full recompute re-runs (frameworks.RECOMPUTE_REPLAY_MODES);
        None when it recomputes nothing in full."""
        if self.best.layout.recompute != "full":
            return None
        mode = self.job.recompute_replay_mode
        return {"mode": mode, "what": RECOMPUTE_REPLAY_TEXT[mode]}

    def _lora_dict(self) -> dict[str, Any] | None:
        """LoRA fine-tuning (plan/train/lora.py): the adapters' rank, targets and trained
        parameters; None when every weight is trained."""
        job = self.job
        if not job.lora_rank:
            return None
        adapters = float(self.ctx_summary["adapter_params"])
        return {
            "rank": job.lora_rank,
            "targets": list(job.lora_target_names),
            "trainable_params": adapters,
            "trainable_share": adapters / float(self.ctx_summary["params"]),
            "frozen": "every base weight: no weight-gradient GEMM, gradient, optimizer state "
            "or gradient traffic",
            "flops_convention": "the frozen weights' matmuls count 2 passes (forward, data "
            "gradient), the adapters' 3, attention 3",
            "base_weights": "nf4" if job.qlora else "16-bit",
        }

    def _notes(self) -> list[str]:
        """What the plan leaves out that the model's config has."""
        out = []
        n = self.model.extra_layers_excluded
        if n and not self.job.mtp_layers:
            out.append(
                f"{self.model.name} has {n} multi-token-prediction module{'s' if n > 1 else ''}, "
                f"not trained in this plan; give --mtp-layers {n} to price {'them' if n > 1 else 'it'} "
                "(DeepSeek-V3's pre-training and Megatron-Bridge's recipes train it)"
            )
        return out

    def _pipeline_layout_dict(self) -> dict[str, Any] | None:
        """The explicit pipeline layout the plan ran (None: layers split evenly): each rank's
        transformer layers and where the embedding and the loss sit."""
        text, pp = self.job.pipeline_layout, self.best.layout.pp
        if text is None or pp <= 1:
            return None
        pl = parse_pipeline_layout(text, pp, self.model.layers, self.job.mtp_layers)
        return {
            "layout": text,
            "stages": pl.pp * pl.vpp,
            "rank_layers": list(pl.rank_layers),
            "embedding_rank": pl.embedding_rank,
            "loss_rank": pl.loss_rank,
            "mtp_rank": pl.mtp_rank,
        }

    def _optimizer_dict(self) -> dict[str, Any]:
        """Which optimizer the plan prices; for Muon, its share of the parameters and the
        seconds of its orthogonalisation inside `breakdown.optimizer_s`."""
        if self.job.optimizer != "muon":
            return {"name": self.job.optimizer}
        from flopwise.workload.params import count_params

        return {
            "name": "muon",
            "managed_params_share": muon_managed_share(count_params(self.model)),
            "newton_schulz_s": self.best.step.newton_schulz,
            "source": MUON_SOURCE,
        }

    def _margin_gib(self) -> float | None:
        """Device memory left free by the plan's peak (negative: short by that much)."""
        cap = self.ctx_summary["device_memory_gib"]
        return None if cap is None else float(cap) - self.best.memory.total / GIB

    def _shard_gpus(self, lay: Layout) -> int:
        """GPUs the training state is sharded over (1 without ZeRO)."""
        if lay.zero == 0:
            return 1
        domain = int(self.ctx_summary["scaleup_domain"])
        return zero_shard_gpus(lay.tp, lay.dp, lay.cp, lay.hsdp, domain)

    def _search_dict(self) -> dict[str, Any]:
        o = self.outcome
        d: dict[str, Any] = {
            "searched": self.searched,
            "configs_evaluated": o.evaluated,
            "pruned_by_state_memory": o.pruned,
            "timed": o.timed,
            "feasible": o.feasible,
            "elapsed_s": o.elapsed_s,
            "best": _cand_dict(self.best) if self.fits is not False else None,
            "top": [_cand_dict(c) for c in o.top[1:6]],
        }
        if self.why_not:
            d["nothing_fits"] = {"why": self.why_not, "what_would": list(self.suggestions)}
        return d


def _cand_dict(c: Candidate) -> dict[str, Any]:
    return {
        "layout": {**c.layout.to_dict(), "microbatches_per_step": c.microbatches},
        "step_time_s": c.step_time_s,
        "memory_per_gpu_gib": c.memory.total / GIB,
    }


def with_pipeline_layout(
    model: ModelSpec, job: TrainJob, cons: LayoutConstraints
) -> LayoutConstraints:
    """`cons` with the interleaving depth an explicit pipeline layout fixes (its stages are
    pp x vpp); the layout is checked against the model and the pipeline degree here."""
    text = job.pipeline_layout
    assert text is not None
    if cons.pp is None:
        raise FlopwiseError(
            f"--pipeline-layout needs --pp: its stages are PP x VPP ({text!r}); give the "
            "pipeline degree it was written for"
        )
    pl = parse_pipeline_layout(text, cons.pp, model.layers, job.mtp_layers)
    if cons.vpp is not None and cons.vpp != pl.vpp:
        raise FlopwiseError(
            f"--vpp {cons.vpp} disagrees with the pipeline layout, whose {pl.pp * pl.vpp} "
            f"stages over --pp {pl.pp} are {pl.vpp} virtual stage{'s' if pl.vpp > 1 else ''} "
            "per rank"
        )
    return replace(cons, vpp=pl.vpp)


def plan_training(
    model: ModelSpec,
    hardware: Hardware,
    job: TrainJob,
    constraints: LayoutConstraints | None = None,
) -> TrainPlan:
    """Plan a training job: search the layouts `constraints` leave free, return the best.

    When nothing fits, the plan holds the leanest layout with ``fits=False``, a reason and
    what would make the job fit (more GPUs, ZeRO-3, recompute, dropped constraints).
    """
    cons = constraints or LayoutConstraints()
    if job.optimizer == "muon":
        check_muon_sharding(cons.zero, cons.hsdp, job.profile.name, job.profile.zero_stages)
    extra = constrain(job.profile, cons.given())
    if extra:
        cons = replace(cons, **extra)
    if job.pipeline_layout is not None:
        cons = with_pipeline_layout(model, job, cons)
    if job.seq_len > model.max_seq_len:
        raise FlopwiseError(
            f"sequence length {job.seq_len} exceeds {model.name}'s context of "
            f"{model.max_seq_len} tokens"
        )
    if (why := explain_constraints(model, job, cons)) is not None:
        raise FlopwiseError(why)
    if job.objective == "cost":
        return _cheapest(model, hardware, job, cons)
    ctx = ModelContext(model, hardware, job)
    fixed = cons.given()
    all_fixed = all(k in fixed for k in ("tp", "pp", "dp", "cp", "microbatch", "recompute", "zero"))
    if all_fixed:
        lay = _fixed_layout(cons)
        if (p := layout_problem(model, job, lay)) is not None:
            raise FlopwiseError(p)
    # headroom is the search's policy for layouts nobody ran; a layout the user fixed
    # completely (a published one, one they run today) is judged against device capacity
    outcome = search(ctx, cons, headroom=not all_fixed)
    summary = context_summary(ctx)
    summary["memory_headroom_gib"] = 0.0 if all_fixed else ctx.headroom_bytes / GIB
    if outcome.top:
        return TrainPlan(
            model,
            hardware,
            job,
            summary,
            outcome.top[0],
            outcome.top[0].memory.fits,
            outcome,
            not all_fixed,
        )
    if outcome.leanest is None:
        raise FlopwiseError(_no_layout_reason(model, job, cons))
    why, what = _explain_no_fit(
        model, hardware, job, cons, outcome, float(summary["memory_headroom_gib"])
    )
    return TrainPlan(
        model,
        hardware,
        job,
        summary,
        outcome.leanest,
        False,
        outcome,
        not all_fixed,
        why,
        tuple(what),
    )


def _cheapest(
    model: ModelSpec, hardware: Hardware, job: TrainJob, cons: LayoutConstraints
) -> TrainPlan:
    """Objective cost: with a fixed price per GPU-hour, the cheapest run uses the GPU count
    (up to job.gpus: 1, 1/2, 1/4, 1/8 of it) with the fewest GPU-seconds per token."""
    best: TrainPlan | None = None
    first_error: FlopwiseError | None = None
    for k in (1, 2, 4, 8):
        if job.gpus % k:
            continue
        sub = replace(job, gpus=job.gpus // k, objective="time")
        try:
            plan = plan_training(model, hardware, sub, cons)
        except FlopwiseError as exc:
            first_error = first_error or exc
            continue
        if plan.fits is False:
            continue
        if best is None or plan.step_time_s * plan.job.gpus < best.step_time_s * best.job.gpus:
            best = plan
    if best is None:
        if first_error is not None:
            raise first_error
        return plan_training(model, hardware, replace(job, objective="time"), cons)
    return replace(best, job=replace(best.job, objective="cost"))


def _fixed_layout(cons: LayoutConstraints) -> Layout:
    return Layout(
        tp=cons.tp or 1,
        pp=cons.pp or 1,
        dp=cons.dp or 1,
        cp=cons.cp or 1,
        ep=cons.ep or 1,
        vpp=cons.vpp or 1,
        microbatch=cons.microbatch or 1,
        recompute=cons.recompute or "none",
        zero=(3 if cons.hsdp else 1) if cons.zero is None else cons.zero,
        sequence_parallel=bool(cons.sequence_parallel),
        hsdp=bool(cons.hsdp),
        etp=cons.etp or 0,
        recompute_layers=cons.recompute_layers or 0,
    )


def _no_layout_reason(model: ModelSpec, job: TrainJob, cons: LayoutConstraints) -> str:
    given = ", ".join(f"{k}={v}" for k, v in cons.given().items()) or "no constraints"
    if all(getattr(cons, k) is not None for k in ("tp", "pp", "dp", "cp")):
        # every degree given: name the constraint that layout breaks
        problem = layout_problem(model, job, _fixed_layout(cons))
        if problem is not None:
            return f"no valid layout of {model.name} on {job.gpus} GPUs with {given}: {problem}"
    return (
        f"no valid layout of {model.name} on {job.gpus} GPUs with {given}: the degrees must "
        f"multiply to the GPU count, TP must divide {model.heads} heads, DP must divide the "
        f"global batch of {job.global_batch_seqs} sequences"
    )


def _explain_no_fit(
    model: ModelSpec,
    hw: Hardware,
    job: TrainJob,
    cons: LayoutConstraints,
    outcome: SearchOutcome,
    headroom: float = 0.0,
) -> tuple[str, list[str]]:
    lean = outcome.leanest
    assert lean is not None
    cap = (hw.memory_bytes or 0) / GIB
    room = f" with {headroom:.1f} GiB headroom (--memory-headroom)" if headroom else ""
    why = (
        f"no layout fits in {cap:.1f} GiB per GPU{room}; the leanest needs "
        f"{lean.memory.total / GIB:.1f} GiB (training state "
        f"{(lean.memory.weights + lean.memory.grads + lean.memory.master + lean.memory.optimizer) / GIB:.1f} GiB)"
    )
    what: list[str] = []
    if cons.given():
        ctx = ModelContext(model, hw, job)
        free = search(ctx, LayoutConstraints(), stop_at_first=True)
        if free.top:
            lay = free.top[0].layout
            what.append(
                f"drop the fixed layout choices ({', '.join(f'--{k}' for k in cons.given())}): "
                f"e.g. tp={lay.tp} pp={lay.pp} zero={lay.zero} recompute={lay.recompute} fits"
            )
            return why, what
    if lean.layout.zero < 3 and lean.layout.pp == 1 and cons.zero is not None:
        what.append("--zero 3 shards the weights too")
    if lean.layout.recompute != "full" and cons.recompute is not None:
        what.append("--recompute full keeps only each layer's input")
    step = max(job.gpus_per_node or hw.scaleup_domain or 1, 1)
    gpus = job.gpus
    for _ in range(14):
        gpus = max(gpus * 2, step)
        bigger = replace(job, gpus=gpus, global_batch_seqs=max(job.global_batch_seqs, 1))
        try:
            ctx = ModelContext(model, hw, bigger)
            res = search(ctx, LayoutConstraints(), stop_at_first=True)
        except FlopwiseError:
            continue
        if res.top:
            lay = res.top[0].layout
            what.append(
                f"at least ~{gpus} GPUs (e.g. tp={lay.tp} pp={lay.pp} dp={lay.dp} "
                f"zero={lay.zero} recompute={lay.recompute})"
            )
            break
    else:
        what.append(f"more than {gpus} GPUs, or accelerators with more memory")
    return why, what
