"""flopwise check: one process, a healthy job, and jobs with a dead or hung rank."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.cluster_launch import FAULTY, base_env, one_json, srun_like, torchrun
from flopwise.bench.check import expected_sum


def test_expected_sum() -> None:
    assert [expected_sum(n) for n in (1, 2, 4, 8)] == [1, 3, 10, 36]


def test_single_process_check(isolated_home: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "flopwise", "check", "--json", "--timeout", "20"],
        capture_output=True, text=True, timeout=120, env=base_env(isolated_home),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = one_json(run.stdout)
    assert doc["ok"] and doc["world_size"] == 1 and doc["ranks"][0]["value"] == 1.0


@pytest.mark.slow
def test_two_ranks_report_host_device_and_sum(isolated_home: Path) -> None:
    run = torchrun(2, ["check", "--json", "--timeout", "30"], isolated_home)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = one_json(run.stdout)
    assert doc["ok"] and doc["problem"] is None and doc["backend"] == "gloo"
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        assert r["value"] == 3.0 and r["status"] == "ok" and r["host"] and r["device"] == "cpu"


@pytest.mark.slow
def test_hung_rank_is_named_under_torchrun(isolated_home: Path) -> None:
    """Rank 1 hangs after joining: rank 0 reports it missing after the timeout and exits 1."""
    run = torchrun(3, ["check", "--json", "--timeout", "3"], isolated_home, script=FAULTY,
                   FLOPWISE_TEST_FAULT_RANK="1", FLOPWISE_TEST_FAULT_MODE="hang")  # fmt: skip
    assert run.returncode != 0
    doc = one_json(run.stdout)
    assert doc["ok"] is False
    assert "rank 1 (host" in doc["problem"] and "did not reach" in doc["problem"]
    assert [r["status"] for r in doc["ranks"]] == ["failed", "missing", "failed"]


@pytest.mark.slow
def test_dead_rank_is_named_without_a_supervisor(isolated_home: Path) -> None:
    runs = srun_like(3, ["check", "--timeout", "5"], isolated_home, script=FAULTY,
                     FLOPWISE_TEST_FAULT_RANK="2")  # fmt: skip
    assert [r.returncode for r in runs] == [1, 1, 3]
    assert "FAILED" in runs[0].stdout and "rank 2 (host" in runs[0].stdout
    assert "check failed" in runs[1].stderr and "rank 2 (host" in runs[1].stderr
    assert "Traceback" not in runs[0].stderr + runs[1].stderr
