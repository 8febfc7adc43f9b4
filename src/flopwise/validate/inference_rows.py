"""Each published serving row posed as the ``flopwise plan infer`` command a user would type.

Reads ``published/inference_runs.csv`` (conventions in published/NOTES.md) and returns, per row,
either a ``PosedRow`` (model and accelerator catalog ids, the serving job, the command that
reproduces it, and the published metrics) or the reason it cannot be posed. Nothing here runs
the planner.

How each source is posed (see NOTES.md "Inference rows"):

- ``trtllm09`` / ``trtllm05`` (gptSessionBenchmark, static batching at the published batch):
  ``--batch B``. The first-token rows ran batch 1 with output length 1.
- ``trtllm014`` (perf-overview 0.14.0, ``trtllm-bench throughput``: every request of fixed
  ISL/OSL queued at once, in-flight batching, output tokens/s under maximum load; the engine
  picks the running batch): ``--num-requests N`` with N the dataset size the row states (1,000 to
  30,000 requests), an offline batch run by in-flight batching at the largest concurrency that
  fits (and that the engine profile allows), ramp-up and drain included. Its engines were built
  with the sizes trtllm-bench's pre-defined table gave them (``trtllm_presets.py``):
  ``--engine-max-batch B --engine-max-tokens T`` where that table is known.
- ``trtllm015`` / ``trtllm017`` (perf-overview 0.15.0 / 0.17, same trtllm-bench methodology and dataset sizes as 0.14):
  posed the same way.
- ``rocmvllm`` (AMD's vLLM docker throughput tables on MI300X, ``benchmark_throughput.py``:
  every prompt submitted at once with ``--max-num-seqs`` equal to their number): ``--num-requests
  N --batch N --engine vllm``.
- ``trtllm10`` (perf-overview 1.0, ``trtllm-bench throughput --backend pytorch``, the same
  dataset sizes): posed as ``trtllm014``; NVFP4 columns as ``--weight-dtype fp4 --kv-dtype
  fp8``; the RTX PRO 6000 tables' TPxPP layouts with ``--pp`` inside the 8-GPU RTX PRO Server;
  MoE models with ``--ep`` = TP and ``--attention-dp`` (the doc's MoE options; its
  ``$ep_size`` is not published per row); decode passes padded to the CUDA-graph batch sizes
  of the doc's ``llm_options.yml`` (``--cuda-graph-batch-sizes``). Unseen: scored apart
  (UNSEEN_FAMILIES).
- ``sglang030`` (ShareGPT, request rates) and ``lambda_vllm054`` (lengths not stated): skipped.

FP8 rows are fp8 weights, activations and KV cache (TensorRT-LLM perf docs: "If you specify FP8
quantization, the KV cache will automatically be set to FP8 as well"); FP16 rows fp16 throughout.
PCIe cards (L40S, A100 PCIe) run TP inside one 8-GPU PCIe server, named with ``--system``.
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType

from flopwise.validate.trtllm_presets import CUDA_GRAPH_BATCH_SIZES, preset_sizes

#: Accelerator names used by the published file -> catalog ids.
ACCELERATORS: Mapping[str, str] = MappingProxyType(
    {
        "H100-SXM-80GB": "h100-sxm",
        "H100-SXM-80GB (HBM3)": "h100-sxm",
        "H100-80GB": "h100-sxm",
        "H200-SXM-141GB": "h200-sxm",
        "H200-SXM-141GB (HBM3e)": "h200-sxm",
        "A100-SXM-80GB": "a100-sxm-80gb",
        "A100-SXM4-80GB": "a100-sxm-80gb",
        "A100-80GB": "a100-sxm-80gb",
        "A100-PCIe-80GB": "a100-pcie-80gb",
        "L40S-48GB": "l40s",
        "MI300X": "mi300x",
        "MI325X": "mi325x",
        "MI355X": "mi355x",
        "B200-180GB": "b200",
        "GB200-192GB": "gb200",
        "RTX-PRO-6000": "rtx-pro-6000",
    }
)

#: Node type named for tensor parallelism on PCIe cards (8-GPU PCIe servers, systems.csv).
PCIE_SYSTEMS: Mapping[str, str] = MappingProxyType(
    {"l40s": "pcie-l40s-8x", "a100-pcie-80gb": "pcie-a100-8x", "rtx-pro-6000": "rtx-pro-server"}
)

#: Model labels (lower case, first match wins) -> catalog ids. NOTES.md: the 0.9.0 doc's
#: "LLaMA 7B/70B" are Llama-2; Hermes-3-Llama-3.1-405B is a Llama 3.1 405B fine-tune.
MODELS: tuple[tuple[str, str], ...] = (
    ("llama-2 7b", "llama-2-7b"),
    ("llama-2 13b", "llama-2-13b"),
    ("llama-2 70b", "llama-2-70b"),
    ("llama 3.1 8b", "llama-3.1-8b"),
    ("llama 3.1 70b", "llama-3.1-70b"),
    ("llama 3.1 405b", "llama-3.1-405b"),
    ("llama 3.3 70b", "llama-3.3-70b"),
    ("llama 4 scout", "llama-4-scout"),
    ("llama 4 maverick", "llama-4-maverick"),
    ("qwen3-235b-a22b", "qwen3-235b-a22b"),
    ("qwen3-30b-a3b", "qwen3-30b-a3b"),
    ("llama-3.1-8b", "llama-3.1-8b"),
    ("llama-3.1-70b", "llama-3.1-70b"),
    ("llama-3.1-405b", "llama-3.1-405b"),
    ("mixtral 8x7b", "mixtral-8x7b"),
    ("mixtral 8x22b", "mixtral-8x22b"),
    ("gpt-j 6b", "gpt-j-6b"),
    ("mistral 7b", "mistral-7b"),
    ("falcon 180b", "falcon-180b"),
)

#: Source families: id prefix -> family name (cross-validation leaves one family out).
FAMILIES: tuple[tuple[str, str], ...] = (
    ("trtllm014_", "trtllm014"),
    ("trtllm015_", "trtllm015"),
    ("trtllm017_", "trtllm017"),
    ("trtllm10_", "trtllm10"),
    ("trtllm09_", "trtllm09"),
    ("trtllm05_", "trtllm05"),
    ("rocmvllm_", "rocmvllm"),
    ("sglang030_", "sglang030"),
    ("lambda_vllm054_", "lambda_vllm054"),
)

METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("output_tokens_per_s", "measured_output_tokens_per_s"),
    ("ttft_ms", "measured_ttft_ms"),
    ("tpot_ms", "measured_tpot_ms"),
)


@dataclass(frozen=True, slots=True)
class PosedRow:
    """One published row as a job flopwise can plan, with the metrics it publishes."""

    id: str
    family: str
    model: str  # catalog id
    accelerator: str  # catalog id
    system: str | None
    input_len: int
    output_len: int
    batch: int | None  # None: --batch max
    tp: int
    gpus: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    measured: Mapping[str, float] = field(default_factory=dict)
    note: str = ""
    num_requests: int | None = None  # an offline batch of this many requests (--num-requests)
    memory_fraction: float | None = None  # the engine's memory knob as the source ran it
    #: the engine's build sizes where the source's build tool fixed them (trtllm_presets.py)
    engine_max_batch: int | None = None
    engine_max_tokens: int | None = None
    #: the source ran sequences longer than the model's context (--allow-long-context)
    allow_long_context: bool = False
    #: the source's FP8 engine ran 16-bit context attention (--no-fp8-context-attention)
    fp8_context_attention: bool | None = None
    pp: int = 1  # pipeline stages (--pp), as the source's TPxPP layout states
    ep: int = 1  # expert-parallel groups inside the TP group (--ep)
    attention_dp: bool = False  # attention data parallelism over the TP ranks (--attention-dp)
    #: the source's release decoded this model with masked MHA (--decode-kernel per-head)
    decode_kernel: str | None = None
    #: the CUDA-graph batch sizes the source's engine padded decode passes to
    #: (--cuda-graph-batch-sizes; trtllm_presets.CUDA_GRAPH_BATCH_SIZES)
    cuda_graph_batch_sizes: tuple[int, ...] = ()
    #: a modelling choice was made with this row in view (its notes say "IN VIEW:")
    in_view: bool = False

    @property
    def is_moe(self) -> bool:
        return _is_moe(self.model)

    @property
    def command(self) -> str:
        """The exact ``flopwise plan infer`` command that reproduces this row's prediction."""
        parts = ["flopwise", "plan", "infer", self.model, "--accelerator", self.accelerator]
        if self.system:
            parts += ["--system", self.system]
        parts += ["--tp", str(self.tp)]
        if self.pp > 1:
            parts += ["--pp", str(self.pp)]
        parts += ["--gpus", str(self.gpus)]
        if self.num_requests is not None:
            parts += ["--num-requests", str(self.num_requests)]
            if self.batch is not None:  # the engine's sequence cap the source set
                parts += ["--batch", str(self.batch)]
        else:
            parts += ["--batch", "max" if self.batch is None else str(self.batch)]
        parts += ["--input-len", str(self.input_len), "--output-len", str(self.output_len)]
        parts += ["--weight-dtype", self.weight_dtype, "--kv-dtype", self.kv_dtype]
        parts += ["--engine", self.engine]
        if self.memory_fraction is not None:
            parts += ["--memory-fraction", f"{self.memory_fraction:g}"]
        if self.engine_max_batch is not None:
            parts += ["--engine-max-batch", str(self.engine_max_batch)]
        if self.engine_max_tokens is not None:
            parts += ["--engine-max-tokens", str(self.engine_max_tokens)]
        if self.allow_long_context:
            parts += ["--allow-long-context"]
        if self.fp8_context_attention is not None:
            no = "" if self.fp8_context_attention else "no-"
            parts += [f"--{no}fp8-context-attention"]
        if self.decode_kernel is not None:
            parts += ["--decode-kernel", self.decode_kernel]
        if self.cuda_graph_batch_sizes:
            parts += ["--cuda-graph-batch-sizes", ",".join(map(str, self.cuda_graph_batch_sizes))]
        if self.ep > 1:
            parts += ["--ep", str(self.ep)]
        if self.attention_dp:
            parts += ["--attention-dp"]
        return " ".join(parts)


