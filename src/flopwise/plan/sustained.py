"""The one fitted constant of the hardware model: the share of its GEMM ceiling a die sustains.

Training steps run their GEMMs at MAMF x (shape efficiency) x this fraction
(plan/train/step_time.py). It is fitted on published training runs only (validate/training.py).
Part of it is measured: the power cap's share of a die's burst rate under sustained load
(POWER_CAPPED_SHARE); the rest is what only a training step loses (launch gaps, GEMMs sharing
the GPU with overlapped collectives). Serving passes (plan/infer/latency.py make_rates) run at
the measured power-capped share where their die has one, else at this fraction
(``serving_compute_share``), so both planners share one model of the hardware and serving rows
never enter a fit: for the inference validation every share is out of sample. A device's own
`bench sustained` share (``--measured``) replaces the die's power-cap assumption in both
planners (``serving_compute_share``, ``training_compute_fraction``).
"""

from __future__ import annotations

from flopwise.catalog.accelerators import longest_id_prefix
from flopwise.hardware import Hardware
from flopwise.plan.efficiency import power_clock_factor

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
#: Refitted 2026-11-25 with MaxText's FSDP gradients reduce-scattered straight from XLA's
#: weight-gradient fusions (no flatten, cast and divide pass in HBM as PyTorch FSDP/DeepSpeed
#: make: step_time.py, `other`): the TPU fractions no longer absorb 3-6% of a step that XLA
#: does not spend: tpu-v5e 0.965 -> 0.90, tpu-v5p 0.825 -> 0.815, tpu-v6e 0.745 -> 0.73; GPU
#: dies and default unchanged.
#: Refitted 2026-11-25 (second) with torchtitan's FSDP2 gradients copied into the reduce-scatter
#: input once (6 B per parameter per microbatch, NCCL's AVG dividing; frameworks.py
#: ZERO_GRAD_HANDLING "fsdp2-copy-in") instead of FSDP1's flatten, cast and pre-divide (18 B):
#: torchtitan's rows get 0.3-4.8% faster, and the dies their rows share give it back: ga100
#: 0.81 -> 0.80, gh100 0.73 -> 0.725, default 0.785 -> 0.78; the TPU dies unchanged.
#: Refitted 2026-11-29 with torchtitan's pointwise ops priced as its model code runs them
#: without torch.compile, one eager kernel per PyTorch op (plan/train/pointwise.py, the bytes
#: traced from the op graph), and compiled where the run compiled: its eager rows get 7-17%
#: slower, and the dies their rows share give back: ga100 0.80 -> 0.81, gh100 0.725 -> 0.73,
#: default 0.78 -> 0.785; the TPU dies unchanged.
#: Refitted 2026-11-29 (second) with cuDNN's fused attention on the Blackwell dies priced from
#: NVIDIA's published timings by sequence length (efficiency.BLACKWELL_ATTENTION) instead of the
#: papers' constant fractions: NeMo's B200 rows at 16K-64K get 3-6% faster, and the default,
#: which they pull, gives back: 0.785 -> 0.78; every die unchanged.
#: Refitted 2026-11-29 (third) with NeMo 24.07's six fine-tuning rows posed (SFT and LoRA on
#: packed SQuAD examples: plan/train/lora.py, TrainJob.document_len; 215 rows): gh100
#: 0.73 -> 0.735; default 0.78 -> 0.785 with them, back to 0.78 once LoRA's adapter merges were
#: priced (their three LoRA rows 1-2% slower); the other dies unchanged.
#: Refitted 2026-11-30 with full activation checkpoints priced as each framework's checkpoint
#: runs them (frameworks.RECOMPUTE_REPLAY_MODES): PyTorch's non-reentrant checkpoint (torch
#: >= 2.1: torchtitan, llm-foundry from v0.3.0) and compiled remat (MaxText, PyTorch/XLA) do
#: not re-run the MLP's output projection, Megatron's checkpoint does. The rows with full
#: recompute get 3-9% faster, and the dies give back what they absorbed: ga100 0.81 -> 0.80,
#: gh100 0.735 -> 0.715, tpu-v5e 0.90 -> 0.83, default 0.78 -> 0.755; v5p and v6e unchanged.
#: Refitted 2026-11-30 (second) with the GH100 parts that have no MAMF of their own (Meta's
#: 500 W Grand Teton H100 of torchtitan's rows, the H200's bf16) taking the H100 SXM's measured
#: fractions of peak (gemm_ceiling.MAMF_SIBLINGS) instead of the generic 0.80: torchtitan's FP8
#: GEMMs were priced 13% above the die's own measured rate, and the die's fraction gives back
#: what it had absorbed: gh100 0.715 -> 0.725, default 0.755 -> 0.76; the others unchanged.
SUSTAINED_COMPUTE_FRACTION_DEFAULT = 0.76
SUSTAINED_COMPUTE_FRACTION: dict[str, float] = {
    "ga100": 0.80,
    "gh100": 0.725,
    "tpu-v5e": 0.83,
    "tpu-v5p": 0.815,
    "tpu-v6e": 0.73,
}

