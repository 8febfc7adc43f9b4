"""Named efficiency constants shared by every planner, each with where its value comes from.

These are the few knobs of the performance model. They are fitted to physics and published
hardware figures (MAMF, STREAM, nccl-tests), never to individual training or inference rows, and
every one is overridden by a measurement when the results store has one.
"""

from __future__ import annotations

import itertools
import math

#: Achievable fraction of dense peak for large GEMMs when no MAMF (published or measured) is
#: known. Published bf16 MAMF/peak (stas00/ml-engineering compute/accelerator/README.md):
#: A100 86.9%, H100 80.3%, B200 77.6%, MI300X 51.4%; NVIDIA median ~0.80.
GEMM_FRACTION_WITHOUT_MAMF = 0.80

#: GEMM tile edge (elements) used for tile and wave quantization: CUTLASS/cuBLAS pick 128x128 or
#: 128x256 CTA tiles for large bf16 GEMMs (NVIDIA "Matrix Multiplication Background User's Guide").
GEMM_TILE = 128

#: Fixed cost of launching one kernel, seconds (CUDA launch latency is 2-5 us; NVIDIA CUDA
#: best-practices guide). Matters only for small decode-time kernels.
KERNEL_LAUNCH_S = 4e-6

#: Achievable fraction of peak HBM bandwidth for streaming kernels when none was measured.
#: BabelStream/STREAM triad on A100-80GB reaches ~1.7-1.8 of 2.04 TB/s and on H100 SXM ~3.0 of
#: 3.35 TB/s (~0.85-0.9); we use 0.85.
MEMORY_BW_FRACTION = 0.85

#: Achievable fraction of link bandwidth for large collectives (busbw / link rate). nccl-tests
#: all_reduce busbw: DGX-A100 ~230 of 300 GB/s NVLink (0.77), DGX-H100 ~360-480 of 450 GB/s
#: with NVLS; InfiniBand NDR 400 Gb/s reaches ~45-48 GB/s of 50 (0.9-0.96). 0.80 for
#: scale-up, 0.90 for scale-out.
SCALEUP_LINK_FRACTION = 0.80
SCALEOUT_LINK_FRACTION = 0.90

#: Scale-up links that carry less of their spec rate than NVLink, by accelerator-id prefix.
#: The collective libraries' own topology models give the usable rate per link: NCCL takes
#: NVLink at 20.0 of 25 GB/s per link on A100 and 40.1 of 50 on Blackwell (src/graph/topo.h
#: SM80_NVLINK_BW, SM100_NVLINK_BW; 20.6 on H100), the 0.80 above; RCCL takes an MI300-class
#: (gfx94: MI300X, MI300A, MI325X) xGMI link at 48 of its 64 GB/s per direction, "after protocol
#: and error correction overheads" (RCCL maintainers, ROCm/rccl#1210; ROCm blog "Understanding
#: RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", 2025-03-02: "approximately
#: 48 GB/s per link ... about 75% of the theoretical peak"). Set from those sources, not from
#: any serving or training row; a measured busbw (bench comms) replaces it.
SCALEUP_LINK_FRACTION_BY_PREFIX: dict[str, float] = {
    "mi300x": 0.75,
    "mi300a": 0.75,
    "mi325x": 0.75,
}


#: Where each usable link fraction comes from, in words (plans print it beside the busbw).
SCALEUP_LINK_BASIS_DEFAULT = "NCCL's usable NVLink rate, 20.0 of 25 GB/s per link"
SCALEUP_LINK_BASIS_BY_PREFIX: dict[str, str] = {
    prefix: "RCCL's usable xGMI rate, 48 of 64 GB/s per link"
    for prefix in SCALEUP_LINK_FRACTION_BY_PREFIX
}


def scaleup_link_fraction(accelerator_id: str) -> float:
    """Achievable fraction of an accelerator's catalog scale-up link rate for large
    collectives (SCALEUP_LINK_FRACTION_BY_PREFIX, else SCALEUP_LINK_FRACTION)."""
    return scaleup_link_basis(accelerator_id)[0]


