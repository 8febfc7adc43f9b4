"""The GEMM shapes a training plan prices for one job, so `bench matmul --model` can time them.

The step-time model (plan/train/step_time.py) prices every GEMM of a layer and of the logits
through one memoised function, keyed by its forward shape; each forward (M x K) @ (K x N) has a
data-gradient (M x N) @ (N x K) and a weight-gradient (K x M) @ (M x N) beside it. Pricing the
job once and reading that memo gives exactly the shapes the plan will look up in a measured
shape table (`plan train --measured`): nothing here restates the model's formulas. Batched
attention GEMMs of the unfused kernel (heads as the batch) are left out: `bench matmul` times
single and grouped GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.hardware import Hardware
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.layout import Layout
from flopwise.plan.train.step_time import step_breakdown
from flopwise.workload.spec import ModelSpec


@dataclass(frozen=True, slots=True, order=True)
class JobGemm:
    """One GEMM shape of a job: `groups` > 1 is one grouped kernel of that many experts, each
    (m x k) @ (k x n) with m its tokens."""

    groups: int
    m: int
    n: int
    k: int

    @property
    def grouped(self) -> bool:
        return self.groups > 1


def job_gemm_shapes(
    model: ModelSpec, hw: Hardware, job: object, layout: Layout, backward: bool = True
) -> list[JobGemm]:
    """Every distinct GEMM shape (forward, data and weight gradient; the forward alone when
    not `backward`) the plan of `job` on `layout` prices, sorted. `job` is a plan.train
    TrainJob."""
    ctx = ModelContext(model, hw, job)  # type: ignore[arg-type]
    step_breakdown(ctx, layout, 1)
    shapes: set[JobGemm] = set()
    for key in ctx.cache("gemm"):
        m, n, k, batch, _dtype, grouped, wgrad = key
        if not isinstance(batch, int) or (batch > 1 and not grouped):
            continue  # heads-batched attention GEMMs
        mi, ni, ki = (max(int(float(v)), 1) for v in (m, n, k))  # type: ignore[arg-type]
        groups = batch if grouped else 1
        passes: tuple[tuple[int, int, int], ...] = ((mi, ni, ki),)
        if backward:
            # the data gradient, and the weight gradient unless the weight is frozen (LoRA)
            passes += ((mi, ki, ni),) + (((ki, ni, mi),) if wgrad else ())
        for a, b, c in passes:
            shapes.add(JobGemm(groups, a, b, c))
    return sorted(shapes)


#: The catalog device the shapes are derived on: a job's GEMM shapes depend on its model,
#: layout and framework, not on the device (any catalog entry builds the planner's context).
SHAPES_REFERENCE_DEVICE = "h100-sxm"


def training_gemm_shapes(
    model: ModelSpec,
    *,
    tp: int = 1,
    ep: int = 1,
    cp: int = 1,
    seq_len: int = 4096,
    microbatch: int = 1,
    dtype: str = "bf16",
    framework: str = "generic",
    backward: bool = True,
) -> list[JobGemm]:
    """The GEMM shapes one training microbatch of `model` runs per GPU under tensor parallelism
    `tp`, expert parallelism `ep` and context parallelism `cp` (data parallel over the experts'
    ranks; pipeline stages do not change a layer's shapes); the forward GEMMs alone when not
    `backward`."""
    from flopwise.errors import FlopwiseError
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.train.job import TrainJob

    for name, value in (("tp", tp), ("ep", ep), ("cp", cp), ("seq-len", seq_len)):
        if value < 1:
            raise FlopwiseError(f"--{name} must be at least 1, got {value}")
    if microbatch < 1:
        raise FlopwiseError(f"--microbatch must be at least 1, got {microbatch}")
    if ep > 1 and (not model.is_moe or model.experts % ep):
        valid = "a divisor of its expert count" if model.is_moe else "1 (a dense model)"
        raise FlopwiseError(f"--ep {ep} does not split {model.name}'s experts; valid: {valid}")
    gpus = tp * ep * cp
    job = TrainJob(
        gpus=gpus,
        seq_len=seq_len,
        global_batch_seqs=microbatch * ep,
        dtype=dtype,
        framework=framework,
        gpus_per_node=gpus,
    )
    layout = Layout(tp=tp, pp=1, dp=ep, cp=cp, ep=ep, microbatch=microbatch)
    hw = hardware_from_catalog(SHAPES_REFERENCE_DEVICE)
    return job_gemm_shapes(model, hw, job, layout, backward)


def forward_gemm_shapes(
    model: ModelSpec, tokens: tuple[int, ...], *, tp: int = 1, ep: int = 1
) -> list[JobGemm]:
    """The forward GEMMs of one pass over each token count in `tokens` (a serving engine's
    decode batches and prefill chunks): the layers' projections with M the tokens, the experts
    with M the tokens each receives on average (tokens x top-k x ep / experts, at least 1),
    and the logits. Shapes only; the serving planner draws each expert's rows around that
    mean (plan/infer/latency.py) and interpolates between measured shapes."""
    from flopwise.errors import FlopwiseError

    if not tokens or min(tokens) < 1:
        raise FlopwiseError(f"--tokens takes positive token counts, got {list(tokens)}")
    found: set[JobGemm] = set()
    for t in tokens:
        found.update(training_gemm_shapes(model, tp=tp, ep=ep, seq_len=t, backward=False))
    return sorted(found)
