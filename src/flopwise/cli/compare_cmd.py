"""`flopwise compare train|infer MODEL [job flags]`: the job on every offer, Pareto-marked."""

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


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def add_where_args(p: argparse.ArgumentParser) -> None:
    """Which candidates: offers (filtered) or catalog accelerators at a price."""
    p.add_argument(
        "--accelerators",
        type=_csv_list,
        metavar="A,B,...",
        help="compare these accelerators (or system ids) on their catalog node types instead of "
        "offers; priced by --price-per-gpu-hour or the cheapest catalog offer",
    )
    p.add_argument(
        "--price-per-gpu-hour",
        type=typed(non_negative_float),
        metavar="USD",
        help="price for --accelerators (offers carry their own prices)",
    )
    p.add_argument(
        "--provider", type=_csv_list, metavar="A,B", help="only offers of these providers"
    )
    p.add_argument(
        "--max-price",
        type=typed(non_negative_float),
        metavar="USD",
        help="only offers at most this many dollars per instance-hour",
    )
    p.add_argument(
        "--spot",
        action="store_true",
        help="price offers at their published spot price (offers without one are left out)",
    )
    p.add_argument(
        "--sort", choices=("cost", "time"), default="cost", help="row order (default: cost)"
    )
    p.add_argument(
        "--measured",
        action="store_true",
        help="use the results store's latest measurements for accelerators that have them",
    )
    add_db(p)


def add_train_job_args(p: argparse.ArgumentParser) -> None:
    """The job flags of `flopwise plan train` that do not name the hardware."""
    p.add_argument(
        "model", metavar="MODEL", help="catalog id, alias, HF repo name or config.json path"
    )
    p.add_argument(
        "--gpus", type=positive_int, required=True, metavar="N", help="number of accelerators"
    )
    p.add_argument(
        "--tokens",
        type=typed(tokens),
        required=True,
        metavar="N",
        help="training tokens: 15T, 300B, 2e12",
    )
    p.add_argument(
        "--seq-len",
        type=positive_int,
        metavar="N",
        help="sequence length (default: min(context, 4096))",
    )
    batch = p.add_mutually_exclusive_group()
    batch.add_argument(
        "--global-batch-seqs", type=positive_int, metavar="N", help="sequences per optimizer step"
    )
    batch.add_argument(
        "--global-batch-tokens",
        type=typed(tokens),
        metavar="N",
        help="tokens per optimizer step (default 4Mi), e.g. 4M, 16M",
    )
    p.add_argument(
        "--dtype", default="bf16", choices=("bf16", "fp16", "fp8"), help="GEMM dtype (default bf16)"
    )
    p.add_argument("--recipe", metavar="NAME", help="training-state recipe (as plan train)")
    g = p.add_argument_group("layout (any left out is searched on every offer)")
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
        "--sequence-parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="shard norms/residuals over TP",
    )
    from flopwise.cli.plan_train_cmd import add_framework_args

    add_framework_args(p)
    p.add_argument(
        "--mfu",
        type=typed(fraction),
        metavar="X",
        help="skip the model: first-order estimate at this assumed MFU (as plan train --mfu)",
    )
    add_where_args(p)
    from flopwise.cli.goodput_args import add_goodput_args

    add_goodput_args(p)


def _batch(text: str) -> int | None:
    from flopwise.units import parse_positive_int

    return None if text.strip().lower() == "max" else parse_positive_int(text, "--batch")


