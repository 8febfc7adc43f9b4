"""`flopwise bench matmul`: achievable matmul TFLOPS by directed search (or the full grid)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flopwise.cli._args import add_bench_outputs, add_device, positive_float, positive_int


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "matmul",
        help="achievable matmul TFLOPS (directed shape search)",
        description="Measure the maximum achievable matmul TFLOPS of a device. The directed "
        "search picks shapes from the device's properties (compute units, 128-byte alignment, "
        "whole waves) inside the ranges; --search grid measures every shape in them; --groups "
        "times MoE grouped GEMMs at given shapes; --model measures the GEMMs a training job's "
        "plan prices. Every run is stored, and plans read it with --measured.",
    )
    dev = p.add_mutually_exclusive_group()
    add_device(dev)
    dev.add_argument(
        "--devices",
        metavar="all|LIST",
        help="measure several local devices at once, one process each: 'all' or cuda:0,cuda:1",
    )
    p.add_argument(
        "--dtype", help="bf16 (accelerator default), fp16, fp32 (CPU default), tf32, fp8"
    )
    p.add_argument("--search", choices=("auto", "grid"), default="auto", help="default auto")
    p.add_argument(
        "--groups",
        type=positive_int,
        default=1,
        metavar="G",
        help="time one grouped GEMM of G experts per shape, the MoE expert kernel "
        "(torch._grouped_mm, else a torch.mm per expert): --m is tokens per expert, and every "
        "shape of the --m/--n/--k grid is measured. --measured then prices a plan's expert "
        "GEMMs from these shapes, not from dense ones (default 1: dense GEMMs)",
    )
    for dim in ("m", "n", "k"):
        g = p.add_mutually_exclusive_group()
        g.add_argument(
            f"--{dim}-range",
            nargs=3,
            type=int,
            metavar=("START", "STOP", "STEP"),
            help=f"{dim.upper()} sizes START..STOP (inclusive) every STEP",
        )
        g.add_argument(
            f"--{dim}",
            nargs="+",
            type=positive_int,
            metavar="N",
            help=f"{dim.upper()} sizes as a list",
        )
    job = p.add_argument_group(
        "a job's GEMMs (--model): measure the shapes its training plan (or with --tokens its "
        "serving passes) prices, then `plan train|infer ... --measured` uses them"
    )
    job.add_argument(
        "--model",
        metavar="MODEL",
        help="catalog id, HF repo name or config.json: time every GEMM shape (forward, data and "
        "weight gradient; experts as grouped GEMMs) one microbatch of it runs per GPU",
    )
    job.add_argument("--tp", type=positive_int, default=1, metavar="N", help="tensor parallel")
    job.add_argument("--ep", type=positive_int, default=1, metavar="N", help="expert parallel")
    job.add_argument("--cp", type=positive_int, default=1, metavar="N", help="context parallel")
    job.add_argument(
        "--seq-len", type=positive_int, metavar="N", help="tokens per sequence (CPU 256, else 4096)"
    )
    job.add_argument(
        "--microbatch", type=positive_int, default=1, metavar="N", help="sequences per microbatch"
    )
    job.add_argument(
        "--tokens", type=positive_int, nargs="+", metavar="N",
        help="serving instead of training: the forward GEMMs of one pass over each of these "
        "token counts (decode batches, prefill chunks), e.g. --tokens 1 8 64 256 8192",
    )  # fmt: skip
    job.add_argument(
        "--vocab", type=positive_int, metavar="N",
        help="vocabulary rows of the logits GEMMs (default: CPU 8192, as bench step; else the "
        "model's)",
    )  # fmt: skip
    job.add_argument(
        "--framework", default="generic", metavar="NAME",
        help="framework profile whose GEMMs are priced (torchtitan runs q, k, v and gate, up "
        "as separate GEMMs); default generic",
    )  # fmt: skip
    p.add_argument(
        "--budget-s",
        type=positive_float,
        metavar="S",
        help="time budget of the whole run, seconds (default 20 on CPU, 60 on accelerators; "
        "--search grid, --groups and --model: none). A shape that cannot finish inside it "
        "is not started; the run stores what it measured and says the budget ended it",
    )
    p.add_argument("--iterations", type=positive_int, metavar="N", help="timed runs per shape")
    p.add_argument("--warmup", type=int, metavar="N", help="untimed runs per shape")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    add_bench_outputs(p)
    p.set_defaults(func=run)


def _values(args: argparse.Namespace, dim: str) -> tuple[int, ...] | None:
    from flopwise.bench.matmul_search import values_from_range

    rng = getattr(args, f"{dim}_range")
    if rng is not None:
        return values_from_range(rng[0], rng[1], rng[2], what=f"--{dim}-range")
    listed = getattr(args, dim)
    return tuple(listed) if listed else None


def config_from_args(args: argparse.Namespace) -> Any:
    from flopwise.bench.device import parse_device_spec
    from flopwise.bench.matmul import parse_dtype
    from flopwise.bench.matmul_run import MatmulConfig

    if args.devices is None:
        parse_device_spec(args.device)
    if args.dtype is not None:
        parse_dtype(args.dtype)
    shapes, label = _job_shapes(args)
    return MatmulConfig(
        shapes=shapes,
        label=label,
        device=args.device,
        dtype=args.dtype,
        search=args.search,
        m=_values(args, "m"),
        n=_values(args, "n"),
        k=_values(args, "k"),
        budget_s=args.budget_s,
        iterations=args.iterations,
        warmup=args.warmup,
        seed=args.seed,
        groups=args.groups,
    )


def _job_shapes(args: argparse.Namespace) -> tuple[Any, str | None]:
    """((groups, m, n, k), ...) and a label for --model; (None, None) without it."""
    from flopwise.errors import FlopwiseError

    if args.model is None:
        for flag in ("tp", "ep", "cp", "microbatch"):
            if getattr(args, flag) != 1:
                raise FlopwiseError(f"--{flag} describes a job: it goes with --model")
        if (
            args.seq_len is not None
            or args.vocab is not None
            or args.tokens is not None
            or args.framework != "generic"
        ):
            raise FlopwiseError(
                "--seq-len, --tokens, --vocab and --framework describe a job: they go with --model"
            )
        return None, None
    given = [f"--{d}" for d in ("m", "n", "k") if getattr(args, d) or getattr(args, f"{d}_range")]
    if given or args.groups != 1 or args.search != "auto":
        what = ", ".join(given + (["--groups"] if args.groups != 1 else []))
        raise FlopwiseError(
            f"--model measures the job's own shapes; drop {what or '--search'} (or --model)"
        )
    from dataclasses import replace

    from flopwise.bench.device import parse_device_spec
    from flopwise.bench.step import CPU_DEFAULT_VOCAB
    from flopwise.plan.train.frameworks import get_profile
    from flopwise.plan.train.gemm_shapes import forward_gemm_shapes, training_gemm_shapes
    from flopwise.workload.hf import load_model

    get_profile(args.framework)  # a one-line error for an unknown profile
    kind, _ = parse_device_spec(args.device or "auto")
    seq = args.seq_len or (256 if kind == "cpu" else 4096)
    spec = load_model(args.model)
    vocab = args.vocab or (min(spec.vocab, CPU_DEFAULT_VOCAB) if kind == "cpu" else spec.vocab)
    if vocab != spec.vocab:
        spec = replace(spec, vocab=vocab)
    dtype = "fp8" if (args.dtype or "").lower() in ("fp8", "float8", "e4m3") else "bf16"
    if args.tokens is not None:
        if args.seq_len is not None or args.cp != 1 or args.microbatch != 1:
            raise FlopwiseError(
                "--tokens sets each serving pass's tokens: drop --seq-len, --cp and --microbatch"
            )
        found = forward_gemm_shapes(spec, tuple(args.tokens), tp=args.tp, ep=args.ep)
        passes = ", ".join(str(t) for t in args.tokens)
        label = (
            f"{spec.name} serving passes of {passes} tokens: tp {args.tp}, ep {args.ep}, "
            f"vocabulary {vocab}"
        )
        return tuple((g.groups, g.m, g.n, g.k) for g in found), label
    found = training_gemm_shapes(
        spec, tp=args.tp, ep=args.ep, cp=args.cp, seq_len=seq, microbatch=args.microbatch,
        dtype=dtype, framework=args.framework,
    )  # fmt: skip
    label = (
        f"{spec.name} training microbatch: tp {args.tp}, ep {args.ep}, cp {args.cp}, "
        f"{args.microbatch} x {seq} tokens, vocabulary {vocab}, framework {args.framework}"
    )
    return tuple((g.groups, g.m, g.n, g.k) for g in found), label


def _devices(text: str) -> list[str]:
    from flopwise.bench.device import local_devices, parse_device_spec

    if text.strip().lower() == "all":
        return local_devices()
    specs = [s.strip() for s in text.split(",") if s.strip()]
    for s in specs:
        kind, _ = parse_device_spec(s)
        if kind == "auto":
            from flopwise.errors import FlopwiseError

            raise FlopwiseError("--devices takes 'all' or explicit devices such as cuda:0,cuda:1")
    return specs


def run(args: argparse.Namespace) -> int:
    from flopwise.present import bench_view
    from flopwise.present.jsonout import dumps, emit
    from flopwise.results.safe_save import preflight

    config = config_from_args(args)
    preflight(args.db, args.out)  # an unusable --db or --out fails now, not after measuring
    if args.devices is not None:
        from flopwise.bench.multi import run_matmul_devices

        multi = run_matmul_devices(config, _devices(args.devices), args.db).to_dict()
        _write(args.out, dumps(multi))
        if args.json:
            emit(multi)
        else:
            bench_view.show_matmul_devices(multi)
        return 130 if multi["status"] == "interrupted" else 0

    from flopwise.bench.device import resolve_device
    from flopwise.bench.matmul_run import defaults_for, run_matmul
    from flopwise.cli._bench_run import keep_and_show
    from flopwise.cli._signals import exit_code, terminate_as_interrupt

    info = resolve_device(config.device)
    d = defaults_for(info)
    space = config.space(d)
    search = "grid" if config.groups > 1 else config.search
    if config.shapes:
        search = "shapes"
    total = len(config.shapes) if config.shapes else (space.size if search == "grid" else None)
    listed = search in ("grid", "shapes")
    budget = config.budget_s if config.budget_s is not None else (None if listed else d.budget_s)
    with (
        terminate_as_interrupt(),
        bench_view.matmul_progress(search, total, budget) as on_shape,
    ):
        result = run_matmul(config, on_shape, info=info)
    keep_and_show("matmul", result, info, args, bench_view.show_matmul)
    if result.status == "failed":
        sys.stderr.write(f"flopwise: error: matmul run failed: {result.stop_reason}\n")
    return exit_code(result.status)


def _write(path: str | None, text: str) -> None:
    if path is None:
        return
    from flopwise.errors import FlopwiseError

    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise FlopwiseError(f"cannot write --out {path!r}: {exc.strerror}") from None
