"""What the training model needs from the model, the hardware and the job, computed once.

A search evaluates thousands of layouts; everything that does not depend on the layout (or
depends only on a few of its degrees) is computed here once and cached by those degrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from flopwise.catalog.systems import get_system
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.roofline import Tier, memory_bw_bytes_per_s, tier_for
from flopwise.plan.sustained import power_clock_share, training_compute_fraction
from flopwise.plan.train.muon import muon_recipe
from flopwise.units import GIB
from flopwise.workload.flops import (
    RECOMPUTE_MODES,
    attention_flops_per_token,
    train_flops_per_token,
)
from flopwise.workload.memory_bytes import TrainingRecipe
from flopwise.workload.params import (
    ParamCounts,
    attention_params,
    count_params,
    mlp_params,
    norm_params,
    router_params,
)
from flopwise.workload.spec import ModelSpec

from .constants import MEMORY_HEADROOM_FRACTION
from .fp8_recipes import Fp8Recipe, get_fp8_recipe, runs_block_scaled_mma
from .job import TrainJob
from .layout import zero_shard_gpus
from .lora import AdapterCounts, adapter_counts, check_lora_model
from .pipeline_layout import PipelineLayout, parse_pipeline_layout
from .recipes import resolve_recipe

_ALIBI_OR_LEARNED = ("bloom", "mpt", "gpt2", "opt", "falcon_alibi")


def packed_documents(m: ModelSpec, seq_len: int, document_len: int | None) -> ModelSpec:
    """The model as a job of packed documents runs it (TrainJob.document_len): every layer
    attends within its document only, which is Llama 4's chunked attention with the document as
    the chunk (each query sees the keys of its own chunk up to itself; the kernel is a causal
    kernel over one chunk: workload/flops.py, plan/attention_rate.py). Unchanged without
    documents, or with documents as long as the sequence."""
    if document_len is None or document_len >= seq_len:
        return m
    if m.sliding_layers and m.sliding_window > 0:
        raise FlopwiseError(
            f"--document-len with {m.name}: its local-attention layers inside packed documents "
            "are not modelled"
        )
    return replace(
        m, sliding_window=document_len, sliding_layers=m.layers, local_attention="chunked"
    )


@dataclass(slots=True)
class ModelContext:
    """Layout-independent facts of one (model, hardware, job), plus per-degree caches."""

    model: ModelSpec
    hw: Hardware
    job: TrainJob
    counts: ParamCounts = field(init=False)
    recipe: TrainingRecipe = field(init=False)
    fp8_recipe: Fp8Recipe = field(init=False)  # scaling around FP8 GEMMs (used with fp8 only)
    gpus_per_node: int = field(init=False)
    domain: int = field(init=False)  # GPUs that share the scale-up fabric
    bw_bytes_s: float = field(init=False)  # achievable HBM bandwidth
    peak16_flops: float = field(init=False)
    # dtype the layers' GEMMs run in (fp16 on bf16 units where no fp16 peak; an fp8 recipe's own:
    # NVFP4's is fp4); its dense peak is the MFU denominator
    gemm_dtype: str = field(init=False)
    peak_flops: float = field(init=False)
    capacity_bytes: float | None = field(init=False)
    compute_fraction: float = field(init=False)  # sustained fraction of GEMM/attention rates
    # ... of the layers' GEMMs in gemm_dtype (differs only where a bench sustained run of that
    # dtype, fp8, is stored: plan/sustained.py training_compute_fraction)
    gemm_fraction: float = field(init=False)
    power_factor: float = field(init=False)  # clock share at a reduced power cap
    # how a `bench sustained` measurement entered compute_fraction (None: none did)
    fraction_note: str | None = field(init=False)
    # per-layer parameter counts (whole layer, before any split)
    dense_layer_params: float = field(init=False)
    moe_shared_params: float = field(init=False)  # attention + router + shared experts + norms
    moe_expert_params: float = field(init=False)  # all routed experts of one layer
    n_dense: int = field(init=False)
    n_moe: int = field(init=False)
    attn_fwd_flops_per_token_layer: float = field(init=False)  # causal, executed
    model_flops_per_token: float = field(init=False)
    recompute_flops_per_token: dict[str, float] = field(init=False)
    rope: bool = field(init=False)
    # LoRA (plan/train/lora.py): base weights frozen, adapters of this many parameters per layer
    frozen: bool = field(init=False)
    adapter_params_per_layer: float = field(init=False)
    nf4_params_per_layer: float = field(init=False)  # QLoRA: NF4-stored weights per layer
    expert_adapter_params_per_layer: float = field(init=False)  # LoRA: routed experts' adapters
    adapters: AdapterCounts | None = field(init=False, default=None)
    caches: dict[str, dict[tuple[object, ...], object]] = field(init=False)

    def __post_init__(self) -> None:
        self.model = packed_documents(self.model, self.job.seq_len, self.job.document_len)
        m, hw, job = self.model, self.hw, self.job
        self.counts = count_params(m)
        self.recipe = resolve_recipe(job.recipe_name)
        if job.optimizer == "muon":
            self.recipe = muon_recipe(self.recipe, self.counts)
        self.fp8_recipe = get_fp8_recipe(job.fp8_recipe_name)
        if job.dtype == "fp8" and self.fp8_recipe.needs_block_scaled_mma:
            fp4 = hw.accelerator.spec("peak_fp4_tflops") if hw.accelerator is not None else None
            if not runs_block_scaled_mma(fp4):
                raise FlopwiseError(
                    f"--fp8-recipe {self.fp8_recipe.name} needs tensor cores that apply "
                    f"per-block scales (Blackwell, CDNA4); {hw.id} has none: use current, "
                    "delayed, tensorwise or rowwise"
                )
            vendor = hw.accelerator.vendor.strip().lower() if hw.accelerator else ""
            if self.fp8_recipe.gemm_dtype == "fp4" and vendor != "nvidia":
                # NVFP4 (E4M3 scales per 16 values) is NVIDIA's format; CDNA4 runs MXFP4
                raise FlopwiseError(
                    f"--fp8-recipe {self.fp8_recipe.name} runs on NVIDIA Blackwell tensor "
                    f"cores; {hw.id} has none: use mxfp8"
                )
        gpn = job.gpus_per_node
        if gpn is None and hw.system_id is not None:
            gpn = get_system(hw.system_id).gpus_per_node
        self.gpus_per_node = gpn or max(hw.scaleup_domain, 1)
        self.domain = job.scaleup_domain or max(self.gpus_per_node, hw.scaleup_domain or 1)
        self.bw_bytes_s = memory_bw_bytes_per_s(hw)
        # 16-bit peak for the ops fp8 recipes keep in bf16; an fp32 job runs everything in fp32,
        # an fp16 job on a device without bf16 (V100, T4) in fp16
        p16 = "fp32" if job.dtype == "fp32" else "bf16"
        if job.dtype == "fp16" and "bf16" not in hw.peak_tflops:
            p16 = "fp16"
        self.peak16_flops = hw.peak(p16) * 1e12
        dtype = "bf16" if job.dtype == "fp16" and "fp16" not in hw.peak_tflops else job.dtype
        if job.dtype == "fp8":
            dtype = self.fp8_recipe.gemm_dtype  # NVFP4's GEMMs run at the FP4 peak
        self.gemm_dtype = dtype
        self.peak_flops = hw.peak(dtype) * 1e12
        self.capacity_bytes = hw.memory_bytes
        override = job.sustained_compute_fraction
        # a part capped below the power its die's numbers were measured at clocks lower; a
        # `bench sustained` share of this device (--measured) replaces that assumption
        # (plan/sustained.py training_compute_fraction)
        self.power_factor = power_clock_share(hw)
        self.fraction_note = None
        if override:
            self.compute_fraction = self.gemm_fraction = override * self.power_factor
        else:
            self.compute_fraction, self.fraction_note = training_compute_fraction(hw)
            self.gemm_fraction, gemm_note = training_compute_fraction(hw, dtype)
            if gemm_note != self.fraction_note:
                # an FP8 run prices the FP8 GEMMs, the 16-bit one (if any) the rest
                parts = [] if self.fraction_note is None else [f"16-bit: {self.fraction_note}"]
                parts.append(f"{dtype} GEMMs: {gemm_note}")
                self.fraction_note = "; ".join(parts)
        calibration = hw.step_calibration_moe if m.is_moe else hw.step_calibration
        if calibration:
            # bench step on this device: measured / predicted tokens/s scales every rate the
            # device's own work runs at (GEMMs, attention, memory-bound ops); not the network.
            # A step of an MoE model calibrates MoE plans, a dense one dense plans.
            self.compute_fraction *= calibration
            self.gemm_fraction *= calibration
            self.bw_bytes_s *= calibration
        norms = m.norms_per_layer * norm_params(m, m.hidden)
        attn = attention_params(m)
        self.dense_layer_params = attn + mlp_params(m, m.ffn) + norms
        self.n_moe = m.moe_layers
        self.n_dense = m.layers - self.n_moe
        if m.is_moe:
            one = mlp_params(m, m.expert_ffn, bias=m.expert_bias)
            shared = m.shared_experts * mlp_params(m, m.shared_expert_ffn, bias=False)
            self.moe_shared_params = attn + norms + shared + router_params(m)
            self.moe_expert_params = m.experts * one
        else:
            self.moe_shared_params = self.moe_expert_params = 0.0
        self.attn_fwd_flops_per_token_layer = (
            attention_flops_per_token(m, job.seq_len, "causal") / m.layers
        )
        flops = {
            rc: train_flops_per_token(
                m, job.seq_len, recompute=rc, counts=self.counts, remat_tensors=job.remat_tensors
            )
            for rc in RECOMPUTE_MODES
        }
        self.model_flops_per_token = flops["none"].model
        self.recompute_flops_per_token = {rc: f.recompute for rc, f in flops.items()}
        if job.mtp_layers:
            # each MTP module: one more layer, its h x 2h projection and the shared output
            # head, three passes (the layer re-run with it under full or selective recompute)
            layer = self.counts.layer_matmul_active / m.layers
            mtp_attn = attention_flops_per_token(m, job.seq_len, "full") / m.layers
            module = 2.0 * (layer + 2.0 * m.hidden * m.hidden + self.counts.output_projection)
            self.model_flops_per_token += job.mtp_layers * 3.0 * (module + mtp_attn)
            rc = self.recompute_flops_per_token
            if "full" in rc:
                rc["full"] += job.mtp_layers * (2.0 * layer + mtp_attn)
            if "selective" in rc:
                rc["selective"] += job.mtp_layers * mtp_attn
        if job.recompute_skips_tail and m.ffn and self.n_dense:
            # PyTorch's early stop and a compiled recomputation leave each dense layer's MLP
            # output projection out of a full recompute (frameworks.RECOMPUTE_REPLAY_MODES):
            # the hardware FLOPs count what runs
            self.recompute_flops_per_token["full"] -= 2.0 * m.hidden * m.ffn * self.n_dense
        self.frozen = job.lora_rank > 0
        self.adapter_params_per_layer = self.expert_adapter_params_per_layer = 0.0
        check_lora_model(
            m,
            job.lora_rank,
            job.mtp_layers,
            job.optimizer,
            job.qlora,
            job.dtype,
            job.lora_target_names,
        )
        # QLoRA: the layer linears' weights, stored in NF4 (the rest of a layer: its norms)
        self.nf4_params_per_layer = (
            float(attention_params(m) + mlp_params(m, m.ffn)) if job.qlora else 0.0
        )
        if self.frozen:
            ad = adapter_counts(
                m, job.lora_rank, job.lora_target_names, job.profile.separate_projections
            )
            self.adapters = ad
            # averages over the layers: non-expert adapters, and every routed expert's
            self.adapter_params_per_layer = ad.non_expert_total(self.n_dense, self.n_moe) / m.layers
            self.expert_adapter_params_per_layer = self.n_moe * m.experts * ad.per_expert / m.layers
            # frozen weights (the output head's too) run no weight-gradient GEMM; the adapters a
            # token passes through (its routed experts' only) run three passes of their own
            active = m.layers * self.adapter_params_per_layer
            active += self.n_moe * m.experts_per_token * ad.per_expert
            self.model_flops_per_token -= 2.0 * self.counts.matmul_active
            self.model_flops_per_token += 6.0 * active
        self.rope = m.learned_positions == 0 and m.model_type not in _ALIBI_OR_LEARNED
        self.caches = {}

    @property
    def headroom_bytes(self) -> float:
        """Memory the search leaves free per GPU: the job's headroom, else the default
        fraction of device memory (constants.MEMORY_HEADROOM_FRACTION)."""
        if self.job.memory_headroom_gib is not None:
            return self.job.memory_headroom_gib * GIB
        if self.capacity_bytes is None:
            return 0.0
        return MEMORY_HEADROOM_FRACTION * self.capacity_bytes

    def cache(self, name: str) -> dict[tuple[object, ...], object]:
        c = self.caches.get(name)
        if c is None:
            c = self.caches[name] = {}
        return c

    def tier(self, group: int, extent: int) -> Tier:
        """Network tier of a group of `group` GPUs whose ranks span `extent` consecutive GPUs.

        Across nodes, NCCL runs one ring/tree per NIC rail: the k members of the group that share
        a node each drive their own NIC, so the group's bus bandwidth is k x the per-GPU NIC
        rate (nccl-tests multi-node busbw ~ the node's total NIC bandwidth), capped by the
        scale-up fabric that feeds the rails. The "node" is the scale-up domain: a multi-node
        NVLink domain (GB200/GB300 NVL72) is one node to NCCL, its trays' GPUs reached through
        the P2P transport "like multi-GPU single node systems" (NVIDIA/nccl#1159, MNNVL since
        NCCL 2.20), so all k of the group's members in the rack drive rails, not the four of a
        tray. Where the domain is the node (DGX/HGX) the two counts are the same.
        """
        key = (group, extent)
        cache = self.cache("tier")
        hit = cache.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        spans = extent > self.domain
        try:
            tier = tier_for(self.hw, group, spans_nodes=spans)
        except FlopwiseError:
            if not spans:
                raise
            raise FlopwiseError(
                f"{self.hw.id}: {self.job.gpus} GPUs span nodes of {self.gpus_per_node} and the "
                "scale-out bandwidth is unknown; pass --system ID (a node type: flopwise "
                "catalog systems) or --inter-node-gbps X (assumed per-GPU scale-out GB/s)"
            ) from None
        if spans:
            stride = max(extent // group, 1)
            per_node = max(1, min(group, self.domain // stride))
            inside = tier_for(self.hw, group, spans_nodes=False)
            scaled = replace(tier.scaled(per_node, inside), ranks_per_node=per_node)
            if "all_to_all" not in tier.by_op and group > per_node:
                # an all-to-all has no rings to spread over the node's rails: every rank sends
                # (n - k)/n of its buffer off the node through its own NIC (PXN hands it to the
                # rail's NIC), so its bus bandwidth (nccl-tests: algbw x (n-1)/n) is the per-GPU
                # NIC rate x (n-1)/(n-k), not k x that rate as for the ring collectives. A
                # measured all-to-all keeps its own figure.
                a2a = tier.bw_for("all_to_all") * (group - 1) / (group - per_node)
                scaled = scaled.with_op("all_to_all", min(a2a, inside.bw_for("all_to_all")))
            tier = scaled
        cache[key] = tier
        return tier

    def pipeline(self, pp: int) -> PipelineLayout | None:
        """The job's explicit pipeline layout over `pp` ranks (TrainJob.pipeline_layout); None
        without one, or with one pipeline rank (every layer on it, as without a layout)."""
        if self.job.pipeline_layout is None or pp <= 1:
            return None
        cache = self.cache("pipeline")
        hit = cache.get((pp,))
        if hit is None:
            hit = cache[(pp,)] = parse_pipeline_layout(
                self.job.pipeline_layout, pp, self.layers, self.job.mtp_layers
            )
        return hit  # type: ignore[return-value]

    def mtp_rank(self, pp: int) -> int | None:
        """The pipeline rank that runs the multi-token-prediction modules: the layout's, else
        the last (Megatron-Core builds them in the post-process stage); None without any."""
        if not self.job.mtp_layers:
            return None
        pl = self.pipeline(pp)
        if pl is not None and pl.mtp_rank is not None:
            return pl.mtp_rank
        return max(pp - 1, 0)

    def shard_group(self, tp: int, dp: int, cp: int, hsdp: bool) -> int:
        """GPUs that ZeRO shards the training state over (layout.zero_shard_gpus)."""
        return zero_shard_gpus(tp, dp, cp, hsdp, self.domain)

    @property
    def layers(self) -> int:
        return self.model.layers

    @property
    def tokens_per_step(self) -> int:
        return self.job.tokens_per_step
