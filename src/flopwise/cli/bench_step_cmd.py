"""`flopwise bench step MODEL`: timed training steps next to the planner's prediction."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_bench_outputs, add_device, positive_float, positive_int


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "step",
        help="time real training steps of a model and compare with the planner",
        description="Build MODEL's transformer from its config with PyTorch (layers reduced to "
        "fit the device), time forward + backward + AdamW steps (bf16 on accelerators, fp32 on "
        "the CPU), report tokens/s and MFU next to the planner's prediction for the same job "
        "on the same measured hardware, and store the ratio: plan train --measured uses it as "
        "this device's calibration (an MoE model's for MoE plans, a dense one's for dense "
        "plans). MoE experts run as grouped GEMMs (torch._grouped_mm). Under torchrun: data "
        "parallel, one replica per rank.",
    )
    p.add_argument("model", metavar="MODEL", help="catalog id, HF repo name or config.json path")
    add_device(p)
    p.add_argument(
        "--layers", type=positive_int, metavar="N", help="layers to build (default: CPU 1, "
        "accelerators as many as fit)",
    )  # fmt: skip
    p.add_argument(
        "--seq-len", type=positive_int, metavar="N", help="tokens per sequence (CPU 64, else 4096)"
    )
    p.add_argument("--microbatch", type=positive_int, default=1, metavar="N",
                   help="sequences per step and rank (default 1)")  # fmt: skip
    p.add_argument(
        "--vocab", type=positive_int, metavar="N", help="vocabulary rows (default: CPU 8192, "
        "accelerators the model's)",
    )  # fmt: skip
    p.add_argument("--steps", type=positive_int, metavar="N", help="timed steps (CPU 2, else 5)")
    p.add_argument("--warmup", type=int, metavar="N", help="untimed steps first (CPU 1, else 2)")
    p.add_argument(
        "--ep", type=positive_int, default=1, metavar="N",
        help="expert parallelism of an MoE model under torchrun: the world size shards the "
        "experts over every rank, tokens travel by all-to-all (default 1: every rank holds "
        "every expert)",
    )  # fmt: skip
    p.add_argument("--backend", default="auto", help="under torchrun: auto, nccl, gloo, ...")
    p.add_argument("--timeout", type=positive_float, default=300.0, metavar="S",
                   help="seconds before a missing rank fails a torchrun job (default 300)")  # fmt: skip
    add_bench_outputs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.bench.device import parse_device_spec
    from flopwise.bench.step import StepConfig, run_step, summary_of
    from flopwise.present import bench_view, step_view
    from flopwise.present.jsonout import dumps, emit

    parse_device_spec(args.device)
    config = StepConfig(
        model=args.model,
        device=args.device,
        layers=args.layers,
        seq_len=args.seq_len,
        microbatch=args.microbatch,
        vocab=args.vocab,
        steps=args.steps,
        warmup=args.warmup,
        backend=args.backend,
        timeout_s=args.timeout,
        ep=args.ep,
    )
    with bench_view.rounds_progress("training steps") as on_step:
        doc = run_step(config, args.db, on_step)
    if doc.get("rank", 0) != 0:
        return 130 if doc["status"] == "interrupted" else 0
    from flopwise.bench.device import resolve_device
    from flopwise.bench.provenance import save_run

    doc["result_id"] = save_run(
        "step",
        summary=summary_of(doc),
        payload=doc,
        status=doc["status"],
        info=resolve_device(doc["device"]),
        db=args.db,
    )
    from flopwise.cli.bench_matmul_cmd import _write

    _write(args.out, dumps(doc))
    if args.json:
        emit(doc)
    else:
        step_view.show_step(doc)
    return 130 if doc["status"] == "interrupted" else 0