#: Dies no source family of `validate --only training` ran on, whose fraction is fitted on the
#: runs of `validate --only training-unseen` marked in sample (FRACTION_FIT_ROWS), by the same
#: rule (the 0.005-grid value with the least mean absolute log error). Its out-of-sample error
#: is everything else that runs on the die: that section's other rows on it and every serving
#: row, whose GEMMs run at the same fraction (plan/infer/latency.py make_rates) and which never
#: enter a fit. `validate --only training-unseen` refits it and reports both (`fraction_fits`).
#: cdna3 (MI300X, MI325X): torchao's torchtitan Llama 3 8B in bf16 on 8 x MI300X (FSDP2, per-op
#: selective checkpointing, torch.compile; 5,376.5 tokens/s per GPU, pytorch/ao
#: torchao/float8/README.md at 9519bebb), fitted 2026-11-25: 0.53 of the die's MAMF (668 TFLOPS
#: bf16 in the ml-engineering table, measured with PyTorch's TunableOp on), where GPU dies with
#: runs keep 0.73-0.81. What it absorbs is not separated by any source read: the 750 W cap's
#: clocks, hipBLASLt's default kernels against TunableOp's tuned ones, and RCCL sharing the
#: compute units. Out of sample when fitted: the 320 AMD vLLM serving rows 16.4% -> 10.3% MAPE
#: (bias +13.7% -> +3.6%), every serving row 12.34% -> 11.32%; the three MI300X float8 rows of
#: the same table +59...+85% -> +13...+33% (their FP8 ceiling is still a stand-in: gemm_ceiling
#: MAMF_STAND_INS). One run is thin fit data: plans on these dies list the value under ASSUMED
#: and take the intervals of a die without validated runs.
FRACTION_FITTED_ON_UNSEEN: dict[str, float] = {"cdna3": 0.53}

#: The training-unseen rows each FRACTION_FITTED_ON_UNSEEN value is fitted on (marked in sample).
FRACTION_FIT_ROWS: dict[str, tuple[str, ...]] = {"cdna3": ("torchao_mi300x_llama38b_bf16",)}

#: The share of its burst rate a kernel keeps under sustained load at its die's power cap,
#: MEASURED (nothing fitted), per die and kernel class: the serving planner's compute share
#: where one is measured (`serving_compute_share`). On GH100: an H100 SXM at its 700 W cap,
#: each workload back to back for 30 s (benchmarks/device/sustained.py; its log
#: benchmarks/device/results/h100-2026-11-23/sustained.txt): a bf16 8192^3 GEMM held 669.3
#: TFLOPS (mean of 15 windows, SM clock 1,290-1,380 MHz) against the same machine's 848.8 MAMF
#: (log_round2.txt), 0.788; cuDNN fused causal attention forward + backward at 32K held 531.4
#: against its burst 547.1 (attention.csv: 621.6 forward, 521.8 backward, the backward 2.5x
#: the forward's FLOPs), 0.971. The training fraction above (GH100 0.725) is this power cap and
#: what only a training step adds on top of it: launch gaps between thousands of eager kernels
#: and GEMMs sharing SMs and HBM with overlapped NCCL collectives, 0.725 / 0.788 = 0.92 of it.
#: A serving engine adds neither (decode runs in CUDA graphs or a compiled engine, and its
#: tensor-parallel all-reduces run between the GEMMs, priced on their own), so on a die with a
#: measurement its GEMMs and prefill attention run at these shares; elsewhere at the die's
#: training fraction, which holds the training-only losses too (slower than the power cap
#: alone by about the GH100's 8%, not extrapolated: no other die's sustained load is measured).
POWER_CAPPED_SHARE: dict[str, dict[str, float]] = {
    "gh100": {"gemm": 669.26 / 848.785, "attention": 531.42 / 547.1},
}

