"""LoRA fine-tuning (``--lora-rank R``, ``--lora-targets``): frozen base weights, low-rank adapters.

LoRA (Hu et al. 2021, arXiv:2106.09685 §4.1) keeps every pretrained weight W frozen and trains,
beside each targeted linear, A (r x in) and B (out x r): y = W x + B A x. What that changes in a
training step, as the step and memory models price it:

- Backward: a frozen linear computes only its data gradient (the gradient that flows on to the
  layers below); its weight-gradient GEMM is not run, because nothing needs it (PyTorch autograd
  computes a gradient only for inputs that require one; Transformer Engine's linears skip the
  weight gradient when the weight does not require grad). The output head is frozen too. So a
  step's GEMM work is forward + data gradient, about 4 x the base matmul FLOPs per token
  instead of 6 x, plus the adapters'.
- Adapters: two GEMMs forward (x A, then (x A) B) and four backward (data and weight gradients
  of both) per targeted linear, in 16-bit; the column-parallel targets (Q/K/V, FC1) split B's
  output over TP, the row-parallel ones (attention output, FC2) A's input. Each adapter's
  output is added to its linear's, and the two input gradients summed, in separate elementwise
  kernels (step_time.adapter_cost).
- Training state: the base weights keep their stored bytes (16-bit, and a recipe's FP8 copy)
  but have no gradient, fp32 master or optimizer state; the adapters carry the full recipe.
  Data-parallel gradient traffic, ZeRO gradient handling and the optimizer step cover the
  adapters only; ZeRO-3 still gathers the sharded base weights.
- Activations: a frozen linear saves no input for the weight gradient it skips; a targeted
  one's adapter keeps that input in 16-bit for its A gradient (activations.py
  _lora_saved_inputs_delta).
- FP8 (Transformer Engine recipes): a frozen linear's input gets no transposed FP8 copy (the
  transpose is made only for a weight gradient); the output gradients keep their cast-transpose
  (plan/train/fp8.py).

QLoRA (``--qlora``; Dettmers et al. 2023, arXiv:2305.14314) stores the frozen base's layer
linears in 4-bit NormalFloat with double-quantized constants (NF4_BYTES_PER_PARAM) and
dequantizes each to 16 bits whenever a GEMM uses it (NF4_DEQUANT_BYTES_PER_PARAM through HBM,
forward and data gradient); the embedding, the output head and the norms stay 16-bit, as
bitsandbytes leaves them. Paged optimizers (optimizer state paged to host memory on spikes) are
not modelled: the adapters' state is counted on the device.

MoE layers: the router stays frozen; FC1/FC2 targets put an adapter on every routed expert (run
as grouped GEMMs over each GPU's local experts, with the experts' tokens) and on the shared
experts, as Megatron-Bridge's LoRA adapts linear_fc1/linear_fc2 inside the experts; expert
adapters are sharded and reduced as the experts are (EP, expert data parallelism).

Not modelled, and refused with one line: adapters on multi-head latent attention's
projections, the Muon optimizer, multi-token-prediction modules, QLoRA with FP8 GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.errors import FlopwiseError
from flopwise.workload.spec import ModelSpec

#: The linears an adapter can sit beside, by Megatron-Core's names without the `linear_` prefix:
#: the fused Q/K/V projection, the attention output projection, the MLP's up (with gate) and
#: down projections.
LORA_TARGETS: tuple[str, ...] = ("qkv", "proj", "fc1", "fc2")

#: Targets when none are named: every linear of the block, as NeMo 2.0's and Megatron-Bridge's
#: `LoRA` default target_modules (linear_qkv, linear_proj, linear_fc1, linear_fc2).
DEFAULT_LORA_TARGETS: tuple[str, ...] = LORA_TARGETS

#: Highest adapter rank a plan takes (LoRA papers use 1-256; more is surely a typo).
MAX_LORA_RANK = 4096

#: Bytes per parameter of a QLoRA base linear (`--qlora`): 4-bit NormalFloat values plus their
#: double-quantized constants, "8/64 + 32/(64 x 256) = 0.127 bits per parameter" (Dettmers et
#: al. 2023, arXiv:2305.14314 §3: blocks of 64 with an 8-bit absmax, those in blocks of 256 with
#: an fp32 one), the bitsandbytes `nf4` + `bnb_4bit_use_double_quant` layout QLoRA trains with.
NF4_BYTES_PER_PARAM = (4.0 + 8.0 / 64 + 32.0 / (64 * 256)) / 8.0

#: Bytes a QLoRA linear's weight costs each time a GEMM uses it: bitsandbytes dequantizes it to
#: a 16-bit copy before the matmul (forward, and again for the data gradient), reading the
#: NF4 weight and writing 16 bits (the GEMM reads that copy as any weight).
NF4_DEQUANT_BYTES_PER_PARAM = NF4_BYTES_PER_PARAM + 2.0


def parse_lora_targets(text: str) -> tuple[str, ...]:
    """A comma list of LORA_TARGETS (``all`` for all four), in canonical order, or a one-line
    error naming the bad name and the valid ones."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    if names == ["all"]:
        return LORA_TARGETS
    if not names:
        raise FlopwiseError(f"--lora-targets is empty; give some of {', '.join(LORA_TARGETS)}")
    for n in names:
        if n not in LORA_TARGETS:
            raise FlopwiseError(
                f"--lora-targets: {n!r} is not one of {', '.join(LORA_TARGETS)} (or all)"
            )
    return tuple(t for t in LORA_TARGETS if t in names)


