"""Collective bandwidth as nccl-tests measures it, through torch.distributed.

Sizes are whole-array bytes as nccl-tests counts them (all_gather: the gathered output,
reduce_scatter: the input, all_to_all and send/recv: one rank's buffer). Each rank times
``iterations`` back-to-back operations after ``warmup`` and a barrier; the reported time is the
mean over ranks (as nccl-tests), with min and max. algbw = S / t; busbw = algbw x the
nccl-tests factor (:data:`flopwise.collectives.BUSBW_FACTORS`), GB = 1e9 bytes.
After timing, one operation on known values is checked: ``wrong`` counts mismatched elements.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from flopwise.bench.comms_ops import prepare, sync
from flopwise.collectives import BUSBW_FACTORS
from flopwise.errors import FlopwiseError
from flopwise.units import GB, KIB, MIB

if TYPE_CHECKING:
    from flopwise.bench.session import Session

OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send_recv",
)
GROUPS: tuple[str, ...] = ("all", "intra", "inter")
#: dtype name -> (torch attribute, bytes per element).
DTYPES: dict[str, tuple[str, int]] = {
    "float32": ("float32", 4),
    "float64": ("float64", 8),
    "bfloat16": ("bfloat16", 2),
    "float16": ("float16", 2),
}
DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp64": "float64", "double": "float64",
                 "bf16": "bfloat16", "fp16": "float16", "half": "float16"}  # fmt: skip
#: Defaults: nccl-tests-like on accelerators; smaller on CPU/gloo where 1 GB takes seconds.
DEFAULT_MIN_BYTES = 32 * KIB
DEFAULT_MAX_BYTES_DEVICE = 1024 * MIB
DEFAULT_MAX_BYTES_CPU = 16 * MIB


def canonical_dtype(name: str) -> str:
    key = DTYPE_ALIASES.get(name.lower(), name.lower())
    if key not in DTYPES:
        raise FlopwiseError(f"unknown dtype {name!r}; valid: {', '.join(DTYPES)} (or bf16, fp16)")
    return key


@dataclass(frozen=True, kw_only=True, slots=True)
class CommsConfig:
    """What to measure. Sizes in bytes; the last size is the largest min*factor^k <= max."""

    ops: tuple[str, ...] = OPS
    min_bytes: int = DEFAULT_MIN_BYTES
    max_bytes: int = DEFAULT_MAX_BYTES_CPU
    factor: float = 2.0
    dtype: str = "float32"
    iterations: int = 20
    warmup: int = 5
    group: str = "all"

    def __post_init__(self) -> None:
        bad = [op for op in self.ops if op not in OPS]
        if bad or not self.ops:
            raise FlopwiseError(f"unknown op {', '.join(bad) or '(none)'}; valid: {', '.join(OPS)}")
        if self.min_bytes < 1 or self.max_bytes < self.min_bytes:
            raise FlopwiseError(
                f"--max-bytes {self.max_bytes} must be at least --min-bytes {self.min_bytes} (> 0)"
            )
        if not (self.factor > 1 or self.min_bytes == self.max_bytes) or not math.isfinite(
            self.factor
        ):
            raise FlopwiseError(f"--factor must be greater than 1, got {self.factor}")
        if self.iterations < 1 or self.warmup < 0:
            raise FlopwiseError("--iterations must be >= 1 and --warmup >= 0")
        if self.group not in GROUPS:
            raise FlopwiseError(f"unknown group {self.group!r}; valid: {', '.join(GROUPS)}")
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    @property
    def element_bytes(self) -> int:
        return DTYPES[self.dtype][1]

    def sizes(self) -> list[int]:
        out, size = [], float(self.min_bytes)
        while size <= self.max_bytes * (1 + 1e-9):
            out.append(int(size))
            if self.factor <= 1:
                break
            size *= self.factor
        return sorted(set(out))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ops": list(self.ops),
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "factor": self.factor,
            "dtype": self.dtype,
            "iterations": self.iterations,
            "warmup": self.warmup,
            "group": self.group,
        }


def element_count(op: str, n_bytes: int, element_bytes: int, group_size: int) -> int:
    """Elements for a size: whole elements, divisible by the group where the op splits it."""
    count = n_bytes // element_bytes
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        count -= count % group_size
        return max(count, group_size)
    return max(count, 1)


def bandwidths_gbps(op: str, n_bytes: float, time_s: float, group_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one operation on `n_bytes` taking `time_s` (nccl-tests)."""
    algbw = n_bytes / time_s / GB
    return algbw, algbw * BUSBW_FACTORS[op](group_size)


