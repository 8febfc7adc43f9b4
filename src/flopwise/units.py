"""The unit convention, written once.

- ``_tflops``: 1e12 FLOP/s (dense).      - ``_gb``: 1e9 bytes.     - ``_gib``: 2**30 bytes.
- ``_gbps``: 1e9 bytes/s (GB/s, as nccl-tests and memory bandwidth are quoted).
- ``_gbit_s``: 1e9 bits/s (network line rates).  - ``_s``: seconds.  TB/s = 1e12 B/s.
"""

from __future__ import annotations

import math
import re

from flopwise.errors import FlopwiseError

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40
TERA = 1e12
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0

_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_SIZE_SUFFIX = {
    "": 1.0,
    "b": 1.0,
    "k": KIB,
    "kb": KB,
    "kib": KIB,
    "m": MIB,
    "mb": MB,
    "mib": MIB,
    "g": GIB,
    "gb": GB,
    "gib": GIB,
    "t": TIB,
    "tb": TB,
    "tib": TIB,
}
_NUM = r"(-?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)"


def parse_count(
    text: str | float | int,
    what: str = "count",
    not_a_number: str = "is not a number; use e.g. 15T, 300B, 2e12 or 4M",
) -> float:
    """Parse '15T', '2e12', '300B', '4M', '1_000' into a positive number (decimal suffixes);
    text that is no number is an error saying `not_a_number` after the value."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(_NUM + r"\s*([kmbgtp]?)", str(text).strip().lower().replace("_", ""))
        if not m:
            raise FlopwiseError(f"{what} {text!r} {not_a_number}")
        value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2)]
    if not math.isfinite(value) or value <= 0:
        raise FlopwiseError(f"{what} must be a positive number, got {text!r}")
    return value


def parse_size_bytes(text: str | float | int, what: str = "size") -> float:
    """Parse '80GB' (1e9), '80GiB' (2**30), '32K'/'1G' (binary, as nccl-tests), '4096' bytes."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(_NUM + r"\s*([kmgt]i?b?|b)?", str(text).strip().lower())
        if not m:
            raise FlopwiseError(
                f"{what} {text!r} is not a size; use e.g. 80GB, 80GiB, 32K, 1G or a byte count"
            )
        value = float(m.group(1)) * _SIZE_SUFFIX[m.group(2) or ""]
    if not math.isfinite(value) or value <= 0:
        raise FlopwiseError(f"{what} must be a positive size, got {text!r}")
    return value


def parse_positive_int(text: str | int, what: str) -> int:
    """Parse a positive whole number (accepts 2K/1M style suffixes for convenience)."""
    value = parse_count(text, what, "is not a whole number; use e.g. 8, 512 or 4K")
    if value != int(value):
        raise FlopwiseError(f"{what} must be a whole number, got {text!r}")
    return int(value)


def check_fraction(value: float, what: str) -> float:
    """`value` when it is a fraction in (0, 1], else a one-line error naming `what`."""
    if not 0.0 < value <= 1.0:
        raise FlopwiseError(f"{what} must be a fraction in (0, 1], got {value!r}")
    return value


def gib(n_bytes: float) -> float:
    return n_bytes / GIB


def gb(n_bytes: float) -> float:
    return n_bytes / GB


def human_count(x: float) -> str:
    """1.5e12 -> '1.50T' (decimal suffixes, for tokens/params/FLOPs)."""
    for suffix, scale in (("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{suffix}"
    return f"{x:.0f}"