#: Families added after every modelling choice that shaped the planner: nothing was fitted to
#: them and no choice made with them in view, except rows whose notes say "IN VIEW:" (then
#: scored apart). validate reports them as the serving model's unseen error.
UNSEEN_FAMILIES: Mapping[str, str] = MappingProxyType(
    {
        "trtllm10": "TensorRT-LLM 1.0 perf-overview (B200, GB200, RTX PRO 6000, H200, H100), added 2026-11-24"
    }
)

#: The marker of a row a modelling choice was made with in view.
IN_VIEW_MARKER = "IN VIEW:"

#: Families whose FP8 engines ran 16-bit context attention: the 0.9.0 performance doc's
#: reproduction commands build with ``trtllm-build ... --context_fmha enable`` and no
#: ``--use_fp8_context_fmha`` (off by default in PluginConfig), and the v0.5.0 H200 launch blog
#: predates that option. trtllm-bench (0.12 onward: the perf-overview families) turns it on.
FP16_CONTEXT_FMHA: frozenset[str] = frozenset({"trtllm05", "trtllm09"})

#: Families whose TensorRT-LLM release decoded with masked MHA (--decode-kernel per-head) for
#: some models, and the (query heads per KV head, head size) pairs it had an XQA kernel for:
#: 0.5 predates XQA (first in the 0.8 releases: docs/source/blogs/XQA-kernel.md); the 0.8-0.10
#: releases shipped precompiled XQA cubins for 8 query heads per KV head at head size 128 and
#: 256 only (cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/cubin/xqa_kernel_cubin.h,
#: "nqpkv_8" kernels; "nqpkv_0" ones serve Medusa's multi-token queries), and MHA models
#: (1 per KV head) had none at beam width 1. Later releases compile XQA for any group (JIT).
PER_HEAD_DECODE: Mapping[str, frozenset[tuple[int, int]]] = MappingProxyType(
    {"trtllm05": frozenset(), "trtllm09": frozenset({(8, 128), (8, 256)})}
)