def group_layout(nodes: Sequence[Sequence[int]], group: str) -> list[list[int]]:
    """Process groups for `--group`: all ranks; ranks sharing a node; one rank per node.

    `nodes` lists each node's ranks. 'inter' makes one group per local index (the i-th rank of
    every node), as data-parallel groups across nodes are built.
    """
    world = sorted(r for node in nodes for r in node)
    if group == "all":
        groups = [world]
    elif group == "intra":
        groups = [sorted(node) for node in nodes]
        if any(len(g) < 2 for g in groups):
            raise FlopwiseError(
                "--group intra needs at least 2 ranks on every node; ranks per node: "
                + ", ".join(str(len(g)) for g in groups)
            )
    elif group == "inter":
        if len(nodes) < 2:
            raise FlopwiseError(
                f"--group inter needs ranks on at least 2 nodes; all {len(world)} ranks are on "
                "one node (use --group intra or all)"
            )
        depth = max(len(n) for n in nodes)
        groups = [sorted(n[i] for n in nodes if len(n) > i) for i in range(depth)]
        groups = [g for g in groups if len(g) > 1]
    else:
        raise FlopwiseError(f"unknown group {group!r}; valid: {', '.join(GROUPS)}")
    if len(groups[0]) < 2:
        raise FlopwiseError(
            "collectives need at least 2 ranks; launch with torchrun --nproc_per_node 2 (or more) "
            "or srun --ntasks 2"
        )
    return groups


@dataclass(frozen=True, slots=True)
class CommsRow:
    """One op at one size, aggregated over all ranks."""

    op: str
    bytes: int
    count: int
    dtype: str
    time_us: float  # mean over ranks of each rank's mean per-operation time
    time_us_min: float
    time_us_max: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    time_us_by_rank: tuple[float, ...] = ()  # what each rank measured, in rank order

    def to_dict(self) -> dict[str, Any]:
        d = {name: getattr(self, name) for name in self.__slots__}
        d["time_us_by_rank"] = list(self.time_us_by_rank)
        return d


