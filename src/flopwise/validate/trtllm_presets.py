"""The engine sizes ``trtllm-bench build`` gave the TensorRT-LLM 0.14 published runs.

Before 0.15, ``trtllm-bench build --dataset`` did not size the engine from the dataset's
lengths: it looked the model and its TP x PP mapping up in a pre-defined table,
``tensorrt_llm/bench/build/benchmark_config.yml``, keyed by the dataset's max sequence length
(ISL + OSL here) where the table has such a row, else by ``general``, and built the engine with
that max_batch_size and max_num_tokens (``build.py``'s ``get_benchmark_engine_settings``; a model
or mapping missing from the table was refused). The tuning heuristic that
``plan/infer/trtllm_build.py`` models (``tuning.py``) arrived with 0.15: the 0.15
perf-overview is the first to say "trtllm-bench build uses high-level statistics of the dataset
... and tuning heuristics", and the 0.14 perf-overview's alternative build command,
``--max_seq_length $seq_len``, is the option of the table-driven ``build.py`` (the heuristic's
``build.py`` names it ``--max_seq_len``).

The values below are NVIDIA's own: the stored ``benchmark_config.yml`` (NVIDIA/TensorRT-LLM,
commit 8fcf9fc2) and the 0.11 perf-overview's "Network Configuration Files and Settings"
tables, which list the same numbers. The stored table names Meta-Llama-3-70B and -8B; the 0.14
table's Llama 3.1 entries were not stored. They are taken to be the same: Llama 3.1 70B/8B have
the Llama 3 architecture and vocabulary, and the 0.14 perf-overview runs "LLaMA v3 70B" and
"LLaMA v3.1 70B" through the same grid side by side. Models and mappings the stored table lacks
(Llama 3.1 405B, Mixtral 8x22B, Mixtral 8x7B at TP 8) stay unknown: those rows get no sizes and
the planner's default sizing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: (catalog model id, tp) -> {max sequence length or "general": (max_batch_size, max_num_tokens)}
TRTLLM_BENCH_014_SIZES: Mapping[tuple[str, int], Mapping[int | str, tuple[int, int]]] = (
    MappingProxyType(
        {
            ("llama-3.1-70b", 1): {"general": (2048, 2048)},
            ("llama-3.1-70b", 2): {"general": (256, 1024), 4096: (2048, 1024)},
            ("llama-3.1-70b", 4): {"general": (2048, 1024)},
            ("llama-3.1-70b", 8): {"general": (8192, 16384)},
            ("llama-3.1-8b", 1): {"general": (2048, 8192)},
            ("mixtral-8x7b", 2): {"general": (2048, 3072)},
            ("mixtral-8x7b", 4): {"general": (8192, 8192)},
        }
    )
)

#: Families whose engines were built from that table.
PRESET_FAMILIES: tuple[str, ...] = ("trtllm014",)


def preset_sizes(family: str, model: str, tp: int, seq_len: int) -> tuple[int, int] | None:
    """(max_batch_size, max_num_tokens) of a row's engine, or None where unknown."""
    if family not in PRESET_FAMILIES:
        return None
    rows = TRTLLM_BENCH_014_SIZES.get((model, tp))
    if rows is None:
        return None
    return rows.get(seq_len, rows["general"])


#: The CUDA-graph batch sizes the TensorRT-LLM 1.0 perf-overview ran with padding on: its
#: "Reproducing Benchmarked Results" section gives one ``llm_options.yml`` for dense and one
#: for MoE models (``trtllm-bench ... throughput --backend pytorch --extra_llm_api_options
#: $llm_options``), both ``cuda_graph_config: {enable_padding: true, batch_sizes: [1, 2, 4, 8,
#: 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192]}`` (NVIDIA/TensorRT-LLM
#: docs/source/performance/perf-overview.md, the 1.0 edition whose tables are the trtllm10
#: rows). Posed as ``--cuda-graph-batch-sizes``.
CUDA_GRAPH_BATCH_SIZES: dict[str, tuple[int, ...]] = {
    "trtllm10": (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192),
}
