"""Regenerate src/flopwise/catalog/data/intervals_inference.json from the published rows.

Run after changing the inference planner or its published rows:
``PYTHONPATH=src python scripts/fit_intervals.py`` (``--check`` exits 1 when the shipped file
differs from what the residuals give now). See flopwise.validate.intervals_fit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from flopwise.validate.intervals_fit import interval_doc

TARGET = Path(__file__).resolve().parents[1] / "src/flopwise/catalog/data/intervals_inference.json"


def render() -> str:
    return json.dumps(interval_doc(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        same = TARGET.is_file() and TARGET.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{TARGET} is stale: rerun scripts/fit_intervals.py")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
