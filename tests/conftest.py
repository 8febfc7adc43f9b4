"""Shared fixtures: every test runs with its own FLOPWISE_HOME so nothing touches the user's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "flopwise-home"
    monkeypatch.setenv("FLOPWISE_HOME", str(home))
    from flopwise.catalog import accelerators, goodput, models, systems

    caches = (
        goodput.load_failure_causes,
        goodput.load_storage_tiers,
        goodput._links,
        accelerators.load_accelerators,
        accelerators._alias_index,
        models.load_model_index,
        models._alias_index,
        systems.load_systems,
        systems._by_key,
    )
    for c in caches:
        c.cache_clear()
    yield home
    for c in caches:
        c.cache_clear()


def run_cli(
    *args: str, env_home: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m flopwise ARGS` in a subprocess (real exit codes, real stdout/stderr)."""
    import os

    env = dict(os.environ)
    if env_home is not None:
        env["FLOPWISE_HOME"] = str(env_home)
    return subprocess.run(
        [sys.executable, "-m", "flopwise", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def communicate_or_kill(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """`proc.communicate(timeout)`, and on a timeout kill the child's whole process group (start
    it with ``start_new_session=True``) before re-raising: a child left measuring (or its
    spawned device workers) would take the CPUs of every test after it."""
    import os
    import signal

    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.communicate()
        raise