@dataclass(frozen=True, slots=True)
class Unposed:
    id: str
    family: str
    reason: str


def load_rows() -> list[dict[str, str]]:
    data = resources.files("flopwise.catalog").joinpath("data/published/inference_runs.csv")
    with data.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def family_of(row_id: str) -> str:
    for prefix, name in FAMILIES:
        if row_id.startswith(prefix):
            return name
    return row_id.split("_", 1)[0]


def _int(text: str) -> int | None:
    try:
        return int(float(text)) if text.strip() else None
    except ValueError:
        return None


#: How a row states the engine memory fraction its source ran with (TensorRT-LLM perf-overview
#: 0.15 onward: "In majority of cases, we also use a higher KV cache percentage by setting
#: --kv_cache_free_gpu_mem_fraction 0.95"; the rows do not say which fell back to 0.90).
_MEMORY_FRACTION = re.compile(r"kv_cache_free_gpu_mem_fraction (0\.\d+)")

#: How a row states the size of its offline dataset (trtllm-bench: all requests queued at once).
_REQUESTS = re.compile(r"(\d[\d,]*) requests of fixed ISL/OSL issued at once")


def _num_requests(notes: str) -> int | None:
    m = _REQUESTS.search(notes)
    return int(m.group(1).replace(",", "")) if m else None


