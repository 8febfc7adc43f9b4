"""`flopwise bench matmul|memory|attention|comms|io|step|sustained`: the group; each benchmark registers itself."""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: One module per benchmark, each with register(bench_subparsers).
BENCH_MODULES: tuple[str, ...] = (
    "flopwise.cli.bench_matmul_cmd",
    "flopwise.cli.bench_memory_cmd",
    "flopwise.cli.bench_attention_cmd",
    "flopwise.cli.bench_comms_cmd",
    "flopwise.cli.bench_io_cmd",
    "flopwise.cli.bench_step_cmd",
    "flopwise.cli.bench_sustained_cmd",
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="measure what this machine delivers (matmul, memory, attention, comms, io, step, sustained)",
        description="Measure achievable matmul TFLOPS, memory bandwidth, attention TFLOPS by "
        "sequence length, collective bandwidth, storage throughput and the GEMM rate kept under "
        "sustained load. Results are stored with their provenance (flopwise results).",
    )
    bsub = p.add_subparsers(dest="bench_cmd", required=True, metavar="WHAT", parser_class=type(p))
    for name in BENCH_MODULES:
        import_module(name).register(bsub)
