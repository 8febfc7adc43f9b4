"""The six operations as nccl-tests runs them, each with a check on known values.

Each builder returns (run one operation, run once on known values and count wrong elements).
Buffers are allocated once per size; all_gather works in place as nccl-tests does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flopwise.errors import FlopwiseError

#: Reductions of small whole numbers are exact in every dtype above up to 256 ranks; the
#: relative tolerance only matters beyond that (bf16 keeps 8 mantissa bits).
CHECK_RTOL = 1e-2


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device != "cpu":
        acc = getattr(torch, "accelerator", None)
        if acc is not None:
            acc.synchronize()


def prepare(
    op: str, count: int, members: list[int], me: int, dtype: Any, device: str, pg: Any
) -> tuple[Callable[[], None], Callable[[], int]]:
    """(run one op, run once on known values and count wrong elements) for this rank."""
    import torch
    import torch.distributed as dist

    n, k = len(members), members.index(me)
    zeros = torch.zeros
    if op == "all_reduce":
        buf = zeros(count, dtype=dtype, device=device)

        def run() -> None:
            dist.all_reduce(buf, group=pg)

        def check() -> int:
            buf.fill_(1)
            run()
            return _wrong(buf, torch.full_like(buf, n))

    elif op in ("all_gather", "reduce_scatter", "all_to_all"):
        chunk = count // n
        a = zeros(count, dtype=dtype, device=device)
        b = zeros(count, dtype=dtype, device=device)
        owners = torch.arange(1, n + 1, device=device).repeat_interleave(chunk).to(dtype)
        if op == "all_gather":
            mine = b.narrow(0, k * chunk, chunk)  # in place, as nccl-tests

            def run() -> None:
                dist.all_gather_into_tensor(b, mine, group=pg)

            def check() -> int:
                b.zero_()
                mine.fill_(k + 1)
                run()
                return _wrong(b, owners)

        elif op == "reduce_scatter":
            out = b.narrow(0, 0, chunk)

            def run() -> None:
                dist.reduce_scatter_tensor(out, a, group=pg)

            def check() -> int:
                a.fill_(1)
                run()
                return _wrong(out, torch.full_like(out, n))

        else:

            def run() -> None:
                dist.all_to_all_single(b, a, group=pg)

            def check() -> int:
                a.fill_(k + 1)
                run()
                return _wrong(b, owners)

    elif op == "broadcast":
        buf = zeros(count, dtype=dtype, device=device)
        root = members[0]

        def run() -> None:
            dist.broadcast(buf, src=root, group=pg)

        def check() -> int:
            buf.fill_(3 if me == root else 0)
            run()
            return _wrong(buf, torch.full_like(buf, 3))

    elif op == "send_recv":
        send = zeros(count, dtype=dtype, device=device)
        recv = zeros(count, dtype=dtype, device=device)
        nxt, prv = members[(k + 1) % n], members[(k - 1) % n]

        def run() -> None:
            ops = [dist.P2POp(dist.isend, send, nxt, pg), dist.P2POp(dist.irecv, recv, prv, pg)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()

        def check() -> int:
            send.fill_(k + 1)
            recv.zero_()
            run()
            return _wrong(recv, torch.full_like(recv, (k - 1) % n + 1))

    else:  # pragma: no cover - CommsConfig validates ops
        raise FlopwiseError(f"unknown op {op!r}")
    return run, check


def _wrong(got: Any, expected: Any) -> int:
    import torch

    ok = torch.isclose(got.float(), expected.float(), rtol=CHECK_RTOL, atol=0.0)
    return int((~ok).sum().item())