@dataclass(frozen=True, slots=True)
class Linear:
    """One targeted linear of a layer: its input and output widths (whole, before TP) and
    whether TP splits its output (column-parallel) or its input (row-parallel)."""

    name: str
    d_in: float
    d_out: float
    column_parallel: bool


def attention_linears(
    m: ModelSpec, targets: tuple[str, ...], separate: bool = False
) -> tuple[Linear, ...]:
    """The attention linears of a layer that carry an adapter. Megatron-Core fuses Q/K/V into
    one linear with one adapter; where the model code keeps them apart (`separate`: Hugging
    Face's and torchtitan's q/k/v_proj, as PEFT targets them) each has its own."""
    h = m.hidden
    q, k, v = m.heads * m.head_dim, m.kv_heads * m.head_dim, m.kv_heads * m.v_head_dim
    out: list[Linear] = []
    if "qkv" in targets:
        if separate:
            out += [Linear(n, h, w, True) for n, w in (("q", q), ("k", k), ("v", v))]
        else:
            out.append(Linear("qkv", h, q + k + v, True))
    if "proj" in targets:
        out.append(Linear("proj", m.heads * m.v_head_dim, h, False))
    return tuple(out)


def mlp_linears(
    m: ModelSpec, targets: tuple[str, ...], width: float, separate: bool = False
) -> tuple[Linear, ...]:
    """The linears of one MLP of intermediate `width` that carry an adapter: FC1 (gate and up,
    fused in Megatron-Core, apart where `separate`) and FC2. A dense layer's MLP, a MoE layer's
    shared experts (one MLP of their summed width, as Megatron-Core builds them) and each routed
    expert are such an MLP (Megatron-Bridge's LoRA adapts the experts' linear_fc1/linear_fc2)."""
    h, mult = m.hidden, 2 if m.gated_mlp else 1
    out: list[Linear] = []
    if "fc1" in targets:
        if separate:
            out += [Linear(n, h, width, True) for n in ("gate", "up")[-mult:]]
        else:
            out.append(Linear("fc1", h, mult * width, True))
    if "fc2" in targets:
        out.append(Linear("fc2", width, h, False))
    return tuple(out)


#: Where an adapter group sits (AdapterGroup.where): every layer's attention, the dense layers'
#: MLP, each MoE layer's shared experts, each routed expert of each MoE layer.
ADAPTER_PLACES: tuple[str, ...] = ("all", "dense", "shared", "expert")


