"""Who am I in the job, and a process group that fails loudly instead of hanging.

Launchers: ``torchrun`` (``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT``,
``GROUP_RANK`` = node rank), Slurm ``srun`` (``SLURM_PROCID``/``SLURM_NTASKS``/
``SLURM_LOCALID``/``SLURM_NODEID``/``SLURM_JOB_NODELIST``; used only when torchrun's variables
are absent and a job step is running), otherwise a single process. Every wait has a timeout:
the rendezvous, the process group (gloo and NCCL collectives honour it) and :class:`Session`'s
store barrier, which names the ranks that did not arrive.

torch is imported lazily, only when a process group is created.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flopwise.bench.hostlist import expand_nodelist
from flopwise.bench.session import RankInfo, Session, first_sentence
from flopwise.errors import FlopwiseError

#: Slurm has no rendezvous port; derive one from the job id as PyTorch Lightning does
#: (lightning.fabric.plugins.environments.slurm: 15000 + last four digits of the job id).
SLURM_PORT_BASE = 15000
#: Backends picked by ``--backend auto`` per device type (torch.distributed documentation).
AUTO_BACKENDS: Mapping[str, str] = {"cuda": "nccl", "xpu": "xccl", "hpu": "hccl", "cpu": "gloo"}


@dataclass(frozen=True, slots=True)
class DistEnv:
    """This process's place in the job, from the launcher's environment."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int | None  # None: single process, pick a free port
    launcher: str  # "torchrun" | "slurm" | "single"
    node_key: str  # equal on ranks sharing a node

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise FlopwiseError(
                f"rank {self.rank} is outside a world of {self.world_size} processes; "
                "check RANK/WORLD_SIZE (or SLURM_PROCID/SLURM_NTASKS)"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "master": f"{self.master_addr}:{self.master_port}",
            "launcher": self.launcher,
        }


def _int(env: Mapping[str, str], name: str) -> int:
    text = env.get(name, "")
    try:
        return int(text)
    except ValueError:
        raise FlopwiseError(f"environment variable {name}={text!r} is not a whole number") from None


def env_from(env: Mapping[str, str] | None = None) -> DistEnv:
    """Map torchrun's or Slurm's variables to a DistEnv (torchrun's win when both are set)."""
    env = os.environ if env is None else env
    host = socket.gethostname()
    if "RANK" in env and "WORLD_SIZE" in env:
        if "MASTER_ADDR" not in env or "MASTER_PORT" not in env:
            raise FlopwiseError(
                "RANK and WORLD_SIZE are set but MASTER_ADDR/MASTER_PORT are not; launch with "
                "torchrun or set all four"
            )
        node = env.get("GROUP_RANK") or env.get("SLURM_NODEID")
        return DistEnv(
            rank=_int(env, "RANK"),
            world_size=_int(env, "WORLD_SIZE"),
            local_rank=_int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0,
            master_addr=env["MASTER_ADDR"],
            master_port=_int(env, "MASTER_PORT"),
            launcher="torchrun" if "TORCHELASTIC_RUN_ID" in env else "env",
            node_key=f"node{node}" if node is not None else host,
        )
    # Inside an sbatch script without srun there is no job step: that is one process, not a job.
    in_step = "SLURM_STEP_ID" in env or "SLURM_STEPID" in env
    if in_step and "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        nodelist = nodelist or env.get("SLURM_NODELIST", "")
        addr = env.get("MASTER_ADDR") or (expand_nodelist(nodelist)[0] if nodelist else "")
        if not addr:
            raise FlopwiseError("Slurm job without SLURM_JOB_NODELIST: set MASTER_ADDR")
        if "MASTER_PORT" in env:
            port = _int(env, "MASTER_PORT")
        else:
            port = (
                SLURM_PORT_BASE + _int(env, "SLURM_JOB_ID") % 10000 if "SLURM_JOB_ID" in env else 0
            )
        if not port:
            raise FlopwiseError("Slurm job without SLURM_JOB_ID: set MASTER_PORT")
        node = env.get("SLURM_NODEID")
        return DistEnv(
            rank=_int(env, "SLURM_PROCID"),
            world_size=_int(env, "SLURM_NTASKS"),
            local_rank=_int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0,
            master_addr=addr,
            master_port=port,
            launcher="slurm",
            node_key=f"node{node}" if node is not None else host,
        )
    return DistEnv(0, 1, 0, "127.0.0.1", None, "single", host)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def device_type_available() -> str:
    """The accelerator type torch sees here ('cuda', 'xpu', ...) or 'cpu'."""
    import torch

    acc = getattr(torch, "accelerator", None)
    if acc is not None and acc.is_available():
        current = acc.current_accelerator()
        if current is not None:
            return str(current.type)
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_backend(name: str) -> tuple[str, str]:
    """`auto` or a backend name -> (backend, device type); a clear error when unavailable."""
    import torch.distributed as dist

    dev = device_type_available()
    backend = AUTO_BACKENDS.get(dev, "gloo") if name == "auto" else name.lower()
    if not dist.is_backend_available(backend):
        raise FlopwiseError(
            f"backend {backend!r} is not available in this PyTorch build; available: "
            + ", ".join(b for b in ("gloo", "nccl", "mpi", "ucc", "xccl", "hccl") if _avail(b))
        )
    # gloo and mpi move host tensors; the device backends move tensors on their device.
    device = "cpu" if backend in ("gloo", "mpi") else dev
    if backend not in ("gloo", "mpi") and dev == "cpu":
        raise FlopwiseError(f"backend {backend!r} needs an accelerator and none is visible")
    return backend, device


