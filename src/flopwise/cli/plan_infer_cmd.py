"""`flopwise plan infer`: latency, throughput, memory and cost of serving a model."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_db, add_json, non_negative_float, positive_int, typed


def _batch(text: str) -> int | None:
    if text.strip().lower() == "max":
        return None
    from flopwise.units import parse_positive_int

    return parse_positive_int(text, "--batch (a positive integer or 'max')")


def _acceptance(text: str) -> float:
    from flopwise.errors import FlopwiseError

    value = non_negative_float(text)
    if value >= 1:
        raise FlopwiseError(f"{text!r} must be a fraction in [0, 1), e.g. 0.7")
    return value


def add_moe_serving_args(p: argparse.ArgumentParser) -> None:
    """--ep and --attention-dp: how a mixture-of-experts model is split for serving."""
    p.add_argument(
        "--ep",
        type=positive_int,
        default=1,
        metavar="N",
        help="expert-parallel groups inside the tensor-parallel group (MoE; divides --tp)",
    )
    p.add_argument(
        "--attention-dp",
        action="store_true",
        help="attention data-parallel over the tensor-parallel ranks (MoE, e.g. DeepSeek MLA)",
    )


def register(psub: Any) -> None:
    p = psub.add_parser(
        "infer",
        help="inference latency, throughput, memory and cost",
        description="Plan LLM inference: prefill and decode per layer at the roofline of each "
        "op, KV cache, batching, quantization, speculative decoding. Exit 1 when the "
        "deployment does not fit in memory (the plan is still shown, led by 'does not fit').",
    )
    p.add_argument(
        "model", metavar="MODEL", help="catalog id, alias, HF repo name or config.json path"
    )
    p.add_argument(
        "--accelerator", "-a", required=True, metavar="ID", help="accelerator id, or cpu"
    )
    p.add_argument("--system", metavar="ID", help="node type (scale-up domain, network)")
    p.add_argument(
        "--measured",
        nargs="?",
        const="latest",
        metavar="ID|latest",
        help="use stored measurements (a result id, or the latest runs)",
    )
    add_db(p)
    p.add_argument(
        "--gpus", type=positive_int, metavar="N", help="total GPUs (replicas = N/(tp*pp))"
    )
    p.add_argument("--tp", type=positive_int, metavar="N", help="tensor-parallel degree")
    p.add_argument("--pp", type=positive_int, metavar="N", help="pipeline-parallel degree")
    p.add_argument(
        "--batch",
        type=typed(_batch),
        default=1,
        metavar="N|max",
        help="static batch size, or 'max' for steady-state continuous batching (default 1)",
    )
    p.add_argument(
        "--input-len", type=positive_int, default=1024, metavar="N", help="prompt tokens"
    )
    p.add_argument(
        "--output-len", type=positive_int, default=256, metavar="N", help="output tokens"
    )
    p.add_argument(
        "--weight-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8", "int4")
    )
    p.add_argument("--kv-dtype", choices=("bf16", "fp16", "fp8", "int8"), help="default 16-bit")
    p.add_argument(
        "--activation-dtype",
        choices=("bf16", "fp16", "fp8", "int8", "fp32"),
        help="GEMM input dtype (default: fp8 with fp8 weights on fp8 hardware, else 16-bit "
        "weight-only); int8 = SmoothQuant-style W8A8",
    )
    p.add_argument(
        "--engine",
        default="generic",
        metavar="NAME",
        help="engine class for overhead constants: generic, tensorrt-llm, vllm, sglang",
    )
    add_moe_serving_args(p)
    p.add_argument(
        "--price-per-gpu-hour", type=typed(non_negative_float), metavar="USD", help="for the cost"
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--sweep", action="store_true", help="latency/throughput over batch sizes")
    mode.add_argument(
        "--target-tpot-ms",
        type=typed(non_negative_float),
        metavar="MS",
        help="inverse question: bandwidth and GPUs needed for this time per output token",
    )
    p.add_argument("--draft", metavar="MODEL", help="draft model for speculative decoding")
    p.add_argument(
        "--acceptance", type=typed(_acceptance), default=0.7, metavar="A", help="default 0.7"
    )
    p.add_argument("--draft-tokens", type=positive_int, default=4, metavar="K", help="default 4")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.plan.infer import InferJob, plan_inference, resolve_layout
    from flopwise.results.measured import hardware_for
    from flopwise.workload.hf import load_model

    model = load_model(args.model)
    hw = hardware_for(args.accelerator, args.system, args.measured, args.db)
    tp, pp, replicas = resolve_layout(hw, args.gpus, args.tp, args.pp)
    if args.tp is not None:
        from flopwise.plan.infer.job import check_tensor_parallel

        check_tensor_parallel(model, tp)
    job = InferJob(
        input_len=args.input_len,
        output_len=args.output_len,
        batch=args.batch,
        tp=tp,
        pp=pp,
        replicas=replicas,
        weight_dtype=args.weight_dtype,
        kv_dtype=args.kv_dtype,
        act_dtype=args.activation_dtype,
        engine=args.engine,
        price_per_gpu_hour=args.price_per_gpu_hour,
        ep=args.ep,
        attention_dp=args.attention_dp,
    )
    hw_doc = {
        "id": hw.id,
        "name": hw.name,
        "origins": {k: v.to_dict() for k, v in hw.origins.items()},
    }
    if args.sweep:
        from flopwise.plan.infer.sweep import sweep_batches

        points = sweep_batches(model, hw, job)
        doc: dict[str, Any] = {
            "model": model.name,
            "accelerator": hw.id,
            "job": job.to_dict(),
            "points": [pt.to_dict() for pt in points],
        }
        _emit(args, doc, "sweep")
        return 0
    if args.target_tpot_ms is not None:
        from flopwise.plan.infer.target import plan_for_target_tpot

        target = plan_for_target_tpot(model, hw, job, args.target_tpot_ms / 1e3)
        doc = {"model": model.name, "accelerator": hw.id, **target.to_dict()}
        _emit(args, doc, "target")
        return 0
    draft = None
    if args.draft:
        from flopwise.plan.infer.speculative import DraftConfig

        draft = DraftConfig(
            model=load_model(args.draft), acceptance=args.acceptance, tokens=args.draft_tokens
        )
    plan = plan_inference(model, hw, job, draft=draft)
    doc = {**plan.to_dict(), "hardware": hw_doc}
    _emit(args, doc, "plan")
    from flopwise.cli._fit import EXIT_DOES_NOT_FIT

    return EXIT_DOES_NOT_FIT if doc.get("fits") is False else 0


def _emit(args: argparse.Namespace, doc: dict[str, Any], kind: str) -> None:
    if args.json:
        from flopwise.present.jsonout import emit

        emit(doc)
        return
    from flopwise.present import infer_view

    {
        "plan": infer_view.show_plan,
        "sweep": infer_view.show_sweep,
        "target": infer_view.show_target,
    }[kind](doc)