def add_infer_job_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model", metavar="MODEL", help="catalog id, alias, HF repo name or config.json path"
    )
    p.add_argument(
        "--tp",
        type=positive_int,
        metavar="N",
        help="tensor-parallel degree of a replica (default: the smallest that fits)",
    )
    p.add_argument(
        "--pp", type=positive_int, default=1, metavar="N", help="pipeline-parallel degree"
    )
    p.add_argument(
        "--batch",
        type=typed(_batch),
        default=1,
        metavar="N|max",
        help="static batch per replica, or 'max' for steady-state continuous batching",
    )
    p.add_argument("--input-len", type=positive_int, default=1024, metavar="N", help="prompt")
    p.add_argument("--output-len", type=positive_int, default=256, metavar="N", help="output")
    p.add_argument(
        "--weight-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8", "int4")
    )
    p.add_argument("--kv-dtype", choices=("bf16", "fp16", "fp8", "int8"), help="default 16-bit")
    p.add_argument(
        "--activation-dtype",
        choices=("bf16", "fp16", "fp8", "int8", "fp32"),
        help="GEMM input dtype (default: as flopwise plan infer)",
    )
    p.add_argument(
        "--engine",
        default="generic",
        metavar="NAME",
        help="engine class: generic, tensorrt-llm, vllm, sglang",
    )
    add_where_args(p)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="run one job on every cloud offer (or accelerator): time, cost, Pareto front",
        description="Plan the same job on every offer in the catalog (or on --accelerators) and "
        "list GPUs/instances, time, cost and whether the offer's network is what the plan "
        "assumes. Rows no other row beats on both time and cost are marked Pareto-optimal.",
    )
    csub = p.add_subparsers(dest="compare_cmd", required=True, metavar="JOB", parser_class=type(p))
    t = csub.add_parser("train", help="training: days and total cost per offer")
    add_train_job_args(t)
    add_json(t)
    t.set_defaults(func=run)
    i = csub.add_parser("infer", help="inference: latency and $ per million output tokens")
    add_infer_job_args(i)
    add_json(i)
    i.set_defaults(func=run)


def compare_from_args(args: argparse.Namespace) -> Any:
    """Build the job and candidates from parsed flags and run the comparison."""
    from types import MappingProxyType

    from flopwise.cli.plan_train_cmd import framework_job_kwargs
    from flopwise.compare import (
        CompareInferJob,
        CompareTrainJob,
        compare_infer,
        compare_train,
        from_accelerators,
        from_offers,
    )
    from flopwise.compare.jobs import LAYOUT_KEYS
    from flopwise.errors import FlopwiseError
    from flopwise.workload.hf import load_model

    model = load_model(args.model)
    from flopwise.compare.engine import catalog_hardware, measured_hardware

    hardware = measured_hardware(args.db) if args.measured else catalog_hardware
    if args.accelerators:
        if args.provider or args.max_price is not None or args.spot:
            raise FlopwiseError(
                "--provider, --max-price and --spot apply to offers; drop --accelerators"
            )
        candidates = from_accelerators(args.accelerators, args.price_per_gpu_hour)
    else:
        if args.price_per_gpu_hour is not None:
            raise FlopwiseError(
                "--price-per-gpu-hour prices --accelerators; offers carry their own prices"
            )
        candidates = from_offers(
            providers=args.provider, max_price_per_hour=args.max_price, spot=args.spot
        )
    if args.compare_cmd == "train":
        seq = args.seq_len
        if seq and seq > model.max_seq_len:
            raise FlopwiseError(
                f"--seq-len {seq} exceeds {model.name}'s context of {model.max_seq_len} tokens"
            )
        gbs = args.global_batch_seqs
        if gbs is None and args.global_batch_tokens:
            gbs = max(int(args.global_batch_tokens) // (seq or min(model.max_seq_len, 4096)), 1)
        layout = {k: getattr(args, k) for k in LAYOUT_KEYS if getattr(args, k) is not None}
        job = CompareTrainJob(
            tokens=args.tokens,
            gpus=args.gpus,
            seq_len=seq,
            global_batch_seqs=gbs,
            dtype=args.dtype,
            recipe=args.recipe,
            framework_options=MappingProxyType(framework_job_kwargs(args)),
            mfu=args.mfu,
            layout=layout,
        )
        from flopwise.cli.goodput_args import goodput_inputs_from_args

        return compare_train(
            model,
            job,
            candidates,
            sort=args.sort,
            hardware=hardware,
            goodput=goodput_inputs_from_args(args),
        )
    if args.input_len + args.output_len > model.max_seq_len:
        raise FlopwiseError(
            f"--input-len + --output-len = {args.input_len + args.output_len} exceeds "
            f"{model.name}'s context of {model.max_seq_len} tokens"
        )
    ijob = CompareInferJob(
        batch=args.batch,
        input_len=args.input_len,
        output_len=args.output_len,
        weight_dtype=args.weight_dtype,
        kv_dtype=args.kv_dtype,
        act_dtype=args.activation_dtype,
        engine=args.engine,
        tp=args.tp,
        pp=args.pp,
    )
    return compare_infer(model, ijob, candidates, sort=args.sort, hardware=hardware)


def run(args: argparse.Namespace) -> int:
    result = compare_from_args(args)
    if args.json:
        from flopwise.present.jsonout import emit

        emit(result.to_dict())
    else:
        from flopwise.present.compare_view import show_compare

        show_compare(result.to_dict())
    return 0
