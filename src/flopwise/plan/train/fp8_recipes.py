"""FP8 training recipes: what scaling costs around every FP8 GEMM, from what the library does.

An FP8 linear layer runs three GEMMs (forward ``input @ weight``, data gradient
``grad_output @ weight``, weight gradient ``input^T @ grad_output``), and each of their inputs is
first cast from 16-bit to FP8 with a scale: a max-abs (amax) reduction over the tensor, then a
cast kernel writing the FP8 copy and, because Hopper's FP8 tensor cores take both operands
K-major, the transposed copy the backward GEMMs need. Those kernels are memory-bound: their
bytes move at the achievable HBM bandwidth. How many bytes per element, which kernels, and what
else changes (the GEMM kernel, the tensor-parallel all-gather dtype) is the recipe's:

- **tensorwise** (torchao ``Float8LinearConfig()``; torchtitan's default float8 recipe): one
  dynamic scale per tensor. Inputs and output gradients: an amax pass (read 2 B/element; under
  torch.compile it fuses into the kernel that produced the tensor) and one cast kernel reading
  2 B and writing FP8 row-major and column-major (1 + 1 B). Weights are cast on the FSDP shard
  before a float8 all-gather, once per gather (not charged: 1/shard of the weight); FSDP
  gathers those weights in FP8 (torchao's tensorwise "with float8 all-gather" benchmark
  setting; torchtitan docs/float8.md's tensorwise command line). Under
  tensor parallelism the sequence-parallel all-gathers carry FP8 (torchtitan docs/float8.md:
  "float8 all-gather ... for TP by default for Float8Linear"), so activations are cast on the
  local shard before the gather.
- **rowwise** (torchao ``from_recipe_name("rowwise")``): one scale per row, along the GEMM's
  K dimension, so the weight-gradient GEMM needs its inputs scaled along the other axis: each
  activation/gradient is cast twice (kernel 1 reads 2 B, writes FP8 1 B and a 16-bit transposed
  copy 2 B; kernel 2 reads that 2 B and writes FP8 1 B: 8 B/element, 6 with the first read fused
  into the producer); weights likewise after a 16-bit all-gather (3 + 4 + 3 = 10 B/element,
  every microbatch). The forward GEMM runs PyTorch's CUTLASS row-wise kernel
  (ROWWISE_GEMM_FRACTION of the cuBLAS tensor-wise rate); the backward GEMMs, which torchao runs
  without fast accumulation, use the cuBLAS tensor-wise kernel and rescale the 16-bit output in
  a separate kernel (read and write 2 B per output element; torchao float8_ops.py
  addmm_float8_unwrapped, pytorch/ao#2184). Tensor-parallel all-gathers stay 16-bit and the
  casts run on the gathered tensor (float8 all-gather for rowwise never landed: pytorch/ao#2145);
  async-TP fuses no all-gather with a row-wise-scaled matmul (pytorch/pytorch#149990); FSDP
  gathers 16-bit weights (torchtitan docs/float8.md: "For float8 with rowwise scaling, all
  distributed communication is done in high precision").
- **rowwise-gw-hp** (torchao ``rowwise_with_gw_hp``): row-wise forward and data gradient, the
  weight gradient in 16-bit: one FP8 cast per activation/gradient (read 2, write 1), weights
  cast twice (forward row-wise, backward tensor-wise: 3 + 3 B).
- **delayed** (Transformer Engine ``DelayedScaling``, Megatron-Core's and NeMo's default
  ``fp8_recipe``): the scale comes from the amax history, so one fused cast-transpose kernel
  reads 2 B and writes 1 + 1 B, recording the amax as it goes (TE docs: delayed scaling
  "reduces tensor reads per quantization from two to one"). Weights are cast once per step;
  sequence-parallel all-gathers carry the FP8 copy (TE LayerNormLinear gathers its FP8 norm
  output).
- **current** (Transformer Engine ``Float8CurrentScaling``): as delayed plus the amax pass
  (read 2 B) that current scaling needs before the cast.
- **mxfp8** (Transformer Engine ``MXFP8BlockScaling``, Blackwell's training recipe in the
  Megatron-Bridge tables as "FP8-MX"): E4M3 values with one E8M0 scale per 32 consecutive
  values along K, which Blackwell's tensor cores apply inside the MMA (block-scaled MMA), so the
  GEMMs run at the FP8 rate. The blocks lie along K, so the weight-gradient GEMM needs the other
  orientation: one quantize kernel reads 2 B and writes the row-wise and column-wise FP8 copies
  (1 + 1 B) with their scales (2 x 1/32 B), the block maxima taken inside it (no amax pass).
  Weights are quantized once per step; sequence-parallel all-gathers carry the MXFP8 data and
  scales. Only devices with block-scaled tensor cores run it (those with an FP4 peak in the
  catalog: Blackwell, CDNA4); elsewhere the plan is refused.
- **nvfp4** (Transformer Engine ``NVFP4BlockScaling``; Megatron-Bridge ``bf16_with_nvfp4_mixed``,
  the tables' "NVFP4"): the recipe of NVIDIA's NVFP4 pre-training paper (arXiv:2509.25149) as
  Transformer Engine runs it: E2M1 values (half a byte) with an E4M3 scale per 16 values and an
  FP32 scale per tensor, so every quantization first reduces the tensor's amax (read 2 B);
  weights in 16x16 blocks (one layout serves the forward and the data gradient), activations and
  gradients in 1x16 blocks along K for the forward and data-gradient GEMMs, and for the
  weight-gradient GEMM a 16x16 random Hadamard transform followed by quantization along the
  other axis (pytorch/ao#3293's summary of the paper's recipe; TransformerEngine#2270's recipe
  flags: stochastic rounding, RHT and 2D quantization on by default). Charged: the amax pass,
  then two quantize kernels, row-wise and Hadamard-transformed column-wise, each reading 2 B and
  writing 0.5 B plus a scale byte per 16 values. All three GEMMs run NVFP4 at the device's FP4
  rate (block-scaled MMA: Blackwell only). Sequence-parallel all-gathers are taken in 16 bits:
  the per-tensor scale needs the gathered tensor's amax, and no source read here says TE gathers
  NVFP4 (an assumption, conservative). Megatron-Bridge's recipe keeps no layer in 16 bits
  (``first_last_layers_bf16`` is set only for its Nemotron 3 Super variant).

Byte counts for the torchao recipes follow torchao's own roofline accounting
(torchao/testing/float8/roofline_utils.py ``get_tensor_memory_traffic_ovhd_s`` at pytorch/ao
03c850a, June 2025), with ``fuse_with_prev`` true inside a compiled model (torchao docs: float8
needs torch.compile "for competitive performance") and false for a stand-alone linear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from flopwise.errors import FlopwiseError

#: Values sharing one E8M0 scale in the OCP microscaling (MX) formats.
MXFP8_BLOCK = 32

#: Values sharing one E4M3 scale in NVFP4 (besides the tensor's FP32 scale).
NVFP4_BLOCK = 16

#: Bytes per element of a 16-bit tensor, of its FP8 copy and of its FP4 (E2M1) copy.
_B16 = 2.0
_B8 = 1.0
_B4 = 0.5
BF16_BYTES = _B16
FP8_BYTES = _B8

#: Rate of PyTorch's CUTLASS row-wise-scaled FP8 GEMM (fast accumulation) relative to the cuBLAS
#: tensor-wise GEMM on H100: "most shapes are within 90-100% of tensor-wise efficiency, but
#: there's a long tail going down to 50%" (pytorch/pytorch#147971, Feb 2025, over a sweep of
#: M, N, K); the midpoint of the stated bulk, 0.95, is taken.
ROWWISE_GEMM_FRACTION = 0.95


@dataclass(frozen=True, kw_only=True, slots=True)
class Fp8Recipe:
    """What one FP8 scaling recipe does around every FP8 linear layer."""

    name: str
    library: str
    summary: str
    # bytes per element of an activation or output gradient cast for the GEMMs, excluding the
    # amax read; amax_read_bytes is added unless the read fuses into the producing kernel
    act_cast_bytes: float
    amax_read_bytes: float
    amax_fuses_with_producer: bool
    # bytes per weight element cast each microbatch (0: cast on the FSDP shard / once per step)
    weight_cast_bytes: float
    # cast kernels per activation/gradient and per weight (each pays a launch)
    act_cast_kernels: int
    weight_cast_kernels: int
    # activations cast on the local sequence-parallel shard, then all-gathered in FP8;
    # False: all-gathered in 16-bit and cast on the gathered tensor
    fp8_tp_all_gather: bool
    # async-TP fuses the all-gather with the consuming matmul
    async_tp_fuses_all_gather: bool
    # FSDP/ZeRO-3 gathers the linear weights in FP8, cast on the shard (torchao
    # enable_fsdp_float8_all_gather); False: 16-bit gathers
    fp8_fsdp_all_gather: bool
    fwd_gemm_fraction: float  # rate of the forward GEMM relative to a tensor-wise FP8 GEMM
    dgrad_gemm_fraction: float
    wgrad_dtype: str  # "fp8", or "bf16" when the weight gradient stays 16-bit
    # the backward GEMMs' 16-bit outputs are rescaled by a separate kernel (read + write)
    bwd_output_rescale: bool
    # the norm before the QKV and FC1 projections and the activation before FC2 write the FP8
    # copy themselves (Transformer Engine LayerNormLinear / LayerNormMLP): those inputs cost
    # PRODUCER_FP8_CAST_BYTES instead of a cast-transpose kernel
    producer_writes_fp8: bool = False
    # the recipe's GEMMs need tensor cores that apply per-block scales (MX formats: Blackwell,
    # CDNA4); a device without them cannot run it
    needs_block_scaled_mma: bool = False
    # the dtype the recipe's GEMMs run in ("fp4": NVFP4 on the FP4 tensor cores)
    gemm_dtype: str = "fp8"
    sources: tuple[str, ...] = ()

    def act_bytes(self, fused: bool) -> float:
        """Bytes per element to make one activation/gradient ready for its GEMMs."""
        amax = 0.0 if fused and self.amax_fuses_with_producer else self.amax_read_bytes
        return self.act_cast_bytes + amax

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "library": self.library,
            "summary": self.summary,
            "act_cast_bytes": self.act_cast_bytes,
            "amax_read_bytes": self.amax_read_bytes,
            "weight_cast_bytes": self.weight_cast_bytes,
            "fp8_tp_all_gather": self.fp8_tp_all_gather,
            "fp8_fsdp_all_gather": self.fp8_fsdp_all_gather,
            "fwd_gemm_fraction": self.fwd_gemm_fraction,
            "wgrad_dtype": self.wgrad_dtype,
            "bwd_output_rescale": self.bwd_output_rescale,
            "producer_writes_fp8": self.producer_writes_fp8,
            "needs_block_scaled_mma": self.needs_block_scaled_mma,
            "gemm_dtype": self.gemm_dtype,
            "sources": list(self.sources),
        }


#: Bytes per element an FP8 GEMM input costs when the kernel that produces it writes FP8
#: (Transformer Engine: ``_apply_normalization`` writes ``ln_out`` as uint8 FP8 in
#: LayerNormLinear, ``activation_func(fc1_out, fp8_meta, GEMM2_INPUT, ...)`` in LayerNormMLP):
#: the transposed copy the weight-gradient GEMM needs (``fp8_transpose``: read 1 B, write
#: 1 B), less the byte the producer no longer writes (FP8 instead of the 16-bit output the
#: elementwise model charges) = 1 B, where a separate cast-transpose reads 2 B and writes 2 B.
PRODUCER_FP8_CAST_BYTES = 1.0

_TORCHAO_ROOFLINE = (
    "pytorch/ao torchao/testing/float8/roofline_utils.py get_tensor_memory_traffic_ovhd_s "
    "(commit 03c850a, June 2025)"
)


def _te_recipe(
    *,
    name: str,
    summary: str,
    act_cast_bytes: float,
    amax_read_bytes: float,
    amax_fuses_with_producer: bool,
    act_cast_kernels: int,
    sources: tuple[str, ...],
    producer_writes_fp8: bool = False,
    needs_block_scaled_mma: bool = False,
    gemm_dtype: str = "fp8",
    low_precision_tp_all_gather: bool = True,
) -> Fp8Recipe:
    """A Transformer Engine recipe: weights quantized once per step (is_first_microbatch
    caching), FP8 sequence-parallel all-gathers that the userbuffers overlap fuses, 16-bit
    FSDP gathers, every GEMM at the FP8 rate with an FP8 weight gradient; what differs between
    TE's recipes is how an activation is quantized."""
    return Fp8Recipe(
        name=name,
        library="transformer-engine",
        summary=summary,
        act_cast_bytes=act_cast_bytes,
        amax_read_bytes=amax_read_bytes,
        amax_fuses_with_producer=amax_fuses_with_producer,
        weight_cast_bytes=0.0,
        act_cast_kernels=act_cast_kernels,
        weight_cast_kernels=0,
        fp8_tp_all_gather=low_precision_tp_all_gather,
        async_tp_fuses_all_gather=True,
        fp8_fsdp_all_gather=False,
        fwd_gemm_fraction=1.0,
        dgrad_gemm_fraction=1.0,
        wgrad_dtype=gemm_dtype,
        bwd_output_rescale=False,
        producer_writes_fp8=producer_writes_fp8,
        needs_block_scaled_mma=needs_block_scaled_mma,
        gemm_dtype=gemm_dtype,
        sources=sources,
    )


