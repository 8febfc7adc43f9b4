"""The forward and backward graphs torch.compile makes of a function, through AOTAutograd.

Tests that check what a compiled training step runs (which matmuls a checkpoint recomputes,
which casts are merged) read these graphs instead of timing anything. By default the joint
graph is split by the min-cut partitioner, the one Inductor uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

#: Dynamo, tracing a custom autograd Function, instantiates torch's Function base class, which
#: torch itself warns about (DeprecationWarning from torch/autograd/function.py): not the
#: tests' code. A ``pytest.mark.filterwarnings`` argument.
TORCH_FUNCTION_INSTANTIATION_WARNING = "ignore:.*should not be instantiated:DeprecationWarning"


def compiled_graphs(
    fn: Callable[..., torch.Tensor], *inputs: torch.Tensor, min_cut: bool = True
) -> dict[str, torch.fx.GraphModule]:
    """Run ``fn(*inputs).sum().backward()`` compiled as one graph and return {"fw", "bw"}:
    the graphs AOTAutograd hands its compilers, split by the min-cut partitioner (Inductor's)
    or, with ``min_cut=False``, by the default partitioner, which eliminates no common
    subexpressions."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs: dict[str, torch.fx.GraphModule] = {}

    def keep(kind: str) -> Callable[[torch.fx.GraphModule, Any], Any]:
        def compiler(gm: torch.fx.GraphModule, _inputs: Any) -> Any:
            assert kind not in graphs, f"a second {kind} graph: the function did not compile whole"
            graphs[kind] = gm
            return make_boxed_func(gm.forward)

        return compiler

    partition = {"partition_fn": min_cut_rematerialization_partition} if min_cut else {}
    backend = aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw"), **partition)
    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*inputs).sum().backward()
    return graphs


def calls(gm: torch.fx.GraphModule, target_contains: str) -> list[torch.fx.Node]:
    """The graph's operator calls whose target names `target_contains` (placeholders, which
    carry the forward's node names into the backward, are not calls)."""
    return [
        n for n in gm.graph.nodes if n.op == "call_function" and target_contains in str(n.target)
    ]
