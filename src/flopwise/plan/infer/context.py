"""What one serving plan derives once per (model, hardware, job): the engine profile with the
job's overrides, the precision, the per-GPU shard and the kernel rates."""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.infer.constants import EngineProfile, get_engine
from flopwise.plan.infer.job import InferJob, Precision, resolve_precision
from flopwise.plan.infer.latency import Rates, make_rates
from flopwise.plan.infer.shard import Shard, make_shard
from flopwise.plan.infer.trtllm_build import with_engine_sizes
from flopwise.workload.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Context:
    """Everything derived once per (model, hardware, job): shard, rates, engine, precision."""

    spec: ModelSpec
    hw: Hardware
    job: InferJob
    engine: EngineProfile
    precision: Precision
    shard: Shard
    rates: Rates


def make_context(
    spec: ModelSpec, hw: Hardware, job: InferJob, engine: EngineProfile | None = None
) -> Context:
    total = job.input_len + job.output_len
    if spec.learned_positions and total > spec.learned_positions:
        raise FlopwiseError(
            f"input {job.input_len} + output {job.output_len} = {total} tokens exceeds "
            f"{spec.name}'s learned position table of {spec.learned_positions} rows"
        )
    if total > spec.max_seq_len and not job.allow_long_context:
        raise FlopwiseError(
            f"input {job.input_len} + output {job.output_len} = {total} tokens exceeds "
            f"{spec.name}'s context of {spec.max_seq_len} tokens (--allow-long-context runs "
            "past it, as TensorRT-LLM's --max_seq_len and vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN do)"
        )
    if job.tp * job.pp > 1 and not (hw.scaleup_bw_uni_gbps or hw.intra_busbw_gbps):
        raise FlopwiseError(
            f"{hw.id} has no known interconnect; tensor/pipeline parallel needs one"
        )
    engine = engine or get_engine(job.engine)
    if job.memory_fraction is not None:
        engine = replace(engine, memory_fraction=job.memory_fraction)
    engine = with_engine_sizes(engine, job.engine_max_batch, job.engine_max_tokens)
    if job.fp8_context_attention is not None:
        engine = replace(engine, fp8_context_attention=job.fp8_context_attention)
    if job.decode_kernel is not None:
        engine = replace(engine, decode_kernel=job.decode_kernel)
    precision = resolve_precision(job, hw)
    if (job.ep > 1 or job.attention_dp) and not spec.is_moe:
        raise FlopwiseError(
            f"{spec.name} is dense: --ep and --attention-dp apply to mixture-of-experts models"
        )
    if job.ep > 1 and spec.experts % job.ep:
        raise FlopwiseError(f"--ep {job.ep} must divide {spec.name}'s {spec.experts} experts")
    shard = make_shard(
        spec,
        job.tp,
        job.pp,
        precision.weight,
        precision.kv,
        job.ep,
        job.attention_dp,
        whole_dense=engine.attention_dp_whole_dense,
        chunked_decode=engine.chunked_attention_in_decode,
    )
    rates = make_rates(hw, engine, precision.act, precision.weight, spec, job.input_len)
    return Context(spec, hw, job, engine, precision, shard, rates)
