"""Published runs no constant was fitted to: Megatron-Bridge's 25.11 pre-training table.

Source: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md (snapshot commit 00b7660),
"25.11 NeMo Container", Pre-Training Performance, tables DGX-H100, DGX-B200, DGX-GB200 and
DGX-GB300, shipped as catalog/data/published/training_unseen.csv and scored by
`flopwise validate --only training-unseen` (validate/unseen_training.py). These runs are not in
the shared reference file; the dense rows were read after the fitted constants were last
changed, the MoE rows (2026-11-24) after the MoE step model was last changed. Every prediction
here is out of sample, on a newer framework release than any validation row.

Measured 2026-11-24 on this code: dense rows -15.5% (H100 70B), -1.4% (H100 405B), +3.9% (B200
8B), +15.2% (B200 405B), +6.7% (GB200 8B), -18.2% (GB200 405B), -5.3% (GB300 8B), -4.7% (GB300
405B): MAPE 8.9%, 7 of 8 inside their 80% intervals. MoE rows (14, FP8-MX posed with the mxfp8
recipe): Qwen3-235B-A22B -2.5% (GB300) and +6.9% (GB200), DeepSeek-V3 -14.7%/+14.0% (GB200), but
+26% to +251% where many small experts sit on each GPU (EP8 on H100 and B200): MAPE 65%. That
gap is reported, not asserted away; MoE plans take its spread as their interval (interval.py).
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.validate.unseen_training import (
    UnseenTrainingValidation,
    load_unseen_training_runs,
    pose_argv,
    validate_unseen_training,
)

#: Stated tolerance for one dense row: twice the training validation's out-of-sample MAPE (11.7%
#: when set) rounded up; the largest dense error at the time of writing is 18.2%.
ROW_TOLERANCE = 0.25


@pytest.fixture(scope="module")
def unseen() -> UnseenTrainingValidation:
    return validate_unseen_training()


def test_each_dense_row_within_tolerance(unseen: UnseenTrainingValidation) -> None:
    dense = [r for r in unseen.rows if not r.moe]
    assert len(dense) == 8
    for r in dense:
        assert r.row.predicted == pytest.approx(r.row.measured, rel=ROW_TOLERANCE), r.row.id


def test_dense_rows_fall_inside_their_80pct_intervals(unseen: UnseenTrainingValidation) -> None:
    dense = [r for r in unseen.rows if not r.moe]
    # an 80% interval should hold most of them: at least 6 of 8 (7 at the time of writing)
    assert sum(bool(r.inside_interval) for r in dense) >= 6
    mape = sum(abs(r.error_pct) for r in dense) / len(dense)
    assert mape < 12.0, mape


def test_every_published_row_is_scored_or_skipped_with_a_reason(
    unseen: UnseenTrainingValidation,
) -> None:
    ids = {r["id"] for r in load_unseen_training_runs()}
    scored = {r.row.id for r in unseen.rows}
    skipped = {s.id: s.reason for s in unseen.skipped}
    assert scored | set(skipped) == ids and not scored & set(skipped)
    assert all(reason.strip() for reason in skipped.values())
    reasons = " ".join(skipped.values())
    # the reasons name what the planner does not model, in its own words where it refuses
    for phrase in ("Megatron FSDP", "malformed", "does not divide"):
        assert phrase in reasons, phrase


def test_moe_rows_are_scored_apart_from_dense(unseen: UnseenTrainingValidation) -> None:
    doc = unseen.to_dict()
    by_class = doc["by_class"]
    assert by_class["dense"]["n"] + by_class["moe"]["n"] == doc["out_of_sample"]["n"]
    assert by_class["moe"]["n"] >= 5  # enough to size the MoE interval regime
    moe_ids = {r["id"] for r in doc["rows"] if r["class"] == "moe"}
    assert "mb2511_h100_qwen330ba3b_fp8cs" in moe_ids
    regime = doc["moe_interval"]["regime"]
    assert regime["lo"] <= regime["hi"] and regime["n"] == by_class["moe"]["n"]


def test_a_row_is_the_command_a_user_would_type() -> None:
    row = next(r for r in load_unseen_training_runs() if r["id"] == "mb2511_h100_gptoss120b_bf16")
    argv = pose_argv(row)
    assert isinstance(argv, list)
    assert argv[argv.index("--ep") + 1] == "8" and argv[argv.index("--pp") + 1] == "4"
    proc = run_cli("plan", "train", row["model"], *argv, "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    scored = next(r for r in validate_unseen_training().rows if r.row.id == row["id"])
    assert float(d["tokens_per_s"]) / int(row["gpus"]) == pytest.approx(scored.row.predicted)
    assert d["interval"]["regime"] == "moe"


def test_validate_cli_section() -> None:
    proc = run_cli("validate", "--only", "training-unseen", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["training_unseen"]
    assert doc["metric"] == "tokens/s per GPU" and doc["out_of_sample"]["n"] >= 16
    text = run_cli("validate", "--only", "training-unseen")
    assert text.returncode == 0 and "nothing was fitted" in text.stdout
