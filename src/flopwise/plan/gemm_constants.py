"""Named constants of the GEMM shape model (plan/gemm.py), each with where its value comes from.

None is fitted to a validation row; the published GEMM rows (validate --only matmul) only
score the model built from them.
"""

from __future__ import annotations

#: CTA tile shapes (rows x cols of C) the library chooses from, per GPU family. Hopper (sm90)
#: wgmma kernels in CUTLASS 3 / cuBLAS 12 use 64-row warpgroup tiles: 64x128, 64x256, 128x128,
#: 128x256, 256x128 (CUTLASS docs "CUTLASS 3.x GEMM API", sm90 collective builders; DeepGEMM
#: README: BLOCK_M 64/128). Ampere-class mma.sync kernels (CUTLASS 2 default configurations,
#: and the tile list in cuBLAS's cublasLtMatmulTile_t): 64x64 to 256x128. AMD hipBLASLt
#: macro tiles are of the same sizes.
TILES_HOPPER: tuple[tuple[int, int], ...] = (
    (128, 256),
    (256, 128),
    (128, 128),
    (64, 256),
    (64, 128),
)
TILES_AMPERE: tuple[tuple[int, int], ...] = (
    (128, 256),
    (256, 128),
    (128, 128),
    (128, 64),
    (64, 128),
    (64, 64),
)

#: Row tiles for skinny GEMMs (decode, few tokens per expert): mma.sync's smallest M is 16 and
#: cuBLAS/CUTLASS ship 16/32/64-row tiles for them (cublasLtMatmulTile_t TILE_16x.., 32x..).
SMALL_M_TILES: tuple[int, ...] = (16, 32, 64)

#: The tile at which a CTA's operand reuse is taken to reach the full MAMF rate. A tm x tn tile
#: loads (tm + tn) elements per K step for tm*tn MACs; a smaller tile runs at its reuse
#: tm*tn/(tm+tn) relative to this one's (capped at 1). NVIDIA Matrix Multiplication Background
#: guide §2.3: "larger tiles ... more data reuse"; 128x128 and larger reach the top rates.
REFERENCE_TILE = (128, 128)

#: K elements per main-loop stage of a CTA (CUTLASS sm80/sm90 bf16 kernels use 32-64 and 64-128
#: for fp8); used to count stream-K work units and to keep split-K slices at least
#: SPLIT_K_MIN_STAGES stages long (CUTLASS split-K docs: splitting below a few stages leaves the
#: pipeline no depth).
K_STAGE = 64
SPLIT_K_MIN_STAGES = 8

#: Bytes per accumulator element of the split-K / stream-K partial sums (fp32), written and read
#: back once by the reduction (CUTLASS "split-k serial/parallel" and stream-K fix-up).
PARTIAL_SUM_BYTES = 4

#: Output element bytes per GEMM input dtype: FP8/FP4 GEMMs write BF16 (Transformer Engine,
#: DeepGEMM README "BF16 output"), 16-bit GEMMs write their own dtype, fp32 writes fp32.
OUTPUT_BYTES = {"fp4": 2.0, "fp8": 2.0, "int8": 2.0, "bf16": 2.0, "fp16": 2.0, "fp32": 4.0}

#: Elements per scale factor for block-scaled low-precision GEMMs, and bytes per scale:
#: DeepSeek-V3 / DeepGEMM FP8: 1x128 per activation row and 128x128 per weight block, fp32
#: scales (DeepSeek-V3 report §3.3.2); NVFP4: 16-element blocks with FP8 scales, MXFP8/MXFP4:
#: 32-element blocks with E8M0 scales (OCP Microscaling spec v1.0). Per-tensor scaling
#: (Transformer Engine delayed/current scaling) adds one scalar: nothing to model. The
#: CUDA-core promotion of block-scaled FP8 runs overlapped with the next WGMMA (DeepSeek-V3
#: report §3.3.2), so only the scale bytes are charged.
SCALING_BLOCKS: dict[str, tuple[int, int, int, float]] = {
    # name: (activation elements per scale along K, weight block along K, weight block along N,
    # bytes per scale). DeepSeek's FP8 scales 1x128 activation tiles and 128x128 weight blocks;
    # the microscaling formats scale every 32 (MX) or 16 (NVFP4) consecutive elements along K
    # of every row of both operands.
    "per_tensor": (0, 0, 0, 0.0),
    "block128": (128, 128, 128, 4.0),
    "mxfp8": (32, 32, 1, 1.0),
    "nvfp4": (16, 16, 1, 1.0),
}

