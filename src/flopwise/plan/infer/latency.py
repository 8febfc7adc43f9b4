"""Time of one forward pass on one GPU, op by op at the roofline of its arithmetic intensity.

Every GEMM costs max(FLOPs / achievable GEMM rate x tile/wave efficiency, bytes / achievable
bandwidth) plus a launch (as ``flopwise.plan.roofline.gemm_time_s``), attention costs the larger
of its FLOPs and the KV bytes it reads, tensor-parallel all-reduces cost the cheaper of a ring
and a one-shot/two-shot custom all-reduce, and the engine adds its host time per pass.

The time is attributed to what bounds each op, so a breakdown always sums to the total:
``weights_s`` (memory-bound GEMMs: reading weights), ``kv_s`` (memory-bound attention: reading
the KV cache), ``compute_s`` (compute-bound ops), ``comm_s`` (all-reduces, pipeline sends) and
``overhead_s`` (kernel launches and engine host time) and ``activations_s`` (memory-bound
elementwise ops: norms, rotary, residual adds, the MLP activation).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.attention_head_dim import head_dim_factor
from flopwise.plan.attention_rate import model_attention_rate
from flopwise.plan.efficiency import KERNEL_LAUNCH_S
from flopwise.plan.gemm import compute_efficiency, gemm_correction, roof_fraction
from flopwise.plan.infer.comm import allreduce_s, node_gpus
from flopwise.plan.infer.constants import (
    ALLREDUCE_ELEMENT_BYTES,
    ELEMENTWISE_KERNELS_PER_LAYER,
    FP8_ATTENTION_SPEEDUP,
    PREFILL_ATTENTION_KERNEL,
    RIDGE_SMOOTHING_P,
    SCALED_GEMM_DTYPES,
    EngineProfile,
    host_s_per_request,
)
from flopwise.plan.infer.moe_kernels import routing_cost
from flopwise.plan.infer.shard import Shard, busiest_group_experts, expected_distinct_experts
from flopwise.plan.roofline import (
    achievable_matmul_tflops,
    collective_time_s,
    memory_bw_bytes_per_s,
    tier_for,
)
from flopwise.plan.sustained import serving_compute_share
from flopwise.units import TERA
from flopwise.workload.memory_bytes import storage_bytes
from flopwise.workload.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Seconds by what bounds them, plus the bytes and FLOPs behind them (one GPU)."""

    weights_s: float = 0.0
    kv_s: float = 0.0
    compute_s: float = 0.0
    comm_s: float = 0.0
    overhead_s: float = 0.0
    activations_s: float = 0.0
    weight_bytes: float = 0.0
    kv_bytes: float = 0.0
    flops: float = 0.0

    @property
    def total_s(self) -> float:
        return (
            self.weights_s
            + self.kv_s
            + self.compute_s
            + self.comm_s
            + self.overhead_s
            + self.activations_s
        )

    def __add__(self, other: Breakdown) -> Breakdown:
        # field by field (not a zip over _values): this runs ~10^5 times per validation
        return Breakdown(
            self.weights_s + other.weights_s,
            self.kv_s + other.kv_s,
            self.compute_s + other.compute_s,
            self.comm_s + other.comm_s,
            self.overhead_s + other.overhead_s,
            self.activations_s + other.activations_s,
            self.weight_bytes + other.weight_bytes,
            self.kv_bytes + other.kv_bytes,
            self.flops + other.flops,
        )

    def scaled(self, factor: float) -> Breakdown:
        return Breakdown(
            self.weights_s * factor,
            self.kv_s * factor,
            self.compute_s * factor,
            self.comm_s * factor,
            self.overhead_s * factor,
            self.activations_s * factor,
            self.weight_bytes * factor,
            self.kv_bytes * factor,
            self.flops * factor,
        )

    def _values(self) -> tuple[float, ...]:
        return (
            self.weights_s,
            self.kv_s,
            self.compute_s,
            self.comm_s,
            self.overhead_s,
            self.activations_s,
            self.weight_bytes,
            self.kv_bytes,
            self.flops,
        )

    def to_dict(self, unit: float = 1e3) -> dict[str, float]:
        """Times in ms by default."""
        return {
            "weights_read_ms": self.weights_s * unit,
            "kv_read_ms": self.kv_s * unit,
            "compute_ms": self.compute_s * unit,
            "communication_ms": self.comm_s * unit,
            "overhead_ms": self.overhead_s * unit,
            "activations_ms": self.activations_s * unit,
            "total_ms": self.total_s * unit,
            "weight_bytes": self.weight_bytes,
            "kv_bytes": self.kv_bytes,
            "flops": self.flops,
        }


