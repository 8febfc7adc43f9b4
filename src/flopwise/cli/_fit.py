"""Exit status of the planners when the job does not fit (shared by plan train and infer)."""

from __future__ import annotations

#: `plan train` and `plan infer` exit 1 when the job does not fit in memory; the output still
#: shows the plan, led by "does not fit" (2 stays reserved for bad input).
EXIT_DOES_NOT_FIT = 1
