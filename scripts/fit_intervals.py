"""Write catalog/data/intervals_training.json from the out-of-sample validation residuals.

    python scripts/fit_intervals.py

Run after changing the step-time model or the published runs; tests/train/test_intervals.py
fails while the shipped file differs from what the residuals give.
"""

from __future__ import annotations

import json
from pathlib import Path

from flopwise.validate.training import validate_training

OUT = Path(__file__).resolve().parent.parent / "src/flopwise/catalog/data/intervals_training.json"


def table() -> dict[str, object]:
    v = validate_training()
    return {
        "level": 0.8,
        "what": "measured/predicted step time of flopwise validate's out-of-sample training "
        "predictions (leave one source family out), 10th and 90th percentile per regime",
        "regimes": v.interval_table(),
    }


def main() -> None:
    OUT.write_text(json.dumps(table(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
