"""`--devices all`: one process per local device, all measuring at once.

Each worker runs the same matmul benchmark on its own device and saves its run to the results
store itself (the store takes concurrent writers); the parent collects the runs and reports
each device, the slowest, and the spread ((fastest - slowest) / fastest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from flopwise.bench.io_ops import terminate_as_interrupt
from flopwise.bench.matmul_run import MatmulConfig, run_matmul
from flopwise.errors import FlopwiseError


def matmul_worker(config: MatmulConfig, device: str, db: str | None) -> dict[str, Any]:
    """Measure one device and store the run; returns the run document with its result id."""
    from flopwise.bench.provenance import save_run

    # Ctrl-C reaches every worker too: run_matmul then returns its partial run, stored below.
    cfg = dataclasses.replace(config, device=device)
    run = run_matmul(cfg)
    doc = run.to_dict()
    from flopwise.bench.device import resolve_device

    with _no_second_interrupt():  # measured: a second signal must not lose it
        doc["result_id"] = save_run(
            "matmul",
            summary=run.summary(),
            payload=doc,
            status=run.status,
            info=resolve_device(device),
            db=db,
        )
    return doc


@contextmanager
def _no_second_interrupt() -> Iterator[None]:
    """SIGINT ignored while the run is stored, then restored (the worker may be this process:
    a disposition left at SIG_IGN would also pass to every process it starts)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass(frozen=True, slots=True)
class MultiDeviceRun:
    runs: tuple[dict[str, Any], ...]
    status: str

    def to_dict(self) -> dict[str, Any]:
        measured = [r for r in self.runs if r.get("best_tflops")]
        slowest = min(measured, key=lambda r: r["best_tflops"], default=None)
        fastest = max(measured, key=lambda r: r["best_tflops"], default=None)
        spread = None
        if slowest is not None and fastest is not None:
            spread = (fastest["best_tflops"] - slowest["best_tflops"]) / fastest["best_tflops"]
        return {
            "status": self.status,
            "devices": list(self.runs),
            "slowest": None
            if slowest is None
            else {"device": slowest["device"], "best_tflops": slowest["best_tflops"]},
            "fastest": None
            if fastest is None
            else {"device": fastest["device"], "best_tflops": fastest["best_tflops"]},
            "spread": spread,
        }


def _interrupt_workers(pool: ProcessPoolExecutor) -> None:
    """SIGINT to every live worker, so each stops measuring and stores what it has."""
    import os
    import signal

    # the executor's worker table is private but has been stable since Python 3.2
    for proc in list(getattr(pool, "_processes", {}).values()):
        if proc.is_alive() and proc.pid is not None:
            with suppress(OSError):  # exited in between
                os.kill(proc.pid, signal.SIGINT)


def run_matmul_devices(config: MatmulConfig, devices: list[str], db: str | None) -> MultiDeviceRun:
    """Run `matmul_worker` in one spawned process per device, concurrently."""
    if not devices:
        raise FlopwiseError("--devices all found no local accelerators (use --device cpu)")
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    status = "complete"
    docs: list[dict[str, Any]] = []
    with (
        ProcessPoolExecutor(max_workers=len(devices), mp_context=ctx) as pool,
        # SIGTERM (Slurm's time limit, scancel) reaches only this process, unlike Ctrl-C which
        # the terminal sends to the workers too: pass it on so each stores its partial run
        terminate_as_interrupt(lambda: _interrupt_workers(pool)),
    ):
        futures: list[Future[dict[str, Any]]] = [
            pool.submit(matmul_worker, config, dev, db) for dev in devices
        ]
        for dev, fut in zip(devices, futures, strict=True):
            for _attempt in range(2):
                try:
                    doc = fut.result()
                except KeyboardInterrupt:
                    # Ctrl-C reaches the workers too; SIGTERM is passed on by _interrupt_workers
                    status = "interrupted"  # collect their partial runs
                    continue
                except Exception as exc:  # a worker died: report it, keep the others
                    doc = {"device": dev, "status": "failed", "error": str(exc) or repr(exc)}
                break
            else:
                doc = {"device": dev, "status": "interrupted", "error": "no result"}
            if doc.get("status") == "interrupted":
                status = "interrupted"
            docs.append(doc)
    return MultiDeviceRun(tuple(docs), status)
