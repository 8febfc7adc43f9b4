"""`flopwise bench step MODEL`: time real training steps and set them beside the planner's.

The model's transformer is built from its HF config with torch (layers, and on the CPU the
vocabulary, reduced to fit the device; the result says so), then warm-up steps and timed steps
of forward, backward and AdamW run on the local device (bf16 autocast on accelerators, fp32 on
the CPU), synchronised around each step. Under torchrun every rank runs one replica under
DistributedDataParallel. tokens/s and MFU (model FLOPs as the planner counts them) are reported
next to the planner's prediction for the same job on the same measured hardware, and the ratio
measured / predicted tokens/s is what `plan train --measured` uses as this device's calibration.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError

#: CPU defaults: one full-width layer, a short sequence and a vocabulary cut to 8192 rows
#: (Llama 3's 128256-row embedding and head alone would need 16 GB of fp32 AdamW state).
CPU_DEFAULT_LAYERS = 1
CPU_DEFAULT_SEQ_LEN = 64
CPU_DEFAULT_VOCAB = 8192
#: Accelerator default sequence length (the planner's default is min(context, 4096)).
ACCELERATOR_DEFAULT_SEQ_LEN = 4096
#: Share of device memory the weights, optimizer state and activations may take when the
#: layer count is chosen to fit (the rest: allocator, workspaces, fragmentation).
FIT_MEMORY_SHARE = 0.6
DEFAULT_STEPS = 5
DEFAULT_WARMUP = 2
CPU_DEFAULT_STEPS = 2
CPU_DEFAULT_WARMUP = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class StepConfig:
    model: str
    device: str = "auto"
    layers: int | None = None
    seq_len: int | None = None
    microbatch: int = 1
    vocab: int | None = None
    steps: int | None = None
    warmup: int | None = None
    backend: str = "auto"
    timeout_s: float = 300.0
    #: expert parallelism: 1 (every rank holds every expert, data parallel) or the torchrun
    #: world size (each rank holds experts/world of them; tokens travel by all-to-all)
    ep: int = 1

    def __post_init__(self) -> None:
        if self.ep < 1:
            raise FlopwiseError(f"--ep must be at least 1, got {self.ep}")
        for name in ("layers", "seq_len", "vocab", "steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise FlopwiseError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.microbatch < 1:
            raise FlopwiseError(f"--microbatch must be at least 1, got {self.microbatch}")
        if self.warmup is not None and self.warmup < 0:
            raise FlopwiseError(f"--warmup must not be negative, got {self.warmup}")


def reduced_model(spec: Any, layers: int, vocab: int) -> Any:
    """The model with fewer layers (and rows of vocabulary); the layer shapes are untouched."""
    changes: dict[str, Any] = {"layers": layers, "vocab": vocab, "name": spec.name}
    if spec.sliding_layers:
        changes["sliding_layers"] = min(spec.sliding_layers, layers)
    if spec.dense_layers:  # an MoE model's dense layers among those kept
        changes["dense_layers"] = tuple(i for i in spec.dense_layers if i < layers)
    return replace(spec, **changes)


def layers_that_fit(
    spec: Any, memory_bytes: int | None, tokens: int, act_bytes: int, ep: int = 1
) -> int:
    """Most layers (at most the model's) whose state and activations fit the device, a rank
    holding 1/ep of the routed experts."""
    from flopwise.bench.step_model import STATE_BYTES_PER_PARAM, activation_bytes_per_layer
    from flopwise.workload.params import count_params

    if memory_bytes is None:
        return spec.layers
    one = reduced_model(spec, 1, spec.vocab)
    two = reduced_model(spec, 2, spec.vocab)
    experts = count_params(two).experts - count_params(one).experts
    per_layer = count_params(two).total - count_params(one).total - experts + experts // ep
    fixed = count_params(one).total - per_layer
    budget = FIT_MEMORY_SHARE * memory_bytes - fixed * STATE_BYTES_PER_PARAM
    budget -= tokens * spec.vocab * 4 * 2  # fp32 logits and their gradient
    cost = per_layer * STATE_BYTES_PER_PARAM + activation_bytes_per_layer(spec, tokens, act_bytes)
    fit = int(budget // cost) if budget > 0 else 0
    if fit < 1:
        raise FlopwiseError(
            f"not even one layer of {spec.name} fits {memory_bytes / 2**30:.0f} GiB at this "
            "microbatch and sequence length; lower --seq-len or --microbatch"
        )
    return min(fit, spec.layers)


def make_adamw(torch: Any, params: Any) -> tuple[Any, str]:
    """AdamW as training frameworks run it: the fused single-kernel update (torchtitan's
    default, Megatron's apex/TE FusedAdam), which the planner's optimizer time assumes (one
    read of parameters, gradients and moments, one write). PyTorch's own default is the
    foreach implementation, a sequence of multi-tensor passes: on an H100 (2026-11-23,
    benchmarks/device/profile_step.py) it spent 69 ms per step on 2.36B parameters, about
    85 B per parameter against the fused kernel's ~30. Falls back to foreach where this torch
    build has no fused kernel for the device; the result names which ran."""
    params = list(params)
    try:
        return torch.optim.AdamW(params, lr=1e-4, fused=True), "AdamW (fused)"
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=1e-4), "AdamW (foreach: no fused kernel here)"


def _timed_steps(
    model: Any,
    opt: Any,
    tokens: Any,
    steps: int,
    warmup: int,
    sync: Any,
    amp: Any,
    on_step: Any,
    keep_grads: bool = False,
) -> list[float]:
    """Seconds of each timed step (forward, backward, AdamW), synchronised on both sides.

    keep_grads (the CPU): zero gradients in place instead of freeing them, because the host
    allocator returns large blocks to the OS and every step would page-fault them back in (the
    accelerators' caching allocators keep them; there set_to_none is the frameworks' default)."""
    out = []
    for i in range(warmup + steps):
        sync()
        start = time.perf_counter()
        with amp():
            loss = model(tokens)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=not keep_grads)
        sync()
        if i >= warmup:
            out.append(time.perf_counter() - start)
        if on_step is not None:
            on_step(i + 1, warmup + steps)
    return out


def run_step(config: StepConfig, db: str | None = None, on_step: Any = None) -> dict[str, Any]:
    """Build, time and predict; returns the result document (rank 0's view under torchrun)."""
    from contextlib import nullcontext

    from flopwise.bench.device import (
        accelerator_id,
        activate,
        import_torch,
        resolve_device,
        synchronize,
    )
    from flopwise.bench.step_predict import predict_step
    from flopwise.workload.flops import train_flops_per_token
    from flopwise.workload.hf import load_model

    spec = load_model(config.model)
    torch = import_torch()
    from flopwise.bench.step_model import check_supported

    check_supported(spec)
    session = None
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if config.ep not in (1, world):
        raise FlopwiseError(
            f"--ep {config.ep}: expert parallelism spans every rank of the job (--ep {world} "
            f"under this torchrun) or none (--ep 1)"
        )
    if config.ep > 1 and (not spec.is_moe or spec.experts % config.ep):
        raise FlopwiseError(
            f"--ep {config.ep} shards experts: {spec.name} has "
            f"{spec.experts or 'no'} experts, which it does not divide"
        )
    if world > 1:
        from flopwise.bench import dist

        session = dist.start(config.backend, config.timeout_s)
        info = resolve_device(session.device)
    else:
        info = resolve_device(config.device)
    activate(torch, info)
    on_cpu = not info.is_accelerator
    seq = config.seq_len or (CPU_DEFAULT_SEQ_LEN if on_cpu else ACCELERATOR_DEFAULT_SEQ_LEN)
    seq = min(seq, spec.max_seq_len)
    vocab = config.vocab or (min(spec.vocab, CPU_DEFAULT_VOCAB) if on_cpu else spec.vocab)
    act_bytes = 4 if on_cpu else 2
    tokens_per_rank = config.microbatch * seq
    if config.layers is not None:
        layers = min(config.layers, spec.layers)
    elif on_cpu:
        layers = min(CPU_DEFAULT_LAYERS, spec.layers)
    else:
        layers = layers_that_fit(
            reduced_model(spec, spec.layers, vocab),
            info.memory_bytes,
            tokens_per_rank,
            act_bytes,
            config.ep,
        )
    small = reduced_model(spec, layers, vocab)
    steps = config.steps or (CPU_DEFAULT_STEPS if on_cpu else DEFAULT_STEPS)
    warmup = (
        config.warmup
        if config.warmup is not None
        else (CPU_DEFAULT_WARMUP if on_cpu else DEFAULT_WARMUP)
    )
    from flopwise.bench.step_model import (
        ExpertParallel,
        build,
        expert_parameter_names,
        parameter_count,
    )

    torch.manual_seed(0)
    device = torch.device(info.spec)
    ep = None
    if config.ep > 1 and session is not None:
        import torch.distributed as tdist

        ep = ExpertParallel(tdist.group.WORLD, session.rank, config.ep)
    model = build(small, device, ep)
    params = parameter_count(model)
    net: Any = model
    if session is not None:
        from torch.nn.parallel import DistributedDataParallel

        if ep is not None:  # each rank's experts are its own: not averaged across ranks
            DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
                model, expert_parameter_names(model)
            )
        ids = [info.index] if info.is_accelerator and info.index is not None else None
        net = DistributedDataParallel(model, device_ids=ids)
    opt, optimizer = make_adamw(torch, model.parameters())
    tokens = torch.randint(0, vocab, (config.microbatch, seq), device=device)
    if on_cpu:
        amp: Any = nullcontext
        dtype = "fp32"
    else:

        def amp() -> Any:
            return torch.autocast(device_type=info.type, dtype=torch.bfloat16)

        dtype = "bf16"

    def sync() -> None:
        synchronize(torch, info)

    status = "complete"
    try:
        seconds = _timed_steps(net, opt, tokens, steps, warmup, sync, amp, on_step, on_cpu)
    except KeyboardInterrupt:
        status, seconds = "interrupted", []
    except RuntimeError as exc:
        from flopwise.bench.device import is_out_of_memory

        if is_out_of_memory(exc):
            raise FlopwiseError(
                f"{small.name} with {layers} layer(s) at microbatch {config.microbatch} x "
                f"{seq} tokens is out of memory on {info.spec}; lower --layers or --seq-len"
            ) from None
        raise
    step_s = statistics.median(seconds) if seconds else None
    if session is not None and step_s is not None:
        # the slowest rank sets the pace of data-parallel training
        t = torch.tensor([step_s], dtype=torch.float64, device=device)
        import torch.distributed as tdist

        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        step_s = float(t.item())
    flops_per_token = train_flops_per_token(small, seq).model
    tps = None if step_s is None else world * tokens_per_rank / step_s
    acc = accelerator_id(info)
    pred = predict_step(
        small,
        acc,
        world_size=world,
        microbatch=config.microbatch,
        seq_len=seq,
        on_cpu=on_cpu,
        db=db,
        ep=config.ep,
    )
    peak, peak_source = _peak(acc, dtype, pred)
    mfu = None if tps is None or not peak else flops_per_token * tps / world / (peak * 1e12)
    ratio = None if tps is None or not pred.tokens_per_s else tps / pred.tokens_per_s
    from flopwise.bench.provenance import provenance

    doc: dict[str, Any] = {
        "model": spec.name,
        "device": info.spec,
        "device_name": info.name,
        "accelerator": acc,
        "dtype": dtype,
        "layers": layers,
        "layers_full": spec.layers,
        "vocab": vocab,
        "vocab_full": spec.vocab,
        "reduced": _reduction_text(spec, layers, vocab),
        "hidden": spec.hidden,
        "params": params,
        # an MoE step calibrates MoE plans only (results/measured.py step_calibration_moe)
        "moe": small.is_moe,
        "moe_kernel": _moe_kernel(model),
        "ep": config.ep,
        "seq_len": seq,
        "microbatch": config.microbatch,
        "world_size": world,
        "steps": len(seconds),
        "warmup": warmup,
        "optimizer": optimizer,
        "step_time_s": step_s,
        "step_times_s": seconds,
        "tokens_per_s": tps,
        "model_flops_per_token": flops_per_token,
        "tflops_per_device": None if tps is None else flops_per_token * tps / world / 1e12,
        "peak_tflops": peak,
        "peak_source": peak_source,
        "mfu": mfu,
        "predicted": pred.to_dict(),
        "calibration": ratio,
        "calibration_meaning": "measured / predicted tokens/s; plan train --measured divides "
        "its compute and memory-bound time by it",
        "status": status,
        "device_info": info.to_dict(),
        "provenance": provenance(torch, info),
    }
    if session is not None:
        from flopwise.bench import dist

        doc["rank"] = session.rank
        dist.stop()
    return doc


def _peak(acc: str | None, dtype: str, pred: Any) -> tuple[float | None, str]:
    """MFU denominator: the catalog's dense peak; on the CPU the measured matmul rate the
    prediction used (none is published)."""
    if acc is not None and acc != "cpu":
        from flopwise.catalog import get_accelerator

        value = get_accelerator(acc).peak_tflops(dtype)
        if value:
            return value, f"catalog dense {dtype} peak of {acc}"
    if pred.peak_tflops:
        return pred.peak_tflops, f"as the planner's: {pred.peak_source}"
    return None, "unknown (no catalog peak and no stored matmul measurement)"


def _reduction_text(spec: Any, layers: int, vocab: int) -> str:
    parts = []
    if layers < spec.layers:
        parts.append(f"{layers} of {spec.layers} layers")
    if vocab < spec.vocab:
        parts.append(f"vocabulary {vocab} of {spec.vocab} rows")
    what = " and ".join(parts) or "nothing"
    return f"reduced to fit the device: {what}; hidden size and layer shapes are the model's"


def _moe_kernel(model: Any) -> str | None:
    """What the MoE layers ran their expert GEMMs with (None for a dense model)."""
    kernels = {m.kernel for m in model.modules() if type(m).__name__ == "_MoE"}
    return ", ".join(sorted(kernels)) or None


def summary_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The headline stored as the result's summary (read by plan train --measured)."""
    keys = (
        "model", "device", "device_name", "dtype", "layers", "layers_full", "vocab", "seq_len",
        "microbatch", "world_size", "step_time_s", "tokens_per_s", "mfu", "peak_tflops",
        "calibration", "status", "moe", "moe_kernel", "ep",
    )  # fmt: skip
    out = {k: doc.get(k) for k in keys}
    pred = doc.get("predicted") or {}
    out["predicted_tokens_per_s"] = pred.get("tokens_per_s")
    out["predicted_mfu"] = pred.get("mfu")
    return out
