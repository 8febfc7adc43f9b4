"""JSON output: one document on stdout and nothing else."""

from __future__ import annotations

import json
import math
import sys
from typing import Any


def _clean(value: Any) -> Any:
    """NaN/inf are not JSON: report them as null (unknown), never as a made-up number."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(doc: Any) -> str:
    return json.dumps(_clean(doc), indent=2, sort_keys=False, allow_nan=False)


def emit(doc: Any) -> None:
    sys.stdout.write(dumps(doc) + "\n")
    sys.stdout.flush()
