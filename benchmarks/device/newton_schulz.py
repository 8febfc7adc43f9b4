"""Muon's Newton-Schulz iterations timed on a device, beside what the planner prices for them.

The training planner prices `--optimizer muon` (plan/train/muon.py) as five quintic
Newton-Schulz iterations per weight matrix, run as fp32 matmuls at
``torch.set_float32_matmul_precision("medium")`` (Megatron-Core's ``muon_fp32_matmul_prec``
default), i.e. on bfloat16 tensor cores, through the same GEMM shape model as the layers. This
script runs those iterations on the matrix shapes of real models (Llama 3.1 8B and 70B,
DeepSeek-V3's MLA and expert matrices) and prints, per shape, the measured seconds and the
plan's ``newton_schulz_s`` for the accelerator named with ``--accelerator`` (its catalog GEMM
model, sustained fraction 1.0: a burst like this measurement). One CSV row per shape on stdout.

Usage (on a GPU machine):
    python benchmarks/device/newton_schulz.py --accelerator h100-sxm > newton_schulz.csv
On a CPU (the script's own check, small shapes): python benchmarks/device/newton_schulz.py --cpu
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

#: (name, rows, cols): Llama 3.1 8B / 70B layer weights as Megatron-Core fuses them, and
#: DeepSeek-V3's MLA up-projection and one routed expert's fc1/fc2.
SHAPES = (
    ("llama8b_qkv", 6144, 4096),
    ("llama8b_fc1", 28672, 4096),
    ("llama8b_fc2", 4096, 14336),
    ("llama70b_fc1", 57344, 8192),
    ("dsv3_q_up", 24576, 1536),
    ("dsv3_expert_fc1", 4096, 7168),
    ("dsv3_expert_fc2", 7168, 2048),
)
CPU_SHAPES = (("cpu_small", 192, 128), ("cpu_wide", 256, 512))

#: Keller Jordan's quintic coefficients (Megatron-Core's default coefficient_type "quintic").
A, B, C = 3.4445, -4.7750, 2.0315
STEPS = 5


def newton_schulz(g: torch.Tensor, steps: int = STEPS) -> torch.Tensor:
    """Orthogonalise g: `steps` quintic iterations on the wide orientation."""
    x = g / (g.norm() + 1e-7)
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    for _ in range(steps):
        a = x @ x.T
        b = B * a + C * (a @ a)
        x = A * x + b @ x
    return x.T if tall else x


def time_s(fn, runs: int, device: torch.device) -> float:  # type: ignore[no-untyped-def]
    """Median wall seconds of `runs` calls after one warm-up, synchronised on a GPU."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    sync()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def planned_s(accelerator: str | None, rows: int, cols: int) -> float | None:
    """The planner's seconds for one matrix (sustained fraction 1.0), or None without a device."""
    if accelerator is None:
        return None
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.train.muon import newton_schulz_s

    return newton_schulz_s(rows, cols, hardware_from_catalog(accelerator), 1.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--accelerator", help="catalog id whose plan to print beside the time")
    ap.add_argument("--cpu", action="store_true", help="small shapes on the CPU (a check)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    device = torch.device("cpu" if args.cpu or not torch.cuda.is_available() else "cuda")
    shapes = CPU_SHAPES if device.type == "cpu" else SHAPES
    torch.set_float32_matmul_precision("medium")
    print("shape,rows,cols,dtype,device,measured_s,planned_s")
    for name, rows, cols in shapes:
        g = torch.randn(rows, cols, device=device, dtype=torch.float32)
        s = time_s(lambda g=g: newton_schulz(g), args.runs, device)
        plan = planned_s(args.accelerator, rows, cols)
        cell = "" if plan is None else f"{plan:.6g}"
        print(f"{name},{rows},{cols},fp32-medium,{device.type},{s:.6g},{cell}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