def scaleup_link_basis(accelerator_id: str) -> tuple[float, str]:
    """(usable fraction of the scale-up link rate, where it comes from) for an accelerator."""
    from flopwise.catalog.accelerators import longest_id_prefix

    best = longest_id_prefix(accelerator_id, SCALEUP_LINK_FRACTION_BY_PREFIX)
    if best:
        return SCALEUP_LINK_FRACTION_BY_PREFIX[best], SCALEUP_LINK_BASIS_BY_PREFIX[best]
    return SCALEUP_LINK_FRACTION, SCALEUP_LINK_BASIS_DEFAULT


#: Per-step latency (alpha) of a collective, seconds, on devices whose collectives are not
#: NCCL/RCCL (TPU ICI, Gaudi RoCE, gloo): NCCL and RCCL groups use NCCL's own tuner latencies
#: (plan/nccl_latency.py). NCCL small-message all_reduce latency is ~10 us inside an NVLink
#: node and ~20-30 us across InfiniBand nodes (nccl-tests, 8 B rows).
SCALEUP_ALPHA_S = 10e-6
SCALEOUT_ALPHA_S = 25e-6

#: FlashAttention-style fused attention, achievable fraction of the dense 16-bit peak for the
#: causal attention core (QK^T, softmax, PV), forward and backward. FlashAttention-2 (Dao 2023,
#: arXiv:2307.08691 §4.1) reaches "up to 73% of the theoretical maximum FLOPs/s" forward and
#: "up to 63%" backward on A100; FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608) reaches
#: 740 TFLOPS = 75% of H100 peak forward, and its backward runs 1.5-1.75x FA2's. Causal
#: masking and head_dim 128 at 2-8K tokens sit below the headline: we use 0.60 and 0.50.
ATTENTION_FWD_FRACTION = 0.60
ATTENTION_BWD_FRACTION = 0.50

#: The FLOPs a FlashAttention backward pass executes, as a multiple of the forward's: it
#: recomputes the scores, so 5 matmuls instead of 2 (FlashAttention-2 paper §4.1 counts
#: backward FLOPs as 2.5x forward).
ATTENTION_BWD_FLOP_FACTOR = 2.5

#: FlashAttention-2 kernels on Hopper and newer GPUs cannot use wgmma/TMA and reach about 35%
#: of H100 peak (FlashAttention-3 paper, arXiv:2407.08608 §1: "FlashAttention-2 achieves only
#: 35% utilization on H100"); its backward sits lower still (their Fig. 6: ~30%). Used for runs
#: that name FlashAttention-2 (or earlier) as their kernel on these accelerators.
FA2_ON_HOPPER_FWD_FRACTION = 0.35
FA2_ON_HOPPER_BWD_FRACTION = 0.30

