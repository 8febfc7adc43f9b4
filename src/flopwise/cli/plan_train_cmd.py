"""`flopwise plan train`: the training planner (layout search, memory, step time, cost).

With ``--mfu X`` it falls back to the first-order estimate (time = FLOPs / (GPUs x peak x MFU)).
Exit status: 0 with a plan that fits, 1 when nothing fits (the output says why and what would),
2 on bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import (
    add_db,
    add_json,
    fraction,
    non_negative_float,
    positive_int,
    tokens,
    typed,
)
from flopwise.cli.memory_args import add_memory_args

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
    t.add_argument(
        "model", metavar="MODEL", help="catalog id, alias, HF repo name or config.json path"
    )
    t.add_argument(
        "--accelerator",
        "-a",
        required=True,
        metavar="ID",
        help="accelerator id or alias (see flopwise catalog accelerators)",
    )
    t.add_argument(
        "--gpus", type=positive_int, required=True, metavar="N", help="number of accelerators"
    )
    t.add_argument(
        "--tokens",
        type=typed(tokens),
        required=True,
        metavar="N",
        help="training tokens: 15T, 300B, 2e12",
    )
    t.add_argument(
        "--seq-len",
        type=positive_int,
        metavar="N",
        help="sequence length (default: min(context, 4096))",
    )
    batch = t.add_mutually_exclusive_group()
    batch.add_argument(
        "--global-batch-seqs", type=positive_int, metavar="N", help="sequences per optimizer step"
    )
    batch.add_argument(
        "--global-batch-tokens",
        type=typed(tokens),
        metavar="N",
        help="tokens per optimizer step (default 4Mi), e.g. 4M, 16M",
    )
    t.add_argument(
        "--dtype",
        default="bf16",
        choices=("bf16", "fp16", "fp8"),
        help="GEMM dtype (default bf16; fp8 needs an accelerator with fp8)",
    )
    t.add_argument(
        "--recipe",
        metavar="NAME",
        help="training-state recipe (default bf16-adam, fp8-adam for --dtype fp8)",
    )
    t.add_argument("--system", metavar="ID", help="node type (see flopwise catalog systems)")
    t.add_argument(
        "--inter-node-gbps",
        type=typed(non_negative_float),
        metavar="X",
        help="assume this per-GPU scale-out bandwidth (GB/s, one direction) between nodes; "
        "for accelerators without a node type in the catalog (labelled as assumed)",
    )
    t.add_argument(
        "--scaleup-domain",
        type=positive_int,
        metavar="N",
        help="accelerators per scale-up domain (NVLink domain, TPU slice over ICI); default: "
        "the node type's. Multislice TPU jobs: the slice size (slices talk over DCN)",
    )
    t.add_argument(
        "--gpus-per-node",
        type=positive_int,
        metavar="N",
        help="GPUs per node (default: the system's)",
    )
    g = t.add_argument_group("layout (any left out is searched)")
    for name, help_ in (
        ("tp", "tensor-parallel degree"),
        ("pp", "pipeline-parallel degree"),
        ("dp", "data-parallel degree"),
        ("cp", "context-parallel degree"),
        ("ep", "expert-parallel degree (MoE)"),
        ("vpp", "virtual pipeline stages per GPU (interleaved 1F1B)"),
        ("microbatch", "sequences per microbatch"),
    ):
        g.add_argument(f"--{name}", type=positive_int, metavar="N", help=help_)
    g.add_argument(
        "--recompute",
        choices=("none", "selective", "full", "op"),
        help="activation recompute (op: torchtitan's op-level selective checkpointing)",
    )
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3), help="ZeRO stage over DP (x CP)")
    g.add_argument(
        "--hsdp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="hybrid sharding: ZeRO-3 inside each node, replicas across nodes (FSDP "
        "HYBRID_SHARD; implies --zero 3)",
    )
    g.add_argument(
        "--sequence-parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="shard norms/residuals over TP (Korthikanti et al. 2022)",
    )
    add_framework_args(t)
    t.add_argument(
        "--objective",
        choices=("time", "cost"),
        default="time",
        help="rank layouts by step time, or by GPU-hours (may use fewer GPUs)",
    )
    t.add_argument(
        "--mfu",
        type=typed(fraction),
        metavar="X",
        help="skip the model: first-order estimate at this assumed MFU",
    )
    t.add_argument(
        "--price-per-gpu-hour",
        type=typed(non_negative_float),
        metavar="USD",
        help="price per GPU-hour for the cost",
    )
    t.add_argument(
        "--measured",
        nargs="?",
        const="latest",
        metavar="ID|latest",
        help="use stored benchmark results for this accelerator",
    )
    add_memory_args(t)
    from flopwise.cli.goodput_args import add_goodput_args

    add_goodput_args(t)
    add_db(t)
    add_json(t)
    t.set_defaults(func=run_train)


def add_framework_args(t: argparse.ArgumentParser) -> None:
    """--framework and the per-setting overrides of its profile (None: as the profile does)."""
    from flopwise.plan.train.frameworks import FRAMEWORKS

    f = t.add_argument_group(
        "framework (what overlaps with what; each switch defaults to the profile's value)"
    )
    f.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default="generic",
        help="training framework profile (default generic: PyTorch DDP/FSDP behaviour); "
        "see docs/training-planner.md for what each profile does and its sources",
    )
    f.add_argument(
        "--attention",
        choices=("flash", "flash2", "unfused"),
        default=None,
        help="attention kernel (default: the profile's; flash = the best fused kernel for "
        "the accelerator)",
    )
    for flag, help_ in (
        ("tp-comm-overlap", "TP collectives overlap GEMMs (Transformer Engine userbuffers)"),
        ("pp-comm-overlap", "pipeline sends overlap compute (Megatron-Core overlap_p2p_comm)"),
        ("ep-comm-overlap", "expert all-to-alls overlap another microbatch (DeepSeek DualPipe)"),
        ("dp-comm-overlap", "gradient reduction overlaps the backward (DDP/FSDP buckets)"),
        ("pp-scatter-gather", "pipeline sends split over TP ranks (Megatron scatter/gather)"),
    ):
        f.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, default=None, help=help_)


def framework_job_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainJob keywords add_framework_args defines."""
    return {
        "framework": args.framework,
        "attention": args.attention,
        "tp_comm_overlap": args.tp_comm_overlap,
        "pp_comm_overlap": args.pp_comm_overlap,
        "ep_comm_overlap": args.ep_comm_overlap,
        "dp_comm_overlap": args.dp_comm_overlap,
        "pp_scatter_gather": args.pp_scatter_gather,
    }


def run_train(args: argparse.Namespace) -> int:
    if args.mfu is not None:
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
    from flopwise.results.measured import hardware_for
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
    model, hw, seq = _model_hw_seq(args)
    from flopwise.plan.train import (
        LayoutConstraints,
        TrainJob,
        assume_inter_node_bw,
        plan_training,
    )

    if args.inter_node_gbps is not None:
        hw = assume_inter_node_bw(hw, args.inter_node_gbps)

    if args.global_batch_seqs:
        gbs = args.global_batch_seqs
    else:
        from flopwise.plan.train.batch import batch_seqs_from_tokens

        batch_tokens = args.global_batch_tokens or DEFAULT_BATCH_TOKENS
        gbs, _ = batch_seqs_from_tokens(batch_tokens, seq)
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
    )
    cons = LayoutConstraints(
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        cp=args.cp,
        ep=args.ep,
        vpp=args.vpp,
        microbatch=args.microbatch,
        recompute=args.recompute,
        zero=args.zero,
        sequence_parallel=args.sequence_parallel,
        hsdp=args.hsdp,
    )
    return plan_training(model, hw, job, cons)


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
