"""Real gloo runs: 2 and 4 ranks under torchrun, two simulated nodes, and a rank that dies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.cluster_launch import FAULTY, base_env, one_json, srun_like, torchrun, torchrun_nodes
from flopwise.plan.roofline import BUSBW_FACTORS
from flopwise.results.measured import cpu_hardware
from flopwise.results.store import ResultStore

pytestmark = pytest.mark.slow
TINY = ["--min-bytes", "4K", "--max-bytes", "64K", "--factor", "4", "--iterations", "3",
        "--warmup", "1", "--timeout", "60"]  # fmt: skip
SIZES = [4096, 16384, 65536]


def _check_rows(doc: dict, ops: list[str], n: int, ranks: int | None = None) -> None:
    ranks = ranks or n
    rows = doc["rows"]
    assert [r["op"] for r in rows] == [op for op in ops for _ in SIZES]
    for r in rows:
        # bytes moved: whole float32 elements, split evenly where the op splits the array
        assert r["bytes"] == r["count"] * 4 and r["dtype"] == "float32"
        assert r["bytes"] in SIZES
        if r["op"] in ("all_gather", "reduce_scatter", "all_to_all"):
            assert r["count"] % n == 0
        # nccl-tests definitions: algbw = S/t (GB = 1e9), busbw = algbw x factor(n)
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6) / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * BUSBW_FACTORS[r["op"]](n))
        # rank 0 aggregates every rank's time: mean (as nccl-tests), min and max
        per_rank = r["time_us_by_rank"]
        assert len(per_rank) == ranks and min(per_rank) > 0
        assert r["time_us"] == pytest.approx(sum(per_rank) / ranks)
        assert (r["time_us_min"], r["time_us_max"]) == (min(per_rank), max(per_rank))
        assert r["wrong"] == 0, r


def _stored(home: Path) -> list:
    return ResultStore(home / "results.sqlite").list("comms")


def test_two_ranks_all_ops_json_and_store(isolated_home: Path) -> None:
    run = torchrun(2, ["bench", "comms", "--backend", "gloo", "--json", *TINY], isolated_home)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = one_json(run.stdout)  # rank 0 alone prints, exactly one document
    ops = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
    _check_rows(doc, ops, 2)
    assert doc["group_size"] == 2 and doc["status"] == "complete"
    (stored,) = _stored(isolated_home)
    assert stored.id == doc["result_id"] and stored.accelerator == "cpu"
    s = stored.summary  # the contract results.measured reads
    peak = max(r["busbw_gbps"] for r in doc["rows"] if r["op"] == "all_reduce")
    assert (s["op"], s["group"], s["nodes"], s["ranks"]) == ("all_reduce", "all", 1, 2)
    assert s["busbw_gbps"] == pytest.approx(peak)
    prov = stored.payload["provenance"]
    assert prov["backend"] == "gloo" and prov["ranks"] == 2 and prov["torch_version"]
    assert sorted(r for ranks in prov["hosts"].values() for r in ranks) == [0, 1]


def test_four_ranks_table_and_intra_group(isolated_home: Path) -> None:
    ops = ["all_reduce", "reduce_scatter", "send_recv"]
    args = ["bench", "comms", "--backend", "gloo", "--ops", ",".join(ops), "--group", "intra"]
    run = torchrun(4, [*args, *TINY], isolated_home)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "4 ranks on 1 node(s)" in out and "# all_reduce" in out and "wrong elements: 0 OK" in out
    (stored,) = _stored(isolated_home)
    doc = stored.payload
    _check_rows(doc, ops, 4)
    assert (doc["group_size"], doc["groups"]) == (4, 1)
    assert f"stored as result {stored.id}" in out
    hw = cpu_hardware(str(isolated_home / "results.sqlite"))
    assert hw.intra_busbw_gbps == pytest.approx(stored.summary["busbw_gbps"])
    assert hw.inter_busbw_gbps is None


def test_two_nodes_inter_group(isolated_home: Path) -> None:
    """Two torchrun agents meeting through c10d behave as two nodes of 2 ranks each."""
    args = ["bench", "comms", "--backend", "gloo", "--group", "inter", "--ops", "all_reduce",
            "--json", *TINY]  # fmt: skip
    runs = torchrun_nodes(2, 2, args, isolated_home)
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    (doc,) = [json.loads(r.stdout) for r in runs if r.stdout.strip()]  # one rank 0, one document
    _check_rows(doc, ["all_reduce"], 2, ranks=4)
    assert (doc["group_size"], doc["groups"]) == (2, 2)
    assert (doc["summary"]["nodes"], doc["summary"]["ranks"]) == (2, 4)
    hw = cpu_hardware(str(isolated_home / "results.sqlite"))
    assert hw.inter_busbw_gbps == pytest.approx(doc["summary"]["busbw_gbps"])


@pytest.mark.parametrize(
    ("dead", "needle"),
    [(1, "rank 1 (host"), (0, "lost the rendezvous store")],  # rank 0 hosts the store here
)
def test_rank_that_dies_is_named_and_nobody_hangs(
    dead: int, needle: str, isolated_home: Path
) -> None:
    """srun-style launch (no supervisor kills the others): one rank exits after joining."""
    args = ["bench", "comms", "--backend", "gloo", "--ops", "all_reduce", *TINY[:-2],
            "--timeout", "10"]  # fmt: skip
    runs = srun_like(3, args, isolated_home, script=FAULTY, FLOPWISE_TEST_FAULT_RANK=str(dead))
    assert runs[dead].returncode == 3  # the injected death
    for r in (r for rank, r in enumerate(runs) if rank != dead):
        assert r.returncode == 2, r.stderr[-2000:]
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("flopwise: error:")]
        assert len(lines) == 1, r.stderr[-2000:]
        assert needle in lines[0]
        assert "Traceback" not in r.stderr
    assert _stored(isolated_home) == []


def test_rank_that_dies_inside_a_collective_is_named(isolated_home: Path) -> None:
    """The old code said only "a peer failed during it": the dead rank had reached the same
    collective, so it was not behind anyone."""
    args = ["bench", "comms", "--backend", "gloo", "--ops", "all_reduce", *TINY[:-2],
            "--timeout", "10"]  # fmt: skip
    runs = srun_like(
        3,
        args,
        isolated_home,
        script=FAULTY,
        FLOPWISE_TEST_FAULT_RANK="2",
        FLOPWISE_TEST_FAULT_MODE="die-in-collective",
    )
    assert runs[2].returncode == 3
    for r in runs[:2]:
        assert r.returncode == 2, r.stderr[-2000:]
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("flopwise: error:")]
        assert len(lines) == 1, r.stderr[-2000:]
        assert "rank 2 (host" in lines[0] and "stopped inside it" in lines[0], lines[0]
        assert "Traceback" not in r.stderr


def test_srun_style_launch_maps_slurm_variables(isolated_home: Path) -> None:
    args = ["bench", "comms", "--backend", "gloo", "--ops", "broadcast,all_to_all", "--json"]
    runs = srun_like(2, [*args, *TINY], isolated_home)
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    assert runs[1].stdout == ""  # only rank 0 reports
    doc = one_json(runs[0].stdout)
    _check_rows(doc, ["broadcast", "all_to_all"], 2)
    assert doc["provenance"]["launcher"] == "slurm"
    assert doc["summary"]["op"] == "broadcast"  # no all_reduce: the first op is the headline


def test_one_process_is_told_how_to_launch(isolated_home: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "flopwise", "bench", "comms", "--backend", "gloo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=base_env(isolated_home),
    )
    assert run.returncode == 2
    assert "at least 2 ranks" in run.stderr and "torchrun" in run.stderr
    assert "Traceback" not in run.stderr