#: How a row states the engine's token budget per pass (vLLM's command line).
_MAX_NUM_TOKENS = re.compile(r"--max-num-batched-tokens (\d+)")


def _max_num_tokens(notes: str) -> int | None:
    m = _MAX_NUM_TOKENS.search(notes)
    return int(m.group(1)) if m else None


#: How a row states a pipeline-parallel layout (TensorRT-LLM 1.0's RTX PRO 6000 tables).
_LAYOUT = re.compile(r"Layout TPxPP (\d+)x(\d+)")

#: How a row says its MoE model ran expert parallelism over the TP group with attention data
#: parallelism (TensorRT-LLM 1.0's MoE commands: --ep $ep_size, enable_attention_dp: true).
_EP_OVER_TP = "posed with expert parallelism over the TP group and attention data parallelism"


def _pipeline(notes: str) -> int:
    m = _LAYOUT.search(notes)
    return int(m.group(2)) if m else 1


def _memory_fraction(notes: str) -> float | None:
    m = _MEMORY_FRACTION.search(notes)
    return float(m.group(1)) if m else None


def _precision(label: str) -> tuple[str, str, str] | None:
    text = label.strip().lower()
    if text.startswith("fp8 (weights+kv)"):
        return "fp8", "fp8", ""
    if text == "fp8":
        return (
            "fp8",
            "fp8",
            "'FP8' read as fp8 weights, activations and KV cache, as in the TensorRT-LLM "
            "performance docs of the same period",
        )
    if text.startswith("fp4 (nvfp4"):
        return "fp4", "fp8", ""  # --weight-dtype fp4: NVFP4 W4A4, as TensorRT-LLM runs it
    if text.startswith("fp16"):
        return "fp16", "fp16", ""
    if text.startswith("bf16"):
        return "bf16", "bf16", ""
    return None


def _engine(label: str) -> str | None:
    text = label.lower()
    if "tensorrt-llm" in text and "pytorch backend" in text:
        return "tensorrt-llm-pytorch"  # trtllm-bench --backend pytorch (the 1.0 tables)
    for key, name in (("tensorrt-llm", "tensorrt-llm"), ("sglang", "sglang"), ("vllm", "vllm")):
        if key in text:
            return name
    return None


def _model(label: str) -> str | None:
    text = label.lower()
    return next((model_id for key, model_id in MODELS if key in text), None)