GPU_VENDORS = ("nvidia", "amd")

#: GEMM input dtypes whose kernels schedule whole output tiles only, persistent and
#: data-parallel: no split-K, no stream-K, so the tail wave's idle SMs are paid in full. The
#: serving engines' FP4 GEMMs: TensorRT-LLM's SM100 NVFP4 CUTLASS kernel is
#: GemmUniversal<..., cutlass::gemm::PersistentScheduler> in GemmUniversalMode::kGemm
#: (cpp/tensorrt_llm/kernels/cutlass_kernels/fp4_gemm/nvfp4_nvfp4_gemm_template_sm100.h; also
#: FlashInfer's `cutlass` mm_fp4 backend), and vLLM's SM100 NVFP4 and MXFP4 CUTLASS GEMMs use
#: the same scheduler.
DATA_PARALLEL_DTYPES = frozenset({"fp4"})

#: Fixed time inside every GEMM kernel that nothing overlaps: filling the pipeline (the first
#: stage's loads before the first MMA) and draining it (the last tile's store), about two DRAM
#: round trips of ~0.5 us each on H100 (chipsandcheese 2023, "Nvidia's H100: Funny L2, and Tons
#: of Bandwidth": DRAM latency ~ 0.5 us). Launch overhead (KERNEL_LAUNCH_S) comes on top.
KERNEL_FILL_DRAIN_S = 1.0e-6

#: Power of the inverse-distance weights that interpolate measured/modelled ratios between
#: measured shapes (Shepard 1968): 4 keeps the correction local, so a large GEMM follows the
#: large measured shapes and not a slow skinny one two octaves away in every dimension.
SHAPE_INTERPOLATION_POWER = 4

#: Smoothing of the roofline corner between FLOP time and input-read time: near the ridge real
#: kernels fall below both roofs (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)).
#: time = max x (1 + r^p)^(1/p): 1.26x at the ridge, < 2% once one side is 3x the other. The
#: same value as the inference planner's RIDGE_SMOOTHING_P (plan/infer/constants.py).
RIDGE_SMOOTHING_P = 3.0

#: What a grouped GEMM kernel (MoE experts: one launch over every local expert's tokens, each
#: group with its own weights) reaches of the rate the same shapes get as one dense GEMM:
#: applied to the FLOP roof (ceiling x shape efficiency) of every grouped GEMM, in training
#: (plan/train/step_time.py) and serving (plan/infer/latency.py) alike. Fitted, by the rule of
#: the sustained fraction's fit (least mean |log error| on a 0.005 grid), on the ten grouped
#: rows of DeepGEMM's README (H800 FP8, contiguous and masked layouts: matmul_runs.csv
#: `deepgemm_h800_fp8_grouped_*`) against the dense model that meets the same library's dense
#: shapes at M = 4096 within 5%: the grouped kernels ran 2-21% below it (their per-group
#: tile scheduling, per-expert TMA descriptors and, in the masked layout, tiles sized for the
#: largest group). Nothing else is fitted on those rows; their leave-one-out error is reported
#: by `flopwise validate --only matmul` (grouped_fit), and no serving or training row was used.
#: Measured on Hopper only: every device's grouped GEMMs take it (no other device's grouped
#: GEMM is published in the catalog); `flopwise bench matmul` corrects dense shapes only.
GROUPED_GEMM_EFFICIENCY = 0.88
