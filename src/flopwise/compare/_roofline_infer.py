"""A memory-bandwidth roofline for decode, used only until the inference planner lands.

Labelled `roofline` in every output. Per decode step each GPU reads its share of the weights and
of the KV cache at achievable bandwidth, or computes 2 x active params x batch at achievable
GEMM rate, whichever is slower; prefill is compute-bound over the prompts. No communication,
no launch overhead: a lower bound on latency.
"""

from __future__ import annotations

from typing import Any

from flopwise.compare.jobs import InferJob
from flopwise.hardware import Hardware
from flopwise.plan.roofline import achievable_matmul_tflops, memory_bw_bytes_per_s
from flopwise.units import GIB, TERA
from flopwise.workload.flops import decode_flops_per_token, prefill_flops
from flopwise.workload.memory_bytes import kv_cache_bytes, weight_bytes
from flopwise.workload.params import count_params
from flopwise.workload.spec import ModelSpec


def roofline_infer(model: ModelSpec, hw: Hardware, gpus: int, job: InferJob) -> dict[str, Any]:
    counts = count_params(model)
    weights = weight_bytes(counts, job.weight_dtype)
    ctx = job.input_len + job.output_len
    kv_full = kv_cache_bytes(model, ctx, job.kv_dtype) * job.batch
    kv_mean = kv_cache_bytes(model, job.input_len + job.output_len / 2, job.kv_dtype) * job.batch
    bw = memory_bw_bytes_per_s(hw) * gpus
    flops_rate = achievable_matmul_tflops(hw, "bf16") * TERA * gpus
    decode_mem_s = (weights + kv_mean) / bw
    decode_cmp_s = decode_flops_per_token(model, job.input_len + job.output_len / 2, counts)
    decode_cmp_s = decode_cmp_s * job.batch / flops_rate
    tpot_s = max(decode_mem_s, decode_cmp_s)
    prefill_s = max(
        prefill_flops(model, job.input_len, counts) * job.batch / flops_rate, weights / bw
    )
    mem_gib = (weights + kv_full) / gpus / GIB
    dev_gib = None if hw.memory_bytes is None else hw.memory_bytes / GIB
    return {
        "method": "roofline",
        "note": "memory-bandwidth roofline (no communication or overheads): a latency lower bound",
        "ttft_ms": prefill_s * 1e3,
        "tpot_ms": tpot_s * 1e3,
        "e2e_latency_s": prefill_s + tpot_s * job.output_len,
        "output_tokens_per_s": job.batch / tpot_s,
        "memory_per_gpu_gib": mem_gib,
        "fits": None if dev_gib is None else mem_gib <= dev_gib,
        "breakdown": {
            "decode_weights_read_ms": weights / bw * 1e3,
            "decode_kv_read_ms": kv_mean / bw * 1e3,
            "decode_compute_ms": decode_cmp_s * 1e3,
        },
        "memory_breakdown": {
            "weights_gib": weights / gpus / GIB,
            "kv_cache_gib": kv_full / gpus / GIB,
        },
    }
