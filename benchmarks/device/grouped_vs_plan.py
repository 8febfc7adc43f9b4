"""Measured grouped GEMMs (`bench matmul --groups`) against the plan's grouped GEMM model.

Reads every stored grouped run of the device ($FLOPWISE_HOME's results), and prints per shape the
measured rate, the rate plan/gemm.py gives it from the catalog alone (no measurement: the
GROUPED_GEMM_EFFICIENCY share of the dense roof), and their ratio: what a device session needs to
judge the grouped model at fine-grained expert shapes (docs/training-planner.md, the MoE lead).

    python benchmarks/device/grouped_vs_plan.py [--db PATH]
"""

from __future__ import annotations

import argparse

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.gemm import gemm_estimate
from flopwise.results.measured import grouped_by_dtype
from flopwise.results.store import ResultStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="results database (default: flopwise's)")
    args = ap.parse_args()
    store = ResultStore(args.db)
    runs = [r for r in store.list("matmul", None, limit=1000) if r.status == "complete"]
    by_accelerator: dict[str, list] = {}  # type: ignore[type-arg]
    for run in runs:
        by_accelerator.setdefault(run.accelerator or "", []).append(run)
    print("accelerator,dtype,groups,m,n,k,measured_tflops,plan_tflops,measured_over_plan")
    for acc, acc_runs in sorted(by_accelerator.items()):
        if not acc or acc == "cpu":
            continue
        hw = hardware_from_catalog(acc)
        for dtype, (rows, _) in grouped_by_dtype(acc_runs).items():
            for _, g, m, n, k, measured in rows:
                plan = gemm_estimate(m, n, k, hw, dtype, g, grouped=True).tflops
                print(
                    f"{acc},{dtype},{g},{m},{n},{k},{measured:.1f},{plan:.1f},{measured / plan:.3f}"
                )


if __name__ == "__main__":
    main()
