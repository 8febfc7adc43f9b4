"""Published TPU runs of a framework other than MaxText: torchprime (PyTorch/XLA) on Trillium.

Source: AI-Hypercomputer/torchprime torchprime/torch_xla_models/results.csv at commit 12dc8a42
(2025-05-16) with the recipes of the README and configs/ at that commit: Llama 3.0/3.1 8B, 3.1
70B and 3.1 405B on one v6e-256 slice (and 405B on two), 8,192 tokens, PyTorch/XLA SPMD with
FSDP over the slice (405B also tensor-parallel 4), per-layer checkpointing (70B and 405B with the
layer input offloaded to host), splash or Pallas flash attention, bf16 model, AdaFactor. Shipped
in catalog/data/published/training_unseen.csv (framework pytorch-xla) and scored by `flopwise
validate --only training-unseen`. Added 2026-11-30 after the last change to the step model;
nothing was changed after reading them.

Measured when added (tokens/s per chip, plan vs published): 8B -3.6% and -3.1%, 70B -1.1%, all
inside their 80% intervals, on the v6e fraction fitted to MaxText's four Trillium rows only;
405B +20.9% (outside), as MaxText's own 405B Trillium row at the same TP 4 x FSDP 64 layout
(+24.9% in sample): two frameworks agree on something at that layout the plan does not price.
The two-slice 405B run is refused (no sourced DCN bandwidth for v6e hosts). What is asserted is
the posing and the one number a fraction cannot move: how much slower a 70B model trains than an
8B one on the same chips and framework.
"""

from __future__ import annotations

import pytest

from flopwise.errors import FlopwiseError
from flopwise.plan.train.frameworks import get_profile
from flopwise.validate.unseen_training import UnseenTrainingValidation as Unseen
from posed import posed_flags, published_rows
from validation_cache import unseen_training

#: Stated tolerance on a published throughput ratio of two jobs on the same chips, framework
#: and sequence (as test_unseen_torchao.py's speedups): the die's fraction cancels in it.
RATIO_TOLERANCE = 0.10


@pytest.fixture
def unseen() -> Unseen:
    return unseen_training()


def test_rows_are_posed_as_their_recipes() -> None:
    rows = published_rows("torchprime_")
    assert len(rows) == 5
    for r in rows:
        argv, flag = posed_flags(r)
        assert flag("--framework") == "pytorch-xla" and flag("-a") == "tpu-v6e"
        assert flag("--zero") == "3" and "--no-hsdp" in argv  # FSDP over the whole mesh
        assert "--fused-loss" in argv  # XLA compiles the loss with the step
        tp, dp = int(flag("--tp")), int(flag("--dp"))
        assert tp * dp == int(r["gpus"])
        assert int(flag("--microbatch")) * dp == int(r["gbs"])  # no gradient accumulation
        if r["model"] == "llama-3.1-8b":
            assert flag("--recompute") == "full" and "--remat-tensors" not in argv
        else:
            assert flag("--recompute") == "custom"
            assert flag("--remat-tensors") == "decoder_layer_input=offload"
        if r["model"] == "llama-3.1-405b":
            assert tp == 4


def test_every_row_is_scored_or_refused_with_its_reason(unseen: Unseen) -> None:
    scored = {r.row.id: r for r in unseen.rows if r.row.id.startswith("torchprime_")}
    skipped = {s.id: s.reason for s in unseen.skipped if s.id.startswith("torchprime_")}
    assert set(scored) | set(skipped) == {r["id"] for r in published_rows("torchprime_")}
    assert not any(r.in_sample for r in scored.values())  # nothing was fitted to them
    # two slices: the planner will not guess the DCN bandwidth of a v6e host
    assert set(skipped) == {"torchprime_2xv6e256_llama31_405b"}
    assert "scale-out bandwidth is unknown" in skipped["torchprime_2xv6e256_llama31_405b"]


def test_model_size_ratio_on_the_same_chips(unseen: Unseen) -> None:
    rows = {r.row.id: r.row for r in unseen.rows}
    small, large = rows["torchprime_v6e256_llama31_8b"], rows["torchprime_v6e256_llama31_70b"]
    published = large.measured / small.measured
    planned = large.predicted / small.predicted
    assert published == pytest.approx(0.1234, abs=0.001)  # 849.9 / 6,878.3 tokens/s per chip
    assert planned == pytest.approx(published, rel=RATIO_TOLERANCE)


def test_profile_reduces_bf16_gradients_and_has_no_pipeline() -> None:
    p = get_profile("pytorch-xla")
    assert p.recipe_for("bf16") == "fsdp-pure"  # train.py casts the model to bf16
    assert p.fused_pointwise and p.max_pp == 1 and not p.context_parallel
    from flopwise.plan.train.frameworks import constrain

    with pytest.raises(FlopwiseError, match="pytorch-xla has no pipeline"):
        constrain(p, {"pp": 2})
