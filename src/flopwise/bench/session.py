"""A running job as flopwise sees it: every rank's identity, plus barriers that name laggards.

The rendezvous store (TCPStore) carries what each rank announces and how far it got, so a
failure can be explained even when the process group itself is broken.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from flopwise.errors import FlopwiseError

if TYPE_CHECKING:
    from flopwise.bench.dist import DistEnv

#: After a failure, how long to wait for the other survivors to record that they saw it too
#: before naming the ranks that did not (they time out at about the same moment; 2 s covers
#: the skew of a loaded host).
NAMING_GRACE_S = 2.0


def collective_timeout_s(timeout_s: float) -> float:
    """The backend's own timeout: the stated one less the naming grace, so that a hung rank is
    detected and named within --timeout, not after it."""
    return max(timeout_s - NAMING_GRACE_S, timeout_s / 2)


@dataclass(frozen=True, slots=True)
class RankInfo:
    """What each rank tells the others when the session starts."""

    rank: int
    host: str
    node_key: str
    local_rank: int
    pid: int
    device: str
    device_name: str


@dataclass
class Session:
    """An initialised process group plus the store, with timeouts that name missing ranks."""

    env: DistEnv
    backend: str
    device: str  # torch device string, e.g. 'cpu' or 'cuda:1'
    timeout_s: float
    store: Any
    ranks: list[RankInfo] = field(default_factory=list)
    _phase: int = 0

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    def store_barrier(self, what: str) -> None:
        """Every rank arrives or, after the timeout, a FlopwiseError names those that did not."""
        self._phase += 1
        keys = [f"arrive/{self._phase}/{r}" for r in range(self.world_size)]
        try:
            self.store.set(keys[self.rank], what)
        except Exception as exc:
            raise self.store_lost(exc) from None
        try:
            self.store.wait(keys, timedelta(seconds=self.timeout_s))
        except Exception as exc:
            try:
                missing = [r for r, k in enumerate(keys) if not self.store.check([k])]
            except Exception:
                raise self.store_lost(exc) from None
            self.linger_for_survivors(f"named/{self._phase}", missing)
            raise FlopwiseError(
                f"rank {self.rank}: {self.describe(missing)} did not reach {what} within "
                f"{self.timeout_s:g}s (dead, hung or unreachable)"
            ) from None

    def get_json(self, key: str) -> Any:
        """A value another rank stored (it must exist), or a one-line error if the store is gone."""
        try:
            return json.loads(self.store.get(key).decode())
        except Exception as exc:
            raise self.store_lost(exc) from None

    def mark(self, what: str) -> None:
        """Record this rank's progress so a failure elsewhere can name who fell behind."""
        try:
            self.store.set(f"progress/{self.rank}", what)
        except Exception as exc:
            raise self.store_lost(exc) from None

    def _has(self, key: str) -> bool:
        try:
            return bool(self.store.check([key]))
        except Exception:
            return False

    def laggards(self, expected: str) -> list[int]:
        """Ranks whose recorded progress is not `expected` (after a short grace period)."""
        return sorted(self.progress_of_laggards(expected))

    def progress_of_laggards(self, expected: str) -> dict[int, str | None]:
        """{rank: its recorded progress} for the ranks not at `expected`, polled for a short
        grace period. If the store goes away meanwhile (rank 0 exited), the last complete
        reading is returned; with none, the store error propagates."""
        deadline = time.monotonic() + self.timeout_s - collective_timeout_s(self.timeout_s)
        last: dict[int, str | None] | None = None
        while True:
            try:
                now = {r: self._progress(r) for r in range(self.world_size)}
            except Exception:
                if last is None:
                    raise
                return last
            last = {r: p for r, p in now.items() if p != expected}
            if not last or time.monotonic() > deadline:
                return last
            time.sleep(0.05)

    def describe(self, ranks: Sequence[int]) -> str:
        """'rank 1 (host a, local rank 1, pid 42)' for each rank, from what they announced."""
        if not ranks:
            return "no rank"
        known = {i.rank: i for i in self.ranks}
        parts = []
        for r in ranks:
            i = known.get(r)
            parts.append(
                f"rank {r} (host {i.host}, local rank {i.local_rank}, pid {i.pid})"
                if i
                else f"rank {r}"
            )
        return ("ranks " if len(parts) > 1 else "") + ", ".join(parts)

    def collective_failed(self, what: str, exc: BaseException) -> FlopwiseError:
        """Turn a backend error into one line naming the ranks that did not get through.

        This rank records that it saw `what` fail; after a short grace the ranks that recorded
        neither the failure nor anything later are named: those still inside `what` died or
        hung there, the others never reached it.
        """
        first = first_sentence(exc)
        failed = f"failed during {what}"
        try:
            self.mark(failed)
            where = {r: p for r, p in self.progress_of_laggards(failed).items() if r != self.rank}
        except Exception:
            return self.store_lost(exc)
        inside = [r for r, p in where.items() if p == what]
        never = [r for r, p in where.items() if p != what]
        self.linger_for_survivors(f"named/{what}", list(where))
        parts = []
        if inside:
            parts.append(f"{self.describe(inside)} stopped inside it and did not report back")
        if never:
            parts.append(f"{self.describe(never)} did not reach it")
        who = "; ".join(parts) if parts else "every rank saw it fail (no rank is missing)"
        return FlopwiseError(
            f"rank {self.rank}: {what} failed after at most {self.timeout_s:g}s: {who} "
            f"(dead, hung or unreachable); backend said: {first}"
        )

    def linger_for_survivors(self, tag: str, lost: Sequence[int]) -> None:
        """Record that this rank has read what it needs from the store to name `lost`; on
        rank 0, which hosts the store when no launcher does (srun, mpirun), also wait up to
        NAMING_GRACE_S for every other survivor to record the same before this process exits
        and takes the store with it. Without the wait, a survivor a moment behind rank 0 (a
        loaded host) found the store gone and blamed rank 0 instead of the rank that died."""
        try:
            self.store.set(f"{tag}/{self.rank}", "1")
        except Exception:
            return
        if self.rank != 0:
            return
        others = [f"{tag}/{r}" for r in range(self.world_size) if r != self.rank and r not in lost]
        deadline = time.monotonic() + NAMING_GRACE_S
        while others and time.monotonic() < deadline:
            others = [k for k in others if not self._has(k)]
            if others:
                time.sleep(0.02)

    def _progress(self, rank: int) -> str | None:
        key = f"progress/{rank}"
        return self.store.get(key).decode() if self.store.check([key]) else None

    def store_lost(self, exc: BaseException) -> FlopwiseError:
        return FlopwiseError(
            f"rank {self.rank}: lost the rendezvous store at {self.env.master_addr}:"
            f"{self.env.master_port} (rank 0 or the launcher died): {first_sentence(exc)}"
        )

    def hosts(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for info in self.ranks:
            out.setdefault(info.host, []).append(info.rank)
        return out

    def nodes(self) -> list[list[int]]:
        """Ranks grouped by node, nodes in order of their lowest rank."""
        out: dict[str, list[int]] = {}
        for info in sorted(self.ranks, key=lambda i: i.rank):
            out.setdefault(info.node_key, []).append(info.rank)
        return list(out.values())


_BOILERPLATE = ("This is typically", "Check the logs", "GLHF")


def first_sentence(exc: BaseException) -> str:
    """The backend's message without its source location and boilerplate advice."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    text = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0])
    sentences = re.split(r"(?<=[a-z0-9])\. ", text)
    kept = [x for x in sentences if not x.startswith(_BOILERPLATE)]
    return ". ".join(kept or sentences[:1]).rstrip(" .")[:200]