#: Where each POWER_CAPPED_SHARE entry was measured (validate reports it beside the fits).
POWER_CAPPED_SHARE_SOURCE: dict[str, str] = {
    "gh100": "H100 SXM at its 700 W cap, 30 s per workload (benchmarks/device/sustained.py; "
    "results/h100-2026-11-23/sustained.txt): bf16 8192^3 GEMM 669.3 of 848.8 TFLOPS burst, "
    "cuDNN attention fwd+bwd at 32K 531.4 of 547.1",
}

#: Die of each accelerator-id prefix: the unit the fraction is fitted per. A part of the same
#: die run at a lower power cap (Meta's Grand Teton H100 at 500 W) shares its die's fraction
#: and is slowed by efficiency.power_clock_factor. MI325X is MI300X's CDNA3 die with more HBM at
#: 1,000 W (its own MAMF is measured at that power).
DIE_OF_PREFIX: dict[str, str] = {
    "mi300x": "cdna3",
    "mi325x": "cdna3",
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
    group = fraction_group(accelerator_id)
    if group in SUSTAINED_COMPUTE_FRACTION:
        return SUSTAINED_COMPUTE_FRACTION[group]
    return FRACTION_FITTED_ON_UNSEEN.get(group, SUSTAINED_COMPUTE_FRACTION_DEFAULT)


def has_calibrated_compute_fraction(accelerator_id: str) -> bool:
    """Whether published runs calibrated this accelerator's die (else the default is used)."""
    return fraction_group(accelerator_id) in SUSTAINED_COMPUTE_FRACTION


def power_clock_share(hw: Hardware) -> float:
    """Share of its die's clock `hw` keeps when capped below the power its die was fitted at
    (efficiency.power_clock_factor; 1 otherwise)."""
    tdp = hw.accelerator.spec("tdp_w") if hw.accelerator is not None else None
    return power_clock_factor(tdp, fraction_group(hw.id))


def sustained_gemm_fraction(hw: Hardware) -> float:
    """Share of its GEMM ceiling `hw` sustains under load: its die's fitted fraction (or the
    default), slowed when the part is capped below its die's power (power_clock_share)."""
    return sustained_compute_fraction(hw.id) * power_clock_share(hw)


#: The die whose training fraction and power-capped GEMM share are both known, so that their
#: ratio (what a training step keeps of its power-capped GEMM rate: launch gaps, GEMMs sharing
#: the GPU with overlapped collectives) is measured there and stands in on dies without a
#: fitted fraction (training_compute_fraction).
TRAINING_ONLY_REFERENCE_DIE = "gh100"


def training_only_share(die: str = TRAINING_ONLY_REFERENCE_DIE) -> float:
    """What a training step keeps of its die's power-capped GEMM rate: the die's fitted fraction
    over its measured POWER_CAPPED_SHARE (GH100: 0.725 / 0.788 = 0.920)."""
    return SUSTAINED_COMPUTE_FRACTION[die] / POWER_CAPPED_SHARE[die]["gemm"]


def training_compute_fraction(hw: Hardware, dtype: str | None = None) -> tuple[float, str | None]:
    """(share of its GEMM ceiling a training step on `hw` sustains, how a measurement entered it)

    Without a `bench sustained` measurement of this device (``--measured``): the die's fitted
    fraction (or the default), slowed for a part capped below its die's power
    (sustained_gemm_fraction); the note is None. With one (the device's sustained / burst GEMM
    rate at its own power cap; for `dtype` fp8 its FP8 run's where one is stored,
    `Hardware.gemm_share`), the measurement replaces what the die's numbers assumed about the
    power cap (the die's fitted fraction assumes its 16-bit share for every dtype):
    - on a die whose power-capped share is measured too (POWER_CAPPED_SHARE: GH100), the fitted
      fraction scaled by the device's share over the die's (the power-clock factor dropped: the
      measurement is at this device's cap);
    - on a die with no fitted fraction (the default stands in for it), the device's share times
      the training-only share measured on the reference die;
    - on a die fitted on published runs but with no power-capped share of its own (GA100, the
      TPUs, and CDNA3, fitted on one unseen run), the fitted fraction is kept: there is nothing
      to scale the measurement against, and a fit holds more than the power cap (CDNA3's 0.53
      holds its default GEMM kernels against the catalog MAMF's tuned ones).
    """
    share = hw.gemm_share(dtype)
    fitted = sustained_gemm_fraction(hw)
    if share is None:
        return fitted, None
    group = fraction_group(hw.id)
    reference = POWER_CAPPED_SHARE.get(group)
    if reference is not None and group in SUSTAINED_COMPUTE_FRACTION:
        value = SUSTAINED_COMPUTE_FRACTION[group] * share / reference["gemm"]
        return value, (
            f"{group}'s fitted {SUSTAINED_COMPUTE_FRACTION[group]:.3f} x this device's measured "
            f"GEMM share {share:.3f} / the die's {reference['gemm']:.3f} (bench sustained)"
        )
    if group in SUSTAINED_COMPUTE_FRACTION or group in FRACTION_FITTED_ON_UNSEEN:
        return fitted, (
            f"{group}'s fitted {fitted:.3f} kept: the measured GEMM share {share:.3f} (bench "
            f"sustained) has no sustained-load measurement of the {group} die to be scaled "
            "against; serving plans use it"
        )
    rest = training_only_share()
    ref = TRAINING_ONLY_REFERENCE_DIE
    return share * rest, (
        f"this device's measured GEMM share {share:.3f} (bench sustained) x the training-only "
        f"share {rest:.3f} measured on the {ref} die ({ref}'s fitted fraction over its "
        "power-capped share: launch gaps and GEMMs beside overlapped collectives)"
    )


def serving_compute_share(hw: Hardware, kind: str, dtype: str | None = None) -> tuple[float, str]:
    """(share of its burst rate, where it comes from) of a serving engine's `kind` kernels
    ("gemm" or "attention") on `hw`: GEMMs at this device's own `bench sustained` share where
    one is measured (``--measured``; basis "measured", at the device's own power cap; `dtype`
    fp8 GEMMs at its FP8 run's where one is stored); else the
    power-capped share measured on its die (POWER_CAPPED_SHARE; "power-capped"), else the die's
    training fraction (sustained_gemm_fraction; "training"); the die's values slowed when the
    part is capped below its die's power (power_clock_share)."""
    if kind not in ("gemm", "attention"):
        raise ValueError(f"kind {kind!r}: expected 'gemm' or 'attention'")
    measured_share = hw.gemm_share(dtype)
    if kind == "gemm" and measured_share is not None:
        return measured_share, "measured"
    group = fraction_group(hw.id)
    measured = POWER_CAPPED_SHARE.get(group)
    if measured is not None:
        return measured[kind] * power_clock_share(hw), "power-capped"
    return sustained_gemm_fraction(hw), "training"


def sustained_fraction_fallback(hw: Hardware, value: float) -> dict[str, dict[str, object]]:
    """The ``assumed`` entry a plan carries when `hw`'s die has no fitted fraction (empty when
    it has one): the default fitted over every published run stands in for it."""
    if has_calibrated_compute_fraction(hw.id):
        return {}
    group = fraction_group(hw.id)
    if group in FRACTION_FITTED_ON_UNSEEN:
        runs = ", ".join(FRACTION_FIT_ROWS[group])
        source = (
            f"no validated training family on {hw.id}'s die ({group}): fitted on "
            f"{len(FRACTION_FIT_ROWS[group])} published run(s) ({runs}; plan/sustained.py "
            "FRACTION_FITTED_ON_UNSEEN), its error on other runs in `flopwise validate`"
        )
    else:
        source = (
            f"no validated training runs on {hw.id}'s die: the fraction fitted over all "
            "published runs (plan/sustained.py SUSTAINED_COMPUTE_FRACTION_DEFAULT)"
        )
    return {"sustained_compute_fraction": {"value": value, "source": source}}
