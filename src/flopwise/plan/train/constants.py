"""Named constants of the training model: memory terms and what overlaps with what.

Shared efficiency knobs (GEMM ceilings, link fractions, attention kernels) live in
``flopwise.plan.efficiency``. These are the training-only terms. Each is set from physics, a
framework's documented behaviour or a published hardware figure, never from a validation row.
"""

from __future__ import annotations

from flopwise.catalog.accelerators import longest_id_prefix
from flopwise.units import GIB

#: Fixed per-GPU memory a training process holds outside tensors: the CUDA context (~0.5 GiB on
#: A100/H100 with lazy module loading), NCCL communicator buffers (NCCL_BUFFSIZE 4 MiB per
#: channel x channels x peers; ~0.5-1 GiB for TP+DP+PP communicators) and cuBLAS/cuDNN
#: workspaces (PyTorch CUDA semantics notes; NCCL environment docs).
FRAMEWORK_FIXED_BYTES = 2.0 * GIB

#: Allocator fragmentation: the PyTorch caching allocator reserves more than it allocates;
#: `reserved/allocated` of 1.05-1.15 is typical for transformer training (PyTorch memory
#: management docs; Megatron-LM reports). Charged on activations and transient buffers.
ALLOCATOR_FRAGMENTATION = 0.10

#: Default memory headroom of the layout search, as a fraction of device memory: the search
#: recommends only layouts whose predicted peak leaves this much free. It covers what the model
#: cannot see: the PyTorch caching allocator's reserved bytes drift between iterations and
#: ranks (torchtitan's own Llama 3.1 8B FSDP rows peak at 82.4 GiB eager and 77.0 GiB compiled
#: for the same layout, a 7% spread), and the memory model's error against published peaks
#: (validate/memory.py, torchtitan rows). 5% is 4.0 GiB on an 80 GB H100.
#: A layout the user fixes completely is judged against the device capacity instead: headroom is
#: a recommendation policy, not a claim that a known-good layout cannot run.
MEMORY_HEADROOM_FRACTION = 0.05

#: Bytes kept per logit element on the last stage: the 16-bit logits plus the fp32 copy the
#: vocab-parallel cross-entropy works on (Korthikanti et al. 2022 §4.3: output layer 4sbv/t).
LOGITS_BYTES_PER_ELEMENT = 6.0

#: Bytes per logit element at the loss of a PyTorch-native trainer (torchtitan train.py
#: loss_fn: cross_entropy(pred.float()); llm-foundry/Composer alike), the FSDP recipes: the
#: fp32 log-softmax output kept for the backward (4), and at the start of the backward the fp32
#: gradients of the log-probabilities and of the upcast logits (4 + 4); the forward peak is
#: lower (16-bit logits 2 + fp32 copy 4 + log-softmax 4 = 10, then torchtitan deletes pred).
TORCH_LOSS_BYTES_PER_ELEMENT = 12.0

#: The same loss as one fused cross-entropy kernel: torch.compile of the loss (torchtitan
#: --training.compile, components/loss.py, at its June 2025 commits) or FlashAttention's Triton
#: CrossEntropyLoss (llm-foundry's default loss_fn: fused_crossentropy): the 16-bit logits and a
#: per-row log-sum-exp are kept for the backward, which writes the 16-bit gradient in one pass:
#: 2 + 2 bytes per element, no fp32 copies.
FUSED_LOSS_BYTES_PER_ELEMENT = 4.0

#: ZeRO-3 / FSDP holds the gathered weights (and their gradients) of this many layers at once:
#: the layer computing and the one being prefetched (PyTorch FSDP forward/backward prefetch).
ZERO3_GATHERED_LAYERS = 2

#: Bytes one 16-bit activation element takes.
ACT_BYTES = 2.0

#: Memory-bound elementwise traffic in backward relative to forward: the backward of a norm,
#: activation or residual reads the saved input and the incoming gradient and writes one
#: gradient (2x the forward's read+write).
MEMORY_BOUND_BWD_FACTOR = 2.0

#: Elementwise reads+writes per token per layer on hidden-sized tensors in the forward pass:
#: two norms (read h, write h) and two residual adds (read 2h, write h) = 10h elements.
HIDDEN_ELEMENTWISE_PER_LAYER = 10.0

