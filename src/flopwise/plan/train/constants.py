"""Named constants of the training model: memory terms and what overlaps with what.

Shared efficiency knobs (GEMM ceilings, link fractions, attention kernels) live in
``flopwise.plan.efficiency``. These are the training-only terms. Each is set from physics, a
framework's documented behaviour or a published hardware figure, never from a validation row.
"""

from __future__ import annotations

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


def zero_grad_handling_bytes(reduce_bytes: float, handling: str = "flat") -> float:
    """HBM bytes per unsharded parameter per microbatch ZeRO-2/3 spend before the reduce, by the
    framework's `handling` (frameworks.ZERO_GRAD_HANDLING): "flat" as above; "fsdp2-copy-in"
    reads the 16-bit gradient and writes the reduce input; "in-bucket" pre-scales a 16-bit bucket
    in place (an fp32 one divides in NCCL's premul_sum); "none" (XLA) spends nothing."""
    if handling == "none":
        return 0.0
    if handling == "in-bucket":
        return 2.0 * reduce_bytes if reduce_bytes < 4.0 else 0.0
    if handling == "fsdp2-copy-in":
        return ACT_BYTES + reduce_bytes
    cast = 0.0 if reduce_bytes == ACT_BYTES else ACT_BYTES + reduce_bytes
    return ZERO_GRAD_FLATTEN_BYTES + cast + 2.0 * reduce_bytes


#: Fixed time per optimizer step outside the model: gradient clipping norm, loss scaling,
#: logging, data loader hand-off (Megatron-LM timers show 5-50 ms per iteration).
STEP_FIXED_S = 0.02

#: Memory traffic per logit element for the softmax cross-entropy, forward and backward: write
#: the 16-bit logits, read them and write fp32 (Megatron's vocab-parallel cross-entropy
#: upcasts), read for max/sum/loss, then read and write the gradient. An estimate, the same for
#: every framework: counted op by op, Megatron's unfused loss (core_r0.8.0) moves 52 B and a
#: fused kernel about 6 B; charging those was checked and not shipped (docs/training-planner.md,
#: Validation, tenth round).
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
