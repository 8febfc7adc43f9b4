"""Connectivity check: every rank reports host, device and a tiny all_reduce, or is named.

In the spirit of stas00/ml-engineering's torch-distributed-gpu-test.py, with a timeout on
everything: a rank that never joins, dies or hangs is named in the report instead of hanging
the job. Reports travel through the rendezvous store, so they survive a broken process group.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flopwise.errors import FlopwiseError

if TYPE_CHECKING:
    from flopwise.bench.session import Session

#: How long rank 0 keeps polling for peers' reports after a failure before calling them missing.
REPORT_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class RankReport:
    rank: int
    host: str
    local_rank: int
    device: str
    device_name: str
    value: float | None  # all_reduce of (rank + 1) over all ranks, as this rank saw it
    elapsed_ms: float | None
    status: str  # "ok" | "wrong value" | "failed" (its all_reduce raised) | "missing" (no report)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class CheckResult:
    world_size: int
    backend: str
    expected: float  # 1 + 2 + ... + world_size
    ranks: tuple[RankReport, ...]
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None and all(r.status == "ok" for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "world_size": self.world_size,
            "backend": self.backend,
            "expected": self.expected,
            "problem": self.problem,
            "ranks": [r.to_dict() for r in self.ranks],
        }


def expected_sum(world_size: int) -> float:
    """Each rank contributes rank + 1, so the all_reduce sum is n(n+1)/2."""
    return world_size * (world_size + 1) / 2


def run_check(session: Session) -> CheckResult:
    """Run the check on this rank; every rank returns a result, rank 0's names the others."""
    import torch
    import torch.distributed as dist

    from flopwise.bench.comms_ops import sync

    expected = expected_sum(session.world_size)
    problem: str | None = None
    value = elapsed_ms = None
    session.mark("the all_reduce")
    try:
        t = torch.full((1,), float(session.rank + 1), device=session.device)
        start = time.perf_counter()
        dist.all_reduce(t)
        sync(session.device)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        value = float(t.item())
    except RuntimeError as exc:
        problem = str(session.collective_failed("the all_reduce", exc))
    try:
        session.store.set(
            f"check/{session.rank}",
            json.dumps({"value": value, "elapsed_ms": elapsed_ms, "problem": problem}),
        )
        if problem is None:
            session.store_barrier("the end of the check")
    except FlopwiseError as exc:
        problem = str(exc)
    except Exception as exc:
        problem = str(session.store_lost(exc))
    reports = _collect(session, expected, wait=problem is not None)
    if problem is None:
        bad = [r.rank for r in reports if r.status != "ok"]
        problem = f"{session.describe(bad)} reported a wrong all_reduce value" if bad else None
    return CheckResult(session.world_size, session.backend, expected, tuple(reports), problem)


def _collect(session: Session, expected: float, wait: bool) -> list[RankReport]:
    deadline = time.monotonic() + (REPORT_GRACE_S if wait else 0.0)
    found: dict[int, dict[str, Any]] = {}
    while True:
        for r in range(session.world_size):
            if r in found:
                continue
            try:
                if session.store.check([f"check/{r}"]):
                    found[r] = json.loads(session.store.get(f"check/{r}").decode())
            except Exception:
                break
        if len(found) == session.world_size or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    reports = []
    for info in session.ranks:
        got = found.get(info.rank)
        if got is None:
            status = "missing"
            value = elapsed = None
        else:
            value, elapsed = got.get("value"), got.get("elapsed_ms")
            if got.get("problem"):
                status = "failed"
            elif value is None or abs(value - expected) > 1e-6 * expected:
                status = "wrong value"
            else:
                status = "ok"
        reports.append(
            RankReport(
                rank=info.rank,
                host=info.host,
                local_rank=info.local_rank,
                device=info.device,
                device_name=info.device_name,
                value=value,
                elapsed_ms=elapsed,
                status=status,
            )
        )
    return reports
