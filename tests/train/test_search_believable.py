"""The layout search's best promise for a model whose best engineering is published.

Narayanan et al. 2021 (Table 1) trained the 529.6B GPT (105 layers, hidden 20480, 128 heads,
sequence 2048, global batch 2520) on 2,520 A100-80GB at 138 TFLOPS per GPU with full activation
recompute: 44% of peak in hardware FLOPs, 33% in model FLOPs (recompute is a quarter of the
hardware FLOPs). Korthikanti et al. 2022 (arXiv:2205.05198) ran the 530B model with selective
recompute and sequence parallelism at 54.2% model FLOPs utilization, the best published for it.
A search that promises much more than the best published engineering of this model is more
likely wrong than clever: the stated tolerance is 10% above 54.2%. At the time of writing the
best layout (every flag free, `--framework generic`) promises 57.0% (1.05x), with 4.4 GiB of
the 80 GiB left.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

BEST_PUBLISHED_MFU = 0.542  # Korthikanti et al. 2022, selective recompute + SP
MEGATRON_2021_MFU = 138.0 * 0.75 / 312.0  # hardware 138 TFLOPS incl. full recompute
PROMISE_TOLERANCE = 1.10


@pytest.fixture(scope="module")
def best() -> dict[str, object]:
    proc = run_cli(
        "plan", "train", "pub-gpt-style-529.6b-l105h20480", "-a", "a100-sxm-80gb",
        "--gpus", "2520", "--tokens", "1T", "--seq-len", "2048", "--global-batch-seqs", "2520",
        "--dtype", "bf16", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    return out


def test_the_promise_stays_within_the_best_published(best: dict[str, object]) -> None:
    mfu = float(best["mfu"])  # type: ignore[arg-type]
    assert mfu <= PROMISE_TOLERANCE * BEST_PUBLISHED_MFU, f"promises {mfu:.1%} MFU"
    # and it finds at least what Megatron-LM ran in 2021
    assert mfu >= MEGATRON_2021_MFU


def test_the_best_layout_is_not_fitted_to_the_last_gib(best: dict[str, object]) -> None:
    mem = best["memory_breakdown"]
    assert isinstance(mem, dict)
    assert float(mem["usable_gib"]) - float(mem["total_gib"]) >= 1.0