@dataclass(frozen=True, slots=True)
class AdapterGroup:
    """The adapted linears of one part of a layer, and which layers (or experts) hold it."""

    where: str  # ADAPTER_PLACES
    linears: tuple[Linear, ...]

    def params(self, rank: int) -> float:
        """Trained parameters of one copy: r x (in + out) per targeted linear."""
        return float(sum(rank * (lin.d_in + lin.d_out) for lin in self.linears))


def adapter_groups(
    m: ModelSpec, targets: tuple[str, ...], separate: bool = False
) -> tuple[AdapterGroup, ...]:
    """The model's adapted linears by where they sit: the one place both the parameter counts
    (adapter_counts) and the step model (step_time.adapter_cost) read them from."""
    groups = [AdapterGroup("all", attention_linears(m, targets, separate))]
    if m.ffn:
        groups.append(AdapterGroup("dense", mlp_linears(m, targets, m.ffn, separate)))
    shared_width = m.shared_experts * m.shared_expert_ffn
    if shared_width:
        groups.append(AdapterGroup("shared", mlp_linears(m, targets, shared_width, separate)))
    if m.is_moe:
        groups.append(AdapterGroup("expert", mlp_linears(m, targets, m.expert_ffn, separate)))
    return tuple(groups)


@dataclass(frozen=True, slots=True)
class AdapterCounts:
    """A model's adapter parameters: every layer's attention ones, a dense layer's MLP ones, a
    MoE layer's shared-expert ones and one routed expert's (each MoE layer holds `experts`)."""

    attention: float
    dense_mlp: float
    shared: float
    per_expert: float

    def non_expert_total(self, n_dense: int, n_moe: int) -> float:
        return (n_dense + n_moe) * self.attention + n_dense * self.dense_mlp + n_moe * self.shared


def adapter_counts(
    m: ModelSpec, rank: int, targets: tuple[str, ...], separate: bool = False
) -> AdapterCounts:
    by = {g.where: g.params(rank) for g in adapter_groups(m, targets, separate)}
    return AdapterCounts(
        attention=by["all"],
        dense_mlp=by.get("dense", 0.0),
        shared=by.get("shared", 0.0),
        per_expert=by.get("expert", 0.0),
    )


def adapter_params_per_layer(
    m: ModelSpec, rank: int, targets: tuple[str, ...], separate: bool = False
) -> float:
    """Trained parameters one dense layer's adapters hold: r x (in + out) per targeted linear."""
    c = adapter_counts(m, rank, targets, separate)
    return c.attention + c.dense_mlp


def check_lora_model(
    m: ModelSpec,
    rank: int,
    mtp_layers: int,
    optimizer: str,
    qlora: bool = False,
    dtype: str = "",
    targets: tuple[str, ...] = (),
) -> None:
    """Refuse what the LoRA model does not price, in one line each."""
    if qlora and rank <= 0:
        raise FlopwiseError("--qlora needs --lora-rank (the adapters' rank)")
    if qlora and dtype not in ("bf16", "fp16"):
        raise FlopwiseError(
            f"--qlora computes in 16 bits (the NF4 base is dequantized to bf16); --dtype {dtype} "
            "is not modelled with it: use bf16 or fp16"
        )
    if qlora and m.is_moe:
        raise FlopwiseError(f"--qlora with {m.name}: QLoRA of MoE models is not modelled")
    if rank <= 0:
        return
    if m.is_mla and ("qkv" in targets or "proj" in targets):
        raise FlopwiseError(
            f"--lora-targets qkv/proj with {m.name}: adapters on multi-head latent attention's "
            "projections are not modelled; target fc1, fc2"
        )
    if mtp_layers:
        raise FlopwiseError("--lora-rank with --mtp-layers is not modelled; drop one of them")
    if optimizer != "adamw":
        raise FlopwiseError(f"--lora-rank with --optimizer {optimizer} is not modelled; use adamw")
    if rank >= m.hidden:
        raise FlopwiseError(
            f"--lora-rank {rank} is not low rank for {m.name} (hidden {m.hidden}); give less "
            f"than {m.hidden}"
        )
