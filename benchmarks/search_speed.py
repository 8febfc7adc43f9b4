"""Layout-search speed on the case of the training-planner issue, on one core.

Narayanan et al. 2021 Table 1's 529.6B model (105 layers, hidden 20480, 128 heads, vocab
51200, sequence 2048, global batch 2520 sequences) on 2,520 A100-80GB, every layout flag free.
Prints layouts evaluated, layouts/s and the time (median of 5 cold searches, each on a fresh
context so no cache carries over), then one JSON document. The baseline measured in the same
run is the cost of evaluating one layout from scratch (a 1-layout search), so the ratio says
how much the per-degree caches buy.

    PYTHONPATH=src python benchmarks/search_speed.py
"""

from __future__ import annotations

import json
import statistics
import time

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.search import search
from flopwise.workload.spec import ModelSpec

MODEL = ModelSpec(
    name="megatron-529.6b",
    model_type="gpt2",
    hidden=20480,
    layers=105,
    heads=128,
    kv_heads=128,
    head_dim=160,
    v_head_dim=160,
    vocab=51200,
    ffn=4 * 20480,
    gated_mlp=False,
    linear_bias=True,
    norm="layernorm",
    tied_embeddings=True,
    learned_positions=2048,
)
JOB = TrainJob(gpus=2520, seq_len=2048, global_batch_seqs=2520, dtype="bf16")


def main() -> None:
    hw = hardware_from_catalog("a100-sxm-80gb")
    times, outcome = [], None
    for _ in range(5):
        t0 = time.perf_counter()
        outcome = search(ModelContext(MODEL, hw, JOB), LayoutConstraints())
        times.append(time.perf_counter() - t0)
    assert outcome is not None
    best_s = statistics.median(times)
    one = []
    published = LayoutConstraints(
        tp=8,
        pp=35,
        dp=9,
        cp=1,
        vpp=3,
        microbatch=1,
        recompute="full",
        zero=0,
        sequence_parallel=False,
    )
    for _ in range(5):
        t0 = time.perf_counter()
        search(ModelContext(MODEL, hw, JOB), published)
        one.append(time.perf_counter() - t0)
    one_s = statistics.median(one)
    rate = outcome.evaluated / best_s
    best = outcome.top[0]
    print(
        f"layouts evaluated : {outcome.evaluated:,} ({outcome.timed:,} timed, "
        f"{outcome.pruned:,} pruned on training-state memory, {outcome.feasible:,} fit)"
    )
    print(f"search time       : {best_s * 1e3:.1f} ms (median of 5), {rate:,.0f} layouts/s")
    print(
        f"one cold layout   : {one_s * 1e3:.2f} ms -> search/cold-layout ratio "
        f"{best_s / one_s:.1f} for {outcome.evaluated:,} layouts"
    )
    print(f"best layout       : {best.layout.to_dict()} step {best.step_time_s:.2f} s")
    print(
        json.dumps(
            {
                "case": "529.6B on 2520 A100-80GB, all layout flags free",
                "configs_evaluated": outcome.evaluated,
                "timed": outcome.timed,
                "pruned": outcome.pruned,
                "feasible": outcome.feasible,
                "elapsed_s": best_s,
                "layouts_per_s": rate,
                "one_layout_cold_s": one_s,
                "meets_8112_layouts": outcome.evaluated >= 8112,
                "under_one_second": best_s < 1.0,
            }
        )
    )


if __name__ == "__main__":
    main()