#: ... the same where the compiler fuses pointwise ops into the neighbouring matmuls
#: (FrameworkProfile.fused_pointwise, XLA): only the two norms' reductions read h each = 2h;
#: the normalising multiply rides on the next matmul's input, the residual adds on the
#: previous matmul's output, the activation and RoPE on their matmuls.
FUSED_NORM_READS_PER_LAYER = 2.0

#: Optimizer step traffic per parameter the GPU updates: Adam reads grad, master, m, v and writes
#: master, m, v and the 16-bit weight copy. Added to the recipe's bytes (see step_time.py).
ADAM_EXTRA_WRITE_BYTES = 14.0

#: Fraction of the gradient reduction that overlaps with the backward pass of the last
#: microbatch (bucketed reduce-scatter/all-reduce as in PyTorch DDP and Megatron-LM
#: overlap_grad_reduce). What does not fit under that backward is exposed.
DP_OVERLAP_FRACTION = 1.0

#: Fraction of tensor-parallel collectives that stay on the critical path. Megatron-LM's TP
#: all-reduce/reduce-scatter sits between dependent GEMMs; without userbuffer overlap it is
#: fully exposed (Narayanan et al. 2021 §3.3; Korthikanti et al. 2022 §5).
TP_EXPOSED_FRACTION = 1.0

#: With TP communication overlap (Transformer Engine userbuffers: GEMMs split into chunks that
#: pipeline with ring reduce-scatter/all-gather), what stays exposed is the first/last chunk
#: of each ring: about 1/tp of it with a tp-step ring; we charge 1/tp plus the SM share the
#: overlapped collective takes from the GEMMs (OVERLAP_COMPUTE_TAX).

#: Compute time lost per second of communication that runs under compute: NCCL and
#: userbuffer kernels occupy SMs (NCCL uses 16-32 CTAs of 108-132 SMs, ~15-25%) and HBM
#: bandwidth while they overlap GEMMs (NCCL docs NCCL_MAX_CTAS; TE userbuffers use 8-16 SMs).
OVERLAP_COMPUTE_TAX = 0.15

#: Fraction of pipeline point-to-point time on the critical path (1F1B sends/receives between
#: dependent stage computations; Narayanan et al. 2021 §4.1).
PP_EXPOSED_FRACTION = 1.0

#: ZeRO-2/3 (FSDP, DeepSpeed) reduce-scatter the unsharded gradients of every microbatch, and
#: before that they touch them in HBM with memory-bound kernels that compete with the backward
#: GEMMs for SMs and bandwidth (they run on a side stream, but a streaming kernel occupies the
#: SMs for its whole duration): the per-parameter gradients are gathered into one flat
#: gradient (FSDP1 FlatParameter: the views' grads are concatenated, read 2 + write 2 bytes;
#: DeepSpeed copies them into its reduce bucket alike), cast to the reduce dtype when it is
#: not 16-bit (read 2, write 4: FSDP MixedPrecision reduce_dtype=fp32) and divided by the
#: pre-divide factor before the collective (read and write in the reduce dtype: FSDP
#: _div_if_needed; DeepSpeed's gradient averaging). Megatron's ZeRO-0/1 path accumulates
#: wgrad straight into its fp32 main_grad buffer (gradient_accumulation_fusion) and pays none
#: of this. Bytes of the first step; the cast and divide follow from the reduce dtype.
ZERO_GRAD_FLATTEN_BYTES = 4.0


def zero_grad_handling_bytes(reduce_bytes: float) -> float:
    """HBM bytes per unsharded parameter per microbatch ZeRO-2/3 spend before the reduce."""
    cast = 0.0 if reduce_bytes == ACT_BYTES else ACT_BYTES + reduce_bytes
    return ZERO_GRAD_FLATTEN_BYTES + cast + 2.0 * reduce_bytes


#: Fixed time per optimizer step outside the model: gradient clipping norm, loss scaling,
#: logging, data loader hand-off (Megatron-LM timers show 5-50 ms per iteration).
STEP_FIXED_S = 0.02

#: Memory traffic per logit element for the softmax cross-entropy, forward and backward: write
#: the 16-bit logits, read them and write fp32 (Megatron's vocab-parallel cross-entropy
#: upcasts), read for max/sum/loss, then read and write the gradient.
CROSS_ENTROPY_TRAFFIC_BYTES = 16.0

