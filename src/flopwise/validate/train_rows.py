"""Each published training run posed as the `flopwise plan train` command a user would type.

A row becomes (model, argv): the architecture as a Hugging Face config (a catalog model when one
matches exactly, else a ``pub-*`` config shipped under catalog/data/published/models), and the
flags that state what the source published: GPUs, sequence length, global batch, dtype, the
framework profile (``--framework``), the hardware and node type, and every layout degree the
source gives. Degrees it does not give are left to the search, as an operator tuning the run
would. Nothing here reaches the planner except through those flags, so `validate` can set
nothing a user cannot (tests/train/test_reproduce.py runs the commands through the CLI).

Which number is compared (the metric) follows the source: whole-cluster tokens/s where
published (no FLOP convention involved), else the source's TFLOPS per GPU under its convention
(recompute-inclusive for Megatron-LM 2021 and BLOOM, model FLOPs for NeMo and MaxText), else MFU.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from flopwise.validate.train_arch import (
    _int,
    _num,
    arch_config,
    hardware_flags,
    published_model_id,
)
from flopwise.validate.train_remat import maxtext_remat, with_recipe_layout

Row = Mapping[str, str]

#: Source families: the unit of leave-one-source-out cross-validation. Runs of one framework
#: share its code and habits, so they are held out together (stricter than per document).
FAMILIES: tuple[str, ...] = (
    "megatron-lm-2021",
    "bloom",
    "nemo",
    "llm-foundry",
    "torchtitan",
    "maxtext",
)


def load_training_runs() -> list[dict[str, str]]:
    """The published training runs shipped with the package (catalog/data/published)."""
    path = resources.files("flopwise.catalog").joinpath("data/published/training_runs.csv")
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@dataclass(frozen=True, slots=True)
class PosedRow:
    """One published run as a plan-train command, and the number to compare."""

    id: str
    family: str
    accelerator: str  # catalog id
    metric: str  # TrainPlan attribute: tokens_per_s | tflops_per_gpu | hw_tflops_per_gpu | mfu
    measured: float
    model: str  # catalog model id (incl. pub-* published architectures)
    config: Mapping[str, Any]  # the HF config the model id must resolve to
    argv: tuple[str, ...]  # everything after `flopwise plan train MODEL`
    note: str
    peak_memory_gib: float | None  # published peak memory per GPU, when given
    dense: bool = True

    @property
    def command(self) -> str:
        return " ".join(("flopwise", "plan", "train", self.model, *self.argv))

    @property
    def seq_len(self) -> int:
        """Tokens per sequence the run is posed with (its --seq-len)."""
        return int(self.argv[self.argv.index("--seq-len") + 1])


def family_of(row_id: str) -> str | None:
    prefix = row_id.split("_", 1)[0]
    return {
        "n21": "megatron-lm-2021",
        "bloom": "bloom",
        "nemo2407": "nemo",
        "nemo": "nemo",
        "mpt": "llm-foundry",
        "tt2412": "torchtitan",
        "tt2506": "torchtitan",
        "tt2411": "torchtitan",
        "maxtext": "maxtext",
    }.get(prefix)


# --- layout per family ---------------------------------------------------------------------

#: Narayanan et al. 2021 Table 1 run scripts (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh):
#: microbatch size and virtual pipeline depth.
_SC21_TABLE_1: dict[str, tuple[int, int]] = {
    "n21_t1_1.7B": (16, 1),
    "n21_t1_3.6B": (16, 1),
    "n21_t1_7.5B": (16, 1),
    "n21_t1_18.4B": (8, 1),
    "n21_t1_39.1B": (4, 1),
    "n21_t1_76.1B": (2, 3),
    "n21_t1_145.6B": (2, 2),
    "n21_t1_310.1B": (1, 2),
    "n21_t1_529.6B": (1, 3),
    "n21_t1_1008.0B": (1, 1),
}

#: NeMo-Framework-Launcher 24.07 conf/training/*.yaml activations_checkpoint_granularity per
#: model of the 24.07 performance table (null = none): only Nemotron-4 340B recomputes.
NEMO_2407_RECOMPUTE: dict[str, str] = {"Nemotron-340B": "selective"}

#: llm-foundry rows measured on torch 1.13.1, whose non-reentrant checkpoint has no early stop
#: (it arrived in torch 2.1.0) and re-runs the whole block: the A100 40GB table and the A100
#: 80GB table's two 70B rows, added in mosaicml/examples 9fa3ceb9a (2023-04-04; sweep.sh
#: IMAGE mosaicml/pytorch:1.13.1, examples/llm/requirements.txt torch==1.13.1) and kept by
#: llm-foundry b2a43a147 ("added back old numbers that I didn't reproduce"). The other tables
#: ran llm-foundry v0.3.0 or later on torch 2.1.0 (the profile's early stop).
LLM_FOUNDRY_TORCH_113_PREFIXES: tuple[str, ...] = ("mpt_a100_40_", "mpt_a100_80_70b_")

_SKIP_PREFIXES = {
    "llama1": "whole-run GPU-hours only; parallel layout, microbatch and recompute never published",
    "llama2": "whole-run GPU-hours only; parallel layout, microbatch and recompute never published",
    "opt": "'up to 147 TFLOP/s' with an unpublished FSDP+TP split and FLOP convention",
    "palm": "TPU v4 with XLA 2D sharding and partial rematerialisation; layout degrees not "
    "published as TP/PP/DP",
    "gpt3": "V100 count and layout never published",
    "gopher": "TPU v3 run; layout and architecture details not in the shared file",
    "falcon": "GPU-hours only; the 3D layout (and its changes during the run) not published",
    "starcoderbase": "GPU-hours only; layout, microbatch and recompute not published",
}


def _recompute(text: str) -> str | None:
    """The recompute mode a source's words name. torchtitan's op-level selective checkpointing
    (its Llama 3 8B/70B tomls' selective_ac_option = 'op'; "selective activation
    checkpointing" in the Dec 2024 tables) is its own mode, "op" (parallelize_llama.py
    _save_list: every other matmul output and the attention outputs are kept)."""
    t = text.lower()
    if not t.strip():
        return None
    if t.startswith("none"):
        return "none"
    if "full" in t:
        return "full"
    if "layer" in t:
        return "selective"
    if " op" in t or "per-op" in t or "(op)" in t or t.startswith("selective activation"):
        return "op"
    return "selective"


def _layout_flags(row: Row, family: str, gpus: int) -> tuple[list[str], str] | str:
    """The layout flags a source states (and those a user of its framework would pass)."""
    tp, pp, dp, cp = (_int(row, k) for k in ("tp", "pp", "dp", "cp"))
    mb = _int(row, "microbatch")
    rid, notes = row["id"], row.get("notes", "")
    rc = _recompute(row.get("recompute", ""))
    note = ""
    out: list[str] = []

    def put(flag: str, value: object) -> None:
        if value is not None:
            out.extend([flag, str(value)])

    if family == "megatron-lm-2021":
        vpp = None
        if rid in _SC21_TABLE_1:
            mb, vpp = _SC21_TABLE_1[rid]
            note = "microbatch and interleaving from Megatron-LM examples/sc21/run_table_1.sh"
        if tp is None:
            mp = gpus // (dp or 1)
            tp, pp = 8, mp // 8
            note = f"t/p split not transcribed: tp=8 (one DGX A100 node), pp={pp} assumed"
        for f, v in (("--tp", tp), ("--pp", pp), ("--dp", dp), ("--cp", 1)):
            put(f, v)
        put("--vpp", vpp)
        put("--microbatch", mb)
        out += ["--recompute", "full", "--zero", "0", "--no-sequence-parallel"]
        return out, note
    if family == "bloom":
        for f, v in (("--tp", tp), ("--pp", pp), ("--dp", dp), ("--microbatch", mb)):
            put(f, v)
        out += ["--cp", "1", "--vpp", "1", "--recompute", "full", "--zero", "1"]
        out += ["--no-sequence-parallel"]
        return out, "DeepSpeed pipeline engine, ZeRO-1 (tr11-176B-ml README)"
    if family == "nemo":
        if "_ft_" in rid:
            out += list(NEMO_2407_FINETUNING_FLAGS)
            note = NEMO_2407_FINETUNING_NOTE
            if "lora" in rid:
                out += list(NEMO_2407_LORA_FLAGS)
            elif rid in NEMO_2407_SFT_VPP:
                out += ["--vpp", str(NEMO_2407_SFT_VPP[rid])]
        if tp and pp and dp and (tp * pp * dp * (cp or 1)) != gpus:
            return (
                f"layout inconsistent in the source: TPxPPxDPxCP = {tp * pp * dp * (cp or 1)} "
                f"on {gpus} GPUs"
            )
        for f, v in (("--tp", tp), ("--pp", pp), ("--dp", dp), ("--cp", cp or 1)):
            put(f, v)
        put("--microbatch", mb)
        vp = re.search(r"VP=(\d+)", notes)
        if vp:
            put("--vpp", int(vp.group(1)))
        if rid.startswith("nemo2407") and "_ft_" not in rid:
            # the 24.07 table lists no recompute: NeMo-Framework-Launcher 24.07
            # conf/training/*.yaml sets it per model (activations_checkpoint_granularity)
            out += ["--recompute", NEMO_2407_RECOMPUTE.get(row["model"], "none")]
        out += ["--zero", "1"]
        out += ["--sequence-parallel" if (tp or 1) > 1 else "--no-sequence-parallel"]
        if rid.startswith("nemo2407"):
            # NeMo 1.x distributed_fused_adam: 16-bit master remainders (recipes.py)
            out += [
                "--recipe",
                "nemo-fp8" if "fp8" in row.get("dtype", "").lower() else "nemo-bf16",
            ]
        return out, (note + "; " if note else "") + (
            "NeMo recipes: distributed optimizer (ZeRO-1), SP with TP"
        )
    if family == "llm-foundry":
        # the 'Large Scale' table ran FSDP SHARD_GRAD_OP (parameters gathered once per step
        # and kept through the backward; gradients and optimizer state sharded) = ZeRO-2
        grad_op = "SHARD_GRAD_OP" in notes
        zero = "2" if grad_op else "3"
        out += ["--tp", "1", "--pp", "1", "--dp", str(gpus), "--cp", "1", "--zero", zero]
        put("--microbatch", mb)
        put("--recompute", rc)
        # llm-foundry's default loss_fn: fused_crossentropy (flash_attn's Triton kernel)
        out += ["--fused-loss"]
        note = "FSDP SHARD_GRAD_OP = ZeRO-2" if grad_op else "FSDP FULL_SHARD = ZeRO-3"
        if rid.startswith(LLM_FOUNDRY_TORCH_113_PREFIXES) and rc not in (None, "none"):
            out += ["--recompute-replay", "replay"]
            note += "; torch 1.13.1: the non-reentrant checkpoint re-runs the whole block"
        return out, note
    if family == "torchtitan":
        if tp is None or dp is None:
            return "layout not published"
        for f, v in (("--tp", tp), ("--pp", pp or 1), ("--dp", dp), ("--cp", cp or 1)):
            put(f, v)
        if (pp or 1) == 1:
            put("--microbatch", mb)
            out += ["--zero", "3"]
            note = "FSDP2 = ZeRO-3"
        else:
            # FSDP2 under pipelining keeps the gathered weights for the whole step
            # (reshard_after_forward=False): sharded state, no per-microbatch gathers
            out += ["--zero", "1"]
            note = "FSDP2 with PP: weights stay gathered through the step (ZeRO-1 traffic)"
            gbs = (_int(row, "global_batch_tokens") or 0) // (_int(row, "seq_len") or 1)
            local = gbs // (dp * (cp or 1)) if dp else 0
            if mb is None and local and pp and local % pp == 0:
                # torchtitan (2024): n_microbatches = pipeline_parallel_microbatches or the
                # pipeline degree (torchtitan/parallelisms/pipelining_utils.py)
                put("--microbatch", local // pp)
                note += "; microbatches = pipeline degree (torchtitan default)"
            if "interleaved" in notes.lower() or rid.endswith("i1f1b"):
                # not published: torchtitan's default for multi-stage schedules, 2 stages per
                # rank (generate_split_points in parallelisms/pipelining_utils.py at 9dec370)
                out += ["--vpp", "2"]
                note += "; 2 virtual stages per rank (torchtitan default)"
            else:
                out += ["--vpp", "1"]
        if rc == "selective" and "layer" in row.get("recompute", "").lower():
            # torchtitan's per-layer selective AC (selective_ac_option "2", its default) wraps
            # every 2nd transformer block in a full checkpoint (apply_ac in
            # parallelize_llama.py): half the layers of each stage fully recomputed
            layers = _int(row, "layers") or 0
            chunk = -(-layers // (pp or 1))
            out += ["--recompute", "full", "--recompute-layers", str(max(chunk // 2, 1))]
            note += "; per-layer SAC: every 2nd layer fully recomputed (selective_ac_option 2)"
        else:
            put("--recompute", rc)
        if (tp or 1) > 1:
            out += ["--sequence-parallel"]
        if "asynctp" in rid.lower() or "AsyncTP" in notes:
            out += ["--tp-comm-overlap"]
        if rid.startswith("tt2506") and "compile" in notes:
            # torchtitan compiles the loss with --training.compile at its June 2025 commits
            # (components/loss.py); at the Dec 2024 one (9dec370) it stayed eager
            out += ["--fused-loss"]
        if rid.startswith(TORCHTITAN_FUSED_NORM_BY_CONFIG):
            out += ["--fused-norm"]
            note += "; norm_type fused_rmsnorm"
        if "compile" in notes or rid.startswith(TORCHTITAN_COMPILED_BY_CONFIG):
            # --training.compile: the blocks' pointwise chains fused (without it, the eager ops
            # of torchtitan's model code: plan/train/pointwise.py)
            out += ["--compile"]
            note += "; torch.compile"
        elif "--recompute" in out and out[out.index("--recompute") + 1] == "full":
            # every published torchtitan table predates its early_stop=False default
            # (25413d224, 2025-08-29): its eager checkpoint stopped early
            out += ["--recompute-replay", "early-stop"]
            note += "; checkpoint with PyTorch's early stop (torchtitan before 2025-08-29)"
        return out, note
    if family == "maxtext":
        if tp is None or dp is None:
            return "layout not published (recipe not read)"
        if not mb:
            return "per-device batch not published"
        # MaxText: global batch = per_device_batch_size x chips, one microbatch per step
        gbs = mb * gpus
        slices = re.search(r"_(\d+)x", rid)
        n_slices = int(slices.group(1)) if slices else 1
        put("--tp", tp)
        out += ["--pp", "1", "--dp", str(dp), "--cp", "1", "--zero", "3", "--hsdp"]
        out += ["--scaleup-domain", str(gpus // n_slices)]
        out += ["--microbatch", str(gbs // dp)]
        policy, tensors, remat_note = maxtext_remat(row)
        put("--recompute", policy)
        if tensors:
            out += ["--remat-tensors", tensors]
        note = (
            f"{n_slices} slice(s) of {gpus // n_slices} chips: FSDP over ICI inside a slice, "
            "data parallel over DCN between slices (HSDP); one microbatch per step"
        )
        if remat_note:
            note += "; " + remat_note
        # the loss is one XLA-fused computation (no materialised fp32 copies of the logits)
        out += ["--fused-loss"]
        return out, note
    return "no published layout for this family of runs"


#: NeMo 24.07's fine-tuning table (SFT and LoRA on SQuAD v1.1 "packed to 4096 tokens") ran
#: NeMo-Framework-Launcher 24.07's examples/peft/llama/h100/*.sh (their TP/PP, batch 32 and
#: microbatch 1 match every row): `packed_sequence=true`, so attention spans each packed example
#: (THD format, cu_seqlens: NeMo r2.0.0rc1 megatron_gpt_model.py PackedSeqParams). An example is
#: `{question} {title} Paragraph: {context} {answer}` (the launcher's prepare_squad.py and
#: sft.yaml prompt_template), about 230 Llama 2 tokens on average and 270 weighted by tokens
#: (sum(d^2)/sum(d), what attention's cost follows; counted 2026-11-29 with the Llama 2
#: tokenizer over 3,807 examples of the first 11 articles of train-v1.1.json, about 4% of it).
#: No recompute: the launcher's sft.yaml at 24.07 sets `activations_checkpoint_granularity: null`
#: and the scripts do not override it.
NEMO_2407_FINETUNING_FLAGS: tuple[str, ...] = ("--document-len", "270", "--recompute", "none")
NEMO_2407_FINETUNING_NOTE = "SQuAD examples packed to 4096 tokens, 270 tokens token-weighted"
#: Its LoRA rows: launcher conf/peft/llama/sft.yaml `lora_tuning.adapter_dim: 32` with no
#: target_modules, so NeMo's default `("attention_qkv",)` (nemo/collections/nlp/parts/
#: peft_config.py at r2.0.0rc1 get_target_modules); the base model in FP8 (`fp8=true`,
#: `fp8_params=true`), the adapters 16-bit Megatron linears (parallel_adapters.py).
NEMO_2407_LORA_FLAGS: tuple[str, ...] = ("--lora-rank", "32", "--lora-targets", "qkv")
#: The SFT rows' interleaving at the launcher's 24.07 tag: examples/peft/llama/h100/13b_1node.sh
#: (TP 1, PP 4, VP 10) and 70b_2node.sh (TP 4, PP 4, VP 20), both with overlap_p2p_comm.
NEMO_2407_SFT_VPP: dict[str, int] = {
    "nemo2407_ft_llama2_13b_sft_8gpu": 10,
    "nemo2407_ft_llama2_70b_sft_16gpu": 20,
}


#: torchtitan rows whose table names no compile setting but whose config sets it: the 405B
#: runs of docs/performance.md (added in August 2024, 9515a140b and 3faaa1a0d; unchanged at
#: 3e3909a0) used train_configs/llama3_405b.toml, which has ``compile = true`` at each of those
#: commits (the A100 rows' Llama 2/3 tomls have ``compile = false``).
TORCHTITAN_COMPILED_BY_CONFIG: tuple[str, ...] = ("tt2411_405b",)


#: torchtitan rows whose config ran the Triton fused RMSNorm: the A100 numbers of
#: docs/performance.md were measured in April 2024 (commits 395a52627 and 1ea476e9f, unchanged
#: since) with train_configs/llama_13b.toml and llama3_8b.toml, ``norm_type =
#: "fused_rmsnorm"``; their 70B configs had ``"rmsnorm"`` (eager), and all ``compile = false``.
TORCHTITAN_FUSED_NORM_BY_CONFIG: tuple[str, ...] = ("tt2411_l3_8b", "tt2411_l2_13b")


def _dtype_flags(row: Row, family: str) -> list[str]:
    d = row.get("dtype", "").lower()
    if family == "megatron-lm-2021":
        return ["--dtype", "fp16"]
    if "fp8" in d or "float8" in d:
        # the scaling recipe where the source names it (torchao "float8 rowwise" /
        # "tensorwise"); otherwise the framework profile's default
        for name in ("rowwise", "tensorwise"):
            if name in d:
                return ["--dtype", "fp8", "--fp8-recipe", name]
        return ["--dtype", "fp8"]
    if family == "llm-foundry" and "pure" in d:
        return ["--dtype", "bf16", "--recipe", "fsdp-pure"]
    return ["--dtype", "bf16"]


def _metric(row: Row, family: str) -> tuple[str, float] | str:
    if family in ("megatron-lm-2021", "bloom"):
        v = _num(row, "measured_tflops_per_gpu")
        return ("hw_tflops_per_gpu", v) if v else "no TFLOPS published"
    tok = _num(row, "measured_tokens_per_s")
    if tok:
        return "tokens_per_s", tok
    tf = _num(row, "measured_tflops_per_gpu")
    if tf:
        return "tflops_per_gpu", tf
    mfu = _num(row, "measured_mfu")
    if mfu:
        return "mfu", mfu
    return "no throughput published"


def _peak_memory_gib(row: Row) -> float | None:
    m = re.search(r"[Pp]eak memory[^0-9]{0,30}([0-9.]+) GiB", row.get("notes", ""))
    if m is None:
        m = re.search(r"Memory ([0-9.]+) GiB", row.get("notes", ""))
    return float(m.group(1)) if m else None


#: Tables whose GPU column disagrees with their own layout on every row. NeMo's B200
#: long-sequence table (performance_long_sequence.md, NeMo 25.04) lists the H100 table's GPU
#: counts (8 ... 1,024), four times its TPxPPxDPxCP (2 ... 256) on every row. The layout is
#: the consistent part: at 512K and 1M tokens its batch (8 and 4 sequences) divides by the
#: stated DP 4 but not by the DP 16 that the GPU column would need. Its metric is TFLOPS per
#: GPU, so its rows are posed on the stated layout, GPUs = TPxPPxDPxCP.
GPUS_FROM_LAYOUT_PREFIXES: tuple[str, ...] = ("nemo_lseq_b200_",)


def _gpus_of_stated_layout(row: Row, gpus: int) -> tuple[int, str]:
    """The GPU count to pose, and why when it is not the source's GPU column."""
    if not row["id"].startswith(GPUS_FROM_LAYOUT_PREFIXES):
        return gpus, ""
    product = math.prod(_int(row, k) or 1 for k in ("tp", "pp", "dp", "cp"))
    if product == gpus:
        return gpus, ""
    return product, (
        f"the table lists {gpus} GPUs for TPxPPxDPxCP = {product} (every row of it "
        f"{gpus // product}x; its layouts fit its batches, its GPU column does not): posed on "
        "the layout's GPUs, the metric being per GPU"
    )


