"""How fast is `plan infer --sweep`? Times a 64-point batch sweep in-process.

Reports the median wall time of sweep_batches over 64 batch sizes for two models, against a
baseline measured in the same run (one plan_inference call), and ends with one JSON document.
The issue's bar: a 64-point sweep "well under a second".

    PYTHONPATH=src python benchmarks/infer_sweep_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable


def _median_s(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up (imports, caches)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.infer import InferJob, plan_inference
    from flopwise.plan.infer.sweep import sweep_batches
    from flopwise.workload import load_model

    hw = hardware_from_catalog("h100-sxm")
    cases = {
        "llama-3.1-70b tp4 2048/256": (
            load_model("llama-3.1-70b"),
            InferJob(input_len=2048, output_len=256, tp=4),
        ),
        "mixtral-8x7b tp2 1024/256": (
            load_model("mixtral-8x7b"),
            InferJob(input_len=1024, output_len=256, tp=2),
        ),
    }
    results = {}
    for name, (spec, job) in cases.items():
        single = _median_s(lambda s=spec, j=job: plan_inference(s, hw, j), args.runs)
        points = len(sweep_batches(spec, hw, job))
        sweep = _median_s(lambda s=spec, j=job: sweep_batches(s, hw, j), args.runs)
        results[name] = {
            "points": points,
            "sweep_s": sweep,
            "single_plan_s": single,
            "sweep_over_single_plan": sweep / single,
            "well_under_a_second": sweep < 0.5,
        }
        print(
            f"{name:32s} {points} points: sweep {sweep * 1e3:7.1f} ms, one plan "
            f"{single * 1e3:6.2f} ms, ratio {sweep / single:5.1f}x"
        )
    print(json.dumps({"infer_sweep_speed": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
