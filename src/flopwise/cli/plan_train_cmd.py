"""`flopwise plan train`: the training planner (layout search, memory, step time, cost).

With ``--mfu X`` it falls back to the first-order estimate (time = FLOPs / (GPUs x peak x MFU)).
Exit status: 0 with a plan that fits, 1 when nothing fits (the output says why and what would),
2 on bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli.job_args import add_job_args, job_command, resolve_job

#: Default global batch when none is given: 4Mi tokens (Llama 2's 4M-token batch).
DEFAULT_BATCH_TOKENS = 4 * 2**20


def register(psub: Any) -> None:
    t = psub.add_parser(
        "train",
        help="training layout, memory, step time, MFU, days and cost",
        description="Plan training MODEL on GPUs: search the parallel layout (any layout flag "
        "left out is searched), then report memory and step-time breakdowns, MFU, days, "
        "GPU-hours and cost. Exit 1 when nothing fits.",
    )
    add_job_args(t, "train", "plan")
    t.set_defaults(func=job_command(run_train))


def framework_job_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainJob keywords of the framework job flags (cli/job_flags.py)."""
    return {
        "framework": args.framework,
        "attention": args.attention,
        "tp_comm_overlap": args.tp_comm_overlap,
        "pp_comm_overlap": args.pp_comm_overlap,
        "ep_comm_overlap": args.ep_comm_overlap,
        "ep_dispatcher": args.ep_dispatcher or "alltoall",
        "dp_comm_overlap": args.dp_comm_overlap,
        "pp_scatter_gather": args.pp_scatter_gather,
        "compile": getattr(args, "compile", None),
        "recompute_replay": getattr(args, "recompute_replay", None),
        "remat_tensors": getattr(args, "remat_tensors", None) or (),
        "fp8_recipe": args.fp8_recipe,
        "optimizer": getattr(args, "optimizer", None) or "adamw",
        "pipeline_layout": getattr(args, "pipeline_layout", None),
        "mtp_layers": getattr(args, "mtp_layers", None) or 0,
        "lora_rank": getattr(args, "lora_rank", None) or 0,
        "lora_targets": getattr(args, "lora_targets", None),
        "qlora": bool(getattr(args, "qlora", False)),
        "document_len": getattr(args, "document_len", None),
    }


def run_train(args: argparse.Namespace) -> int:
    resolve_job(args)
    if args.mfu is not None:
        _refuse_goodput_flags(args)
        return _first_order(args)
    plan = train_plan_from_args(args)
    doc = plan.to_dict()
    if not args.global_batch_seqs:  # say when the batch had to be rounded to whole sequences
        from flopwise.plan.train.batch import batch_seqs_from_tokens

        asked = args.global_batch_tokens or DEFAULT_BATCH_TOKENS
        note = batch_seqs_from_tokens(asked, plan.job.seq_len)[1]
        if note:
            doc["notes"] = [*doc.get("notes", []), note]
    if plan.fits is not False:
        from flopwise.cli.goodput_args import goodput_inputs_from_args
        from flopwise.plan.goodput import plan_goodput

        doc["goodput"] = plan_goodput(plan, goodput_inputs_from_args(args)).to_dict()
    if args.json:
        from flopwise.present.jsonout import emit

        emit(doc)
    else:
        from flopwise.present.train_view import show_train_plan

        show_train_plan(doc)
    from flopwise.cli._fit import EXIT_DOES_NOT_FIT

    return EXIT_DOES_NOT_FIT if plan.fits is False else 0


def _model_hw_seq(args: argparse.Namespace) -> tuple[Any, Any, int]:
    from flopwise.errors import FlopwiseError
    from flopwise.hardware import hardware_for
    from flopwise.workload.hf import load_model

    model = load_model(args.model)
    hw = hardware_for(args.accelerator, args.system, args.measured, args.db)
    seq = args.seq_len or min(model.max_seq_len, 4096)
    if seq > model.max_seq_len:
        raise FlopwiseError(
            f"--seq-len {seq} exceeds {model.name}'s context of {model.max_seq_len} tokens"
        )
    return model, hw, seq


