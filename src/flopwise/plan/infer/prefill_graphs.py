"""Whether a serving pass that carries prompt tokens replays a CUDA graph or runs op by op.

Every engine here replays CUDA graphs for decode-only passes (up to the batches it captured).
Passes with prompt tokens (prefill, or decode with prompt tokens mixed in) vary in shape, and
whether they replay a graph is the engine's and the release's choice:

- TensorRT-LLM's PyTorch backend runs them eagerly unless piecewise CUDA graphs are switched on
  (``torch_compile_config.enable_piecewise_cuda_graph``, off by default; its guide says they
  exist "to reduce context-phase launch overhead").
- SGLang ran them eagerly in every release before v0.5.10; piecewise CUDA graphs were opt-in
  (``--enable-piecewise-cuda-graph``) until PR #16331 ("Piecewise Cuda Graph set default",
  merged between 2026-01-03 and 2026-03-03) made them the default (the flag became
  ``--disable-piecewise-cuda-graph`` in v0.5.10). That default keeps them off on ROCm, with DP
  attention and with an MoE all-to-all backend, and captures passes of up to the chunked-prefill
  size, or up to 2,048 tokens for MLA models, "to avoid the performance regression"
  (``server_args.py``, ``piecewise_cuda_graph_max_tokens``); for MLA models whose prefill runs in
  ``trtllm_mla``, SGLang's attention backend for them on Blackwell, it keeps them off (PRs #28053
  and #32785, 2026-06/07). DeepSeek-R1 ran eagerly through v0.5.12 all the same: a rule that
  PR #23351 removed after that release kept its graphs off.

An eager pass costs its host the dispatch of every op (plan/infer/dispatch.py); under the
engine's overlap scheduler only what exceeds the GPU's pass shows. ``InferJob.prefill_cuda_graphs``
says what the deployment ran when the default is not it (an older release, a flag).
"""

from __future__ import annotations

from flopwise.plan.infer.context import Context
from flopwise.plan.infer.job import _vendor, supports_block_scaled

#: The largest prompt pass SGLang's default captures for an MLA model (server_args.py:
#: ``piecewise_cuda_graph_max_tokens`` = 2048 "for MLA backend"; other models: the
#: chunked-prefill size, i.e. every pass).
SGLANG_MLA_GRAPH_MAX_TOKENS = 2048
PROMPT_PASS_GRAPH_POLICIES: tuple[str, ...] = ("never", "sglang")


def prompt_pass_graphed(ctx: Context, tokens: float) -> bool:
    """Whether a pass carrying `tokens` tokens, prompt tokens among them, replays a CUDA graph
    on this deployment: the job's say (``InferJob.prefill_cuda_graphs``) where given, else the
    engine's default (``EngineProfile.prompt_pass_graphs``)."""
    asked = ctx.job.prefill_cuda_graphs
    if asked is not None:
        return asked
    if ctx.engine.prompt_pass_graphs == "sglang":
        return _sglang_default(ctx, tokens)
    return False


def _sglang_off(ctx: Context) -> str | None:
    """Why SGLang's piecewise-graph default (v0.5.10 on; see the module docstring) keeps this
    deployment's prompt passes eager at any size, in words; None where it graphs them."""
    if _vendor(ctx.hw) != "nvidia":
        return "SGLang keeps piecewise graphs off on ROCm"
    if ctx.job.attention_dp:
        return "SGLang: no piecewise graphs with DP attention"
    if ctx.spec.is_mla and supports_block_scaled(ctx.hw):
        return "SGLang: MLA prefill in trtllm_mla on Blackwell, no piecewise graphs"
    return None


def _sglang_default(ctx: Context, tokens: float) -> bool:
    """SGLang's piecewise-graph default: off where _sglang_off says, else every pass up to the
    chunked-prefill size, or up to SGLANG_MLA_GRAPH_MAX_TOKENS for an MLA model."""
    if _sglang_off(ctx) is not None:
        return False
    return tokens <= SGLANG_MLA_GRAPH_MAX_TOKENS if ctx.spec.is_mla else True


def prompt_pass_words(ctx: Context) -> str:
    """How this deployment's prompt passes run, in words (for the plan's assumptions)."""
    asked = ctx.job.prefill_cuda_graphs
    if asked is True:
        return "passes with prompt tokens replay CUDA graphs (as asked)"
    if asked is False:
        return "passes with prompt tokens run eagerly (as asked)"
    if ctx.engine.prompt_pass_graphs != "sglang":
        return "passes with prompt tokens run eagerly (the engine's default)"
    off = _sglang_off(ctx)
    if off is not None:
        return f"passes with prompt tokens run eagerly ({off})"
    if ctx.spec.is_mla:
        return (
            "passes with prompt tokens replay piecewise CUDA graphs up to "
            f"{SGLANG_MLA_GRAPH_MAX_TOKENS:,} tokens and run eagerly above (SGLang v0.5.10 on; "
            "eager in every release before: --no-prefill-cuda-graphs)"
        )
    return (
        "passes with prompt tokens replay piecewise CUDA graphs (SGLang v0.5.10 on; eager in "
        "every release before: --no-prefill-cuda-graphs)"
    )
