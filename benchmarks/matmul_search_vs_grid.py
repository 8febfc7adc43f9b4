"""Speed target of `flopwise bench matmul`: directed search against the full grid, one run.

Same device, same ranges, same iterations per shape: the grid measures every shape, then the
directed search runs with its defaults. Target: directed best >= 98% of the grid's best TFLOPS
in <= 10% of the grid's time.

    PYTHONPATH=src python benchmarks/matmul_search_vs_grid.py            # device auto
    PYTHONPATH=src python benchmarks/matmul_search_vs_grid.py --device cuda:0 --json

Default ranges: on the CPU 128..1536 step 128 per dimension (1,728 shapes, about two minutes
on 2 cores); on accelerators mamf-finder's documented full sweep, 1024..16384 step 1024
(4,096 shapes). The grid runs first so a device that heats up during the long grid leaves the
directed search the harder conditions.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from flopwise.bench.device import resolve_device
from flopwise.bench.matmul_run import MatmulConfig, run_matmul
from flopwise.bench.matmul_search import values_from_range

CPU_RANGE = (128, 1536, 128)
ACCELERATOR_RANGE = (1024, 16384, 1024)
TARGET_TFLOPS_RATIO = 0.98
TARGET_TIME_RATIO = 0.10


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype")
    p.add_argument(
        "--range",
        nargs=3,
        type=int,
        metavar=("START", "STOP", "STEP"),
        help="the same range for M, N and K (default: per device type)",
    )
    p.add_argument("--iterations", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--budget-s", type=float, help="directed search budget (default: its own)")
    p.add_argument("--json", action="store_true", help="print only the JSON document")
    p.add_argument("--save", metavar="FILE", help="write both runs, every shape, to FILE")
    return p.parse_args(argv)


def _progress(label: str, quiet: bool) -> Any:
    count = [0]

    def on_shape(r: Any, elapsed: float) -> None:
        count[0] += 1
        if not quiet and count[0] % 50 == 0:
            sys.stderr.write(f"  {label}: {count[0]} shapes, {elapsed:.0f} s\n")

    return on_shape


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    info = resolve_device(args.device)
    rng = (
        tuple(args.range)
        if args.range
        else (ACCELERATOR_RANGE if info.is_accelerator else CPU_RANGE)
    )
    values = values_from_range(*rng)
    common: dict[str, Any] = {
        "device": info.spec,
        "dtype": args.dtype,
        "m": values,
        "n": values,
        "k": values,
        "iterations": args.iterations,
        "warmup": args.warmup,
    }
    if not args.json:
        print(
            f"{info.spec} ({info.name}): ranges {rng[0]}..{rng[1]} step {rng[2]} "
            f"({len(values) ** 3} shapes in the grid)",
            file=sys.stderr,
        )
    grid = run_matmul(
        MatmulConfig(search="grid", **common), _progress("grid", args.json), info=info
    )
    directed = run_matmul(
        MatmulConfig(search="auto", budget_s=args.budget_s, **common),
        _progress("directed", args.json),
        info=info,
    )
    g, d = grid.summary(), directed.summary()
    ratio = (d["best_tflops"] or 0.0) / g["best_tflops"] if g["best_tflops"] else None
    median_ratio = None
    if g["median_tflops_at_best"] and d["median_tflops_at_best"]:
        best_grid_median = max((r.median_tflops or 0.0) for r in grid.results if r.status == "ok")
        best_directed_median = max(
            (r.median_tflops or 0.0) for r in directed.results if r.status == "ok"
        )
        median_ratio = best_directed_median / best_grid_median
    time_ratio = d["elapsed_s"] / g["elapsed_s"] if g["elapsed_s"] else None
    doc = {
        "device": info.spec,
        "device_name": info.name,
        "dtype": g["dtype"],
        "range": list(rng),
        "iterations": grid.iterations,
        "warmup": grid.warmup,
        "grid": {k: g[k] for k in ("best_tflops", "best_shape", "shapes_tried", "elapsed_s")},
        "directed": {
            **{k: d[k] for k in ("best_tflops", "best_shape", "shapes_tried", "elapsed_s")},
            "stop_reason": directed.stop_reason,
            "budget_s": directed.budget_s,
        },
        "tflops_ratio": ratio,
        "best_median_tflops_ratio": median_ratio,
        "time_ratio": time_ratio,
        "target_tflops_ratio": TARGET_TFLOPS_RATIO,
        "target_time_ratio": TARGET_TIME_RATIO,
        "meets_target": bool(
            ratio is not None
            and time_ratio is not None
            and ratio >= TARGET_TFLOPS_RATIO
            and time_ratio <= TARGET_TIME_RATIO
        ),
        "provenance": grid.provenance,
    }
    if not args.json:
        for name, s in (("grid", doc["grid"]), ("directed", doc["directed"])):
            shape = "x".join(map(str, s["best_shape"] or []))
            print(
                f"{name:9s} best {s['best_tflops']:.4f} TFLOPS at {shape}, "
                f"{s['shapes_tried']} shapes in {s['elapsed_s']:.1f} s",
                file=sys.stderr,
            )
        print(
            f"directed/grid: TFLOPS {ratio:.3f} (target >= {TARGET_TFLOPS_RATIO}), time "
            f"{time_ratio:.3f} (target <= {TARGET_TIME_RATIO})",
            file=sys.stderr,
        )
    if args.save:
        with open(args.save, "w", encoding="utf-8") as fh:
            json.dump({"grid": grid.to_dict(), "directed": directed.to_dict()}, fh)
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
