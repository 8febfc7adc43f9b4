"""TensorRT-LLM with pipeline parallelism keeps one micro-batch per stage in flight, each up to
the engine's max_batch_size and max_num_tokens (its batch manager sizes the capacity scheduler
getMaxBatchSize() * mNumMicroBatches with mNumMicroBatches = pp; the PyTorch backend allocates
max_batch_size * pp_size sequence slots), which is why trtllm-bench's heuristic divides its
batch by pp (tensorrt_llm/bench/build/tuning.py)."""

from __future__ import annotations

from flopwise.hardware import hardware_for
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.trtllm_build import bench_build, bench_bytes_per_elem, built_engine
from flopwise.workload import load_model
from flopwise.workload.params import count_params

LLAMA_70B = load_model("llama-3.3-70b")
RTX = hardware_for("rtx-pro-6000", "rtx-pro-server")


def _job(pp: int) -> InferJob:
    return InferJob(
        input_len=128,
        output_len=2048,
        batch=None,
        pp=pp,
        weight_dtype="nvfp4",
        kv_dtype="fp8",
        engine="tensorrt-llm",
        num_requests=3000,
    )


def test_the_runtime_holds_pp_micro_batches_of_the_built_size() -> None:
    trt = get_engine("tensorrt-llm")
    total = float(count_params(LLAMA_70B).total)
    args = (LLAMA_70B, total, 1, 4, "nvfp4", "fp8", RTX.memory_bytes, 128, 2048)
    engine, build = built_engine(trt, *args)
    assert build is not None and build.micro_batches == 4
    # the heuristic's own per-micro-batch sizes, held four times over
    w, kv = bench_bytes_per_elem("nvfp4"), bench_bytes_per_elem("fp8")
    heuristic = bench_build(LLAMA_70B, total, 1, 4, w, kv, RTX.memory_bytes or 0, 128, 2048)
    assert build.max_batch_size == heuristic.max_batch_size
    assert engine.max_num_seqs == 4 * heuristic.max_batch_size
    assert engine.max_num_tokens == 4 * heuristic.max_num_tokens
    # without pipeline parallelism nothing changes
    engine1, build1 = built_engine(trt, LLAMA_70B, total, 1, 1, "nvfp4", "fp8",
                                   RTX.memory_bytes, 128, 2048)  # fmt: skip
    assert build1 is not None and build1.micro_batches == 1
    assert engine1.max_num_seqs == build1.max_batch_size


def test_more_stages_run_more_sequences_and_say_why() -> None:
    one = plan_inference(LLAMA_70B, RTX, _job(1))
    eight = plan_inference(LLAMA_70B, RTX, _job(8))
    slots = eight.extras["engine_max_batch_size"]
    # eight stages hold more sequences than one micro-batch's max_batch_size ...
    assert eight.batch > slots
    # ... and so deliver more than the single GPU (memory for KV grows eightfold too)
    assert eight.output_tokens_per_s > 2 * one.output_tokens_per_s
    assert any("pipeline micro-batches in flight" in a for a in eight.assumptions)
    assert not any("pipeline micro-batches" in a for a in one.assumptions)


def test_one_micro_batch_sizes_the_activation_workspace() -> None:
    # each GPU runs one micro-batch's forward pass at a time: its activation workspace is the
    # built max_num_tokens, not the pp-fold total the scheduler admits per round
    from flopwise.plan.infer.memory import (
        RUNTIME_RESERVED_BYTES,
        engine_fixed_bytes,
        workspace_bytes,
    )
    from flopwise.plan.infer.shard import make_shard

    trt = get_engine("tensorrt-llm")
    total = float(count_params(LLAMA_70B).total)
    engine, build = built_engine(trt, LLAMA_70B, total, 1, 4, "fp4", "fp8",
                                 RTX.memory_bytes, 128, 2048)  # fmt: skip
    assert build is not None and engine.micro_batches == 4
    sh = make_shard(LLAMA_70B, 1, 4, "fp4", "fp8")
    fixed, slots = engine_fixed_bytes(sh, engine, 1.0, 2176)
    one_pass = workspace_bytes(sh, build.max_num_tokens, 0, 1.0)
    assert fixed == sh.weights_per_gpu_bytes() + RUNTIME_RESERVED_BYTES + one_pass + slots
