"""Write the prediction-interval files from the out-of-sample validation residuals.

    python scripts/fit_intervals.py                      # both files
    python scripts/fit_intervals.py --only training      # catalog/data/intervals_training.json
    python scripts/fit_intervals.py --only inference     # catalog/data/intervals_inference.json
    python scripts/fit_intervals.py --only inference --check   # exit 1 when the file is stale

Run after changing a planner or the published runs; tests/train/test_intervals.py and
tests/infer/test_inference_validation.py fail while a shipped file differs from what the
residuals give.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "src/flopwise/catalog/data"
OUT = DATA / "intervals_training.json"
OUT_INFERENCE = DATA / "intervals_inference.json"


def table() -> dict[str, object]:
    from flopwise.plan.train.interval import ATTENTION_BOUND_SHARE, MOE_REGIME
    from flopwise.validate.training import validate_training
    from flopwise.validate.unseen_training import validate_unseen_training

    v = validate_training()
    regimes = v.interval_table()
    moe = validate_unseen_training().moe_regime()
    if moe is not None:
        regimes[MOE_REGIME] = moe
    return {
        "level": 0.8,
        "what": "measured/predicted step time of flopwise validate's out-of-sample training "
        "predictions (leave one source family out), 10th and 90th percentile per regime of "
        "every family's mean bias combined with every row's scatter inside its family; "
        "regimes ending /attention-bound hold steps whose attention core is "
        f"{ATTENTION_BOUND_SHARE:.0%} or more of the compute; "
        f"'{MOE_REGIME}' is the 10th-90th percentile of the measured/predicted step of the MoE "
        "runs in validate --only training-unseen (nothing fitted to them), with their observed "
        "range",
        "regimes": regimes,
    }


def inference_text() -> str:
    from flopwise.validate.intervals_fit import interval_doc

    return json.dumps(interval_doc(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    only = args[args.index("--only") + 1] if "--only" in args else None
    if only not in (None, "training", "inference"):
        print(f"--only {only!r}: expected training or inference", file=sys.stderr)
        return 2
    check = "--check" in args
    stale: list[Path] = []
    if only in (None, "training"):
        text = json.dumps(table(), indent=2) + "\n"
        if check:
            if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
                stale.append(OUT)
        else:
            OUT.write_text(text, encoding="utf-8")
            print(f"wrote {OUT}")
    if only in (None, "inference"):
        text = inference_text()
        if check:
            if not OUT_INFERENCE.is_file() or OUT_INFERENCE.read_text(encoding="utf-8") != text:
                stale.append(OUT_INFERENCE)
        else:
            OUT_INFERENCE.write_text(text, encoding="utf-8")
            print(f"wrote {OUT_INFERENCE}")
    if check:
        for path in stale:
            print(f"{path} is stale: rerun scripts/fit_intervals.py")
        print("up to date" if not stale else "")
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