@dataclass(frozen=True, slots=True)
class Rates:
    """Achievable rates of one GPU for one deployment, computed once per plan."""

    gemm_flops_s: float  # GEMM ceiling at the GEMM input dtype
    attn_flops_s: float  # prefill attention ceiling (16-bit tensor cores x engine fraction)
    bw_bytes_s: float  # achievable HBM bandwidth
    kv_bw_bytes_s: float  # what decode attention reaches
    act_bytes: float  # bytes per GEMM input element
    weight_bytes: float  # bytes per weight element
    act_dtype: str = "bf16"  # GEMM input dtype (for the shape model and measured shapes)
    #: where attn_flops_s comes from: "engine" (the engine's fraction of the GEMM ceiling),
    #: "measured" (bench attention on this device), "die" (the GH100 die's measured curve) or
    #: "published" (a Blackwell die's curve from NVIDIA's cuDNN benchmark)
    attn_basis: str = "engine"
    #: (query head x KV element) multiply-adds per second of a per-head (MMHA) decode kernel;
    #: 0: the engine's decode kernel is grouped, bound by the KV bytes alone
    mmha_ops_s: float = 0.0
    #: the share of its GEMM ceiling the die sustains here, and its basis: "power-capped" (the
    #: die's measured share under its power cap, plan/sustained.py POWER_CAPPED_SHARE) or
    #: "training" (the die's fitted training fraction) or "measured" (bench sustained)
    compute_share: float = 1.0
    compute_share_basis: str = "training"


def make_rates(
    hw: Hardware,
    engine: EngineProfile,
    act_dtype: str,
    weight_dtype: str,
    spec: ModelSpec | None = None,
    prompt_len: float | None = None,
) -> Rates:
    """The deployment's rates; with the model's `spec`, prefill attention at its head dimension
    (the engine's fraction holds at 128: plan/attention_head_dim.py).

    Prefill attention: where the fused kernel has been timed on this device (``bench
    attention``) or its die (GH100 by this project, Blackwell by NVIDIA), the timed rate at the
    prompt's `prompt_len` keys x the share attention keeps under sustained load (plan/sustained.py serving_compute_share; the
    curve is the one a training step prices it with, plan/attention_rate.py); elsewhere
    the engine's fraction of the GEMM ceiling (``prefill_attention_fraction``)."""
    # GEMMs run at the share of their ceiling the die sustains under load: its measured
    # power-capped share, else its training fraction (plan/sustained.py serving_compute_share)
    gemm_share, share_basis = serving_compute_share(hw, "gemm", act_dtype)
    gemm = achievable_matmul_tflops(hw, act_dtype) * TERA * gemm_share
    gemm *= engine.fp8_gemm_fraction if act_dtype in SCALED_GEMM_DTYPES else engine.gemm_fraction
    attn_dtype = "bf16" if ("bf16" in hw.matmul_tflops or "bf16" in hw.peak_tflops) else act_dtype
    speedup = 1.0
    if act_dtype == "fp8" and engine.fp8_context_attention:
        speedup = FP8_ATTENTION_SPEEDUP  # FP8 context FMHA (trtllm-bench's FP8 builds)
    attn, attn_basis = 0.0, "engine"
    peak16 = hw.peak(attn_dtype) * TERA if attn_dtype in hw.peak_tflops else 0.0
    if spec is not None and prompt_len and peak16 > 0:
        # local layers (sliding windows, chunks) at their kernel length (plan/attention_rate.py)
        fused = model_attention_rate(
            hw, PREFILL_ATTENTION_KERNEL, "fwd", prompt_len, peak16, spec, speedup
        )
        if fused.measured:
            attn = peak16 * serving_compute_share(hw, "attention")[0] * fused.fraction
            attn_basis = fused.basis
    if attn_basis == "engine":
        attn = achievable_matmul_tflops(hw, attn_dtype) * TERA * engine.prefill_attention_fraction
        if spec is not None:
            attn *= head_dim_factor(hw.id, spec.head_dim, spec.v_head_dim, "fwd", speedup)
    attn *= speedup
    bw = memory_bw_bytes_per_s(hw)
    return Rates(
        gemm_flops_s=gemm,
        attn_flops_s=attn,
        bw_bytes_s=bw,
        kv_bw_bytes_s=bw * engine.decode_attention_bw_fraction,
        act_bytes=storage_bytes(act_dtype),
        weight_bytes=storage_bytes(weight_dtype),
        act_dtype=act_dtype,
        attn_basis=attn_basis,
        mmha_ops_s=mmha_ops_per_s(hw, engine),
        compute_share=gemm_share,
        compute_share_basis=share_basis,
    )


