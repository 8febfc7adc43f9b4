"""What a job flag is (``JobFlag``), the value parsers and dtype lists the flag tables share,
and their group titles. The tables themselves: cli/job_flags.py (hardware and candidates),
cli/job_flags_train.py (training and goodput), cli/job_flags_infer.py (inference).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flopwise.cli._args import non_negative_float
from flopwise.errors import FlopwiseError

KINDS = ("train", "infer")
DOORS = ("plan", "compare")

#: Weight dtypes of an inference plan (fp4 family: Blackwell-class hardware only).
WEIGHT_DTYPES: tuple[str, ...] = (
    "bf16",
    "fp16",
    "fp8",
    "mxfp8",
    "int8",
    "int4",
    "fp4",
    "nvfp4",
    "mxfp4",
)
KV_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8")
ACTIVATION_DTYPES: tuple[str, ...] = (
    "bf16",
    "fp16",
    "fp8",
    "mxfp8",
    "int8",
    "fp32",
    "fp4",
    "nvfp4",
    "mxfp4",
)

BOOL = "bool"  # --x / --no-x, None when not given
FLAG = "flag"  # --x only (store_true), None when not given


def _batch(text: str) -> str | int:
    if text.strip().lower() == "max":
        return "max"
    from flopwise.units import parse_positive_int

    return parse_positive_int(text, "--batch (a positive integer or 'max')")


def _concurrency(text: str) -> int | tuple[int, ...]:
    """--concurrency: N, or a comma list N1,N2,... (a sweep; a job file may give a list)."""
    from flopwise.units import parse_positive_int

    parts = [p.strip() for p in text.strip().strip("[]").split(",") if p.strip()]
    if not parts:
        raise FlopwiseError(f"--concurrency {text!r}: give N or a comma list such as 1,8,32")
    levels = tuple(
        dict.fromkeys(parse_positive_int(p, "--concurrency (positive integers)") for p in parts)
    )
    return levels[0] if len(levels) == 1 else levels


def _request_rate(text: str) -> float | tuple[float, ...]:
    """--request-rate: R, or a comma list R1,R2,... (a sweep; a job file may give a list)."""
    parts = [p.strip() for p in text.strip().strip("[]").split(",") if p.strip()]
    if not parts:
        raise FlopwiseError(f"--request-rate {text!r}: give R or a comma list such as 1,2,4")
    levels = tuple(dict.fromkeys(_positive_float(p) for p in parts))
    return levels[0] if len(levels) == 1 else levels


def _acceptance(text: str) -> float:
    value = non_negative_float(text)
    if value >= 1:
        raise FlopwiseError(f"{text!r} must be a fraction in [0, 1), e.g. 0.7")
    return value


def _positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value <= 0:
        raise FlopwiseError(f"{text!r} must be a positive number")
    return value


def _measured(text: str) -> str:
    return text.strip()


@dataclass(frozen=True, slots=True)
class JobFlag:
    """One job flag: how it parses, its default, and where it applies."""

    name: str  # long flag without dashes, e.g. "seq-len"; also the job-file key
    help: str
    kinds: tuple[str, ...] = KINDS
    doors: tuple[str, ...] = DOORS
    parse: Callable[[str], Any] | None = None  # raises FlopwiseError on bad text
    choices: tuple[Any, ...] | None = None
    default: Any = None
    required: bool = False
    action: str | None = None  # BOOL, FLAG or None (a value)
    metavar: str | None = None
    short: str | None = None
    group: str | None = None  # argparse group title
    exclusive: str | None = None  # flags sharing this name may not be combined
    #: ... except with these flags of the same set (argparse cannot say so: checked in
    #: job_args._check_exclusive only)
    combines_with: tuple[str, ...] = ()
    const: Any = None  # value when given without an argument (nargs='?')
    dest_name: str | None = None  # args attribute when not the flag name (memory_headroom_gib)

    @property
    def dest(self) -> str:
        return self.dest_name or self.name.replace("-", "_")

    def applies(self, kind: str, door: str) -> bool:
        return kind in self.kinds and door in self.doors


_LAYOUT = "layout (any left out is searched)"
_FRAMEWORK = "framework (what overlaps with what; each switch defaults to the profile's value)"


def _frameworks() -> tuple[str, ...]:
    from flopwise.plan.train.frameworks import FRAMEWORKS

    return tuple(FRAMEWORKS)


def _recompute_modes() -> tuple[str, ...]:
    from flopwise.workload.remat import POLICIES

    return ("none", "selective", "full", "op", *POLICIES)


def _remat_tensors(text: str) -> tuple[tuple[str, str], ...]:
    from flopwise.workload.remat import parse_remat_tensors

    return parse_remat_tensors(text)


def _pipeline_layout(text: str) -> str:
    """A pipeline layout string, its syntax checked (plan/train/pipeline_layout.py); the model
    and --pp check it at plan time."""
    from flopwise.plan.train.pipeline_layout import layout_stages

    layout_stages(text)
    return text.strip()


def _fp8_recipes() -> tuple[str, ...]:
    from flopwise.plan.train.fp8_recipes import FP8_RECIPE_NAMES

    return FP8_RECIPE_NAMES


_GOODPUT = "goodput (failures, checkpoints, restarts; defaults: catalog failures.csv, storage.csv)"
_WHERE = "where to run (compare and report)"
_T, _I = ("train",), ("infer",)
_PLAN, _CMP = ("plan",), ("compare",)


def _csv_list(text: str | list[Any]) -> list[str]:
    if isinstance(text, list):
        return [str(t).strip() for t in text if str(t).strip()]
    return [t.strip() for t in text.split(",") if t.strip()]
