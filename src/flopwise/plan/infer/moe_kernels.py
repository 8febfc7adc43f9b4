"""The kernels an engine runs around an MoE layer's expert GEMMs: router, routing, permute, reduce.

An MoE layer on one tensor-parallel rank is two grouped GEMMs over that rank's slice of every
expert, plus a chain of small kernels that every rank runs on **all** the layer's tokens with the
whole hidden size: they are not divided by tensor parallelism, so at TP 8 they weigh eight times
more against the expert GEMMs than at TP 1. Which kernels, and what they move, is the engine's
code, so it is an engine property (``EngineProfile.moe_kernels``) naming one recipe below.

"generic" (vLLM, SGLang, the generic class): a 16-bit router GEMM, a fused top-k softmax, a
permute that writes one row per (token, chosen expert) and a weighted reduce back to one row per
token, three launches (the planner's long-standing recipe, ``constants.MOE_ROUTING_KERNELS``).

"tensorrt-llm": the MoE plugin of the TensorRT-LLM 0.1x engine builds, read from its source:

- ``tensorrt_llm/layers/moe.py`` (MixtureOfExperts.forward): ``routing_input =
  cast(hidden_states, trt.float32)`` and a router ``RowLinear(..., dtype=trt.float32,
  strict_dtype=True)`` ("Routing is sensitive since it conditions what experts are used"): a
  cast kernel (reads 16-bit, writes fp32) and an fp32 GEMM that reads the fp32 copy;
  forward_experts ``quantize(hidden_states, ..., 'fp8')`` in the FP8 recipe: one more kernel.
- ``cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu`` (CutlassMoeFCRunner::runMoe):
  topkGatingSoftmax; ``CubKeyValueSorter::run`` = ``cub::DeviceRadixSort::SortPairs`` over the
  k x tokens (expert, row) pairs (one digit pass: CUB's histogram/upsweep, scan and
  onesweep/downsweep kernels, three); computeTotalRowsBeforeExpert; expandInputRowsKernel
  (copies each token's input row once per chosen expert, in the GEMM input dtype);
  computeStridesHopperKernel before each grouped GEMM on Hopper (two); the grouped GEMMs; the
  activation; finalizeMoeRoutingKernel, which reads the k expert rows of each token in the GEMM
  output dtype (16-bit: ``HopperGemmOutputType`` / T) and writes one 16-bit row.

The gated activation between the two GEMMs is charged with the other elementwise kernels
(``latency._elementwise``), as before. Not modelled: CUB's small temporary buffers (k x tokens
int pairs, a few MB at most) and the gating kernel's tiny I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.errors import unknown
from flopwise.hardware import Hardware
from flopwise.plan.efficiency import HOPPER_OR_NEWER_PREFIXES, KERNEL_LAUNCH_S
from flopwise.plan.infer.constants import MOE_ROUTING_ELEMENT_BYTES, MOE_ROUTING_KERNELS
from flopwise.units import TERA

#: Bytes per element of the fp32 router input TensorRT-LLM casts the hidden states to
#: (tensorrt_llm/layers/moe.py: ``cast(hidden_states, trt.float32)``).
ROUTER_FP32_BYTES = 4.0

#: Kernels of ``cub::DeviceRadixSort::SortPairs`` for the expert ids (log2(experts) + 1 key
#: bits: one digit pass): histogram (upsweep), exclusive scan and onesweep (downsweep).
CUB_RADIX_SORT_KERNELS = 3

#: TensorRT-LLM MoE plugin kernels on every GPU, whatever its generation: the router input cast,
#: topkGatingSoftmax, the radix sort, computeTotalRowsBeforeExpert, expandInputRowsKernel and
#: finalizeMoeRoutingKernel (moe_kernels.cu runMoe). The fp32 router GEMM is priced apart.
TRTLLM_ROUTING_KERNELS = 1 + 1 + CUB_RADIX_SORT_KERNELS + 1 + 1 + 1

#: computeStridesHopperKernel, launched before each of the two grouped GEMMs on Hopper and newer
#: (moe_kernels.cu runMoe, ``if (using_hopper)``).
TRTLLM_HOPPER_STRIDE_KERNELS = 2

#: The quantize kernel of the FP8 recipe (layers/moe.py forward_experts ``quantize(..., 'fp8')``).
TRTLLM_FP8_QUANTIZE_KERNELS = 1

#: Bytes per element of the expert GEMM outputs the finalize kernel reads: 16-bit even when the
#: GEMM inputs are fp8 (moe_kernels.cu: ``HopperGemmOutputType``; fc2_result is T otherwise).
GEMM_OUTPUT_BYTES = 2.0

RECIPES = ("generic", "tensorrt-llm")


@dataclass(frozen=True, slots=True)
class RoutingCost:
    """Time and bytes of the router and routing kernels of one MoE layer on one GPU."""

    memory_s: float  # memory-bound kernels (cast, quantize, permute, reduce, fp32 router)
    compute_s: float  # the part of the fp32 router above its memory time (compute-bound)
    launches: int
    bytes_moved: float

    @property
    def overhead_s(self) -> float:
        return self.launches * KERNEL_LAUNCH_S


def _is_hopper_or_newer(hw: Hardware | None) -> bool:
    acc = hw.accelerator if hw is not None else None
    return acc is not None and acc.id.startswith(HOPPER_OR_NEWER_PREFIXES)


def routing_cost(
    recipe: str,
    tokens: float,
    rows: float,
    hidden: int,
    experts: int,
    act_bytes: float,
    hw: Hardware | None,
    bw_bytes_s: float,
) -> RoutingCost:
    """The routing kernels of one MoE layer: `tokens` tokens enter, `rows` (token, expert) rows
    are computed on this rank. The generic recipe leaves the router GEMM to the caller (it is
    an ordinary GEMM there); the TensorRT-LLM recipe prices its fp32 router here."""
    if recipe == "generic":
        moved = (tokens + rows) * hidden * MOE_ROUTING_ELEMENT_BYTES * 2  # permute + reduce
        return RoutingCost(moved / bw_bytes_s, 0.0, MOE_ROUTING_KERNELS, moved)
    if recipe != "tensorrt-llm":
        raise unknown("MoE kernel recipe", recipe, RECIPES)
    residual = MOE_ROUTING_ELEMENT_BYTES  # the 16-bit hidden states entering the layer
    cast = tokens * hidden * (residual + ROUTER_FP32_BYTES)
    router_read = tokens * hidden * ROUTER_FP32_BYTES
    fp8 = act_bytes < residual
    quantize = tokens * hidden * (residual + act_bytes) if fp8 else 0.0
    expand = 2.0 * rows * hidden * act_bytes  # gather k copies, write them permuted
    finalize = rows * hidden * GEMM_OUTPUT_BYTES + tokens * hidden * residual
    moved = cast + router_read + quantize + expand + finalize
    launches = TRTLLM_ROUTING_KERNELS + 1  # + the fp32 router GEMM
    if fp8:
        launches += TRTLLM_FP8_QUANTIZE_KERNELS
    if _is_hopper_or_newer(hw):
        launches += TRTLLM_HOPPER_STRIDE_KERNELS
    memory = moved / bw_bytes_s
    # the fp32 router GEMM (N = experts) runs on the CUDA cores: its FLOPs are a floor too
    fp32 = hw.peak_tflops.get("fp32") if hw is not None else None
    router_flops_s = 2.0 * tokens * hidden * experts / (fp32 * TERA) if fp32 else 0.0
    router_memory_s = router_read / bw_bytes_s
    return RoutingCost(memory, max(0.0, router_flops_s - router_memory_s), launches, moved)