def mmha_ops_per_s(hw: Hardware, engine: EngineProfile) -> float:
    """Multiply-adds per second of the per-head (MMHA) decode kernel on `hw`: SMs x clock x
    the engine's rate per SM per clock; 0.0 for a grouped decode kernel. Both hardware numbers
    come from the catalog (compute_units, clock_mhz); without them the rate is unknown."""
    if engine.decode_kernel != "per-head":
        return 0.0
    clock_mhz = hw.accelerator.spec("clock_mhz") if hw.accelerator is not None else None
    if not hw.compute_units or not clock_mhz:
        raise FlopwiseError(
            f"--decode-kernel per-head needs the SM count and clock of {hw.id} (catalog "
            "compute_units and clock_mhz), which the catalog lacks; use --decode-kernel grouped"
        )
    return hw.compute_units * clock_mhz * 1e6 * engine.mmha_ops_per_sm_clock


def shape_efficiency(
    m: int,
    n: int,
    k: int,
    hw: Hardware,
    dtype: str = "bf16",
    groups: int = 1,
    row_draws: tuple[int, float] | None = None,
) -> float:
    """Tile/wave/split-K efficiency of the library's pick (flopwise.plan.gemm): small-M row
    tiles (16/32/64), split-K or stream-K when there are fewer output tiles than SMs; a grouped
    GEMM (MoE experts) schedules the tiles of all its groups in one grid, each group padding
    its own last row tile (`row_draws`: the groups' rows are Binomial draws)."""
    return compute_efficiency(m, n, k, hw, dtype, groups, row_draws)


def gemm(
    m: float,
    n: int,
    k: int,
    hw: Hardware,
    r: Rates,
    groups: float = 1.0,
    grouped: bool = False,
    row_draws: tuple[int, float] | None = None,
) -> Breakdown:
    """`groups` GEMMs (m x k) @ (k x n), as roofline.gemm_time_s, with the time attributed;
    `grouped`: one grouped kernel (MoE experts), at GROUPED_GEMM_EFFICIENCY of the dense
    FLOP roof (plan/gemm_constants.py, fitted on DeepGEMM's grouped GEMMs); `row_draws`
    (trials, p): each group's rows are Binomial(trials, p) about `m` (routed tokens)."""
    if m <= 0 or groups <= 0:
        return Breakdown()
    mi = max(1, round(m))
    flops = 2.0 * m * n * k * groups
    # measured GEMM shapes (bench matmul; grouped ones for a grouped kernel) scale both roofs
    # by the measured/modelled ratio
    corr = gemm_correction(mi, n, k, hw, r.act_dtype, max(1, round(groups)), grouped)
    eff = shape_efficiency(mi, n, k, hw, r.act_dtype, max(1, round(groups)), row_draws)
    eff *= roof_fraction(grouped)
    compute = corr * flops / (r.gemm_flops_s * eff)
    w_bytes = groups * k * n * r.weight_bytes
    moved = groups * (m * k * r.act_bytes + m * n * r.act_bytes) + w_bytes
    memory = corr * moved / r.bw_bytes_s
    # near the ridge point compute and memory traffic do not overlap perfectly: a p-norm of the
    # FLOP-only compute time (no tile padding) and the memory time, on top of the roofline max
    pure = flops / r.gemm_flops_s
    ratio = min(pure, memory) / max(pure, memory)
    slow = (1.0 + ratio**RIDGE_SMOOTHING_P) ** (1.0 / RIDGE_SMOOTHING_P)
    if memory >= compute:
        return Breakdown(
            weights_s=memory * slow, overhead_s=KERNEL_LAUNCH_S, weight_bytes=w_bytes, flops=flops
        )
    return Breakdown(
        compute_s=compute * slow, overhead_s=KERNEL_LAUNCH_S, weight_bytes=w_bytes, flops=flops
    )


