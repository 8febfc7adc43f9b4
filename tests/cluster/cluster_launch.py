"""Launch real multi-process flopwise runs for the cluster tests (torchrun or srun-like)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"
FAULTY = Path(__file__).resolve().parent / "faulty_rank.py"
#: Guards against a hang; a healthy run finishes far sooner.
HANG_GUARD_S = 120


def base_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC"))}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK"):
        env.pop(k, None)
    env.update(
        FLOPWISE_HOME=str(home),
        PYTHONPATH=str(SRC) + os.pathsep + env.get("PYTHONPATH", ""),
        OMP_NUM_THREADS="1",
        COLUMNS="200",
    )
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(
    nproc: int, args: list[str], home: Path, script: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """`torchrun --standalone --nproc-per-node N -m flopwise ARGS` (or a script instead)."""
    entry = [str(script)] if script else ["-m", "flopwise"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", *entry, *args]  # fmt: skip
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, env=base_env(home, **env)
    )


def torchrun_nodes(
    nodes: int, nproc: int, args: list[str], home: Path
) -> list[subprocess.CompletedProcess[str]]:
    """`nodes` torchrun agents on this host meeting through c10d, as on `nodes` machines."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                f"--nnodes={nodes}",
                f"--nproc-per-node={nproc}",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                f"--rdzv-id=flopwise-test-{port}",
                "-m",
                "flopwise",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=base_env(home),
        )
        for _ in range(nodes)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=HANG_GUARD_S)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def srun_like(
    ntasks: int,
    args: list[str],
    home: Path,
    script: Path | None = None,
    hung: int | None = None,
    **env: str,
) -> list[subprocess.CompletedProcess[str]]:
    """Start ranks as Slurm's srun would (SLURM_* variables only), without a supervisor.

    `hung` is a rank expected to hang: it is killed once the others have exited.
    """
    port = free_port()
    entry = [str(script)] if script else ["-m", "flopwise"]
    procs = []
    for rank in range(ntasks):
        slurm = {
            "SLURM_JOB_ID": "4242",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": str(ntasks),
            "SLURM_LOCALID": str(rank),
            "SLURM_NODEID": "0",
            "SLURM_JOB_NODELIST": "localhost",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, *entry, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=base_env(home, **slurm, **env),
            )
        )
    order = [r for r in range(ntasks) if r != hung] + ([hung] if hung is not None else [])
    out: dict[int, subprocess.CompletedProcess[str]] = {}
    for rank in order:
        p = procs[rank]
        if rank == hung:
            p.kill()
        stdout, stderr = p.communicate(timeout=HANG_GUARD_S)
        out[rank] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    return [out[r] for r in range(ntasks)]


def one_json(stdout: str) -> Any:
    """stdout must be exactly one JSON document."""
    return json.loads(stdout)
