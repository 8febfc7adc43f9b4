"""Storage throughput as training sees it: checkpoint writes/reads and many small files.

Everything is created inside one fresh folder (``flopwise-io-XXXX``) under ``--path`` and that
folder is removed afterwards, also on Ctrl-C or SIGTERM; nothing else is touched.

- Checkpoint write: ``writers`` threads each write one file in large blocks, ``fsync`` before
  close; GB/s = all bytes / wall time from the first open to the last fsync.
- Checkpoint read: the same files, read back by as many threads, bypassing the page cache with
  ``O_DIRECT`` when the file system accepts it, else after ``posix_fadvise(DONTNEED)`` (the
  kernel drops clean pages, best effort), else not at all; the report says which.
- Small files: create (write + close, no fsync), stat, then open+read+close, one thread, file
  data dropped from the cache before the read pass (metadata stays cached).

No torch here: plain os calls (which release the GIL, so threads write in parallel).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.bench.io_ops import (
    DIRECT_ALIGN,
    MEMORY_FILESYSTEMS,
    cache_method,
    check_free_space,
    drop_cache,
    filesystem_type,
    leftover_workdirs,
    parallel,
    random_block,
    reader,
    small_files,
    terminate_as_interrupt,
    workdir,
    writer,
)
from flopwise.errors import FlopwiseError
from flopwise.units import GB, GIB, KIB, MIB

DEFAULT_SIZE = GIB
DEFAULT_BLOCK = 8 * MIB
DEFAULT_SMALL_FILES = 2000
DEFAULT_SMALL_FILE_BYTES = 16 * KIB


@dataclass(frozen=True, kw_only=True, slots=True)
class IoConfig:
    path: str
    size_bytes: int = DEFAULT_SIZE  # all writers together
    writers: int = 1
    block_bytes: int = DEFAULT_BLOCK
    small_files: int = DEFAULT_SMALL_FILES
    small_file_bytes: int = DEFAULT_SMALL_FILE_BYTES

    def __post_init__(self) -> None:
        if self.writers < 1:
            raise FlopwiseError(f"--writers must be at least 1, got {self.writers}")
        if self.size_bytes < self.writers:
            raise FlopwiseError(
                f"--size {self.size_bytes} B is too small for {self.writers} writers"
            )
        if self.block_bytes < DIRECT_ALIGN or self.block_bytes % DIRECT_ALIGN:
            raise FlopwiseError(f"--block-size must be a multiple of {DIRECT_ALIGN} bytes")
        if self.small_files < 0 or self.small_file_bytes < 1:
            raise FlopwiseError("--files must be >= 0 and --file-size > 0")

    @property
    def bytes_per_writer(self) -> int:
        """Each writer's share, rounded up to the O_DIRECT alignment."""
        share = -(-self.size_bytes // self.writers)
        return -(-share // DIRECT_ALIGN) * DIRECT_ALIGN


@dataclass(frozen=True, kw_only=True, slots=True)
class IoResult:
    path: str
    fs_type: str | None
    writers: int
    bytes_per_writer: int
    block_bytes: int
    write_gbps: float
    read_gbps: float | None  # None when interrupted before the read phase finished
    write_s: float
    read_s: float | None
    cache_bypass: str
    small_files: int
    small_file_bytes: int
    create_files_per_s: float | None
    stat_files_per_s: float | None
    files_per_s: float | None  # open+read+close, the data-loader rate
    small_cache_bypass: str
    checkpoint: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    result_id: int | None = None
    status: str = "complete"  # or "interrupted": the phases that finished are kept

    def summary(self) -> dict[str, Any]:
        return {
            "write_gbps": self.write_gbps,
            "read_gbps": self.read_gbps,
            "files_per_s": self.files_per_s,
            "path": self.path,
            "writers": self.writers,
            "status": self.status,
        }

    def to_dict(self) -> dict[str, Any]:
        detail = {
            name: getattr(self, name)
            for name in self.__slots__
            if name
            not in ("write_gbps", "read_gbps", "files_per_s", "checkpoint", "result_id", "status")
        }
        detail["notes"] = list(self.notes)
        return {
            "write_gbps": self.write_gbps,
            "read_gbps": self.read_gbps,
            "files_per_s": self.files_per_s,
            "detail": detail,
            "checkpoint": self.checkpoint,
            "result_id": self.result_id,
            "status": self.status,
        }


def check_path(path: str) -> Path:
    """The folder to test in: must exist, be a directory and be writable by us."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FlopwiseError(f"--path {path!r} does not exist; give an existing folder to test")
    if not p.is_dir():
        raise FlopwiseError(f"--path {path!r} is not a directory; give the folder to test")
    if not os.access(p, os.W_OK | os.X_OK):
        raise FlopwiseError(f"--path {path!r} is not writable by this user")
    return p.resolve()


def run_io(cfg: IoConfig) -> IoResult:
    """Measure under cfg.path; everything created is removed before returning or raising."""
    parent = check_path(cfg.path)
    fs_type = filesystem_type(parent)
    notes: list[str] = []
    if fs_type in MEMORY_FILESYSTEMS:
        notes.append(f"{parent} is on {fs_type}: these are memory speeds, not storage speeds")
    notes.extend(leftover_workdirs(parent))
    check_free_space(
        parent, cfg.bytes_per_writer * cfg.writers + cfg.small_files * cfg.small_file_bytes
    )
    try:
        return _measure(cfg, parent, fs_type, notes)
    except OSError as exc:
        raise FlopwiseError(
            f"I/O failed on {exc.filename or cfg.path}: {exc.strerror or exc}"
        ) from None


def _measure(cfg: IoConfig, parent: Path, fs_type: str | None, notes: list[str]) -> IoResult:
    """Checkpoint write, read, small files; an interrupt after the write keeps what finished."""
    per_writer = cfg.bytes_per_writer
    data = random_block(cfg.block_bytes)  # made once, outside the timed window
    status, how, small_how = "complete", "not measured", "not measured"
    read_s: float | None = None
    create: float | None = None
    stat: float | None = None
    read: float | None = None
    with terminate_as_interrupt(), workdir(parent) as work:
        files = [work / f"checkpoint-shard-{i:05d}.bin" for i in range(cfg.writers)]
        write_s = parallel([writer(f, per_writer, data) for f in files])
        try:
            direct, how = cache_method(fs_type, files[0])
            if not direct:
                for f in files:
                    drop_cache(f)
            read_s = parallel([reader(f, cfg.block_bytes, direct) for f in files])
            if cfg.small_files:
                create, stat, read, small_how = small_files(
                    work / "small", cfg.small_files, cfg.small_file_bytes
                )
        except KeyboardInterrupt:
            status = "interrupted"
            notes.append("interrupted: the phases that had finished are reported, the rest not")
    total = per_writer * cfg.writers
    return IoResult(
        path=str(parent),
        fs_type=fs_type,
        writers=cfg.writers,
        bytes_per_writer=per_writer,
        block_bytes=cfg.block_bytes,
        write_gbps=total / write_s / GB,
        read_gbps=None if read_s is None else total / read_s / GB,
        write_s=write_s,
        read_s=read_s,
        cache_bypass=how,
        small_files=cfg.small_files,
        small_file_bytes=cfg.small_file_bytes,
        create_files_per_s=create,
        stat_files_per_s=stat,
        files_per_s=read,
        small_cache_bypass=small_how,
        notes=tuple(notes),
        status=status,
    )


def checkpoint_cost(
    model: str, recipe: str, write_gbps: float, read_gbps: float | None
) -> dict[str, Any]:
    """Seconds to write (and read back) MODEL's training checkpoint at the measured rates.

    A checkpoint holds the weights, the fp32 master copy and the optimizer moments of the
    recipe (flopwise.workload.TRAINING_RECIPES); gradients are not saved.
    """
    from flopwise.workload import count_params, load_model
    from flopwise.workload.memory_bytes import get_recipe

    spec = load_model(model)
    r = get_recipe(recipe)
    params = count_params(spec).total
    per_param = r.weights + r.master + r.optimizer
    n_bytes = params * per_param
    return {
        "model": spec.name,
        "recipe": r.name,
        "params": params,
        "bytes_per_param": per_param,
        "contents": f"weights {r.weights:g} B + master {r.master:g} B + optimizer "
        f"{r.optimizer:g} B per param; gradients not saved",
        "bytes": n_bytes,
        "write_s": n_bytes / (write_gbps * GB),
        "read_s": None if read_gbps is None else n_bytes / (read_gbps * GB),
    }


def store_result(result: IoResult, db: str | None) -> int:
    from flopwise.results.store import ResultStore

    return ResultStore(db).add("io", result.summary(), result.to_dict(), status=result.status)