def attention(flops: float, n_bytes: float, r: Rates, decode: bool) -> Breakdown:
    """One attention kernel: bound by the KV cache it reads in decode, by FLOPs in prefill.

    Decode moves `n_bytes` of KV cache; prefill (FlashAttention-style, tiles in SRAM) moves only
    its Q, K, V and output activations, counted as activation traffic.
    """
    if flops <= 0:
        return Breakdown()
    compute = flops / r.attn_flops_s
    if decode:
        memory = n_bytes / r.kv_bw_bytes_s
        if memory >= compute:
            return Breakdown(kv_s=memory, overhead_s=KERNEL_LAUNCH_S, kv_bytes=n_bytes, flops=flops)
        return Breakdown(
            compute_s=compute, overhead_s=KERNEL_LAUNCH_S, kv_bytes=n_bytes, flops=flops
        )
    memory = n_bytes / r.bw_bytes_s
    if memory >= compute:
        return Breakdown(activations_s=memory, overhead_s=KERNEL_LAUNCH_S, flops=flops)
    return Breakdown(compute_s=compute, overhead_s=KERNEL_LAUNCH_S, flops=flops)


def _per_head_excess(flops: float, kv_bytes: float, r: Rates) -> Breakdown:
    """What a per-head (MMHA) decode kernel adds to the KV-bound time `attention` priced: its
    CUDA-core work, one multiply-add per query head per KV element (`flops` / 2), at
    `r.mmha_ops_s`, where that takes longer than reading the KV bytes; counted as compute."""
    cuda_core_s = flops / 2.0 / r.mmha_ops_s
    memory_s = kv_bytes / r.kv_bw_bytes_s
    tensor_s = flops / r.attn_flops_s
    excess = cuda_core_s - max(memory_s, tensor_s)
    return Breakdown(compute_s=excess) if excess > 0 else Breakdown()


@dataclass(frozen=True, slots=True)
class Pass:
    """What one forward pass processes on one pipeline stage.

    tokens: rows through the GEMMs. decode_seqs sequences each attend with decode_q query tokens
    to decode_keys (full layers) / decode_keys_sliding (sliding layers) cached tokens.
    prefill_pairs(_sliding): causal (query, key) pairs of prompt tokens in this pass.
    """

    tokens: float
    decode_seqs: float = 0.0
    decode_q: int = 1
    decode_keys: float = 0.0
    decode_keys_sliding: float = 0.0
    prefill_tokens: float = 0.0
    prefill_pairs: float = 0.0
    prefill_pairs_sliding: float = 0.0
    logits_rows: float = 0.0
    all_experts: bool = False  # prefill reads every expert


def _layer_attention(sh: Shard, p: Pass, r: Rates, sliding: bool) -> Breakdown:
    s = sh.spec
    keys = p.decode_keys_sliding if sliding else p.decode_keys
    out = Breakdown()
    if p.decode_seqs > 0 and keys > 0:
        flops = p.decode_seqs * p.decode_q * keys * sh.attn_flops_per_key
        kv = p.decode_seqs * keys * sh.kv_per_token_layer_bytes
        out = out + attention(flops, kv, r, decode=True)
        if r.mmha_ops_s > 0:
            out = out + _per_head_excess(flops, kv, r)
    pairs = p.prefill_pairs_sliding if sliding else p.prefill_pairs
    if pairs > 0:
        flops = pairs * 2.0 * s.heads * (s.head_dim + s.v_head_dim) / sh.tp
        qkvo = p.prefill_tokens * (sh.qkv_out + sh.o_in) * r.act_bytes
        out = out + attention(flops, qkvo, r, decode=False)
    return out