#: Fused causal attention on the GH100 die (H100, H200, H800, GH200), MEASURED per kernel: the
#: achieved fraction of the dense bf16 peak is E_inf x s / (s + s_half) for sequence length s.
#: Each query block pays a fixed O(s_block x d) cost (loading Q, the final rescale and O store;
#: in the backward also the dO.O row sums and the dQ accumulation) against O(s x d) of work, so
#: short sequences run below the long-sequence rate; the backward's fixed cost is larger.
#: Fit data: benchmarks/device/results/h100-2026-11-23 (attention.csv; torch 2.11.0+cu130,
#: cuDNN 9.19, H100 80GB HBM3 SXM at 700 W; causal, head_dim 128, 32 heads, 32768 tokens per
#: call, s = 1k..32k, benchmarks/device/attention_sdpa.py): mean |log error| of the fit 3.3%
#: (cudnn fwd), 1.4% (cudnn bwd), 2.0% (flash fwd), 0.9% (flash bwd). Out of sample, on the
#: same script's run on another H100 of an earlier lease (attention_round1.csv): 2.1%, 1.3%,
#: 3.1%, 1.8% (docs/measured-h100.md). "flash" is the best fused kernel of the device (cuDNN's sm90 fused
#: attention, FlashAttention-3's class: Transformer Engine, PyTorch >= 2.11 SDPA); "flash2" is
#: FlashAttention-2 (PyTorch 2.2-2.10 SDPA's flash backend, flash-attn 2.x). FLOPs are counted
#: causal (half the square) and the backward as 2.5x the forward, as the planner counts them.
#: Like every kernel rate, the step multiplies it by the die's sustained compute fraction, and
#: scales it to the model's head dimension (plan/attention_head_dim.py; measured at 128).
GH100_ATTENTION: dict[tuple[str, str], tuple[float, float]] = {
    # (kernel, direction): (E_inf, s_half tokens)
    ("flash", "fwd"): (0.627, 350.0),
    ("flash", "bwd"): (0.560, 1525.0),
    ("flash2", "fwd"): (0.338, 300.0),
    ("flash2", "bwd"): (0.333, 1275.0),
}

#: Accelerator id prefixes of the GH100 die, where GH100_ATTENTION was measured.
GH100_PREFIXES: tuple[str, ...] = ("h100", "h200", "h800", "gh200")


def rate_at_length(rate_inf: float, s_half: float, seq_len: float) -> float:
    """A fused attention kernel's rate at sequence length `seq_len`: rate_inf x s / (s + s_half),
    a query block's fixed cost against work in proportion to the keys it reads (the form of
    GH100_ATTENTION and of `bench attention`'s fitted curves)."""
    return rate_inf * seq_len / (seq_len + s_half)


def gh100_attention_fraction(kernel: str, direction: str, seq_len: float) -> float:
    """Measured fraction of dense bf16 peak of a fused causal attention kernel on GH100."""
    e_inf, s_half = GH100_ATTENTION[(kernel, direction)]
    return rate_at_length(e_inf, s_half, seq_len)


#: Fused causal attention on the Blackwell dies, PUBLISHED by NVIDIA: cuDNN's SDPA (the fused
#: attention Transformer Engine, PyTorch's SDPA and the serving engines run there: the "flash"
#: kernel), as the achieved fraction of the measuring part's dense bf16 peak (GB200 and GB300:
#: 2,500 TFLOPS) at each sequence length timed. Data: NVIDIA/cudnn-frontend
#: benchmark/sdpa_benchmark_training/results/llama3.1/{gb200,gb300}/llama3.1_20260424_*.csv
#: (cuDNN 9.22, "NVIDIA GB200" / "NVIDIA GB300"; Llama 3.1 shape: 64 query and 8 KV heads, head
#: dim 128, batch 2; causal ("top_left"), bf16, non-deterministic backward; median of 10
#: iterations; FLOPs counted causal and the backward as 2.5x the forward, as the planner counts
#: them). The rate is interpolated in log(s) between the points and held at the last one above
#: 32K: the timed rates stop rising there (GB200's fall from 16K to 32K, and NVIDIA's B200 table
#: of the same shape falls from 32K to 128K, sdpa_benchmark_bf16_training at f937055), where
#: kernels long enough to meet the power cap run slower. Below 2K it falls as a kernel with a
#: fixed cost per query block does, s / (s + s_half) (BLACKWELL_ATTENTION_S_HALF, the least
#: |log error| fit of that form to the points). Checked out of sample on the same files' other
#: models (`flopwise validate --only attention`, validate/attention.py): GPT-OSS's 128-token
#: sliding window at head dim 64 and DeepSeek-V3's 192/128 MLA heads.
#: Blackwell Ultra (B300, GB300) doubles the exponential units, hence its higher rates.
#: FlashAttention-2 named on these parts: BLACKWELL_FA2_ATTENTION (B200, GB200), else
#: FA2_ON_HOPPER_*.
BLACKWELL_ATTENTION: dict[tuple[str, str], tuple[tuple[float, float], ...]] = {
    # (die, direction): ((tokens, fraction of dense bf16 peak), ...)
    ("gb100", "fwd"): (
        (2048, 1097 / 2500),
        (4096, 1408 / 2500),
        (8192, 1574 / 2500),
        (16384, 1708 / 2500),
        (32768, 1622 / 2500),
    ),
    ("gb100", "bwd"): (
        (2048, 885 / 2500),
        (4096, 1148 / 2500),
        (8192, 1332 / 2500),
        (16384, 1328 / 2500),
        (32768, 1226 / 2500),
    ),
    ("gb110", "fwd"): (
        (2048, 1373 / 2500),
        (4096, 1703 / 2500),
        (8192, 1856 / 2500),
        (16384, 1915 / 2500),
        (32768, 1953 / 2500),
    ),
    ("gb110", "bwd"): (
        (2048, 967 / 2500),
        (4096, 1248 / 2500),
        (8192, 1435 / 2500),
        (16384, 1507 / 2500),
        (32768, 1490 / 2500),
    ),
}

