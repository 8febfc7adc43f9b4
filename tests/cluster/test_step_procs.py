"""`flopwise bench step` under torchrun: data parallel over 2 gloo ranks on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.cluster_launch import torchrun
from flopwise.results.store import ResultStore

pytestmark = pytest.mark.slow

CONFIG = {
    "model_type": "llama",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 128,
    "max_position_embeddings": 64,
}


def test_two_rank_data_parallel_step_is_reported_once(tmp_path: Path, isolated_home: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    args = ["bench", "step", str(cfg), "--device", "cpu", "--seq-len", "16", "--steps", "2",
            "--warmup", "1", "--backend", "gloo", "--timeout", "60", "--json"]  # fmt: skip
    r = torchrun(2, args, isolated_home)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)  # rank 0 alone prints: one document
    assert doc["world_size"] == 2 and doc["rank"] == 0
    # both replicas' tokens count: 2 ranks x microbatch 1 x 16 tokens per step
    assert doc["tokens_per_s"] == pytest.approx(2 * 16 / doc["step_time_s"])
    stored = ResultStore(isolated_home / "results.sqlite").list("step")
    assert [s.id for s in stored] == [doc["result_id"]]
