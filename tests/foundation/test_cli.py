"""The command line: help everywhere, JSON-only stdout, one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.catalog import load_model_index
from flopwise.cli.main import build_parser, main


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _all_command_paths() -> list[list[str]]:
    """Every command and subcommand path the parser knows."""
    import argparse

    paths: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    paths.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(build_parser(), [])
    return paths


def test_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    paths = _all_command_paths()
    assert ["plan", "train"] in paths and ["catalog", "models"] in paths
    for path in paths:
        code, out, _ = cli(capsys, *path, "--help")
        assert code == 0, path
        assert "usage: flopwise" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.startswith("flopwise ")


@pytest.mark.parametrize("what", ["accelerators", "systems", "models"])
def test_catalog_json(capsys: pytest.CaptureFixture[str], what: str) -> None:
    code, out, err = cli(capsys, "catalog", what, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc[what]) >= 10


def test_catalog_tables_render(capsys: pytest.CaptureFixture[str]) -> None:
    for what in ("accelerators", "systems", "models"):
        code, out, _ = cli(capsys, "catalog", what)
        assert (code == 0 and "h100" in out.lower()) or "llama" in out.lower()


def test_model_works_for_every_catalog_entry(capsys: pytest.CaptureFixture[str]) -> None:
    for ident in load_model_index():
        code, out, err = cli(capsys, "model", ident, "--json")
        assert code == 0, (ident, err)
        doc = json.loads(out)
        for key in (
            "params",
            "active_params",
            "breakdown",
            "train_flops_per_token",
            "kv_cache_bytes_per_token",
        ):
            assert key in doc, (ident, key)
        assert doc["active_params"] <= doc["params"]
        code, out, _ = cli(capsys, "model", ident)
        assert code == 0 and "Parameters" in out


def test_model_from_config_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "mistral",
                "hidden_size": 4096,
                "intermediate_size": 14336,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "vocab_size": 32000,
                "max_position_embeddings": 32768,
            }
        )
    )
    for arg in (str(cfg), str(tmp_path)):
        code, out, err = cli(capsys, "model", arg, "--json")
        assert code == 0, err
        assert json.loads(out)["params"] == 7_241_732_096


def test_plan_train_first_order_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys,
        "plan",
        "train",
        "llama-3.1-8b",
        "--accelerator",
        "h100",
        "--gpus",
        "64",
        "--tokens",
        "15T",
        "--mfu",
        "0.4",
        "--price-per-gpu-hour",
        "2",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    for key in (
        "params",
        "active_params",
        "total_flops",
        "gpus",
        "mfu",
        "train_days",
        "gpu_hours",
        "cost_usd",
        "memory_per_gpu_gib",
        "fits",
    ):
        assert key in doc, key
    assert doc["gpus"] == 64


BAD_INPUTS = [
    (["model", "no-such-model"], "unknown model"),
    (["model", "llama-3.1-8bb"], "did you mean"),
    (["model", "llama-3.1-8b", "--seq-len", "0"], "--seq-len"),
    (["model", "llama-3.1-8b", "--seq-len", "-3"], "--seq-len"),
    (["model", "llama-2-7b", "--seq-len", "100000"], "context"),
    (["model", "llama-3.1-8b", "--seq-len", "abc"], "abc"),
    (["model", "llama-3.1-8b", "--attention", "sparse"], "sparse"),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h1000",
            "--gpus",
            "8",
            "--tokens",
            "1T",
        ],
        "h1000",
    ),
    (
        ["plan", "train", "llama-3.1-8b", "--accelerator", "h100", "--gpus", "0", "--tokens", "1T"],
        "--gpus",
    ),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h100",
            "--gpus",
            "-8",
            "--tokens",
            "1T",
        ],
        "--gpus",
    ),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h100",
            "--gpus",
            "2.5",
            "--tokens",
            "1T",
        ],
        "whole",
    ),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h100",
            "--gpus",
            "8",
            "--tokens",
            "lots",
        ],
        "lots",
    ),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h100",
            "--gpus",
            "8",
            "--tokens",
            "-1T",
        ],
        "--tokens",
    ),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h100",
            "--gpus",
            "8",
            "--tokens",
            "1T",
            "--dtype",
            "fp7",
        ],
        "fp7",
    ),
    (
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--accelerator",
            "h100",
            "--gpus",
            "8",
            "--tokens",
            "1T",
            "--price-per-gpu-hour",
            "-2",
        ],
        "-2",
    ),
    (
        ["plan", "train", "nope", "--accelerator", "h100", "--gpus", "8", "--tokens", "1T"],
        "unknown model",
    ),
    (["plan", "train", "llama-3.1-8b", "--gpus", "8", "--tokens", "1T"], "--accelerator"),
    (["catalog", "gpus"], "gpus"),
    (["results", "show", "999"], "999"),
    (["results", "show", "x"], "'x'"),
    (["nonsense"], "nonsense"),
]


@pytest.mark.parametrize(
    ("args", "needle"), BAD_INPUTS, ids=lambda a: " ".join(a) if isinstance(a, list) else a
)
def test_bad_input_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    code, out, err = cli(capsys, *args)
    assert code == 2, (args, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert needle in lines[0]
    assert "Traceback" not in err


def test_malformed_config_json_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "config.json"
    cases = {
        '{"model_type": "llama", "hidden_size": 4096,': "malformed config.json",
        "[1, 2]": "top level must be an object",
        '{"hidden_size": 10}': "no 'model_type'",
        '{"model_type": "rwkv"}': "not supported; supported:",
        '{"model_type": "llama", "hidden_size": "big", "intermediate_size": 1, '
        '"num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 10}': "hidden_size",
        '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 1, '
        '"num_hidden_layers": 1, "num_attention_heads": 6, "num_key_value_heads": 4, '
        '"vocab_size": 10}': "not a multiple",
        '{"model_type": "llama", "intermediate_size": 1}': "missing required field 'hidden_size'",
    }
    for text, needle in cases.items():
        bad.write_text(text)
        code, out, err = cli(capsys, "model", str(bad))
        assert code == 2 and out == "", text
        assert needle in err and len(err.strip().splitlines()) == 1, (text, err)


def test_json_stdout_is_only_json_in_a_real_process(tmp_path: Path) -> None:
    proc = run_cli(
        "plan",
        "train",
        "mixtral-8x7b",
        "-a",
        "mi300x",
        "--gpus",
        "16",
        "--tokens",
        "300B",
        "--json",
        env_home=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)
    proc = run_cli(
        "plan",
        "train",
        "mixtral-8x7b",
        "-a",
        "mi300",
        "--gpus",
        "16",
        "--tokens",
        "300B",
        env_home=tmp_path,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "did you mean" in proc.stderr
