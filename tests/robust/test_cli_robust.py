"""Hostile input: overlays, configs, impossible plans and closed pipes get clear answers.

Every case runs the real CLI entry point; a traceback anywhere fails the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.catalog import accelerators, systems
from flopwise.cli.main import main

SPEC_HEADER = "accelerator,field,value,source,as_of,note\n"
ID_HEADER = "id,vendor,name,aliases,form_factor,source,as_of\n"
LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
}
TRAIN = ["plan", "train", "llama-3.1-8b", "-a", "h100", "--gpus", "16"]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2, (out[-500:], err)
    assert out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert needle in lines[0], lines[0]


def _clear_caches() -> None:
    for c in (
        accelerators.load_accelerators,
        accelerators._alias_index,
        systems.load_systems,
        systems._by_key,
    ):
        c.cache_clear()


def _overlay(home: Path, name: str, data: bytes | str) -> Path:
    path = home / "catalog" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    _clear_caches()
    return path


# --- item 12: no tracebacks from overlays and configs ------------------------------------------

SPEC_CASES = [
    (b"h100-sxm,peak_bf16_tflops,98\xff,me,2026-01-01,\n", "not UTF-8"),
    (b"h100-sxm,peak_bf16_tflops,0,me,2026-01-01,\n", "must be positive"),
    (b"h100-sxm,memory_gib,1e400,me,2026-01-01,\n", "finite"),
    (b"h100-sxm,memory_bw_gbps,inf,me,2026-01-01,\n", "finite"),
    (b"h100-sxm,memory_bw_gbps,nan,me,2026-01-01,\n", "finite"),
    (
        b"h100-sxm,tdp_w,700,me,2026-01-01,\nH100-SXM,tdp_w,650,me,2026-01-01,\n",
        "duplicate accelerator+field",
    ),
    (b'h100-sxm,tdp_w,700,"me,2026-01-01,\n', ":2: unterminated quote"),
]


@pytest.mark.parametrize(("row", "needle"), SPEC_CASES, ids=[n for _, n in SPEC_CASES])
@pytest.mark.parametrize(
    "command",
    [
        ["plan", "infer", "llama-3.1-8b", "-a", "h100"],
        [*TRAIN, "--tokens", "1T"],
        ["compare", "train", "llama-3.1-8b", "--tokens", "1T", "--gpus", "64"],
        ["catalog", "accelerators"],
    ],
    ids=["infer", "train", "compare", "catalog"],
)
def test_a_bad_spec_overlay_is_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str],
    isolated_home: Path,
    row: bytes,
    needle: str,
    command: list[str],
) -> None:
    """Items 12/13: every consumer fails with the overlay's error; compare no longer exits 0."""
    path = _overlay(isolated_home, "accelerator_specs.csv", SPEC_HEADER.encode() + row)
    code, out, err = cli(capsys, *command)
    _one_line_error(code, out, err, needle)
    assert str(path) in err