@dataclass(frozen=True, slots=True)
class CommsResult:
    config: CommsConfig
    rows: tuple[CommsRow, ...]
    group_size: int
    groups: int
    nodes: int
    world_size: int
    backend: str
    provenance: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    result_id: int | None = None

    def peak_busbw_gbps(self, op: str) -> float | None:
        values = [r.busbw_gbps for r in self.rows if r.op == op]
        return max(values) if values else None

    @property
    def headline_op(self) -> str:
        return "all_reduce" if "all_reduce" in self.config.ops else self.config.ops[0]

    @property
    def tier(self) -> str:
        """'inter' when the groups cross nodes, else 'intra'."""
        crosses = self.config.group == "inter" or (self.config.group == "all" and self.nodes > 1)
        return "inter" if crosses else "intra"

    @property
    def ranks_per_node(self) -> int:
        return max(self.world_size // max(self.nodes, 1), 1)

    @property
    def busbw_basis(self) -> str:
        """'per_node' when whole nodes talk across the network (--group all on several nodes:
        every GPU of a node drives its own NIC, so busbw is the node's); else 'per_gpu'."""
        return "per_node" if self.tier == "inter" and self.config.group == "all" else "per_gpu"

    def busbw_by_op_and_size(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for r in self.rows:
            out.setdefault(r.op, {})[str(r.bytes)] = r.busbw_gbps
        return out

    def summary(self) -> dict[str, Any]:
        """The headline the planners read (flopwise.results.measured contract)."""
        return {
            "op": self.headline_op,
            "busbw_gbps": self.peak_busbw_gbps(self.headline_op),
            "group": self.config.group,
            "tier": self.tier,
            "busbw_basis": self.busbw_basis,
            "ranks_per_node": self.ranks_per_node,
            "nodes": self.nodes,
            "ranks": self.world_size,
            "backend": self.backend,
            "dtype": self.config.dtype,
            "wrong": sum(r.wrong for r in self.rows),
            "peak_busbw_gbps_by_op": {
                op: v for op in self.config.ops if (v := self.peak_busbw_gbps(op)) is not None
            },
            "busbw_gbps_by_op_and_bytes": self.busbw_by_op_and_size(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "result_id": self.result_id,
            "status": "interrupted" if self.interrupted else "complete",
            "summary": self.summary(),
            "config": self.config.to_dict(),
            "group_size": self.group_size,
            "groups": self.groups,
            "rows": [r.to_dict() for r in self.rows],
            "provenance": self.provenance,
        }


def run_comms(session: Session, cfg: CommsConfig, on_row: Any = None) -> CommsResult:
    """Measure every op and size on the session's ranks; every rank returns the same rows.
    `on_row(row, done, total)` is called after each op and size (for a progress bar)."""
    import torch
    import torch.distributed as dist

    layout = group_layout(session.nodes(), cfg.group)
    if cfg.group == "all":
        pg, members = None, layout[0]
    else:
        session.mark("creating the process groups")
        try:
            pg, _ = dist.new_subgroups_by_enumeration(layout)
        except RuntimeError as exc:
            raise session.collective_failed("creating the process groups", exc) from None
        members = next(g for g in layout if session.rank in g)
    n = len(members)
    dtype = getattr(torch, DTYPES[cfg.dtype][0])
    device = session.device
    stats = torch.zeros(2, dtype=torch.float64, device=device)
    rows: list[CommsRow] = []
    interrupted = False
    try:
        for op in cfg.ops:
            for size in cfg.sizes():
                count = element_count(op, size, cfg.element_bytes, n)
                n_bytes = count * cfg.element_bytes
                what = f"{op} of {n_bytes} bytes"
                session.mark(what)
                try:
                    run, check = prepare(op, count, members, session.rank, dtype, device, pg)
                    for _ in range(cfg.warmup):
                        run()
                    sync(device)
                    dist.barrier()
                    start = time.perf_counter()
                    for _ in range(cfg.iterations):
                        run()
                    sync(device)
                    elapsed = (time.perf_counter() - start) / cfg.iterations
                    wrong = check()
                    stats[0], stats[1] = elapsed, wrong
                    gathered = [torch.zeros_like(stats) for _ in range(session.world_size)]
                    dist.all_gather(gathered, stats)
                except FlopwiseError:
                    raise
                except RuntimeError as exc:
                    raise session.collective_failed(what, exc) from None
                times = [float(g[0]) for g in gathered]
                mean = sum(times) / len(times)
                algbw, busbw = bandwidths_gbps(op, n_bytes, mean, n)
                rows.append(
                    CommsRow(
                        op=op,
                        bytes=n_bytes,
                        count=count,
                        dtype=cfg.dtype,
                        time_us=mean * 1e6,
                        time_us_min=min(times) * 1e6,
                        time_us_max=max(times) * 1e6,
                        algbw_gbps=algbw,
                        busbw_gbps=busbw,
                        wrong=int(sum(float(g[1]) for g in gathered)),
                        time_us_by_rank=tuple(t * 1e6 for t in times),
                    )
                )
                if on_row is not None:
                    on_row(rows[-1], len(rows), len(cfg.ops) * len(cfg.sizes()))
    except KeyboardInterrupt:
        interrupted = True
    return CommsResult(
        config=cfg,
        rows=tuple(rows),
        group_size=n,
        groups=len(layout),
        nodes=len(session.nodes()),
        world_size=session.world_size,
        backend=session.backend,
        provenance=provenance(session),
        interrupted=interrupted,
    )


def provenance(session: Session) -> dict[str, Any]:
    """Hosts, ranks, backend and versions: enough to tell two stored runs apart."""
    import torch

    import flopwise

    backend_version = None
    if session.backend == "nccl":
        try:
            backend_version = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:
            backend_version = None
    return {
        "hosts": session.hosts(),
        "ranks": session.world_size,
        "nodes": len(session.nodes()),
        "launcher": session.env.launcher,
        "backend": session.backend,
        "backend_version": backend_version,
        "devices": sorted({f"{i.device} {i.device_name}" for i in session.ranks}),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
        "flopwise_version": flopwise.__version__,
        "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def accelerator_id(session: Session) -> str | None:
    """The catalog id results are filed under: 'cpu' for gloo on host memory, else by name."""
    if session.device == "cpu":
        return "cpu"
    from flopwise.catalog.accelerators import get_accelerator

    try:
        return get_accelerator(session.ranks[0].device_name).id
    except FlopwiseError:
        return None


def store_result(
    result: CommsResult, session: Session, accelerator: str | None, db: str | None
) -> int:
    """Write the run to the results store (rank 0 only calls this)."""
    from flopwise.results.store import ResultStore

    me = session.ranks[session.rank]
    return ResultStore(db).add(
        "comms",
        result.summary(),
        result.to_dict(),
        status="interrupted" if result.interrupted else "complete",
        device=me.device,
        device_name=me.device_name,
        accelerator=accelerator,
        host=me.host,
    )
