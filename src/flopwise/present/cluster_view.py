"""Terminal and JSON views of the cluster benchmarks: comms table, check table, I/O report.

Presenters format; the numbers come computed in the result objects.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from flopwise.present.console import console, table
from flopwise.present.jsonout import emit

if TYPE_CHECKING:
    from flopwise.bench.check import CheckResult
    from flopwise.bench.comms import CommsResult
    from flopwise.bench.io import IoResult


def comms_table(result: CommsResult, accelerator: str | None) -> None:
    """An nccl-tests-like plain table, one block per op (stdout is easy to grep and diff)."""
    p = result.provenance
    out = sys.stdout
    hosts = ", ".join(f"{h} (ranks {_ranges(rs)})" for h, rs in p.get("hosts", {}).items())
    out.write(
        f"# flopwise bench comms: {result.world_size} ranks on {result.nodes} node(s): {hosts}\n"
        f"# backend {result.backend}"
        + (f" {p['backend_version']}" if p.get("backend_version") else "")
        + f", torch {p.get('torch_version')}, group {result.config.group} "
        f"({result.groups} group(s) of {result.group_size} ranks), dtype {result.config.dtype}, "
        f"{result.config.iterations} iterations after {result.config.warmup} warm-up\n"
        "# time = mean over ranks of each rank's mean (min/max over ranks); GB = 1e9 bytes\n"
    )
    head = (
        f"#{'size':>12} {'count':>12} {'type':>9}  {'time':>10} {'min':>10} {'max':>10}"
        f" {'algbw':>8} {'busbw':>8} {'#wrong':>7}\n"
        f"#{'(B)':>12} {'(elements)':>12} {'':>9}  {'(us)':>10} {'(us)':>10} {'(us)':>10}"
        f" {'(GB/s)':>8} {'(GB/s)':>8}\n"
    )
    for op in result.config.ops:
        rows = [r for r in result.rows if r.op == op]
        if not rows:
            continue
        out.write(f"#\n# {op}\n" + head)
        for r in rows:
            out.write(
                f" {r.bytes:>12} {r.count:>12} {r.dtype:>9}  {r.time_us:>10.1f} "
                f"{r.time_us_min:>10.1f} {r.time_us_max:>10.1f} {r.algbw_gbps:>8.3f} "
                f"{r.busbw_gbps:>8.3f} {r.wrong:>7}\n"
            )
    s = result.summary()
    out.write(
        "#\n# peak busbw (GB/s): "
        + ", ".join(f"{op} {v:.3f}" for op, v in s["peak_busbw_gbps_by_op"].items())
        + f"\n# wrong elements: {s['wrong']} {'OK' if s['wrong'] == 0 else 'WRONG'}\n"
    )
    where = f"stored as result {result.result_id}" if result.result_id else "not stored"
    filed = (
        f" for accelerator {accelerator}"
        if accelerator
        else " (device not in the catalog: pass --accelerator ID to file it under one)"
    )
    state = " (interrupted: partial results)" if result.interrupted else ""
    out.write(f"# {where}{filed}{state}\n")
    out.flush()


def comms_json(result: CommsResult) -> None:
    emit(result.to_dict())


def _ranges(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    parts, start = [], 0
    for i in range(1, len(ranks) + 1):
        if i == len(ranks) or ranks[i] != ranks[i - 1] + 1:
            a, b = ranks[start], ranks[i - 1]
            parts.append(str(a) if a == b else f"{a}-{b}")
            start = i
    return ",".join(parts)


def check_report(result: CheckResult, as_json: bool) -> None:
    if as_json:
        emit(result.to_dict())
        return
    console().print(
        table(
            f"flopwise check: {result.world_size} ranks, backend {result.backend}",
            ["rank", "host", "local rank", "device", "all_reduce", "expected", "ms", "status"],
            [
                (
                    r.rank,
                    r.host,
                    r.local_rank,
                    f"{r.device} {r.device_name}",
                    "—" if r.value is None else f"{r.value:g}",
                    f"{result.expected:g}",
                    "—" if r.elapsed_ms is None else f"{r.elapsed_ms:.1f}",
                    r.status,
                )
                for r in result.ranks
            ],
            right=(0, 2, 4, 5, 6),
        )
    )
    line = "[green]OK[/green]" if result.ok else f"[red]FAILED[/red]: {result.problem}"
    console().print(line)


def _rate(value: float | None, fmt: str, unit: str) -> str:
    return "not measured" if value is None else f"{format(value, fmt)} {unit}"


def io_report(result: IoResult, as_json: bool) -> None:
    if as_json:
        emit(result.to_dict())
        return
    d = result
    rows = [
        (
            "checkpoint write",
            f"{d.write_gbps:.3f} GB/s",
            f"{d.writers} writer(s) x {d.bytes_per_writer / 2**20:,.0f} MiB, "
            f"{d.block_bytes // 2**10} KiB blocks, fsync before close",
        ),
        (
            "checkpoint read",
            _rate(d.read_gbps, ".3f", "GB/s"),
            f"same files, {d.writers} reader(s); page cache: {d.cache_bypass}",
        ),
        (
            "small files create",
            _rate(d.create_files_per_s, ",.0f", "files/s"),
            f"{d.small_files} files of {d.small_file_bytes:,} B (no fsync)",
        ),
        ("small files stat", _rate(d.stat_files_per_s, ",.0f", "files/s"), ""),
        (
            "small files read",
            _rate(d.files_per_s, ",.0f", "files/s"),
            f"open+read+close; page cache: {d.small_cache_bypass}",
        ),
    ]
    console().print(
        table(
            f"flopwise bench io: {d.path} ({d.fs_type or 'unknown file system'})",
            ["test", "rate", "how"],
            rows,
            right=(1,),
        )
    )
    if d.checkpoint is not None:
        c = d.checkpoint
        console().print(
            f"{c['model']}: a checkpoint of {c['bytes'] / 1e9:,.1f} GB "
            f"({c['params'] / 1e9:,.2f}B params x {c['bytes_per_param']:g} B/param, recipe "
            f"{c['recipe']}: {c['contents']}) takes {c['write_s']:,.1f} s to write and "
            f"{'?' if c['read_s'] is None else format(c['read_s'], ',.1f')} s to read at these "
            "rates (one node's writers)."
        )
    for note in d.notes:
        console().print(f"note: {note}")
    if d.status != "complete":
        console().print(f"status: {d.status}")
    if d.result_id is not None:
        console().print(f"stored as result {d.result_id}")