def test_a_bom_is_accepted_and_duplicate_ids_are_named(
    capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    """Item 13: Excel's UTF-8 BOM reads; a case-only duplicate id in one file is an error."""
    _overlay(isolated_home, "accelerator_specs.csv",
             "\ufeff" + SPEC_HEADER + "h100-sxm,tdp_w,650,me,2026-01-01,\n")  # fmt: skip
    code, out, err = cli(capsys, "catalog", "accelerators", "--json")
    assert code == 0, err
    path = _overlay(
        isolated_home,
        "systems.csv",
        (Path(systems.__file__).parent / "data" / "systems.csv").read_text().splitlines()[0] + "\n",
    )
    header = path.read_text()
    first = (Path(systems.__file__).parent / "data" / "systems.csv").read_text().splitlines()[1]
    _overlay(isolated_home, "systems.csv", header + first + "\n" + first.upper() + "\n")
    code, out, err = cli(capsys, "catalog", "systems")
    _one_line_error(code, out, err, "systems.csv:3: duplicate id")


def test_a_memory_override_takes_effect_in_the_planners(
    capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    """Item 13: an overlay memory_gb=40 for h100-sxm used to be listed but ignored (79.65 GiB)."""
    _overlay(isolated_home, "accelerator_specs.csv",
             SPEC_HEADER + "h100-sxm,memory_gb,40,me,2026-01-01,\n")  # fmt: skip
    code, out, err = cli(capsys, "plan", "infer", "llama-3.1-8b", "-a", "h100", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["hardware"]["origins"]  # where the numbers came from
    assert doc["memory"]["usable_gib"] < 40 * 1e9 / 2**30
    code, out, err = cli(capsys, *TRAIN, "--tokens", "1T", "--json")
    assert json.loads(out)["device_memory_gib"] == pytest.approx(40 * 1e9 / 2**30)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"num_attention_heads": 0}, "num_attention_heads=0 must be at least 1"),
        ({"max_position_embeddings": 0}, "max_position_embeddings=0 must be at least 1"),
        ({"num_hidden_layers": -2}, "num_hidden_layers=-2"),
        ({"hidden_size": 1e400}, "hidden_size=inf"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["model"],
        ["plan", "infer", "-a", "h100"],
        ["plan", "train", "-a", "h100", "--gpus", "8", "--tokens", "1T"],
    ],
    ids=["model", "infer", "train"],
)
def test_hostile_config_values_are_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    change: dict[str, float],
    needle: str,
    command: list[str],
) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**LLAMA, **change}).replace("Infinity", "1e400"))
    args = [*command[:1], *(command[1:2] if command[0] == "plan" else []), str(cfg)]
    args += command[2:] if command[0] == "plan" else command[1:]
    code, out, err = cli(capsys, *args)
    _one_line_error(code, out, err, needle)


def test_a_non_utf8_config_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_bytes(b'{"model_type": "llama", "name": "\xff\xfe"}')
    code, out, err = cli(capsys, "model", str(cfg))
    _one_line_error(code, out, err, "not UTF-8")


# --- item 14: catalog refresh on hostile ground --------------------------------------------------


@dataclass
class Item:
    provider: str
    instance_name: str
    location: str
    price: object
    gpu_count: object
    gpu_name: str | None
    gpu_memory: float | None
    spot: bool


GOOD = Item("lambda", "gpu_8x_h100_sxm5", "us-east-1", 21.52, 8, "H100", 80, False)


@pytest.mark.parametrize(
    "bad",
    [
        Item("x", "half", "eu", 1.0, 0.5, "H100", 80, False),
        Item("x", "words", "eu", "cheap", 1, "H100", 80, False),
        Item("x", "infinite", "eu", float("inf"), 1, "H100", 80, False),
        Item("x", "nan", "eu", float("nan"), 1, "H100", 80, False),
    ],
    ids=["half-gpu", "string-price", "inf-price", "nan-price"],
)
def test_refresh_skips_rows_that_are_not_offers(isolated_home: Path, bad: Item) -> None:
    from flopwise.catalog.offers import load_offers
    from flopwise.catalog.refresh import refresh_offers

    result = refresh_offers(fetch=lambda: [GOOD, bad], today="2026-11-22")
    assert result.offers == 1 and result.skipped == 1
    written = [o for o in load_offers() if o.origin != "embedded"]
    assert all(o.price_per_hour < float("inf") for o in written)
    assert {o.instance for o in written} == {"gpu_8x_h100_sxm5"}


def test_refresh_onto_a_folder_or_read_only_home_is_one_line(isolated_home: Path) -> None:
    from flopwise.catalog.refresh import refresh_offers
    from flopwise.errors import FlopwiseError
    from robust.readonly import read_only

    target = isolated_home / "catalog" / "offers.csv"
    target.mkdir(parents=True)
    with pytest.raises(FlopwiseError, match="not a file"):
        refresh_offers(fetch=lambda: [GOOD], today="2026-11-22")
    target.rmdir()
    with read_only(isolated_home / "catalog"), pytest.raises(FlopwiseError, match="cannot write"):
        refresh_offers(fetch=lambda: [GOOD], today="2026-11-22")
    assert not target.exists()


# --- items 15 and 16: impossible answers are not answers -----------------------------------------


