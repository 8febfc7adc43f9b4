"""Trace the HBM traffic of eager PyTorch pointwise ops: the constants of plan/train/pointwise.py.

    python scripts/trace_pointwise.py            # print bytes per element, forward and backward
    python scripts/trace_pointwise.py --check    # exit 1 when the shipped constants differ

Each chain of pointwise ops a torchtitan Llama block runs between its matmuls (torchtitan
9dec370 / 3e3909a0: torchtitan/models/norms.py ``RMSNorm`` with norm_type "rmsnorm", and
torchtitan/models/llama/model.py ``apply_rotary_emb``, ``repeat_kv``, ``FeedForward``) is
written here as the same sequence of PyTorch ops and run once forward and once backward under a
``TorchDispatchMode`` that adds up, for every op that launches a kernel, the bytes of its
tensor inputs and outputs. Eager PyTorch runs one kernel per op and each kernel reads its
inputs from HBM and writes its output back (the activations are far larger than L2), so that
sum is the chain's HBM traffic. Views (reshape, transpose, view_as_complex) launch nothing and
are skipped; an expanded view reads only its storage; per-row and per-feature vectors (the
norm's rsqrt, its weight) are skipped as negligible beside the token-by-feature tensors.

Device-independent: the ops and their dtypes are those the same code dispatches on a GPU; only
where the bytes come from (HBM) is the GPU's. Runs on the CPU in seconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

TOKENS = 512
WIDTH = 256
HEADS = 4
HEAD_DIM = 64
N_REP = 4

#: ops that launch no kernel (views, metadata) or allocate without moving data
_NO_KERNEL = frozenset(
    {
        "view", "_unsafe_view", "t", "transpose", "expand", "permute", "view_as_complex",
        "view_as_real", "detach", "alias", "slice", "select", "unsqueeze", "squeeze",
        "as_strided", "_reshape_alias", "split", "split_with_sizes", "ones_like",
        "zeros_like", "empty_like", "new_empty_strided", "_conj",
        "mm", "addmm",  # the matmuls around the chains are priced as GEMMs
    }
)  # fmt: skip


def _counter(min_elements: int) -> Any:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Bytes(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0.0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in _NO_KERNEL:
                return out

            def size(t: object) -> int:
                if not isinstance(t, torch.Tensor) or t.numel() < min_elements:
                    return 0
                stored = t.untyped_storage().nbytes() // t.element_size()
                return min(t.numel(), stored) * t.element_size()

            flat = [*args, *(kwargs or {}).values()]
            flat += list(out) if isinstance(out, (list, tuple)) else [out]
            for a in flat:
                for t in a if isinstance(a, (list, tuple)) else [a]:
                    self.total += size(t)
            return out

    return Bytes()


def traffic(
    fn: Callable[..., Any], inputs: Sequence[Any], elements: int, grads_of: Sequence[Any]
) -> tuple[float, float]:
    """(forward, backward) bytes per element of `elements` moved by `fn(*inputs)`."""
    import torch

    with _counter(TOKENS) as fwd:
        y = fn(*inputs)
    g = torch.randn_like(y)
    with _counter(TOKENS) as bwd:
        torch.autograd.grad(y, list(grads_of), g)
    return fwd.total / elements, bwd.total / elements


def trace() -> dict[str, tuple[float, float]]:
    """Bytes per element, forward and backward, of each eager chain."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    bf16 = torch.bfloat16
    x = torch.randn(TOKENS, WIDTH, dtype=bf16, requires_grad=True)
    y = torch.randn(TOKENS, WIDTH, dtype=bf16, requires_grad=True)
    weight = torch.ones(WIDTH, dtype=bf16, requires_grad=True)
    square = torch.randn(WIDTH, WIDTH, dtype=bf16) / WIDTH

    def rms_norm(v: Any) -> Any:
        # upcast, mean of squares, reciprocal root, scale, downcast, weight
        up = v.float()
        return (up * torch.rsqrt(up.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(v) * weight

    def layer_norm(v: Any) -> Any:
        return F.layer_norm(v, (WIDTH,), weight)

    n = TOKENS * WIDTH
    out = {
        "rms_norm": traffic(rms_norm, [x], n, [x, weight]),
        "one_kernel_norm": traffic(layer_norm, [x], n, [x, weight]),
        # the residual stream branches into the block and around it: one add forward, and in the
        # backward the sum of the two gradients where it branched
        "residual": traffic(lambda a: a + a @ square, [x], n, [x]),
        "gated_act": traffic(lambda a, b: F.silu(a) * b, [x, y], n, [x, y]),
        "gelu": traffic(lambda a: F.gelu(a), [x], n, [x]),
    }
    q = torch.randn(1, TOKENS, HEADS, HEAD_DIM, dtype=bf16, requires_grad=True)
    angles = torch.randn(TOKENS, HEAD_DIM // 2)
    freqs = torch.polar(torch.ones_like(angles), angles).view(1, TOKENS, 1, HEAD_DIM // 2)

    def rope(v: Any) -> Any:
        # pairs as complex numbers in fp32, rotated, back to the input dtype
        pairs = torch.view_as_complex(v.float().reshape(*v.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * freqs).flatten(3).type_as(v)

    fwd, bwd = traffic(rope, [q], TOKENS * HEADS * HEAD_DIM, [q])
    # less the rotation table (one complex64 per pair and token, read once per call: 4 bytes
    # per element over the heads of the call), which the shipped constants leave out
    out["rope"] = (fwd - 4.0 / HEADS, bwd - 4.0 / HEADS)
    kv = torch.randn(1, TOKENS, HEADS, HEAD_DIM, dtype=bf16, requires_grad=True)

    def repeat_kv(v: Any) -> Any:
        # each key/value head copied once per query head that shares it
        b, s, k, d = v.shape
        return v[:, :, :, None, :].expand(b, s, k, N_REP, d).reshape(b, s, k * N_REP, d)

    out["repeat_kv"] = traffic(repeat_kv, [kv], TOKENS * HEADS * HEAD_DIM, [kv])
    return out


def main(argv: list[str]) -> int:
    from flopwise.plan.train.pointwise import EAGER_BYTES_PER_ELEMENT, repeat_kv_bytes

    traced = trace()
    shipped = dict(EAGER_BYTES_PER_ELEMENT)
    shipped["repeat_kv"] = (repeat_kv_bytes(N_REP), repeat_kv_bytes(N_REP))
    stale = []
    for name, (fwd, bwd) in traced.items():
        ref = shipped.get(name)
        print(f"{name:16s} forward {fwd:6.2f}  backward {bwd:6.2f} B/element   shipped {ref}")
        if ref is None or abs(ref[0] - fwd) > 0.51 or abs(ref[1] - bwd) > 0.51:
            stale.append(name)
    if "--check" in argv and stale:
        print(f"stale: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
