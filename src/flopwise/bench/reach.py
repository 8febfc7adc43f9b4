"""Stay inside the stated timeout when the rendezvous is unreachable.

PyTorch's TCPStore client retries a failed connection once after a back-off, each try with the
full timeout, so an unreachable MASTER_ADDR:MASTER_PORT used to take about twice `--timeout`
(and printed C++ stack traces). Probing the port with plain sockets until the deadline keeps
the wait at `--timeout` and the error to one line.
"""

from __future__ import annotations

import socket
import time

from flopwise.errors import FlopwiseError

#: Pause between connection attempts while the store host is not listening yet.
PROBE_INTERVAL_S = 0.2


def wait_reachable(addr: str, port: int, timeout_s: float, rank: int) -> float:
    """Block until a TCP connection to addr:port succeeds; return the seconds left.

    Raises a one-line FlopwiseError once `timeout_s` has passed without one.
    """
    deadline = time.monotonic() + timeout_s
    why = "no answer"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise FlopwiseError(
                f"rank {rank}: rendezvous at {addr}:{port} failed within {timeout_s:g}s "
                f"(nothing reachable there: {why}); check MASTER_ADDR/MASTER_PORT and that "
                "rank 0 started"
            )
        try:
            with socket.create_connection((addr, port), timeout=min(left, 2.0)):
                return max(deadline - time.monotonic(), 0.0)
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
        time.sleep(min(PROBE_INTERVAL_S, max(deadline - time.monotonic(), 0.0)))
