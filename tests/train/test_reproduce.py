"""Each validation row is a command a user can run, and it gives what validate scored."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.validate.train_rows import PosedRow, load_training_runs, pose
from flopwise.validate.training import predict_posed

#: One row per source family (and both pipeline and FSDP layouts, TPU multislice, CP).
SAMPLE = (
    "n21_t1_145.6B",
    "bloom_176B",
    "nemo2407_LLAMA3-70B_64gpu",
    "nemo_lseq_h100_llama2_7b_64k",
    "mpt_a100_40_13b_s2048_128gpu",
    "tt2412_405b_512gpu_1f1b",
    "maxtext_v5e_32b_2x256",
    "tt2506_70b_256gpu_none_asynctp",
)


def _posed(rid: str) -> PosedRow:
    row = next(r for r in load_training_runs() if r["id"] == rid)
    p = pose(row)
    assert isinstance(p, PosedRow), p
    return p


@pytest.mark.slow
@pytest.mark.parametrize("rid", SAMPLE)
def test_command_reproduces_the_scored_prediction(rid: str) -> None:
    posed = _posed(rid)
    assert posed.command.startswith("flopwise plan train ")
    res = run_cli("plan", "train", posed.model, *posed.argv, "--json")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    expected = float(getattr(predict_posed(posed), posed.metric))
    assert doc[posed.metric] == pytest.approx(expected, rel=1e-9)


def test_commands_use_only_cli_flags() -> None:
    """Every flag a posed row passes is one `flopwise plan train --help` documents."""
    from flopwise.cli.main import build_parser

    parser = build_parser()
    for row in load_training_runs():
        p = pose(row)
        if isinstance(p, str):
            continue
        # parsing fails (SystemExit) on any flag the CLI does not have
        args = parser.parse_args(["plan", "train", p.model, *p.argv])
        assert args.framework in {
            "megatron-lm-2021",
            "deepspeed",
            "nemo",
            "llm-foundry",
            "torchtitan",
            "maxtext",
        }