def _avail(backend: str) -> bool:
    import torch.distributed as dist

    try:
        return bool(dist.is_backend_available(backend))
    except Exception:
        return False


def _cpu_name() -> str:
    """The CPU model (Linux /proc/cpuinfo), else the machine type."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _device_for(device_type: str, local_rank: int) -> tuple[str, str]:
    import torch

    if device_type == "cpu":
        return "cpu", _cpu_name()
    mod = getattr(torch, device_type)
    count = mod.device_count()
    if count == 0:
        raise FlopwiseError(f"no {device_type} device visible to this process")
    index = local_rank % count
    from flopwise.bench.device import set_current_device

    set_current_device(torch, device_type, index)
    name = mod.get_device_name(index) if hasattr(mod, "get_device_name") else device_type
    return f"{device_type}:{index}", str(name)


def start(backend: str = "auto", timeout_s: float = 300.0, env: DistEnv | None = None) -> Session:
    """Rendezvous, create the process group and learn every rank's host and device."""
    import torch.distributed as dist

    env = env or env_from()
    backend, device_type = resolve_backend(backend)
    port = env.master_port if env.master_port is not None else _free_port()
    os.environ.update(
        RANK=str(env.rank),
        WORLD_SIZE=str(env.world_size),
        LOCAL_RANK=str(env.local_rank),
        MASTER_ADDR=env.master_addr,
        MASTER_PORT=str(port),
    )
    timeout = timedelta(seconds=timeout_s)
    try:
        store, rank, world = next(dist.rendezvous("env://", timeout=timeout))
    except Exception as exc:
        raise FlopwiseError(
            f"rank {env.rank}: rendezvous at {env.master_addr}:{port} failed within "
            f"{timeout_s:g}s ({first_sentence(exc)})"
        ) from None
    store.set_timeout(timeout)
    device, device_name = _device_for(device_type, env.local_rank)
    try:
        kwargs: dict[str, Any] = {}
        if device != "cpu":  # binds the rank to its device (eager NCCL init, barrier device)
            import torch

            kwargs["device_id"] = torch.device(device)
        dist.init_process_group(
            backend,
            store=dist.PrefixStore("default_pg", store),
            rank=rank,
            world_size=world,
            timeout=timeout,
            **kwargs,
        )
    except Exception as exc:
        raise FlopwiseError(
            f"rank {env.rank}: creating the {backend} process group failed: {first_sentence(exc)}"
        ) from None
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    session = Session(
        env=env,
        backend=backend,
        device=device,
        timeout_s=timeout_s,
        store=dist.PrefixStore(f"flopwise/{restart}", store),
    )
    me = RankInfo(
        env.rank,
        socket.gethostname(),
        env.node_key,
        env.local_rank,
        os.getpid(),
        device,
        device_name,
    )
    try:
        session.store.set(f"who/{env.rank}", json.dumps(_info_dict(me)))
    except Exception as exc:
        raise session.store_lost(exc) from None
    session.store_barrier("the start of the run")
    session.ranks = [RankInfo(**session.get_json(f"who/{r}")) for r in range(world)]
    return session


def _info_dict(info: RankInfo) -> dict[str, Any]:
    return {name: getattr(info, name) for name in RankInfo.__slots__}


def stop() -> None:
    """Destroy the process group if one exists (safe after failures)."""
    import torch.distributed as dist

    if dist.is_initialized():
        with suppress(Exception):
            dist.destroy_process_group()


@contextmanager
def session(backend: str = "auto", timeout_s: float = 300.0) -> Iterator[Session]:
    s = start(backend, timeout_s)
    try:
        yield s
    finally:
        stop()