_RECIPES: tuple[Fp8Recipe, ...] = (
    Fp8Recipe(
        name="tensorwise",
        library="torchao",
        summary="torchao dynamic tensor-wise scaling with float8 all-gather (torchtitan's "
        "default float8 recipe)",
        act_cast_bytes=_B16 + 2 * _B8,
        amax_read_bytes=_B16,
        amax_fuses_with_producer=True,
        weight_cast_bytes=0.0,
        act_cast_kernels=2,  # amax (two-stage reduction counted as one) + cast
        weight_cast_kernels=0,
        fp8_tp_all_gather=True,
        async_tp_fuses_all_gather=True,
        fp8_fsdp_all_gather=True,
        fwd_gemm_fraction=1.0,
        dgrad_gemm_fraction=1.0,
        wgrad_dtype="fp8",
        bwd_output_rescale=False,
        sources=(
            _TORCHAO_ROOFLINE,
            "pytorch/torchtitan docs/float8.md: float8 all-gather for FSDP and, by default, TP",
        ),
    ),
    Fp8Recipe(
        name="rowwise",
        library="torchao",
        summary="torchao row-wise (axis-wise) scaling, power-of-2 scales, 16-bit all-gathers",
        act_cast_bytes=(_B8 + _B16) + (_B16 + _B8),
        amax_read_bytes=_B16,
        amax_fuses_with_producer=True,
        weight_cast_bytes=(_B16 + _B8) + 2 * _B16 + (_B16 + _B8),
        act_cast_kernels=2,
        weight_cast_kernels=3,
        fp8_tp_all_gather=False,
        async_tp_fuses_all_gather=False,
        fp8_fsdp_all_gather=False,
        fwd_gemm_fraction=ROWWISE_GEMM_FRACTION,
        dgrad_gemm_fraction=1.0,
        wgrad_dtype="fp8",
        bwd_output_rescale=True,
        sources=(
            _TORCHAO_ROOFLINE,
            "pytorch/ao torchao/float8/float8_ops.py addmm_float8_unwrapped: backward GEMMs "
            "(use_fast_accum=False) run tensor-wise cuBLAS and rescale the output; ao#2184",
            "pytorch/pytorch#147971 (row-wise GEMM rate); pytorch/pytorch#149990 (async-TP "
            "all-gather-matmul not fused with row-wise scales); pytorch/ao#2145 (no float8 "
            "all-gather for rowwise)",
        ),
    ),
    Fp8Recipe(
        name="rowwise-gw-hp",
        library="torchao",
        summary="torchao rowwise_with_gw_hp: row-wise forward and data gradient, 16-bit "
        "weight gradient",
        act_cast_bytes=_B8,
        amax_read_bytes=_B16,
        amax_fuses_with_producer=True,
        weight_cast_bytes=2 * (_B16 + _B8),
        act_cast_kernels=1,
        weight_cast_kernels=2,
        fp8_tp_all_gather=False,
        async_tp_fuses_all_gather=False,
        fp8_fsdp_all_gather=False,
        fwd_gemm_fraction=ROWWISE_GEMM_FRACTION,
        dgrad_gemm_fraction=ROWWISE_GEMM_FRACTION,
        wgrad_dtype="bf16",
        bwd_output_rescale=False,
        sources=(_TORCHAO_ROOFLINE,),
    ),
    _te_recipe(
        name="delayed",
        summary="Transformer Engine DelayedScaling: scale from the amax history, one fused "
        "cast-transpose per tensor (Megatron-Core and NeMo default)",
        act_cast_bytes=_B16 + 2 * _B8,
        amax_read_bytes=0.0,
        amax_fuses_with_producer=True,
        act_cast_kernels=1,
        producer_writes_fp8=True,
        sources=(
            "NVIDIA TransformerEngine docs, FP8 Delayed Scaling: one tensor read per "
            "quantization instead of two (TransformerEngine#2343)",
            "Megatron-LM --fp8-recipe default 'delayed'; NeMo MegatronMixedPrecision "
            "fp8_recipe default 'delayed'",
            "TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py (2024): the "
            "norm writes its output in FP8 and sequence parallelism all-gathers it in FP8",
            "TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py (2024): "
            "activation_func(fc1_out, fp8_meta, GEMM2_INPUT, ...) writes FC2's input in FP8; "
            "the backward takes fp8_transpose of both for the weight gradients",
        ),
    ),
    _te_recipe(
        name="current",
        summary="Transformer Engine Float8CurrentScaling: an amax pass, then the fused "
        "cast-transpose",
        act_cast_bytes=_B16 + 2 * _B8,
        amax_read_bytes=_B16,
        amax_fuses_with_producer=False,
        act_cast_kernels=2,
        sources=(
            "NVIDIA TransformerEngine docs, FP8 Current Scaling: the amax of the tensor is "
            "computed before it is quantized (two reads per quantization)",
        ),
    ),
    _te_recipe(
        name="mxfp8",
        summary="Transformer Engine MXFP8BlockScaling (Blackwell): an E8M0 scale per 32 values "
        "along K, applied by the tensor cores; one kernel writes row- and column-wise copies",
        act_cast_bytes=_B16 + 2 * _B8 + 2 * _B8 / MXFP8_BLOCK,
        amax_read_bytes=0.0,
        amax_fuses_with_producer=True,
        act_cast_kernels=1,
        needs_block_scaled_mma=True,
        sources=(
            "NVIDIA TransformerEngine docs, low_precision_training/mxfp8: E4M3 with an E8M0 "
            "scale per 32 consecutive values, one-dimensional blocks, native on Blackwell "
            "(SM 10.0+)",
            "TransformerEngine MXFP8 tensors carry row-wise and column-wise data and scales "
            "(NVTETensorFromMXFP8Tensor: rowwise_usage / columnwise_usage); "
            "transformer_engine/pytorch/distributed.py gather_along_first_dim all-gathers "
            "MXFP8 data with its scales",
            "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md: 'FP8-MX' runs on "
            "B200/GB200/GB300 with 32x32-element granularity",
        ),
    ),
    _te_recipe(
        name="nvfp4",
        summary="Transformer Engine NVFP4BlockScaling (Blackwell): E2M1 with an E4M3 scale per "
        "16 values and an FP32 scale per tensor; 16x16 weight blocks, a Hadamard transform "
        "before the weight-gradient quantization; every GEMM at the FP4 rate",
        act_cast_bytes=2 * _B16 + 2 * (_B4 + _B8 / NVFP4_BLOCK),
        amax_read_bytes=_B16,
        amax_fuses_with_producer=False,
        act_cast_kernels=3,
        needs_block_scaled_mma=True,
        gemm_dtype="fp4",
        low_precision_tp_all_gather=False,
        sources=(
            "Abecassis et al., Pretraining Large Language Models with NVFP4 (NVIDIA, "
            "arXiv:2509.25149): 16x16 weight blocks, 1x16 activation/gradient blocks, random "
            "Hadamard transforms on the weight-gradient inputs, stochastic rounding of gradients",
            "pytorch/ao#3293 (NVFP4 training tracker): per-GEMM quantization layouts of that "
            "recipe (1x16 @ 16x16 forward and data gradient, RHT then 1x16 @ 16x1 weight "
            "gradient)",
            "NVIDIA/TransformerEngine#2270: NVFP4 recipe flags for stochastic rounding, RHT and "
            "2D quantization (on by default)",
            "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/mixed_precision.py "
            "bf16_with_nvfp4_mixed: fp4='e2m1', fp4_recipe='nvfp4', no layer kept in bf16",
        ),
    ),
)

FP8_RECIPES: Mapping[str, Fp8Recipe] = MappingProxyType({r.name: r for r in _RECIPES})
FP8_RECIPE_NAMES: tuple[str, ...] = tuple(FP8_RECIPES)


def runs_block_scaled_mma(peak_fp4_tflops: float | None) -> bool:
    """Whether a device's tensor cores apply per-block (MX) scales: the catalog gives such
    devices an FP4 peak (NVIDIA Blackwell, AMD CDNA4), the same generation that added
    block-scaled MMA; Hopper, Ampere and CDNA3 have none."""
    return bool(peak_fp4_tflops)


def get_fp8_recipe(name: str) -> Fp8Recipe:
    """The recipe called `name`, or a one-line error naming the valid ones."""
    r = FP8_RECIPES.get(name)
    if r is None:
        raise FlopwiseError(f"fp8 recipe {name!r} is not one of {', '.join(FP8_RECIPE_NAMES)}")
    return r