#: Unfused attention (Megatron-LM 2021, BLOOM's Megatron-DeepSpeed): the s x s score tensor
#: goes through HBM. The QK^T and PV batched GEMMs' own reads and writes of it are in their
#: memory roofline; on top, per score element, the forward's fused scale-mask-softmax reads and
#: writes it (4 bytes) and dropout reads it, writes its output and a mask (5) = 9; the backward's
#: dropout (read grad 2 + mask 1, write 2) and softmax (read probs 2 + grad 2, write 2) = 11.
#: Korthikanti et al. 2022 §4.1 lists the same tensors: 2 + 1 + 2 bytes stored per element.
UNFUSED_SCORE_BYTES_FWD = 9.0
UNFUSED_SCORE_BYTES_BWD = 11.0
UNFUSED_SCORE_BYTES_STORED = 5.0

#: Sustained fraction of the MAMF-based GEMM (and attention) rate inside a training step.
#: MAMF is the best rate of one GEMM in a short synchronised loop; in a training step the GPU
#: runs at its power cap for hours (clocks drop), its GEMMs share HBM, L2 and SMs with
#: concurrent NCCL and elementwise kernels, and thousands of kernel launches leave gaps. No
#: published hardware figure isolates this, so it is the one constant FITTED ON THE PUBLISHED
#: RUNS: one number per die (DIE_OF_PREFIX), chosen on a 0.005 grid to minimise the mean
#: absolute log error of every validation row on that die at once (validate/training.py
#: fit_fractions); "default" is the same fit over all rows, used for dies with no runs.
#: What it absorbs: power-capped clocks, launch gaps, SM/HBM sharing with communication, and
#: on dies without a measured matmul ceiling the error of the stand-in one (TPU v5p: its
#: sibling v5e's measured fraction, gemm_ceiling.MAMF_SIBLINGS; others
#: efficiency.GEMM_FRACTION_WITHOUT_MAMF). On TPU v5e, whose XLA matmul rate is measured, the
#: fit is ~1.0 (0.965 with XLA's pointwise fusion priced): MaxText under XLA sustains it (no
#: launch gaps; ICI collectives run on DMA engines, not on the matrix units), where GPU steps
#: keep 0.70-0.81 of their MAMF.
#: Its own out-of-sample error is what `flopwise validate` leads with: every row is
#: predicted with the fraction refitted without the row's source family.
#: Fit data (2026-11-22, 199 rows, GEMMs by shape through plan/gemm.py): ga100 from Megatron-LM 2021, BLOOM, llm-foundry and
#: torchtitan A100 runs; gh100 from NeMo 24.07/long-context, llm-foundry, torchtitan (H100
#: 500 W parts scaled by efficiency.power_clock_factor) and Trainy H200; TPUs from MaxText.
#: Refitted 2026-11-22 with the FP8 recipes (plan/train/fp8_recipes.py) and MaxText's remat policies
#: (workload/remat.py): tpu-v5e 1.11 -> 1.155, tpu-v6e 0.70 -> 0.84, default 0.78 (unchanged
#: after both; 0.775 with the FP8 recipes alone).
#: Refitted 2026-11-23 with measured TPU matmul ceilings in the catalog (v5e 181.8 TFLOPS from
#: the JAX Pallas matmul guide, v6e 689 TFLOPS from a user's shape sweep [U]) instead of
#: peak x GEMM_FRACTION_WITHOUT_MAMF: tpu-v5e 1.155 -> 1.005 (MaxText on v5e sustains its
#: measured XLA matmul rate), tpu-v6e 0.84 -> 0.885; v5p has no published matmul figure and
#: keeps 0.965 of the assumed ceiling. Refitted again with collectives timed by NCCL's own
#: tuner latencies (plan/nccl_latency.py) and sharded data parallelism moving one block per
#: collective: ga100 0.81 -> 0.80, tpu-v5e 1.005 -> 1.01, tpu-v6e 0.885 -> 0.89.
#: Refitted 2026-11-23 with GH100 attention rates measured by sequence length on an H100
#: (efficiency.GH100_ATTENTION) instead of the papers' constant fractions: the backward at 2-4k
#: tokens is slower than the 0.50 assumed, and gh100 0.70 -> 0.73 takes it back on the GEMMs;
#: default (all rows) 0.78 -> 0.79.
#: Refitted 2026-11-23 with NeMo's B200 long-sequence table posed on its stated layouts (eight
#: rows; validate/train_rows.py GPUS_FROM_LAYOUT_PREFIXES): no B200 die is fitted (its rows use
#: the default, in sample as out of sample), default 0.79 -> 0.785; every die unchanged.
#: Refitted again with the MaxText tier table's Llama 2 70B and Llama 3.1 8B rows on v6e posed
#: from their tpu-recipes layouts (validate/train_remat.py MAXTEXT_RECIPE_LAYOUTS): tpu-v6e
#: 0.89 -> 0.835 (four rows, three within 6% at 0.835; the 405B row, over v6e's memory as
#: posed, stays 40% optimistic).
#: Refitted 2026-11-23 (third round) with MaxText's pointwise work fused into its matmuls as
#: XLA compiles it (FrameworkProfile.fused_pointwise: only the norms' reductions touch HBM):
#: the TPU fractions no longer absorb the GPUs' separate elementwise kernels: tpu-v5e
#: 1.01 -> 0.965, tpu-v5p 0.965 -> 0.945, tpu-v6e 0.835 -> 0.745; GPU dies and default unchanged.
#: Refitted again with TPU v5p's matmul ceiling taken from v5e's measured XLA rate (same
#: 128x128 MXUs, gemm_ceiling.MAMF_SIBLINGS: 0.923 of peak instead of the NVIDIA-median 0.80):
#: tpu-v5p 0.945 -> 0.825, the same product of ceiling and fraction on its own rows.
#: Refitted again with Transformer Engine's norm and activation writing the FP8 inputs of the
#: QKV/FC1/FC2 GEMMs themselves (Megatron-Core and NeMo: FrameworkProfile.te_layernorm_modules,
#: fp8_recipes.PRODUCER_FP8_CAST_BYTES): NeMo's FP8 rows get 0.3-1.3% faster; default (all rows,
#: B200's eight among them) 0.785 -> 0.78; every die unchanged.
#: Refitted 2026-11-24 with block recompute (Layout.recompute_layers): torchtitan's per-layer
#: selective AC rows posed as every 2nd layer fully recomputed, as torchtitan runs it, instead of
#: Megatron's attention-only selective recompute (+8.3%/+12.2% -> -0.4%/-0.1%): ga100
#: 0.80 -> 0.81, default 0.78 -> 0.785; the other dies unchanged.
SUSTAINED_COMPUTE_FRACTION_DEFAULT = 0.785
SUSTAINED_COMPUTE_FRACTION: dict[str, float] = {
    "ga100": 0.81,
    "gh100": 0.73,
    "tpu-v5e": 0.965,
    "tpu-v5p": 0.825,
    "tpu-v6e": 0.745,
}