#: FlashAttention-2 on the Blackwell die ("flash2": PyTorch's SDPA flash backend, what the
#: torchtitan and llm-foundry profiles name), PUBLISHED by NVIDIA on a B200: the
#: `pyt_flash_attention` rows of NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_bf16_training/
#: artifacts/sdpa_benchmark_results_NVIDIA_B200.csv at f937055 (June 2025, NGC PyTorch 25.05,
#: "free clock"; Llama 3.1 405B shape: 128 query and 8 KV heads, head dim 128, batch 1; causal,
#: bf16), fraction of B200's 2,250 TFLOPS dense bf16 peak, read as BLACKWELL_ATTENTION is.
#: FlashAttention-2 cannot use Blackwell's tensor-core instructions: 0.18 / 0.15 of peak at
#: 32K, half of what FA2_ON_HOPPER_* (0.35 / 0.30, an H100 figure) stood in for. Blackwell
#: Ultra has no published FA2 timing and keeps FA2_ON_HOPPER_*.
BLACKWELL_FA2_ATTENTION: dict[tuple[str, str], tuple[tuple[float, float], ...]] = {
    ("gb100", "fwd"): (
        (2048, 250.977 / 2250),
        (4096, 327.554 / 2250),
        (8192, 376.059 / 2250),
        (16384, 396.971 / 2250),
        (32768, 406.373 / 2250),
    ),
    ("gb100", "bwd"): (
        (2048, 194.686 / 2250),
        (4096, 266.388 / 2250),
        (8192, 309.174 / 2250),
        (16384, 331.025 / 2250),
        (32768, 342.027 / 2250),
    ),
}

#: s_half (tokens) of the E_inf x s / (s + s_half) fit to each row above (fit error fwd/bwd
#: 2.3%/4.8% on GB200, 1.4%/2.1% on GB300; FlashAttention-2 on B200 1.5%/1.8%): how the rate
#: falls below 2K tokens.
BLACKWELL_ATTENTION_S_HALF: dict[tuple[str, str, str], float] = {
    ("flash", "gb100", "fwd"): 1375.0,
    ("flash", "gb100", "bwd"): 1250.0,
    ("flash", "gb110", "fwd"): 975.0,
    ("flash", "gb110", "bwd"): 1425.0,
    ("flash2", "gb100", "fwd"): 1450.0,
    ("flash2", "gb100", "bwd"): 1775.0,
}

#: Blackwell die of each accelerator-id prefix (longest prefix wins): B200 and GB200 are the
#: Blackwell die, B300 and GB300 Blackwell Ultra.
BLACKWELL_DIE_OF_PREFIX: dict[str, str] = {
    "b200": "gb100",
    "gb200": "gb100",
    "b300": "gb110",
    "gb300": "gb110",
}