def train_plan_from_args(
    args: argparse.Namespace, sustained_compute_fraction: float | None = None
) -> Any:
    """The TrainPlan `flopwise plan train ARGS` prints (the library call behind the CLI).

    ``sustained_compute_fraction`` replaces the fitted constant: validation uses it to refit
    that constant without a held-out family (cross-validation); no flag sets it."""
    resolve_job(args)  # flags > --config > defaults (idempotent; validation parses directly)
    model, hw, seq = _model_hw_seq(args)
    from flopwise.plan.train import (
        LayoutConstraints,
        TrainJob,
        assume_inter_node_bw,
        plan_training,
    )

    if args.inter_node_gbps is not None:
        hw = assume_inter_node_bw(hw, args.inter_node_gbps)

    rounded = None  # how a token batch became whole sequences, when it was not exact
    if args.global_batch_seqs:
        gbs = args.global_batch_seqs
    else:
        from flopwise.plan.train.batch import batch_seqs_from_tokens

        batch_tokens = args.global_batch_tokens or DEFAULT_BATCH_TOKENS
        gbs, rounded = batch_seqs_from_tokens(batch_tokens, seq)
    job = TrainJob(
        gpus=args.gpus,
        seq_len=seq,
        global_batch_seqs=gbs,
        tokens=args.tokens,
        dtype=args.dtype,
        recipe=args.recipe,
        gpus_per_node=args.gpus_per_node,
        scaleup_domain=args.scaleup_domain,
        price_per_gpu_hour=args.price_per_gpu_hour,
        objective=args.objective,
        **framework_job_kwargs(args),
        sustained_compute_fraction=sustained_compute_fraction,
        memory_headroom_gib=args.memory_headroom_gib,
        fused_loss=args.fused_loss,
        fused_norm=args.fused_norm,
    )
    cons = LayoutConstraints(
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        cp=args.cp,
        ep=args.ep,
        etp=args.etp,
        vpp=args.vpp,
        microbatch=args.microbatch,
        recompute=args.recompute,
        recompute_layers=args.recompute_layers,
        zero=args.zero,
        sequence_parallel=args.sequence_parallel,
        hsdp=args.hsdp,
    )
    from flopwise.errors import FlopwiseError

    try:
        return plan_training(model, hw, job, cons)
    except FlopwiseError as err:
        if rounded is None or "global batch" not in str(err):
            raise
        # a layout that does not divide a batch the user gave in tokens: say where the
        # sequence count came from, or the count reads as a typo
        raise FlopwiseError(f"{err} (the {rounded}; pass --global-batch-seqs)") from None


def _refuse_goodput_flags(args: argparse.Namespace) -> None:
    """--mfu skips the step-time model and the goodput layered on it: say so, never ignore."""
    from flopwise.cli.job_flag import _GOODPUT
    from flopwise.cli.job_flags import JOB_FLAGS
    from flopwise.errors import FlopwiseError

    given = [
        f"--{f.name}"
        for f in JOB_FLAGS
        if f.group == _GOODPUT and getattr(args, f.dest, None) not in (None, False, f.default)
    ]
    if given:
        raise FlopwiseError(
            f"{', '.join(given)} need the step-time model's plan; --mfu gives a first-order "
            "estimate without goodput (drop --mfu)"
        )


def _first_order(args: argparse.Namespace) -> int:
    from flopwise.plan.first_order import first_order_train

    model, hw, seq = _model_hw_seq(args)
    plan = first_order_train(
        model,
        hw,
        gpus=args.gpus,
        tokens=args.tokens,
        seq_len=seq,
        mfu=args.mfu,
        dtype=args.dtype,
        price_per_gpu_hour=args.price_per_gpu_hour,
    )
    if args.json:
        from flopwise.present.jsonout import emit

        emit(plan.to_dict())
    else:
        from flopwise.present.plan_view import show_first_order

        show_first_order(plan.to_dict())
    return 0