def _mlp(
    sh: Shard,
    p: Pass,
    hw: Hardware,
    r: Rates,
    moe: bool,
    recipe: str = "generic",
    shared_tokens: float | None = None,
) -> Breakdown:
    """One MLP layer on one rank: `p.tokens` rows through the routed experts; the shared
    experts take `shared_tokens` rows (default the same; a rank's own tokens when they are
    whole on every rank under attention data parallelism, Shard.dense_whole)."""
    s, m, h = sh.spec, p.tokens, sh.spec.hidden
    if not moe:
        return gemm(m, sh.mlp_up_out, h, hw, r) + gemm(m, h, sh.mlp_down_in, hw, r)
    routed = m * s.experts_per_token
    distinct = (
        float(s.experts)
        if p.all_experts
        else expected_distinct_experts(s.experts, s.experts_per_token, m)
    )
    per_expert = routed / distinct
    # each expert's rows: every token picks it with probability k / experts (uniform routing;
    # serving routes real tokens with nothing forcing balance), so counts spread about
    # per_expert and each expert pads its own last tile (plan/gemm.py expected_row_tiles)
    draws = (max(1, round(m)), s.experts_per_token / s.experts)
    # expert parallelism: a rank computes only its group's experts, each sharded over tp/ep
    # ranks (Shard.expert_up_out); the step waits for the busiest rank, which at a small batch
    # touches more than the mean share of experts (shard.busiest_group_experts)
    local = (
        distinct / sh.ep
        if p.all_experts
        else busiest_group_experts(s.experts, s.experts_per_token, m, sh.ep)
    )
    # router and routing kernels as the engine runs them (plan/infer/moe_kernels.py)
    route = routing_cost(recipe, m, routed / sh.ep, h, s.experts, r.act_bytes, hw, r.bw_bytes_s)
    out = Breakdown(
        activations_s=route.memory_s, compute_s=route.compute_s, overhead_s=route.overhead_s
    )
    if recipe == "generic":
        out = out + gemm(m, s.experts, h, hw, r)  # a 16-bit router GEMM
    out = out + gemm(per_expert, sh.expert_up_out, h, hw, r, local, grouped=True, row_draws=draws)
    out = out + gemm(per_expert, h, sh.expert_down_in, hw, r, local, grouped=True, row_draws=draws)
    if s.shared_experts:
        ms = m if shared_tokens is None else shared_tokens
        out = out + gemm(ms, sh.shared_up_out, h, hw, r) + gemm(ms, h, sh.shared_down_in, hw, r)
    return out


def _elementwise(sh: Shard, p: Pass, r: Rates) -> Breakdown:
    """Norms, rotary, residual adds and the activation: memory-bound, a few launches."""
    h = sh.spec.hidden
    n_bytes = p.tokens * (6 * h + 3 * sh.mlp_act_width) * 2.0
    return Breakdown(
        activations_s=n_bytes / r.bw_bytes_s,
        overhead_s=ELEMENTWISE_KERNELS_PER_LAYER * KERNEL_LAUNCH_S,
    )


def _share(p: Pass, dp: int) -> Pass:
    """The part of a pass one of `dp` data-parallel attention ranks processes."""
    if dp <= 1:
        return p
    return replace(
        p,
        tokens=p.tokens / dp,
        decode_seqs=p.decode_seqs / dp,
        prefill_tokens=p.prefill_tokens / dp,
        prefill_pairs=p.prefill_pairs / dp,
        prefill_pairs_sliding=p.prefill_pairs_sliding / dp,
        logits_rows=p.logits_rows / dp,
    )


