"""Slurm host lists: `scontrol show hostnames` when Slurm is installed, else the same grammar.

Slurm's compact form (slurm.conf(5) "NodeName", scontrol(1) "show hostnames"): items separated
by commas outside brackets; each bracket holds comma-separated numbers or ranges, zero padding
kept ("gpu[01-03]" -> gpu01 gpu02 gpu03); several brackets in one name expand as a product with
the leftmost varying slowest ("rack[1-2]-node[1-2]" -> rack1-node1 rack1-node2 rack2-node1
rack2-node2).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

from flopwise.errors import FlopwiseError

SCONTROL_TIMEOUT_S = 10
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise FlopwiseError(f"cannot read Slurm node list {text!r}: nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise FlopwiseError(f"cannot read Slurm node list {text!r}: unmatched ']'")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise FlopwiseError(f"cannot read Slurm node list {text!r}: unmatched '['")
    items.append(text[start:])
    return [x.strip() for x in items if x.strip()]


def _expand_bracket(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise FlopwiseError(f"cannot read Slurm node list {whole!r}: bad range {part!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise FlopwiseError(f"cannot read Slurm node list {whole!r}: {part} runs backwards")
        width = len(lo) if lo.startswith("0") else 0
        out.extend(f"{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
    return out


def parse_hostlist(text: str) -> list[str]:
    """Expand a Slurm host list without Slurm (see the module docstring for the grammar)."""
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        pieces = re.split(r"(\[[^\]]*\])", item)
        choices = [
            _expand_bracket(p[1:-1], text) if p.startswith("[") else [p] for p in pieces if p
        ]
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    if not hosts:
        raise FlopwiseError(f"cannot read Slurm node list {text!r}")
    return hosts


def expand_nodelist(text: str) -> list[str]:
    """Host names of a Slurm node list: `scontrol show hostnames` when it is on PATH (Slurm's
    own reading, including forms this parser does not know), else :func:`parse_hostlist`."""
    if shutil.which("scontrol"):
        try:
            r = subprocess.run(
                ["scontrol", "show", "hostnames", text],
                capture_output=True,
                text=True,
                timeout=SCONTROL_TIMEOUT_S,
                check=False,
            )
            hosts = r.stdout.split()
            if r.returncode == 0 and hosts:
                return hosts
        except (OSError, subprocess.SubprocessError):
            pass
    return parse_hostlist(text)