#: Die of each accelerator-id prefix: the unit the fraction is fitted per. A part of the same
#: die run at a lower power cap (Meta's Grand Teton H100 at 500 W) shares its die's fraction
#: and is slowed by efficiency.power_clock_factor.
DIE_OF_PREFIX: dict[str, str] = {
    "a100": "ga100",
    "h100": "gh100",
    "h200": "gh100",
    "h800": "gh100",
    "gh200": "gh100",
    "tpu-v5e": "tpu-v5e",
    "tpu-v5p": "tpu-v5p",
    "tpu-v6e": "tpu-v6e",
}


def fraction_group(accelerator_id: str) -> str:
    """The die whose fitted fraction applies to an accelerator id, or "default"."""
    best = longest_id_prefix(accelerator_id, DIE_OF_PREFIX)
    return DIE_OF_PREFIX[best] if best else "default"


def sustained_compute_fraction(accelerator_id: str) -> float:
    """The sustained-compute fraction for an accelerator id (its die's, else the default)."""
    return SUSTAINED_COMPUTE_FRACTION.get(
        fraction_group(accelerator_id), SUSTAINED_COMPUTE_FRACTION_DEFAULT
    )


def has_calibrated_compute_fraction(accelerator_id: str) -> bool:
    """Whether published runs calibrated this accelerator's die (else the default is used)."""
    return fraction_group(accelerator_id) in SUSTAINED_COMPUTE_FRACTION
