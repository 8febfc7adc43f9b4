"""Grouped GEMMs, the MoE expert layer's kernel: G experts, each (M x K) @ (K x N).

An MoE layer's experts multiply their own tokens by their own weights in one grouped kernel
(torchtitan, Megatron-Core's TEGroupedMLP, vLLM/TensorRT-LLM fused MoE): the tokens routed to
each expert sit one after another in a (G*M x K) buffer, the weights in a (G x N x K) stack
(out x in, as a linear layer stores them), and the kernel walks every group's tiles in one
grid. A group's rate is not a dense GEMM's at the same shape: every group pads its own last
tile, and the kernel's scheduling and per-group set-up are its own. So `bench matmul --groups G`
times that kernel at the shapes a job's experts run (M: tokens per expert), and `--measured`
corrects the plan's grouped GEMMs with it (plan/gemm.py ``gemm_correction``), not with the
dense shapes.

The kernel is PyTorch's grouped GEMM, ``torch._grouped_mm`` (CUTLASS on sm90+; a portable
implementation elsewhere, the CPU included), where this torch has it and it runs on the
device; else one ``torch.mm`` per group (what an MoE without a grouped kernel runs). The run
records which (``grouped_kernel``): the two are different kernels, and a rate stands for the
kernel it timed. FP8 grouped GEMMs need per-row scales (``torch._scaled_grouped_mm``) and are
not measured here.
"""

from __future__ import annotations

from typing import Any

from flopwise.bench.device import DeviceInfo
from flopwise.bench.matmul import MAX_MEMORY_SHARE, DType, MatmulKernel
from flopwise.errors import FlopwiseError

#: What ``grouped_kernel`` says for each way of running the groups.
GROUPED_MM = "torch._grouped_mm"
LOOP_MM = "torch.mm per group"

#: Dtypes a grouped run measures (fp8 needs torch._scaled_grouped_mm's row-wise scales).
GROUPED_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp32", "tf32")


class GroupedMatmulKernel(MatmulKernel):
    """Allocates, runs and times `groups` GEMMs of one dtype as one MoE expert layer."""

    def __init__(
        self, torch: Any, info: DeviceInfo, dtype: DType, groups: int, seed: int = 0
    ) -> None:
        if groups < 2:
            raise FlopwiseError(f"--groups must be at least 2 for a grouped GEMM, got {groups}")
        if dtype.name not in GROUPED_DTYPES:
            raise FlopwiseError(
                f"--groups measures {', '.join(GROUPED_DTYPES)} grouped GEMMs, not {dtype.name} "
                "(fp8 grouped GEMMs need row-wise scales); drop --groups or pick one of those"
            )
        self.groups = groups
        self.kernel_name = GROUPED_MM if hasattr(torch, "_grouped_mm") else LOOP_MM
        super().__init__(torch, info, dtype, seed)

    def check_dtype(self) -> None:
        """As the dense kernel's check; a grouped kernel that fails on this device falls back to
        one torch.mm per group (and the run says so), so only a dtype the device cannot
        multiply in at all fails."""
        if self.kernel_name == GROUPED_MM:
            try:
                super().check_dtype()
                return
            except FlopwiseError:
                self.kernel_name = LOOP_MM
        super().check_dtype()

    def prepare(self, m: int, n: int, k: int) -> tuple[Any, Any, Any]:
        """A: the G*M routed tokens (row-major, (G*M x K)); B: the experts' (G x N x K) weights
        used transposed, the NT layout of a linear layer; C: the group end offsets."""
        torch = self.torch
        torch.manual_seed(self.seed)
        dt = getattr(torch, self.torch_dtype)
        g = self.groups
        a = torch.randn(g * m, k, device=self.device, dtype=dt)
        b = torch.randn(g, n, k, device=self.device, dtype=dt).transpose(-2, -1)
        offs = torch.arange(m, g * m + 1, m, device=self.device, dtype=torch.int32)
        return a, b, offs

    def run_once(self, a: Any, b: Any, c: Any) -> Any:
        torch = self.torch
        if self.kernel_name == GROUPED_MM:
            return torch._grouped_mm(a, b, offs=c)
        m = a.shape[0] // self.groups
        return [torch.mm(a[i * m : (i + 1) * m], b[i]) for i in range(self.groups)]

    def refresh_output(self, c: Any) -> None:
        """Nothing to re-randomise: each call writes a fresh output (C holds the offsets)."""

    def fits(self, m: int, n: int, k: int) -> bool:
        mem = self.info.memory_bytes
        g = self.groups
        need = g * ((m * k + k * n) * self.dtype.element_bytes + m * n * 4)
        return mem is None or need <= MAX_MEMORY_SHARE * mem - self.info.flush_bytes

    def flops(self, m: int, n: int, k: int) -> int:
        """2*M*N*K per group, G groups."""
        return 2 * m * n * k * self.groups