def blackwell_die(accelerator_id: str) -> str | None:
    """The Blackwell die of `accelerator_id` ("gb100", "gb110"), or None for other parts."""
    from flopwise.catalog.accelerators import longest_id_prefix

    best = longest_id_prefix(accelerator_id, BLACKWELL_DIE_OF_PREFIX)
    return BLACKWELL_DIE_OF_PREFIX[best] if best else None


#: The Blackwell timing table of each kernel the planners name ("flash": cuDNN).
BLACKWELL_ATTENTION_BY_KERNEL: dict[str, dict[tuple[str, str], tuple[tuple[float, float], ...]]] = {
    "flash": BLACKWELL_ATTENTION,
    "flash2": BLACKWELL_FA2_ATTENTION,
}


def blackwell_attention_timed(kernel: str, die: str) -> bool:
    """Whether NVIDIA published timings of `kernel` ("flash": cuDNN, "flash2") on `die`."""
    return (die, "fwd") in BLACKWELL_ATTENTION_BY_KERNEL.get(kernel, {})


def blackwell_attention_fraction(
    die: str, direction: str, seq_len: float, kernel: str = "flash"
) -> float:
    """Published fraction of dense bf16 peak of a fused causal attention kernel on a Blackwell
    die at `seq_len` keys (`kernel` "flash": cuDNN, BLACKWELL_ATTENTION; "flash2":
    FlashAttention-2, BLACKWELL_FA2_ATTENTION): the timings interpolated in log(s), held above
    the last, and below the first falling as s / (s + s_half) (BLACKWELL_ATTENTION_S_HALF)."""
    points = BLACKWELL_ATTENTION_BY_KERNEL[kernel][(die, direction)]
    s = max(float(seq_len), 1.0)
    s0, f0 = points[0]
    if s <= s0:
        s_half = BLACKWELL_ATTENTION_S_HALF[(kernel, die, direction)]
        return f0 * (s / (s + s_half)) / (s0 / (s0 + s_half))
    for (s_lo, f_lo), (s_hi, f_hi) in itertools.pairwise(points):
        if s <= s_hi:
            t = math.log(s / s_lo) / math.log(s_hi / s_lo)
            return f_lo + t * (f_hi - f_lo)
    return points[-1][1]


#: Accelerator id prefixes of Hopper-and-newer NVIDIA GPUs, where FA2 kernels fall short.
HOPPER_OR_NEWER_PREFIXES: tuple[str, ...] = (
    "h100",
    "h200",
    "h800",
    "h20",
    "gh200",
    "b200",
    "b300",
    "gb200",
    "gb300",
)

#: Power-capped clocks. A GEMM-bound GPU runs at its power cap, where dynamic power
#: P = C V^2 f with the voltage following the clock along the DVFS curve (V ~ f), so
#: P ~ f^3 and the sustained clock scales with the cube root of the cap (Weste & Harris,
#: "CMOS VLSI Design", dynamic power; NVIDIA documents that GPUs lower clocks to stay within
#: the power limit set by nvidia-smi -pl). A part run below the cap its die's MAMF and
#: sustained fraction were measured at gets (cap / reference)^(1/3) of that rate.
POWER_CLOCK_EXPONENT = 1.0 / 3.0

#: The board power at which each die's published MAMF and the fitted sustained fraction hold:
#: H100 SXM 700 W (MAMF measured on a 700 W H100 SXM), A100 SXM 400 W (vendor TDPs).
REFERENCE_TDP_W: dict[str, float] = {"gh100": 700.0, "ga100": 400.0}


def power_clock_factor(tdp_w: float | None, die: str) -> float:
    """Share of the reference clock a die sustains at `tdp_w` (1 at or above the reference,
    or when either is unknown)."""
    ref = REFERENCE_TDP_W.get(die)
    if tdp_w is None or ref is None or tdp_w >= ref:
        return 1.0
    return float((tdp_w / ref) ** POWER_CLOCK_EXPONENT)
