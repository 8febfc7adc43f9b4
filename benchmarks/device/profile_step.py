"""Where the time of a `flopwise bench step` training step goes, by kernel category.

Builds the same reduced model `bench step` builds (llama-3.1-8b, 6 layers, 4096 tokens, bf16
autocast, fused AdamW), runs warm-up steps, profiles two steps with torch.profiler and prints the
device time per category (GEMM, attention, optimizer, elementwise/norm, cross-entropy, copies)
and the step's wall time, so the planner's breakdown can be set beside it.

Usage (on a GPU machine): python benchmarks/device/profile_step.py [MODEL LAYERS SEQ]
"""

from __future__ import annotations

import re
import sys
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from flopwise.bench.step import make_adamw, reduced_model
from flopwise.bench.step_model import build
from flopwise.workload.hf import load_model

CATEGORIES = (
    ("attention", re.compile(r"fmha|flash|cudnn|sdpa|attention", re.I)),
    ("gemm", re.compile(r"gemm|xmma|cutlass|nvjet|cublas|sm90_|sm80_", re.I)),
    ("optimizer", re.compile(r"multi_tensor|adam|foreach", re.I)),
    ("cross_entropy", re.compile(r"softmax|nll|cross_entropy", re.I)),
    ("copy_cast", re.compile(r"copy|cast|convert|memcpy|memset|fill", re.I)),
    ("elementwise_norm", re.compile(r".")),
)


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "llama-3.1-8b"
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    seq = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    spec = load_model(name)
    small = reduced_model(spec, layers, spec.vocab)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = build(small, dev)
    opt, optimizer = make_adamw(torch, model.parameters())
    tokens = torch.randint(0, spec.vocab, (1, seq), device=dev)

    def step() -> None:
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = model(tokens)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 2
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            step()
        torch.cuda.synchronize()
    by_cat: dict[str, float] = defaultdict(float)
    by_kernel: dict[str, tuple[float, int]] = {}
    for evt in prof.key_averages():
        dev_us = getattr(evt, "self_device_time_total", None)
        if dev_us is None:
            dev_us = evt.self_cuda_time_total
        if not dev_us:
            continue
        cat = next(c for c, rx in CATEGORIES if rx.search(evt.key))
        by_cat[cat] += dev_us / 2
        by_kernel[evt.key] = (dev_us / 2, evt.count // 2)
    busy = sum(by_cat.values())
    print(
        f"model {name} x{layers} layers, seq {seq}, {optimizer}: wall {wall * 1e3:.1f} ms/step, "
        f"device busy {busy / 1e3:.1f} ms/step"
    )
    for cat, us in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:18s} {us / 1e3:8.2f} ms")
    print("top kernels (ms/step, launches/step):")
    for key, (us, n) in sorted(by_kernel.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"  {us / 1e3:8.2f} {n:5d}  {key[:110]}")


if __name__ == "__main__":
    main()
