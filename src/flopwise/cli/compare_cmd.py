"""`flopwise compare train|infer MODEL [job flags]`: the job on every offer, Pareto-marked.

The job flags are those of `flopwise plan` (cli/job_args.py), so a job file runs unchanged in
plan, compare and report. In compare, `--accelerator`/`--system` narrow the candidates to that
accelerator's offers, or, with `--price-per-gpu-hour`, to its catalog node type at that price.
"""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli.job_args import add_job_args, job_command


def add_train_job_args(p: argparse.ArgumentParser) -> None:
    """The job and candidate flags of `compare train` / `report train` (kept for callers)."""
    add_job_args(p, "train", "compare")


def add_infer_job_args(p: argparse.ArgumentParser) -> None:
    """The job and candidate flags of `compare infer` / `report infer` (kept for callers)."""
    add_job_args(p, "infer", "compare")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="run one job on every cloud offer (or accelerator): time, cost, Pareto front",
        description="Plan the same job on every offer in the catalog (or on --accelerators) and "
        "list what each row ran (GPUs, layout, batch), time, cost and whether the offer's "
        "network is what the plan assumes. Rows no other row beats on both time and cost are "
        "marked Pareto-optimal.",
    )
    csub = p.add_subparsers(dest="compare_cmd", required=True, metavar="JOB", parser_class=type(p))
    t = csub.add_parser("train", help="training: days and total cost per offer")
    add_train_job_args(t)
    t.set_defaults(func=job_command(run))
    i = csub.add_parser("infer", help="inference: latency and $ per million output tokens")
    add_infer_job_args(i)
    i.set_defaults(func=job_command(run))


def _candidates(args: argparse.Namespace) -> Any:
    from flopwise.compare import from_accelerators, from_offers
    from flopwise.errors import FlopwiseError

    names = args.accelerators
    if not names and (args.system or (args.accelerator and args.price_per_gpu_hour is not None)):
        names = [args.system or args.accelerator]
    if names:
        if args.provider or args.max_price is not None or args.spot:
            raise FlopwiseError(
                "--provider, --max-price and --spot apply to offers; drop --accelerators"
            )
        return from_accelerators(names, args.price_per_gpu_hour)
    if args.price_per_gpu_hour is not None:
        raise FlopwiseError(
            "--price-per-gpu-hour prices --accelerators (or --accelerator); offers carry their own prices"
        )
    accelerators = None
    if args.accelerator:
        from flopwise.catalog.accelerators import get_accelerator

        accelerators = [get_accelerator(args.accelerator).id]
    found = from_offers(
        accelerators=accelerators,
        providers=args.provider,
        max_price_per_hour=args.max_price,
        spot=args.spot,
    )
    if not found and accelerators:
        raise FlopwiseError(
            f"no catalog offer for {accelerators[0]}; add --price-per-gpu-hour to compare its "
            "catalog node type at that price"
        )
    return found


def _hardware(args: argparse.Namespace) -> Any:
    from flopwise.compare.engine import catalog_hardware, measured_hardware
    from flopwise.errors import FlopwiseError

    if args.measured not in (None, "latest"):
        raise FlopwiseError(
            f"compare --measured takes 'latest' (each accelerator's latest runs), got "
            f"{args.measured!r}; a result id applies to one accelerator: use flopwise plan"
        )
    base = measured_hardware(args.db) if args.measured else catalog_hardware
    gbps = getattr(args, "inter_node_gbps", None)
    if gbps is None:
        return base
    from flopwise.plan.train import assume_inter_node_bw

    return lambda c: assume_inter_node_bw(base(c), gbps)


def compare_from_args(args: argparse.Namespace) -> Any:
    """Build the job and candidates from resolved flags and run the comparison."""
    from types import MappingProxyType

    from flopwise.cli.plan_infer_cmd import resolve_batch
    from flopwise.cli.plan_train_cmd import framework_job_kwargs
    from flopwise.compare import CompareInferJob, CompareTrainJob, compare_infer, compare_train
    from flopwise.compare.jobs import LAYOUT_KEYS
    from flopwise.errors import FlopwiseError
    from flopwise.workload.hf import load_model

    model = load_model(args.model)
    hardware = _hardware(args)
    candidates = _candidates(args)
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
            objective=args.objective,
            gpus_per_node=args.gpus_per_node,
            scaleup_domain=args.scaleup_domain,
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
    for flag, value in (("request-rate", args.request_rate), ("concurrency", args.concurrency)):
        if isinstance(value, tuple):
            raise FlopwiseError(
                f"compare takes one --{flag}, got {','.join(map(str, value))}: "
                "plan infer sweeps a list"
            )
    ijob = CompareInferJob(
        batch=resolve_batch(args.batch, args.num_requests, args.concurrency, args.request_rate),
        input_len=args.input_len,
        output_len=args.output_len,
        weight_dtype=args.weight_dtype,
        kv_dtype=args.kv_dtype,
        act_dtype=args.activation_dtype,
        engine=args.engine,
        tp=args.tp,
        pp=args.pp or 1,
        target_tpot_ms=args.target_tpot_ms,
        target_ttft_ms=args.target_ttft_ms,
        num_requests=args.num_requests,
        concurrency=args.concurrency,
        request_rate=args.request_rate,
        memory_fraction=args.memory_fraction,
        allow_long_context=args.allow_long_context,
        fp8_context_attention=args.fp8_context_attention,
        prefill_cuda_graphs=args.prefill_cuda_graphs,
        decode_kernel=args.decode_kernel,
        cuda_graph_batch_sizes=args.cuda_graph_batch_sizes or (),
        engine_max_batch=args.engine_max_batch,
        engine_max_tokens=args.engine_max_tokens,
        output_spread=args.output_spread or 0.0,
        scheduler_poll_steps=args.scheduler_poll_steps or 1,
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
