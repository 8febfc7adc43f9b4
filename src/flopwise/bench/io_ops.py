"""Low-level pieces of the storage benchmark: one work folder, threads, cache handling.

Every file is created inside the folder `workdir` makes, which is removed on exit.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from flopwise.errors import FlopwiseError

#: O_DIRECT needs offsets and buffers aligned to the logical block size; 4 KiB covers disks
#: and common file systems (Linux open(2), "O_DIRECT" notes).
DIRECT_ALIGN = 4096
#: File systems that hold file data in memory: there is no page cache to bypass.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})
WORKDIR_PREFIX = "flopwise-io-"


def filesystem_type(path: Path) -> str | None:
    """The file system type of the mount holding `path` (Linux /proc/self/mounts), or None."""
    best, fstype = "", None
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount = parts[1].replace("\\040", " ")
                inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, fstype = mount, parts[2]
    except OSError:
        return None
    return fstype


@contextlib.contextmanager
def terminate_as_interrupt(first: Callable[[], None] | None = None) -> Iterator[None]:
    """SIGTERM (as sent by schedulers and torchrun) unwinds like Ctrl-C, so cleanup runs;
    `first` runs before the unwinding (e.g. to pass the signal on to worker processes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if first is not None:
            first()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def workdir_prefix() -> str:
    """'flopwise-io-HOST-PID-': a folder a killed run leaves behind names who made it."""
    host = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"
    return f"{WORKDIR_PREFIX}{host}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def leftover_workdirs(parent: Path) -> list[str]:
    """Deal with work folders earlier runs left under `parent` (SIGKILL skips all cleanup).

    A folder made on this host by a process that no longer exists is removed; any other is
    left alone. Returns one note per folder found, saying which happened.
    """
    notes = []
    here = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"
    for path in sorted(parent.glob(f"{WORKDIR_PREFIX}*")):
        if not path.is_dir():
            continue
        m = re.match(rf"{re.escape(WORKDIR_PREFIX)}(.+)-(\d+)-[^-]+$", path.name)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        what = f"{path} ({size / 1e6:,.1f} MB) left by an earlier flopwise bench io"
        if m and m.group(1) == here and not _pid_alive(int(m.group(2))):
            shutil.rmtree(path, ignore_errors=True)
            gone = not path.exists()
            notes.append(f"{'removed' if gone else 'could not remove'} {what} (pid "
                         f"{m.group(2)} on this host is gone)")  # fmt: skip
        elif m:
            notes.append(f"found {what} (host {m.group(1)}, pid {m.group(2)}, maybe still "
                         "running); not removed")  # fmt: skip
        else:
            notes.append(f"found {what} (owner unknown); not removed, delete it if unused")
    return notes


@contextlib.contextmanager
def workdir(parent: Path) -> Iterator[Path]:
    """A fresh folder under `parent`, removed with everything in it when the block exits."""
    try:
        path = Path(tempfile.mkdtemp(prefix=workdir_prefix(), dir=parent))
    except OSError as exc:
        raise FlopwiseError(
            f"--path {str(parent)!r} is not writable: {exc.strerror or exc}"
        ) from None
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def check_free_space(parent: Path, n_bytes: int) -> None:
    """Refuse to start writing what the file system cannot hold."""
    try:
        free = shutil.disk_usage(parent).free
    except OSError:
        return  # unknown: the writes will tell
    if n_bytes > free:
        raise FlopwiseError(
            f"--size needs {n_bytes / 1e9:,.2f} GB but {parent} has {free / 1e9:,.2f} GB free; "
            "give a smaller --size or another --path"
        )


def parallel(work: Sequence[Callable[[threading.Event], None]]) -> float:
    """Run callables in threads, return wall seconds; Ctrl-C stops them before unwinding."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def wrap(fn: Callable[[threading.Event], None]) -> Callable[[], None]:
        def target() -> None:
            try:
                fn(stop)
            except BaseException as exc:
                errors.append(exc)
                stop.set()

        return target

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in work]
    start = time.perf_counter()
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.1)
    except BaseException:
        stop.set()
        for t in threads:
            # Ctrl-C can arrive before every thread has started: join() refuses those.
            with contextlib.suppress(RuntimeError):
                t.join()
        raise
    elapsed = time.perf_counter() - start
    if errors:
        exc = errors[0]
        if isinstance(exc, OSError):
            raise FlopwiseError(
                f"I/O failed on {exc.filename or 'a test file'}: {exc.strerror or exc}"
            ) from None
        raise exc
    return elapsed


def random_block(block: int) -> memoryview:
    """Incompressible data for the writers, made once before any timing starts."""
    return memoryview(os.urandom(block))


def writer(name: Path, n_bytes: int, data: memoryview) -> Callable[[threading.Event], None]:
    """Write `n_bytes` to `name` in blocks of len(data), fsync before close."""
    block = len(data)

    def write(stop: threading.Event) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            done = 0
            while done < n_bytes and not stop.is_set():
                done += os.write(fd, data[: min(block, n_bytes - done)])
            os.fsync(fd)
        finally:
            os.close(fd)

    return write


def reader(name: Path, block: int, direct: bool) -> Callable[[threading.Event], None]:
    def read(stop: threading.Event) -> None:
        flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)
        fd = os.open(name, flags)
        buf = mmap.mmap(-1, block)  # page aligned, as O_DIRECT requires
        try:
            offset = 0
            while not stop.is_set():
                got = os.preadv(fd, [buf], offset)
                if got <= 0:
                    break
                offset += got
        finally:
            buf.close()
            os.close(fd)

    return read


def drop_cache(name: Path) -> bool:
    """Ask the kernel to drop the file's (clean) cached pages; False when the OS cannot."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(name, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _direct_works(name: Path) -> str | None:
    """None when O_DIRECT reads work on this file, else why not."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return "this OS has no O_DIRECT"
    try:
        fd = os.open(name, os.O_RDONLY | flag)
    except OSError as exc:
        return f"O_DIRECT refused ({errno.errorcode.get(exc.errno or 0, exc.strerror)})"
    buf = mmap.mmap(-1, DIRECT_ALIGN)
    try:
        os.preadv(fd, [buf], 0)
    except OSError as exc:
        return f"O_DIRECT read failed ({errno.errorcode.get(exc.errno or 0, exc.strerror)})"
    finally:
        buf.close()
        os.close(fd)
    return None


def cache_method(fs_type: str | None, probe: Path) -> tuple[bool, str]:
    """(use O_DIRECT, how the page cache is handled, in words)."""
    if fs_type in MEMORY_FILESYSTEMS:
        return False, f"not bypassed: {fs_type} keeps files in memory, reads are memory copies"
    why = _direct_works(probe)
    if why is None:
        return True, "bypassed with O_DIRECT"
    if hasattr(os, "posix_fadvise"):
        return False, f"dropped with posix_fadvise(DONTNEED) before reading, best effort ({why})"
    return False, f"not bypassed ({why}, no posix_fadvise): reads may come from the page cache"


def small_files(folder: Path, count: int, size: int) -> tuple[float, float, float, str]:
    """(create, stat, read) files per second for `count` files of `size` bytes."""
    folder.mkdir()
    payload = os.urandom(size)
    names = [folder / f"sample-{i:07d}.bin" for i in range(count)]
    start = time.perf_counter()
    for name in names:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)
    create_s = time.perf_counter() - start
    start = time.perf_counter()
    for name in names:
        os.stat(name)
    stat_s = time.perf_counter() - start
    for name in names:  # untimed: make the pages clean so the kernel can drop them
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    dropped = all([drop_cache(n) for n in names])
    start = time.perf_counter()
    for name in names:
        with open(name, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    read_s = time.perf_counter() - start
    how = (
        "file data fsynced and dropped with posix_fadvise(DONTNEED) first; metadata stays cached"
        if dropped
        else "not bypassed: reads may come from the page cache"
    )
    return count / create_s, count / stat_s, count / read_s, how
