"""Accelerators without a node type: cross-node layouts need --system or --inter-node-gbps."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import (
    LayoutConstraints,
    TrainJob,
    assume_inter_node_bw,
    plan_training,
)
from flopwise.workload.hf import load_model

BASE = ("plan", "train", "llama-3.1-8b", "-a", "h800", "--tokens", "1T")


def test_cross_node_layout_without_network_names_both_options() -> None:
    r = run_cli(*BASE, "--gpus", "16")
    assert r.returncode == 2
    err = r.stderr.strip()
    assert err.count("\n") == 0
    assert "--system" in err and "--inter-node-gbps" in err
    assert "Traceback" not in err


def test_one_node_needs_no_network() -> None:
    r = run_cli(*BASE, "--gpus", "8", "--json")
    assert r.returncode == 0, r.stderr
    assumed = json.loads(r.stdout)["assumed"]
    # no network is assumed; the fallbacks the plan does rest on are listed (issue 10)
    assert "inter_bw_per_gpu_gbps" not in assumed
    assert "gpus_per_node" in assumed  # no node type for the H800 in the catalog


def test_inter_node_gbps_is_used_and_labelled_as_an_assumption() -> None:
    r = run_cli(*BASE, "--gpus", "64", "--inter-node-gbps", "50", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assumed = doc["assumed"]["inter_bw_per_gpu_gbps"]
    assert assumed["value"] == 50.0
    assert "--inter-node-gbps" in assumed["source"]
    assert doc["measured"] == {}


def test_a_slower_assumed_network_never_speeds_up_a_cross_node_layout() -> None:
    model = load_model("llama-3.1-8b")
    job = TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256)
    cons = LayoutConstraints(tp=8, pp=1, cp=1, microbatch=1, recompute="none", zero=1)
    times = []
    for gbps in (5.0, 25.0, 50.0):
        hw = assume_inter_node_bw(hardware_from_catalog("h800"), gbps)
        times.append(plan_training(model, hw, job, cons).step_time_s)
    assert times[0] > times[1] >= times[2]


def test_inter_node_gbps_must_be_positive() -> None:
    with pytest.raises(FlopwiseError, match="positive"):
        assume_inter_node_bw(hardware_from_catalog("h800"), 0.0)
