"""`flopwise plan infer` end to end: exit codes, one JSON document, one-line errors."""

from __future__ import annotations

import json

import pytest

from flopwise.cli.main import main

DONE_WHEN = [
    "plan", "infer", "llama-3.1-70b", "--accelerator", "h100-sxm", "--tp", "4",
    "--batch", "32", "--input-len", "2048", "--output-len", "256",
]  # fmt: skip


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_done_when_command_prints_latency_throughput_memory_cost_breakdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = cli(capsys, *DONE_WHEN, "--price-per-gpu-hour", "2.5")
    assert code == 0, err
    for label in ("time to first token", "time per output token", "output tokens/s",
                  "memory per GPU", "cost per 1M output tokens", "weights read", "KV read",
                  "communication"):  # fmt: skip
        assert label in out


def test_json_is_one_document_with_the_promised_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, *DONE_WHEN, "--price-per-gpu-hour", "2.5", "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    for key in ("ttft_ms", "tpot_ms", "e2e_latency_s", "output_tokens_per_s",
                "tokens_per_s_per_user", "kv_cache_gib", "memory_per_gpu_gib", "fits",
                "max_batch", "mbu", "mfu", "cost_per_million_output_tokens"):  # fmt: skip
        assert doc[key] is not None, key
    bd = doc["breakdown"]["decode_step"]
    for key in ("weights_read_ms", "kv_read_ms", "compute_ms", "communication_ms"):
        assert key in bd
    assert doc["fits"] is True
    assert doc["kv_cache_gib"] == pytest.approx(32 * 2304 * 327680 / 2**30)
    # cost = price x GPUs / tokens per hour
    expected = 2.5 * 4 / 3600 / doc["output_tokens_per_s"] * 1e6
    assert doc["cost_per_million_output_tokens"] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--input-len", "130000", "--output-len", "2000"], "context of 131072"),
        (["--batch", "zero"], "--batch"),
        (["--engine", "tgi"], "unknown engine"),
        (["--gpus", "6"], "not a multiple"),
        (["--weight-dtype", "int3"], "--weight-dtype"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    try:
        code = main([*DONE_WHEN[:5], "--tp", "4", *args])
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    _, err = capsys.readouterr()
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_model_that_fits_nowhere_says_what_would(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "plan", "infer", "llama-3.1-405b", "-a", "h100-sxm", "--tp", "4",
                       "--batch", "max")  # fmt: skip
    assert code == 2
    assert "fits on 16 GPUs (--tp 8 --pp 2)" in err or "--weight-dtype" in err


LONG = ["plan", "infer", "gpt-j-6b", "--accelerator", "h100-sxm", "--batch", "8",
        "--input-len", "2048", "--output-len", "2048"]  # fmt: skip


def test_past_the_context_is_refused_unless_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    # GPT-J's config allows 2048 positions (n_positions); TensorRT-LLM 0.9.0's published tables
    # ran it at 2048 + 2048 with a larger --max_seq_len, which --allow-long-context poses
    code, out, err = cli(capsys, *LONG)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "4096 tokens exceeds gpt-j-6b's context of 2048" in err
    assert "--allow-long-context" in err
    code, out, err = cli(capsys, *LONG, "--allow-long-context", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["output_tokens_per_s"] > 0
    assert any("past gpt-j-6b's trained context of 2,048" in a for a in doc["assumptions"])


def test_a_learned_position_table_has_no_rows_past_its_length(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # OPT's learned position embedding has max_position_embeddings + 2 rows: nothing runs past it
    code, out, err = cli(
        capsys, "plan", "infer", "opt-175b", "--accelerator", "h100-sxm", "--tp", "8",
        "--input-len", "2048", "--output-len", "512", "--allow-long-context",
    )  # fmt: skip
    assert code == 2 and out == ""
    assert "learned position table of 2050 rows" in err