def pose(r: Mapping[str, str]) -> PosedRow | Unposed:
    """The row as a ``plan infer`` job, or why it cannot be posed as one."""
    rid, fam = r["id"], family_of(r["id"])
    isl, osl, batch = _int(r["input_len"]), _int(r["output_len"]), _int(r["batch_size"])
    if isl is None or osl is None:
        reason = (
            "ShareGPT prompts: input/output lengths vary per request and requests arrive at a "
            "rate, so there is no fixed job to pose"
            if fam == "sglang030"
            else "input/output lengths are not published"
        )
        return Unposed(rid, fam, reason)
    continuous = "in-flight batching" in r["engine"].lower()
    if batch is None and not continuous:
        return Unposed(rid, fam, "batch size is not published and the run is not max-load")
    prec, engine, model = _precision(r["dtype"]), _engine(r["engine"]), _model(r["model"])
    acc = ACCELERATORS.get(r["accelerator"])
    missing = [
        what
        for what, value in (
            (f"dtype {r['dtype']!r}", prec),
            (f"engine {r['engine']!r}", engine),
            (f"model {r['model']!r}", model),
            (f"accelerator {r['accelerator']!r}", acc),
        )
        if value is None
    ]
    if missing or prec is None or engine is None or model is None or acc is None:
        return Unposed(rid, fam, "not in the catalog: " + ", ".join(missing))
    tp = _int(r["tp"]) or 1
    notes = r.get("notes", "")
    pp = _pipeline(notes)
    gpus = _int(r["num_gpus"]) or tp * pp
    ep_over_tp = _EP_OVER_TP in notes and tp > 1
    sizes = preset_sizes(fam, model, tp, isl + osl)
    measured = {metric: float(r[col]) for metric, col in METRIC_COLUMNS if r.get(col, "").strip()}
    return PosedRow(
        id=rid,
        family=fam,
        model=model,
        accelerator=acc,
        system=PCIE_SYSTEMS.get(acc) if tp * pp > 1 else None,
        input_len=isl,
        output_len=osl,
        # an offline run's stated batch is the engine's sequence cap (--max-num-seqs)
        batch=batch,
        tp=tp,
        gpus=gpus,
        weight_dtype=prec[0],
        kv_dtype=prec[1],
        engine=engine,
        measured=MappingProxyType(measured),
        note=prec[2],
        num_requests=_num_requests(notes) if continuous else None,
        memory_fraction=_memory_fraction(notes),
        engine_max_batch=None if sizes is None else sizes[0],
        engine_max_tokens=_max_num_tokens(notes) if sizes is None else sizes[1],
        # the published run went past the model's context: its engine was built for it
        allow_long_context=isl + osl > _context_tokens(model),
        fp8_context_attention=False if fam in FP16_CONTEXT_FMHA and prec[0] == "fp8" else None,
        pp=pp,
        ep=tp if ep_over_tp else 1,
        attention_dp=ep_over_tp,
        decode_kernel="per-head" if _per_head_decode(fam, model) else None,
        cuda_graph_batch_sizes=CUDA_GRAPH_BATCH_SIZES.get(fam, ()),
        in_view=IN_VIEW_MARKER in notes,
    )


def _per_head_decode(family: str, model: str) -> bool:
    """Whether the family's release had no XQA kernel for the model (PER_HEAD_DECODE)."""
    if family not in PER_HEAD_DECODE:
        return False
    from flopwise.workload.hf import load_model

    s = load_model(model)
    group = s.heads // max(1, s.kv_heads)
    return (group, s.head_dim) not in PER_HEAD_DECODE[family]


@functools.cache
def _is_moe(model: str) -> bool:
    """Whether the catalog model routes tokens to experts."""
    from flopwise.workload.hf import load_model

    return load_model(model).is_moe


@functools.cache
def _context_tokens(model: str) -> int:
    """The catalog model's trained context (max_position_embeddings)."""
    from flopwise.workload.hf import load_model

    return load_model(model).max_seq_len


def posed_rows() -> tuple[list[PosedRow], list[Unposed]]:
    posed: list[PosedRow] = []
    unposed: list[Unposed] = []
    for r in load_rows():
        out = pose(r)
        (posed if isinstance(out, PosedRow) else unposed).append(out)  # type: ignore[arg-type]
    return posed, unposed