def test_plan_infer_and_train_agree_when_the_job_does_not_fit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Item 15: 405B on one GPU: both exit 1 and lead with 'does not fit'."""
    for args in (
        ["plan", "infer", "llama-3.1-405b", "-a", "h100", "--gpus", "1"],
        ["plan", "train", "llama-3.1-405b", "-a", "h100", "--gpus", "1", "--tokens", "1T"],
    ):
        code, out, err = cli(capsys, *args)
        assert code == 1, (args, err)
        assert out.lstrip().startswith("does not fit"), out[:200]
        code, out, _ = cli(capsys, *args, "--json")
        assert code == 1 and json.loads(out)["fits"] is False


BAD_PLANS = [
    (["plan", "infer", "llama-3.1-8b", "-a", "h100", "--tp", "3"], "--tp 3 does not divide"),
    ([*TRAIN, "--tokens", "0.5"], "--tokens 0.5 is less than one global batch"),
    ([*TRAIN, "--tokens", "1e12", "--global-batch-tokens", "1e15"], "less than one global batch"),
    ([*TRAIN, "--tokens", "1T", "--gpus-per-node", "3"], "--gpus 16 does not fill whole nodes"),
]


@pytest.mark.parametrize(("args", "needle"), BAD_PLANS, ids=[n for _, n in BAD_PLANS])
def test_impossible_plans_are_refused(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    code, out, err = cli(capsys, *args)
    _one_line_error(code, out, err, needle)


def test_global_batch_rounding_is_stated(capsys: pytest.CaptureFixture[str]) -> None:
    """Item 16: 16M tokens at 8K per sequence is 1,953 sequences: the plan says so."""
    args = [*TRAIN, "--tokens", "1T", "--seq-len", "8192", "--global-batch-tokens", "16M"]
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any("1,953 whole sequences" in n and "15,998,976" in n for n in notes)
    _, out, _ = cli(capsys, *args)
    assert "rounded to 1,953 whole sequences" in " ".join(out.split())


def test_a_layout_that_does_not_divide_a_rounded_batch_says_where_it_came_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """16M tokens at 8K is 1,953 sequences, which DP 16 does not divide: the one-line error
    names the token batch behind the odd count and the flag that states sequences."""
    args = [*TRAIN, "--tokens", "1T", "--seq-len", "8192", "--global-batch-tokens", "16M"]
    code, out, err = cli(capsys, *args, "--dp", "16")
    _one_line_error(code, out, err, "does not divide the global batch of 1953 sequences")
    assert "16,000,000 tokens rounded to 1,953 whole sequences" in err
    assert "--global-batch-seqs" in err
    # given in sequences, the error stays as it was
    code, out, err = cli(
        capsys, *TRAIN, "--tokens", "1T", "--global-batch-seqs", "1953", "--dp", "16"
    )
    _one_line_error(code, out, err, "does not divide the global batch of 1953 sequences")
    assert "rounded" not in err


# --- item 18: closed pipes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["catalog", "models"],
        ["catalog", "offers"],
        ["compare", "infer", "llama-3.1-8b"],
    ],
)
def test_a_reader_that_stops_early_is_not_an_error(args: list[str], tmp_path: Path) -> None:
    """`flopwise ... | head` used to exit 1 with no message (rich's broken-pipe handling)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "flopwise", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=run_cli_env(tmp_path),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head` that has already exited
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


def run_cli_env(home: Path) -> dict[str, str]:
    import os

    return {**os.environ, "FLOPWISE_HOME": str(home), "COLUMNS": "120"}


def test_bench_extra_installs_numpy() -> None:
    """Item 18: torch's 'Failed to initialize NumPy' warning on every torch command."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    bench = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["bench"]
    assert any(dep.startswith("numpy") for dep in bench)


def test_every_case_here_is_traceback_free_in_a_real_process(tmp_path: Path) -> None:
    """One subprocess sample of the cases above: real exit code, real stderr."""
    r = run_cli("plan", "infer", "llama-3.1-8b", "-a", "h100", "--tp", "3", env_home=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