def pose(row: Row) -> PosedRow | str:
    """The row as a plan-train command, or the reason it cannot be posed."""
    rid = row["id"]
    for prefix, why in _SKIP_PREFIXES.items():
        if rid.startswith(prefix):
            return why
    family = family_of(rid)
    if family is None:
        return "no framework profile for this source"
    gpus, seq = _int(row, "num_gpus"), _int(row, "seq_len")
    if not gpus or not seq:
        return "GPU count or sequence length not published"
    gpus, gpus_note = _gpus_of_stated_layout(row, gpus)
    row, recipe_note = with_recipe_layout(row)
    metric = _metric(row, family)
    if isinstance(metric, str):
        return metric
    hw = hardware_flags(row, family)
    if isinstance(hw, str):
        return hw
    acc, hw_flags, hw_note = hw
    lay = _layout_flags(row, family, gpus)
    if isinstance(lay, str):
        return lay
    lay_flags, lay_note = lay
    batch_tokens = _int(row, "global_batch_tokens")
    if family == "maxtext" and not batch_tokens:
        batch_tokens = (_int(row, "microbatch") or 0) * gpus * seq
    if not batch_tokens:
        return "global batch not published"
    cfg = arch_config(row, family)
    if isinstance(cfg, str):
        return cfg
    model, cfg = published_model_id(row, cfg)
    argv = [
        "-a",
        acc,
        *hw_flags,
        "--gpus",
        str(gpus),
        "--tokens",
        "1T",
        "--seq-len",
        str(seq),
        "--global-batch-seqs",
        str(batch_tokens // seq),
        *_dtype_flags(row, family),
        "--framework",
        family if family not in ("bloom",) else "deepspeed",
        *lay_flags,
        # a published layout ran: it is judged against device capacity, as a user pinning it
        # would; headroom is the search's margin for layouts nobody has run
        "--memory-headroom",
        "0",
    ]
    note = "; ".join(n for n in (gpus_note, recipe_note, lay_note, hw_note) if n)
    return PosedRow(
        id=rid,
        family=family,
        accelerator=acc,
        metric=metric[0],
        measured=metric[1],
        model=model,
        config=cfg,
        argv=tuple(argv),
        note=note,
        peak_memory_gib=_peak_memory_gib(row),
    )
