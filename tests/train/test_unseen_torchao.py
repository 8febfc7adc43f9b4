"""Published torchtitan runs no constant was fitted to: torchao's float8 training benchmarks.

Source: pytorch/ao torchao/float8/README.md at commit 9519bebb, "Training benchmarks": Llama 3
8B on one node of 8 x H100 (torch 2.7.0a0, torchao 0.10.0, torchtitan 0.0.2) and 8 x MI300X
(torch 2.9.0.dev ROCm 6.4, torchao 0.13.0), batch 1 per rank, sequence 8192, torch.compile,
FSDP2, per-op selective activation checkpointing; bf16 and torchao's float8 recipes. Shipped in
catalog/data/published/training_unseen.csv (framework torchtitan, recompute op) and scored by
`flopwise validate --only training-unseen`. Added 2026-11-25 after the last change to the
training step model; nothing was changed after reading them.

Measured 2026-11-25 when added (tokens/s per GPU, plan vs published): H100 bf16 +12.3%,
tensorwise +16.0%, rowwise +20.9%; MI300X bf16 +42.5%, tensorwise +85.1%, rowwise_with_gw_hp
+58.7%, rowwise +78.7%, none inside its 80% interval: MI300X had no validated training runs (its
sustained fraction was the default) and has no published FP8 matmul rate (its FP8 ceiling stands
in from its bf16 one). The MI300X bf16 run is since the fit run of the CDNA3 die's fraction
(plan/sustained.py FRACTION_FITTED_ON_UNSEEN, 0.53): the three float8 rows then read +33.2%,
+13.3% and +30.9%, out of sample, and AMD's 320 vLLM serving rows, which run their GEMMs at the
same fraction, 16.4% -> 10.3%. The errors are reported, not asserted away; what is asserted is
the posing, the fit, and on H100, where both ceilings are measured, the recipes' speedups.
"""

from __future__ import annotations

import pytest

from flopwise.validate.unseen_training import UnseenTrainingValidation as Unseen
from flopwise.validate.unseen_training import load_unseen_training_runs, pose_argv
from posed import published_rows
from validation_cache import unseen_training

#: Stated tolerance on a published FP8/bf16 speedup ratio of the same job on the same GPUs.
SPEEDUP_TOLERANCE = 0.10


@pytest.fixture
def unseen() -> Unseen:
    """The section as `validate` computes it (shared with the other tests that read it)."""
    return unseen_training()


def _torchao(unseen: Unseen) -> dict[str, object]:
    return {r.row.id: r for r in unseen.rows if r.row.id.startswith("torchao_")}


def test_every_torchao_row_is_scored_out_of_sample(unseen: Unseen) -> None:
    rows = _torchao(unseen)
    published = [r["id"] for r in published_rows("torchao_")]
    assert sorted(rows) == sorted(published) and len(published) == 7
    # one is the fit row of the CDNA3 fraction (plan/sustained.py), the rest out of sample
    in_sample = {i for i, r in rows.items() if r.in_sample}  # type: ignore[attr-defined]
    assert in_sample == {"torchao_mi300x_llama38b_bf16"}
    ids = {r["id"] for r in unseen.to_dict()["rows"]}
    assert set(published) <= ids


def test_rows_are_posed_as_torchtitan_runs() -> None:
    recipes = {
        "BF16": None,
        "FP8 tensorwise": "tensorwise",
        "FP8 rowwise": "rowwise",
        "FP8 rowwise_with_gw_hp": "rowwise-gw-hp",
    }
    for r in load_unseen_training_runs():
        if not r["id"].startswith("torchao_"):
            continue
        argv = pose_argv(r)
        assert isinstance(argv, list), argv
        flag = dict(zip(argv[::2], argv[1::2], strict=False))
        assert argv[argv.index("--framework") + 1] == "torchtitan"
        assert argv[argv.index("--recompute") + 1] == "op"  # per-op SAC
        assert argv[argv.index("--zero") + 1] == "3"  # FSDP2 over the 8 GPUs
        assert argv[argv.index("--dp") + 1] == "8" and "--fused-loss" in argv  # torch.compile
        recipe = recipes[r["precision"]]
        if recipe is None:
            assert argv[argv.index("--dtype") + 1] == "bf16" and "--fp8-recipe" not in argv
        else:
            assert argv[argv.index("--fp8-recipe") + 1] == recipe
        assert flag.get("-a") in ("h100-sxm", "mi300x")


def test_an_unknown_framework_is_refused_with_its_reason() -> None:
    row = published_rows("torchao_")[0]
    assert pose_argv({**row, "framework": "maxtext"}) == (
        "framework maxtext: not posed (posed: nemo, torchtitan, pytorch-xla, megatron-core)"
    )


def test_h100_fp8_speedups_match_the_publication(unseen: Unseen) -> None:
    rows = _torchao(unseen)
    base = rows["torchao_h100_llama38b_bf16"]
    for rid in ("torchao_h100_llama38b_fp8tw", "torchao_h100_llama38b_fp8rw"):
        r = rows[rid]
        published = r.row.measured / base.row.measured  # type: ignore[attr-defined]
        planned = r.row.predicted / base.row.predicted  # type: ignore[attr-defined]
        # 1.250 and 1.101 published; 1.291 and 1.184 planned when added
        assert planned == pytest.approx(published, rel=SPEEDUP_TOLERANCE), rid
    # and the order of the recipes: tensorwise (float8 all-gather) > rowwise > bf16
    tw, rw = rows["torchao_h100_llama38b_fp8tw"], rows["torchao_h100_llama38b_fp8rw"]
    assert tw.row.predicted > rw.row.predicted > base.row.predicted  # type: ignore[attr-defined]


def test_cdna3_fraction_is_the_refit_of_its_fit_run(unseen: Unseen) -> None:
    from flopwise.plan.sustained import (
        FRACTION_FIT_ROWS,
        FRACTION_FITTED_ON_UNSEEN,
        fraction_group,
        sustained_compute_fraction,
    )

    fit = unseen.to_dict()["fraction_fits"]["cdna3"]
    # the shipped value is what the fit rule gives on its fit run, to the grid's step
    assert fit["refit"] == pytest.approx(FRACTION_FITTED_ON_UNSEEN["cdna3"], abs=0.0051)
    assert fit["fit_rows"] == list(FRACTION_FIT_ROWS["cdna3"])
    # MI300X and MI325X (the same CDNA3 die) plan at it; dies with training runs keep theirs
    assert fraction_group("mi300x") == fraction_group("mi325x") == "cdna3"
    assert sustained_compute_fraction("mi325x") == FRACTION_FITTED_ON_UNSEEN["cdna3"]
    # its out-of-sample rows here are the die's other runs, none of them a fit row
    rows = _torchao(unseen)
    oos = set(fit["out_of_sample_here"]["rows"])
    assert oos == {i for i in rows if i.startswith("torchao_mi300x_")} - set(fit["fit_rows"])
    assert all(not rows[i].in_sample for i in oos)  # type: ignore[attr-defined]
    assert fit["out_of_sample_here"]["n"] == 3
