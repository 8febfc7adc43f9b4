"""Make a folder read-only for a test, as read-only media would be."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make `folder` read-only: a read-only bind mount as root, file modes otherwise."""
    if os.geteuid() == 0:
        ok = subprocess.run(
            ["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True
        )
        if ok.returncode != 0:
            pytest.skip("cannot make a read-only mount here")
        try:
            yield
        finally:
            subprocess.run(["umount", str(folder)], check=False)
        return
    modes = {p: p.stat().st_mode for p in [folder, *folder.iterdir()]}
    for p in modes:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
