"""Published runs no constant was fitted to: Megatron-Bridge's 25.11 dense pre-training rows.

Source: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md (snapshot commit 00b7660),
"25.11 NeMo Container", Pre-Training Performance, tables DGX-H100, DGX-B200, DGX-GB200 and
DGX-GB300: model, GPUs, precision, GBS, MBS, sequence length, FSDP, TP, PP, CP, VP, tokens/s
per GPU. These runs are not in the shared reference file and were read only after the model's
fitted constants were last changed: every prediction here is out of sample, on a newer
framework release than any validation row (NeMo 24.07 is the newest there).

Only the dense rows that run without Megatron FSDP are posed: `--framework nemo` (Megatron-Core
with TP communication overlap, as the NeMo/Megatron-Bridge performance recipes run it),
FP8-CS as `--fp8-recipe current`, the published layout, recompute and microbatch count left to
the search (the table does not state recompute). Measured 2026-11-23 (third round) on this code: errors
-15.5% (H100 70B), -1.4% (H100 405B), +3.9% (B200 8B), +15.2% (B200 405B), +6.7% (GB200 8B),
-18.2% (GB200 405B), -5.3% (GB300 8B), -4.7% (GB300 405B): MAPE 8.9%, 7 of 8 inside their 80%
intervals.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

# (name, model, accelerator, gpus, gbs, mbs, tp, pp, cp, vp, published tokens/s per GPU)
MB_25_11 = [
    ("H100 70B", "llama-3.1-70b", "h100-sxm", 64, 128, 1, 4, 8, 1, 5, 1602),
    ("H100 405B", "llama-3.1-405b", "h100-sxm", 1024, 512, 1, 8, 8, 2, 8, 292),
    ("B200 8B", "llama-3.1-8b", "b200", 8, 128, 2, 1, 1, 1, None, 30624),
    ("B200 405B", "llama-3.1-405b", "b200", 128, 64, 1, 4, 8, 2, 8, 661),
    ("GB200 8B", "llama-3.1-8b", "gb200", 8, 128, 2, 1, 1, 1, None, 31508),
    ("GB200 405B", "llama-3.1-405b", "gb200", 256, 1536, 1, 4, 16, 1, 4, 813),
    ("GB300 8B", "llama-3.1-8b", "gb300", 8, 128, 2, 1, 1, 1, None, 37556),
    ("GB300 405B", "llama-3.1-405b", "gb300", 256, 1536, 1, 2, 8, 2, 4, 999),
]

#: Stated tolerance for one row: twice the training validation's out-of-sample MAPE (11.7% when set)
#: rounded up; the largest error at the time of writing is 18.2%.
ROW_TOLERANCE = 0.25


def _plan(row: tuple[object, ...]) -> dict[str, object]:
    _, model, acc, gpus, gbs, mbs, tp, pp, cp, vp, _ = row
    dp = int(gpus) // (int(tp) * int(pp) * int(cp))  # type: ignore[call-overload]
    args = [
        "plan", "train", str(model), "-a", str(acc), "--gpus", str(gpus), "--tokens", "1T",
        "--seq-len", "8192", "--global-batch-seqs", str(gbs), "--dtype", "fp8",
        "--fp8-recipe", "current", "--framework", "nemo", "--tp", str(tp), "--pp", str(pp),
        "--cp", str(cp), "--dp", str(dp), "--microbatch", str(mbs), "--zero", "1",
        "--memory-headroom", "0", "--json",
    ]  # fmt: skip
    if vp is not None:
        args[args.index("--zero") : args.index("--zero")] = ["--vpp", str(vp)]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    return out


@pytest.fixture(scope="module")
def planned() -> list[tuple[str, float, float, tuple[float, float]]]:
    rows = []
    for row in MB_25_11:
        d = _plan(row)
        gpus = float(d["gpus"])  # type: ignore[arg-type]
        lo, hi = d["tokens_per_s_interval"]  # type: ignore[misc]
        rows.append(
            (
                str(row[0]),
                float(row[-1]),  # type: ignore[arg-type]
                float(d["tokens_per_s"]) / gpus,  # type: ignore[arg-type]
                (lo / gpus, hi / gpus),
            )
        )
    return rows


def test_each_unseen_row_within_tolerance(
    planned: list[tuple[str, float, float, tuple[float, float]]],
) -> None:
    for name, measured, predicted, _ in planned:
        assert predicted == pytest.approx(measured, rel=ROW_TOLERANCE), name


def test_unseen_rows_fall_inside_their_80pct_intervals(
    planned: list[tuple[str, float, float, tuple[float, float]]],
) -> None:
    inside = [lo <= measured <= hi for _, measured, _, (lo, hi) in planned]
    # an 80% interval should hold most of them: at least 6 of 8 (7 at the time of writing)
    assert sum(inside) >= 6, planned
    mape = sum(abs(p / m - 1) for _, m, p, _ in planned) / len(planned)
    assert mape < 0.12, mape
