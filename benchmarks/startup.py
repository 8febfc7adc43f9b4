"""Start-up check: `flopwise --help` and a planning command must start in well under 0.5 s.

Reports the median wall time of each command over several runs, next to a bare
`python -c pass` baseline measured in the same run, and exits non-zero if a command's median
exceeds the budget. Run: python benchmarks/startup.py [--runs N] [--budget-s 0.5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "flopwise --help": [sys.executable, "-m", "flopwise", "--help"],
    "flopwise plan train (first-order)": [
        sys.executable,
        "-m",
        "flopwise",
        "plan",
        "train",
        "llama-3.1-70b",
        "--accelerator",
        "h100-sxm",
        "--gpus",
        "512",
        "--tokens",
        "15T",
        "--mfu",
        "0.4",
        "--json",
    ],
    "flopwise model llama-3.1-8b --json": [
        sys.executable,
        "-m",
        "flopwise",
        "model",
        "llama-3.1-8b",
        "--json",
    ],
}


def _time(cmd: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--budget-s", type=float, default=0.5)
    args = ap.parse_args()
    torch_free = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from flopwise.cli.main import main; "
            "main(['plan','train','llama-3.1-8b','-a','h100','--gpus','8','--tokens','1T','--json']); "
            "assert 'torch' not in sys.modules, 'planner imported torch'",
        ],
        capture_output=True,
        text=True,
    )
    results = {name: _time(cmd, args.runs) for name, cmd in COMMANDS.items()}
    base = results["python -c pass (baseline)"]
    ok = torch_free.returncode == 0
    for name, t in results.items():
        flag = "" if name.startswith("python") or t < args.budget_s else "  OVER BUDGET"
        ok = ok and not flag
        print(f"{name:40s} {t * 1000:7.1f} ms  ({t / base:4.1f}x baseline){flag}", file=sys.stderr)
    print(
        json.dumps(
            {
                "median_s": results,
                "budget_s": args.budget_s,
                "planner_imports_torch": torch_free.returncode != 0,
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
