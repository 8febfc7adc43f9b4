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

#: Bytes kept per logit element on the last stage: the 16-bit logits plus the fp32 copy the
#: vocab-parallel cross-entropy works on (Korthikanti et al. 2022 §4.3: output layer 4sbv/t).
LOGITS_BYTES_PER_ELEMENT = 6.0

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

#: Fraction of pipeline point-to-point time on the critical path (1F1B sends/receives between
#: dependent stage computations; Narayanan et al. 2021 §4.1).
PP_EXPOSED_FRACTION = 1.0

#: Fixed time per optimizer step outside the model: gradient clipping norm, loss scaling,
#: logging, data loader hand-off (Megatron-LM timers show 5-50 ms per iteration).
STEP_FIXED_S = 0.02

#: Memory traffic per logit element for the softmax cross-entropy, forward and backward: write
#: the 16-bit logits, read them and write fp32 (Megatron's vocab-parallel cross-entropy
#: upcasts), read for max/sum/loss, then read and write the gradient.
CROSS_ENTROPY_TRAFFIC_BYTES = 16.0
