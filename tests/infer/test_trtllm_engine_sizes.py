"""TensorRT-LLM engine sizes and what they cost before the KV cache is sized.

Golden numbers come from TensorRT-LLM's own start-up logs (docs/source/reference/memory.md FAQ,
NVIDIA/TensorRT-LLM#1188, the trtllm-bench 0.12 README example) and its build table
(tensorrt_llm/bench/build/benchmark_config.yml); expected values below are derived by hand from
those and the models' architectures, never from the code's own output.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import (
    TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN,
    TRTLLM_SLOT_BYTES_PER_VOCAB,
    EngineProfile,
    get_engine,
)
from flopwise.plan.infer.memory import kv_bytes_per_seq_per_gpu, usable_bytes
from flopwise.plan.infer.result import InferPlan
from flopwise.plan.infer.shard import make_shard
from flopwise.plan.infer.trtllm_build import slot_buffer_bytes
from flopwise.units import GIB
from flopwise.workload import load_model

VOCAB_70B = 128_256


def _engine_with(slots: int) -> EngineProfile:
    return replace(get_engine("tensorrt-llm"), max_num_seqs=slots)


def test_slot_constants_rebuild_the_log_they_come_from() -> None:
    # NVIDIA/TensorRT-LLM#1188: Qwen2.5-Coder-0.5B, 2048 slots, vocab 151,936, max_seq_len 32,768:
    # "Allocated 2.66 GB ... runtime buffers" + "5.76 GB ... decoder"; MemoryCounters' "GB" is GiB
    logged = (2.66 + 5.76) * GIB
    rebuilt = slot_buffer_bytes(_engine_with(2048), 151_936, None, 32_768)
    assert rebuilt == pytest.approx(logged, rel=1e-9)
    # four int32 tensors of max_batch x max_seq_len; the rest is vocabulary-wide, 25-26 bytes
    assert TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN == 16.0
    assert pytest.approx(25.6, abs=0.05) == TRTLLM_SLOT_BYTES_PER_VOCAB


def test_older_runtime_logged_more_per_slot() -> None:
    # trtllm-bench 0.12 README example: Llama-2-7B fp8, max_batch_size 4096, max_seq_len 4098,
    # vocab 32,000: "Allocated 1.14 GB ... runtime buffers", "4.35 GB ... decoder" (GiB). The
    # late-2024 constants give less: the runtime of the published 0.14+ tables is closer to it.
    logged = (1.14 + 4.35) * GIB
    modelled = slot_buffer_bytes(_engine_with(4096), 32_000, None, 4098)
    assert 0.5 * logged < modelled < logged


def test_kv_blocks_of_the_memory_md_log() -> None:
    # docs/source/reference/memory.md FAQ log, Llama-2-7B fp8 engine (6695 MiB) on an 80 GB H100:
    # "total: 79.10 GiB, available: 70.48 GiB", "Number of blocks in KV cache primary pool: 4060",
    # 64 tokens per block. Rebuilt from flopwise's KV bytes per token (2 x 32 layers x 32 heads x
    # 128 x 1 byte = 256 KiB) and the engine's rule: 0.9 of what is free when it sizes the cache.
    total, available = 79.10 * GIB, 70.48 * GIB
    engine = get_engine("tensorrt-llm")
    fixed = total - available
    budget = usable_bytes(engine, total, fixed)
    assert budget is not None
    shard = make_shard(load_model("llama-2-7b"), 1, 1, "fp8", "fp8")
    block = kv_bytes_per_seq_per_gpu(shard, engine.kv_block_tokens)
    assert block == 64 * 2 * 32 * 32 * 128
    # "available" is printed to 2 decimals: +-1 block
    assert math.floor((budget - fixed) / block) == pytest.approx(4060, abs=1)


def _plan_70b_h100(**sizes: int) -> InferPlan:
    job = InferJob(
        input_len=2048, output_len=2048, batch=None, tp=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm", num_requests=1500, **sizes,
    )  # fmt: skip
    return plan_inference(load_model("llama-3.1-70b"), hardware_from_catalog("h100-sxm"), job)


def test_given_engine_sizes_replace_the_heuristic_and_cost_their_slots() -> None:
    plan = _plan_70b_h100(engine_max_batch=2048, engine_max_tokens=2048)
    # the trtllm-bench 0.14 table's Llama 3 70B TP1 engine: 2048 slots, 2048 tokens per pass
    assert plan.extras["engine_max_batch_size"] == 2048
    assert plan.extras["engine_max_num_tokens"] == 2048
    # per slot: 128,256 vocab entries x 25.6 B + 4096 tokens of max_seq_len x 16 B
    per_slot = VOCAB_70B * TRTLLM_SLOT_BYTES_PER_VOCAB + 4096 * 16
    mem = plan.memory
    assert mem.slot_buffers_bytes == pytest.approx(2048 * per_slot)
    assert 6.0 * GIB < mem.slot_buffers_bytes < 6.8 * GIB
    # what is left for KV after 67.7 GiB of fp8 weights and 6.4 GiB of slots: a handful of
    # 4096-token requests (GUARANTEED_NO_EVICT), not the ~14 the heuristic's 64-slot engine allows
    default = _plan_70b_h100()
    assert default.extras["engine_max_batch_size"] == 64
    assert mem.max_batch < default.memory.max_batch
    per_seq = 4096 * 2 * 80 * 8 * 128
    assert mem.kv_per_seq_bytes == per_seq
    assert 3 <= mem.max_batch <= 6
    assert any("given" in a for a in plan.assumptions)


def test_engine_sizes_are_validated() -> None:
    with pytest.raises(FlopwiseError, match="engine_max_batch must be a positive integer"):
        InferJob(engine_max_batch=0)
    with pytest.raises(FlopwiseError, match="exceeds the engine's --engine-max-batch 8"):
        InferJob(batch=16, engine_max_batch=8)


def test_bad_engine_size_flag_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "flopwise", "plan", "infer", "llama-3.1-8b", "--accelerator",
         "h100-sxm", "--engine", "tensorrt-llm", "--engine-max-batch", "zero"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "zero" in proc.stderr


def test_trtllm014_rows_are_posed_with_the_tables_engine_sizes() -> None:
    from flopwise.validate.inference_rows import posed_rows

    rows = {r.id: r for r in posed_rows()[0]}
    # benchmark_config.yml, Llama 3 70B: TP2 general 256/1024, at max_seq_len 4096 2048/1024
    tp2 = rows["trtllm014_llama3170b_h100fp16_tp2_2048_2048"]
    assert (tp2.engine_max_batch, tp2.engine_max_tokens) == (2048, 1024)
    assert "--engine-max-batch 2048 --engine-max-tokens 1024" in tp2.command
    other = rows["trtllm014_llama3170b_h100fp16_tp2_1000_1000"]
    assert (other.engine_max_batch, other.engine_max_tokens) == (256, 1024)
    tp1 = rows["trtllm014_llama3170b_h100fp8_tp1_2048_2048"]
    assert (tp1.engine_max_batch, tp1.engine_max_tokens) == (2048, 2048)
    # not in the stored table: unknown, the planner's default sizing
    assert rows["trtllm014_llama31405b_h200fp8_tp8_1000_1000"].engine_max_batch is None
    # 0.15 onward sized engines with the tuning heuristic: no sizes posed
    assert all(r.engine_max_batch is None for r in rows.values() if r.family != "trtllm014")
