"""Megatron-Core r0.8.0's GPT scaling runs on H100, from the Megatron-LM README (July 2024).

Source: NVIDIA/Megatron-LM README.md and images/model_table.png at f2e5db402c (2024-07-15): GPT
models of 1.7B-462B parameters (vocabulary 131,072, 4,096 tokens) on 48-6,144 H100s with the
table's TP x PP x DP and batch, per-GPU teraFLOP/s and MFU; and the README's strong scaling of
its 177B GPT from 96 to 4,608 GPUs at 1,152 sequences, "a reduction in MFU from 47% to 42%".
Shipped in catalog/data/published/training_unseen.csv (framework megatron-core, TP communication
overlapped as the README states) with their architectures as pub-* configs
(scripts/published_models.py). Added 2026-11-30 after the last change to the step model; nothing
was changed after reading them.

Measured when added (plan vs published, tokens/s per GPU; microbatch, virtual pipeline and
recompute searched, as the table does not state them): 1.7B +11.4%, 7.1B +2.8%, 16B -2.5%, 32B
-2.1%, 70B +9.6%, 119B +9.8%, 177B +8.2%, 314B +0.9%, 462B +1.2%; strong scaling 96 GPUs
+5.1%, 4,608 GPUs +7.1%; all inside their 80% intervals (5.5% MAPE over the 11).
"""

from __future__ import annotations

import pytest

from flopwise.validate.unseen_training import UnseenTrainingValidation as Unseen
from flopwise.validate.unseen_training import (
    unseen_published_model,
)
from flopwise.workload.flops import train_flops_per_token
from flopwise.workload.hf import load_model
from posed import posed_flags, published_rows
from validation_cache import unseen_training

#: Stated tolerance on the ratio of two published MFUs each rounded to a whole percent
#: (47% and 42%: up to +/-2.2% from the rounding alone) plus the layout the text leaves out.
STRONG_SCALING_TOLERANCE = 0.05


@pytest.fixture
def unseen() -> Unseen:
    return unseen_training()


def _megatron_flops_per_token(layers: int, hidden: int, seq: int, vocab: int) -> float:
    """megatron/training/training.py num_floating_point_operations at core_r0.8.0, per token,
    for an MHA GPT with a 4h MLP: 12 L h^2 ((1 + 1 + s/h) + 4 + V / (2 L h))."""
    return 12.0 * layers * hidden**2 * (2.0 + seq / hidden + 4.0 + vocab / (2.0 * layers * hidden))


def test_rows_are_posed_with_their_table_layout() -> None:
    rows = published_rows("mcore08_")
    assert len(rows) == 11
    for r in rows:
        argv, flag = posed_flags(r)
        assert flag("--framework") == "megatron-core" and flag("-a") == "h100-sxm"
        assert int(flag("--tp")) * int(flag("--pp")) * int(flag("--dp")) == int(r["gpus"])
        assert flag("--zero") == "1"  # --overlap-param-gather: the distributed optimizer
        assert "--microbatch" not in argv and "--vpp" not in argv  # not published: searched
        assert ("--tp-comm-overlap" in argv) == (int(r["tp"]) > 1)
        # the model cell is the pub-* config scripts/published_models.py writes for the row
        got = unseen_published_model(r)
        assert got is not None
        assert got[0] == r["model"]


def test_throughput_is_the_published_flops_over_megatrons_count() -> None:
    for r in published_rows("mcore08_"):
        layers, hidden = int(r["layers"]), int(r["hidden"])
        count = _megatron_flops_per_token(layers, hidden, int(r["seq_len"]), int(r["vocab"]))
        per_gpu = float(r["measured_tflops_per_gpu"]) * 1e12 / count
        assert float(r["measured_tokens_per_s_per_gpu"]) == pytest.approx(per_gpu, abs=0.05)
        # the plan counts model FLOPs the way the table does, so the rates compare directly
        spec = load_model(r["model"])
        ours = train_flops_per_token(spec, int(r["seq_len"])).model
        assert ours == pytest.approx(count, rel=0.002), r["id"]


def test_every_row_is_scored_out_of_sample(unseen: Unseen) -> None:
    scored = {r.row.id: r for r in unseen.rows if r.row.id.startswith("mcore08_")}
    assert set(scored) == {r["id"] for r in published_rows("mcore08_")}
    assert not any(r.in_sample for r in scored.values())


def test_strong_scaling_loss_matches_the_readme(unseen: Unseen) -> None:
    rows = {r.row.id: r.row for r in unseen.rows}
    small, large = rows["mcore08_ss_177b_96gpu"], rows["mcore08_ss_177b_4608gpu"]
    published = large.measured / small.measured
    assert published == pytest.approx(42 / 47, rel=1e-3)
    planned = large.predicted / small.predicted
    assert planned < 1.0  # communication more exposed at 48x the GPUs, same batch
    assert planned == pytest.approx(published, rel=STRONG_SCALING_TOLERANCE)


def test_larger_gemms_run_closer_to_peak(unseen: Unseen) -> None:
    """The README's 'superlinear' weak scaling: 1.7B at 41% MFU, 16B at 49%."""
    rows = {r.row.id: r for r in unseen.rows}

    def planned_tflops(rid: str) -> float:
        row = rows[rid]
        return row.row.predicted * train_flops_per_token(load_model(row.model), 4096).model

    assert planned_tflops("mcore08_ws_1.7b_48gpu") < planned_tflops("mcore08_ws_16b_192gpu")
