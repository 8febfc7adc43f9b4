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


MOE_CONFIG = {
    "model_type": "qwen3_moe",
    "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 32,
    "intermediate_size": 64,
    "moe_intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "vocab_size": 128,
    "max_position_embeddings": 64,
    "num_experts": 8,
    "num_experts_per_tok": 2,
}


def test_expert_parallel_layer_matches_every_expert_everywhere(isolated_home: Path) -> None:
    """2 gloo ranks, experts sharded 2 ways: outputs equal the unsharded layer's on each rank's
    own tokens, and each rank's experts get the gradient of both ranks' tokens."""
    script = Path(__file__).resolve().parent / "ep_moe_check.py"
    r = torchrun(2, [], isolated_home, script=script)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 1, r.stdout
    reports = json.loads(lines[0])
    assert sorted(rep["rank"] for rep in reports) == [0, 1]
    for rep in reports:
        for kind in ("qwen2_moe", "gpt_oss"):
            assert rep[kind] == {"outputs_equal": True, "expert_grads_equal": True}, rep


def test_two_rank_expert_parallel_moe_step(tmp_path: Path, isolated_home: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(MOE_CONFIG))
    common = ["bench", "step", str(cfg), "--device", "cpu", "--seq-len", "16", "--steps", "2",
              "--warmup", "1", "--backend", "gloo", "--timeout", "60", "--json"]  # fmt: skip
    docs = {}
    for ep in ("1", "2"):
        r = torchrun(2, [*common, "--ep", ep], isolated_home)
        assert r.returncode == 0, r.stderr[-3000:]
        docs[ep] = json.loads(r.stdout)
    assert docs["2"]["ep"] == 2 and docs["2"]["moe"] is True and docs["2"]["tokens_per_s"] > 0
    # each rank holds half of every layer's 8 experts (3 x 32 x 16 weights each)
    assert docs["1"]["params"] - docs["2"]["params"] == docs["2"]["layers"] * 4 * 3 * 32 * 16
