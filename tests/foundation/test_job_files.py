"""Job files: one job description (`--config job.toml`) for plan, compare and report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomllib

from flopwise.cli import job_args
from flopwise.cli.main import build_parser, main

TRAIN_JOB = """
model = "llama-3.1-8b"
accelerator = "h100-sxm"
gpus = 64
tokens = "1T"
price_per_gpu_hour = 2.5
seq-len = 4096
"""

INFER_JOB = """
model = "llama-3.1-8b"
accelerator = "h100-sxm"
price-per-gpu-hour = 3.0
tp = 2
batch = 16
input-len = 2048
output-len = 256
"""


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(list(argv)) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _write(tmp_path: Path, text: str, name: str = "job.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_same_train_job_file_gives_same_numbers_in_plan_compare_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    job = _write(tmp_path, TRAIN_JOB)
    plan = _json(capsys, "plan", "train", "--config", job, "--json")
    cmp = _json(capsys, "compare", "train", "--config", job, "--json")
    out = tmp_path / "r.html"
    rep = _json(capsys, "report", "train", "--config", job, "--out", str(out), "--json")
    assert out.is_file() and rep["report"] == str(out)
    for doc in (cmp, rep):
        (row,) = doc["rows"]
        assert row["accelerator"] == "h100-sxm" and row["gpus"] == 64
        assert row["train_days"] == pytest.approx(plan["train_days"], rel=1e-12)
        assert row["cost_usd"] == pytest.approx(plan["cost_usd"], rel=1e-12)
        assert row["layout"]["tp"] == plan["layout"]["tp"]


def test_same_infer_job_file_gives_same_latency_in_plan_and_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    job = _write(tmp_path, INFER_JOB)
    plan = _json(capsys, "plan", "infer", "--config", job, "--json")
    cmp = _json(capsys, "compare", "infer", "--config", job, "--json")
    (row,) = cmp["rows"]
    assert row["batch"] == plan["batch"] == 16
    assert row["layout"] == {"tp": 2, "pp": 1}
    assert row["tpot_ms"] == pytest.approx(plan["tpot_ms"], rel=1e-12)
    assert row["ttft_ms"] == pytest.approx(plan["ttft_ms"], rel=1e-12)


def test_flags_override_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = _write(tmp_path, TRAIN_JOB)
    assert main(["plan", "train", "--config", job, "--gpus", "128", "--print-config"]) == 0
    resolved = tomllib.loads(capsys.readouterr().out)
    assert resolved["gpus"] == 128 and resolved["tokens"] == 1e12
    assert resolved["model"] == "llama-3.1-8b" and resolved["seq-len"] == 4096


def test_print_config_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "infer", "qwen2.5-7b", "-a", "h100-sxm", "--batch", "max", "--tp", "2"]
    assert main([*argv, "--print-config"]) == 0
    first = capsys.readouterr().out
    assert 'batch = "max"' in first
    job = _write(tmp_path, first)
    assert main(["plan", "infer", "--config", job, "--print-config"]) == 0
    assert capsys.readouterr().out == first


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('model = "llama-3.1-8b"\ngpu = 8\n', "unknown key 'gpu'; valid for train jobs:"),
        ('model = "llama-3.1-8b"\ngpus = "eight"\n', "gpus = 'eight'"),
        ('model = "llama-3.1-8b"\ngpus = 8\ndtype = "fp7"\n', "valid: bf16, fp16, fp8"),
        ('model = "llama-3.1-8b"\ngpus = 8\nhsdp = "yes"\n', "must be true or false"),
        ('model = "llama-3.1-8b"\ngpus = 8\n', "--tokens is required"),
        ("gpus = 8\n", "MODEL is required"),
        ("gpus = [8\n", "is not valid TOML"),
    ],
)
def test_bad_job_files_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    job = _write(tmp_path, text)
    assert main(["plan", "train", "-a", "h100-sxm", "--config", job]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unknown_key_error_lists_valid_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _write(tmp_path, 'model = "x"\nbogus = 1\n')
    assert main(["compare", "infer", "--config", job]) == 2
    err = capsys.readouterr().err
    for valid in ("input-len", "weight-dtype", "target-tpot-ms"):
        assert valid in err


def test_every_front_door_has_the_same_job_flags() -> None:
    """Each job flag of a kind is on plan, compare and report unless it is marked door-only."""
    parser = build_parser()
    for kind in job_args.KINDS:
        for door, argv in (
            ("plan", ["plan", kind]),
            ("compare", ["compare", kind]),
            ("compare", ["report", kind]),
        ):
            sub: Any = parser
            for word in argv:
                action = next(
                    a
                    for a in sub._actions
                    if a.dest
                    and getattr(a, "choices", None)
                    and isinstance(a.choices, dict)
                    and word in a.choices
                )
                sub = action.choices[word]
            options = {o for a in sub._actions for o in a.option_strings}
            for f in job_args.flags_for(kind, door):
                assert f"--{f.name}" in options, (argv, f.name)


def test_a_registered_flag_reaches_every_front_door_and_job_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_args, "JOB_FLAGS", list(job_args.JOB_FLAGS))
    job_args.register_flag(
        job_args.JobFlag("test-only-knob", "test flag", kinds=("train",), parse=float)
    )
    job = _write(tmp_path, TRAIN_JOB + "test_only_knob = 0.1\n")
    for door in ("plan", "compare"):
        assert main([door, "train", "--config", job, "--print-config"]) == 0
        assert tomllib.loads(capsys.readouterr().out)["test-only-knob"] == 0.1


def test_a_config_path_in_a_job_file_is_relative_to_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from flopwise.catalog.models import find_model_entry

    entry = find_model_entry("mistral-7b")
    assert entry is not None
    (tmp_path / "jobs").mkdir()
    shutil.copy(entry.config_path, tmp_path / "jobs" / "my-model.json")
    job = _write(tmp_path / "jobs", 'model = "./my-model.json"\ngpus = 8\ntokens = "1B"\n')
    doc = _json(capsys, "plan", "train", "--config", job, "-a", "h100-sxm", "--json")
    assert doc["model"] == "my-model"