def stage_pass_time(
    sh: Shard, p: Pass, hw: Hardware, r: Rates, engine: EngineProfile, with_logits: bool = True
) -> Breakdown:
    """One forward pass of one pipeline stage (sh.layers layers) on one GPU."""
    s, m, h = sh.spec, p.tokens, sh.spec.hidden
    ar = allreduce_s(m * h * ALLREDUCE_ELEMENT_BYTES, sh.tp, hw, engine)
    # attention data parallelism: each rank runs attention for its 1/attn_dp of the sequences
    # with whole heads, then gathers every token for the MLP and scatters the result back
    # (all-gather + reduce-scatter: the bytes of one all-reduce instead of two all-reduces).
    # With the dense part whole on every rank (Shard.dense_whole) only the routed experts
    # gather: dense MLP layers, shared experts and the lm_head run on the rank's own tokens.
    pa = _share(p, sh.attn_dp)
    proj = gemm(pa.tokens, sh.qkv_out, h, hw, r) + gemm(pa.tokens, h, sh.o_in, hw, r)
    common = proj + _elementwise(sh, pa, r)
    sliding_frac = s.sliding_layers / s.layers
    attn = _layer_attention(sh, pa, r, sliding=False).scaled(1 - sliding_frac)
    if sliding_frac:
        attn = attn + _layer_attention(sh, pa, r, sliding=True).scaled(sliding_frac)
    total = (common + attn).scaled(sh.layers)
    comm_layers = sh.moe_layers_on_stage if sh.dense_whole else sh.layers
    total = total + Breakdown(comm_s=(1 if sh.attn_dp > 1 else 2) * ar * comm_layers)
    pd = pa if sh.dense_whole else p  # the rows through the dense MLP, shared experts, lm_head
    if sh.dense_layers_on_stage:
        total = total + _mlp(sh, pd, hw, r, moe=False).scaled(sh.dense_layers_on_stage)
    if sh.moe_layers_on_stage:
        moe = _mlp(sh, p, hw, r, moe=True, recipe=engine.moe_kernels, shared_tokens=pd.tokens)
        total = total + moe.scaled(sh.moe_layers_on_stage)
    if with_logits and p.logits_rows > 0:
        # the lm_head stays 16-bit in quantized checkpoints (shard.VOCAB_WEIGHT_BYTES)
        head = replace(r, weight_bytes=sh.vocab_bytes_per_elt)
        total = total + gemm(pd.logits_rows, sh.logits_out, h, hw, head)
        total = total + _logits_gather_and_sample(sh, pd.logits_rows, hw, r, engine)
    return total


def _logits_gather_and_sample(
    sh: Shard, rows: float, hw: Hardware, r: Rates, engine: EngineProfile
) -> Breakdown:
    """The vocabulary-parallel lm_head leaves each TP rank vocab/tp logits per row: they are
    gathered into whole rows (TensorRT-LLM's lm_head is a ColumnLinear with gather_output=True,
    an all-gather; vLLM's LogitsProcessor and SGLang gather them likewise), in the engine's
    logits dtype, and the sampler then reads every row once (the top-k/argmax pass)."""
    full = rows * sh.spec.vocab * engine.logits_bytes
    gather = 0.0
    if sh.tp > 1 and not sh.dense_whole:  # a whole lm_head leaves whole rows: nothing to gather
        tier = tier_for(hw, sh.tp, spans_nodes=sh.tp > node_gpus(hw))
        gather = collective_time_s("all_gather", full, sh.tp, tier)
    return Breakdown(comm_s=gather, activations_s=full / r.bw_bytes_s, overhead_s=KERNEL_LAUNCH_S)


def engine_overhead(
    engine: EngineProfile,
    prefill: bool,
    accelerator_id: str,
    requests: float = 0.0,
    device_s: float = 0.0,
    dispatch_s: float = 0.0,
) -> Breakdown:
    """Host time a pass exposes: the engine's fixed time per pass, plus its per-request host
    work for `requests` requests on the host of `accelerator_id` (constants.host_s_per_request)
    and `dispatch_s` of ops dispatched one by one (an eager pass: plan/infer/dispatch.py), all
    of it, or under an overlap scheduler only what exceeds the `device_s` seconds the GPU
    spends on the pass."""
    fixed = engine.prefill_overhead_s if prefill else engine.step_overhead_s
    host = host_s_per_request(engine, accelerator_id) * max(requests, 0.0) + dispatch_s
    exposed = max(0.0, host - device_s) if engine.host_overlap else host
    return Breakdown(overhead_s=fixed + exposed)
