"""Expert tensor parallelism (--etp): experts split over fewer ranks than the dense layers, the
expert-parallel group folded across TP, CP and DP ranks (Megatron-Core's parallel folding)."""

from __future__ import annotations

import json
from typing import Any

from conftest import run_cli
from flopwise.plan.train.layout import Layout

QWEN = ["qwen3-30b-a3b", "-a", "h100-sxm", "--gpus", "16", "--tokens", "1T", "--seq-len", "4096"]
FIXED = ["--global-batch-seqs", "512", "--pp", "1", "--cp", "1", "--microbatch", "1", "--zero", "1"]


def _plan(*args: str) -> dict[str, Any]:
    proc = run_cli("plan", "train", *QWEN, *FIXED, *args, "--memory-headroom", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_expert_groups_follow_the_folding() -> None:
    plain = Layout(tp=2, pp=1, dp=8, ep=4)
    folded = Layout(tp=2, pp=1, dp=8, ep=8, etp=1)
    assert plain.expert_tp == 2 and plain.expert_dp == 2  # 2 x 8 / (4 x 2)
    assert folded.expert_tp == 1 and folded.expert_dp == 2  # 2 x 8 / (8 x 1)
    assert folded.to_dict()["etp"] == 1 and plain.to_dict()["etp"] == 2


def test_folding_lets_ep_exceed_dp_and_splits_experts_less() -> None:
    # EP 16 on 8 data-parallel ranks at TP 2: only with the experts folded across TP
    refused = run_cli("plan", "train", *QWEN, *FIXED, "--tp", "2", "--dp", "8", "--ep", "16")
    assert refused.returncode == 2
    assert "--etp 1" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    folded = _plan("--tp", "2", "--dp", "8", "--ep", "16", "--etp", "1")
    assert folded["layout"]["ep"] == 16 and folded["layout"]["etp"] == 1
    # at the same EP, whole experts per GPU (etp 1) hold twice the expert weights of halves
    whole = _plan("--tp", "2", "--dp", "8", "--ep", "4", "--etp", "1")
    halves = _plan("--tp", "2", "--dp", "8", "--ep", "4")
    assert halves["layout"]["etp"] == 2
    w_whole = whole["memory_breakdown"]["weights_gib"]
    w_halves = halves["memory_breakdown"]["weights_gib"]
    assert w_whole > w_halves
    # the same expert FLOPs per GPU either way (half the tokens through whole experts): the
    # compute matches; the extra weights may cost recompute elsewhere, not more GEMM time
    ratio = whole["breakdown"]["compute_s"] / halves["breakdown"]["compute_s"]
    assert 0.95 < ratio < 1.05


def test_etp_is_refused_where_it_means_nothing() -> None:
    dense = run_cli(
        "plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8", "--tokens", "1T",
        "--etp", "1",
    )  # fmt: skip
    assert dense.returncode == 2 and "dense" in dense.stderr
    uneven = run_cli("plan", "train", *QWEN, "--tp", "2", "--etp", "4")
    assert uneven.returncode == 2 and "etp=4 does not divide tp=2" in uneven.stderr


def test_the_search_folds_when_asked() -> None:
    d = _plan("--tp", "2", "--etp", "1")
    lay = d["layout"]
    assert lay["etp"] == 1
    assert (lay["tp"] * lay["cp"] * lay["dp"]) % (lay["ep"] * lay["etp"]) == 0
