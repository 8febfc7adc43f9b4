"""FP8 scaling recipes: cast bytes by hand, the --fp8-recipe flag, torchao's published speedups."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.fp8 import LayerCastCost, linear_cast_bytes, linear_time_s
from flopwise.plan.train.fp8_recipes import FP8_RECIPE_NAMES, get_fp8_recipe
from flopwise.plan.train.frameworks import PROFILES
from flopwise.workload.hf import load_model

M, K, N = 4096, 8192, 16384


def test_tensorwise_cast_bytes_by_hand() -> None:
    # stand-alone linear, nothing fused (torchao roofline, fuse_with_prev=False):
    # input/grad_output: amax read 2 + cast read 2, write fp8 twice (row- and column-major) 2
    # = 6 B per element; weight: amax read 2 + two casts of (read 2 + write 1) = 8 B
    c = linear_cast_bytes(M, K, N, get_fp8_recipe("tensorwise"), fused=False)
    assert c.input_bytes == M * K * 6
    assert c.grad_output_bytes == M * N * 6
    assert c.weight_bytes == K * N * 8
    assert c.rescale_bytes == 0
    # inside a compiled model the amax read fuses into the producer: 4 B per element
    f = linear_cast_bytes(M, K, N, get_fp8_recipe("tensorwise"), fused=True, weight_cast=False)
    assert f.input_bytes == M * K * 4
    assert f.weight_bytes == 0


def test_rowwise_cast_bytes_by_hand() -> None:
    # activation: kernel 1 reads 2, writes fp8 1 + a 16-bit transposed copy 2; kernel 2 reads
    # that copy 2 and writes fp8 1 = 8 B; weight 3 + 4 (transpose) + 3 = 10 B; the backward
    # GEMMs' 16-bit outputs (dgrad M x K, wgrad K x N) are read and written again: 4 B each
    c = linear_cast_bytes(M, K, N, get_fp8_recipe("rowwise"), fused=False)
    assert c.input_bytes == M * K * 8
    assert c.grad_output_bytes == M * N * 8
    assert c.weight_bytes == K * N * 10
    assert c.rescale_bytes == (M * K + K * N) * 4
    assert linear_cast_bytes(M, K, N, get_fp8_recipe("rowwise"), fused=True).input_bytes == (
        M * K * 6
    )


def test_delayed_scaling_reads_once_current_twice() -> None:
    # Transformer Engine: delayed scaling's fused cast-transpose reads 2 and writes 1 + 1 B;
    # current scaling adds the amax pass (read 2), which does not fuse
    d = linear_cast_bytes(M, K, N, get_fp8_recipe("delayed"), fused=True, weight_cast=False)
    cur = linear_cast_bytes(M, K, N, get_fp8_recipe("current"), fused=True, weight_cast=False)
    assert d.input_bytes == M * K * 4
    assert cur.input_bytes == M * K * 6


@pytest.mark.parametrize(
    ("shape", "published", "tolerance"),
    [
        # torchao/float8/README.md "Performance", tensorwise, H100 (pytorch/ao c6de9b42a, July
        # 2025): "M, K, N = 4096, 8192, 16384 ... benchmark speedup is 1.39"
        ((4096, 8192, 16384), 1.39, 0.10),
        # same README: "M, K, N = 1024, 2048, 1024 ... benchmark speedup is 0.80"; small shapes
        # are dominated by kernel minimums the roofline only bounds, hence the wider band
        ((1024, 2048, 1024), 0.80, 0.15),
    ],
)
def test_tensorwise_linear_speedup_matches_torchao(
    shape: tuple[int, int, int], published: float, tolerance: float
) -> None:
    # the microbenchmark ran on Meta's H100 (2.4 TB/s HBM2e; torchao roofline_utils.py) and
    # sums GPU kernel times (launches=False); the casting input is a fresh tensor (not fused)
    hw = hardware_from_catalog("h100-hbm2e-96gb", "grand-teton-h100-hbm2e")
    m, k, n = shape
    bf16 = linear_time_s(m, k, n, hw, None, launches=False)
    fp8 = linear_time_s(m, k, n, hw, get_fp8_recipe("tensorwise"), launches=False)
    assert bf16 / fp8 == pytest.approx(published, rel=tolerance)


def test_rowwise_is_slower_than_tensorwise_and_gw_hp_between() -> None:
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    runs = [r for r in FP8_RECIPE_NAMES if not get_fp8_recipe(r).needs_block_scaled_mma]
    t = {r: linear_time_s(M, K, N, hw, get_fp8_recipe(r)) for r in runs}
    assert t["tensorwise"] < t["rowwise"]
    assert t["delayed"] < t["current"]
    # torchao README: tensorwise "fastest", rowwise_with_gw_hp "most accurate"; every recipe
    # still beats bf16 on this large shape
    assert max(t.values()) < linear_time_s(M, K, N, hw, None)


def test_recipe_defaults_per_framework() -> None:
    assert PROFILES["torchtitan"].fp8_recipe == "tensorwise"
    for name in ("megatron-core", "nemo", "generic"):
        assert PROFILES[name].fp8_recipe == "delayed"
    for p in PROFILES.values():
        get_fp8_recipe(p.fp8_recipe)


def test_recipe_errors_name_the_value() -> None:
    with pytest.raises(FlopwiseError, match="applies to --dtype fp8"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, fp8_recipe="rowwise")
    with pytest.raises(FlopwiseError, match="'bogus' is not one of tensorwise, rowwise"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, dtype="fp8", fp8_recipe="bogus")


def test_recipe_flag_errors_on_the_cli() -> None:
    base = ("plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8", "--tokens", "1B")
    r = run_cli(*base, "--fp8-recipe", "rowwise")
    assert r.returncode == 2
    assert "--fp8-recipe rowwise applies to --dtype fp8" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli(*base, "--dtype", "fp8", "--fp8-recipe", "rowise")
    assert r.returncode == 2
    assert "rowise" in r.stderr and "Traceback" not in r.stderr


def _step_s(recipe: str | None, framework: str = "torchtitan", tp_overlap: bool = False) -> float:
    model = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(
        gpus=64,
        seq_len=8192,
        global_batch_seqs=64,
        dtype="fp8",
        framework=framework,
        fp8_recipe=recipe,
        tp_comm_overlap=tp_overlap,
    )
    lay = LayoutConstraints(
        tp=8, pp=1, dp=8, cp=1, microbatch=1, recompute="full", zero=3, sequence_parallel=True
    )
    return plan_training(model, hw, job, lay).step_time_s


def test_planner_uses_the_profile_default_and_the_flag() -> None:
    assert _step_s(None) == _step_s("tensorwise")
    assert _step_s("rowwise") > _step_s("tensorwise")
    # async-TP hides the FP8 all-gathers of tensorwise but not those of rowwise
    # (pytorch/pytorch#149990): overlap gains less with rowwise
    gain_tw = _step_s("tensorwise") - _step_s("tensorwise", tp_overlap=True)
    gain_rw = _step_s("rowwise") - _step_s("rowwise", tp_overlap=True)
    assert gain_rw < gain_tw


def test_published_rows_pass_the_recipe_they_name() -> None:
    from flopwise.validate.train_rows import load_training_runs, pose

    rows = {r["id"]: r for r in load_training_runs()}
    rowwise = pose(rows["tt2506_8b_64gpu_float8_rowwise_vanillatp"])
    tensorwise = pose(rows["tt2506_70b_256gpu_float8_tensorwise_asynctp"])
    unnamed = pose(rows["tt2412_8b_8gpu_fsdp_compile_float8"])
    assert not isinstance(rowwise, str) and not isinstance(tensorwise, str)
    assert not isinstance(unnamed, str)
    assert "--fp8-recipe rowwise" in rowwise.command
    assert "--fp8-recipe tensorwise" in tensorwise.command
    # "Float8 (torchao)" without a recipe: the torchtitan profile's default (tensorwise)
    assert "--fp8-recipe" not in unnamed.command and "--framework torchtitan" in unnamed.command


def test_plan_json_names_the_recipe_it_used() -> None:
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    lay = LayoutConstraints(tp=1, pp=1, dp=8, cp=1, microbatch=1, recompute="full", zero=1)
    fp8 = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, dtype="fp8", framework="nemo")
    bf16 = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, framework="nemo")
    assert plan_training(model, hw, fp8, lay).to_dict()["fp8_recipe"] == "delayed"
    assert plan_training(model, hw, bf16, lay).to_dict()["fp8_recipe"] is None


def test_fsdp_gathers_linear_weights_in_fp8_only_with_tensorwise() -> None:
    from flopwise.plan.train.context import ModelContext
    from flopwise.plan.train.dp_comm import fsdp_gather_bytes_per_param
    from flopwise.workload.params import count_params

    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    c = count_params(model)
    linear = (c.attention + c.mlp) / c.total  # Llama 3.1 8B: 6.98B of 8.03B
    got = {}
    for recipe in ("tensorwise", "rowwise", "delayed"):
        job = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, dtype="fp8", fp8_recipe=recipe)
        got[recipe] = fsdp_gather_bytes_per_param(ModelContext(model, hw, job))
    assert got["tensorwise"] == pytest.approx(2.0 * (1 - linear) + 1.0 * linear)
    assert 1.1 < got["tensorwise"] < 1.2  # embeddings and output projection stay 16-bit
    assert got["rowwise"] == got["delayed"] == 2.0


def _te_and_plain_casts(model_id: str) -> tuple[LayerCastCost, LayerCastCost, float]:
    """(NeMo's, llm-foundry's) layer cast cost of `model_id` under delayed FP8 at TP 1, 4096
    tokens, and the achievable HBM bandwidth they are priced at."""
    from flopwise.plan.train.context import ModelContext
    from flopwise.plan.train.fp8 import layer_cast_cost

    model = load_model(model_id)
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    cost = {}
    for fw in ("nemo", "llm-foundry"):
        job = TrainJob(
            gpus=8, seq_len=4096, global_batch_seqs=8, dtype="fp8", fp8_recipe="delayed",
            framework=fw,
        )  # fmt: skip
        ctx = ModelContext(model, hw, job)
        assert ctx.n_moe == (model.layers if model.is_moe else 0)
        cost[fw] = layer_cast_cost(ctx, ctx.fp8_recipe, 4096.0, 1, False, 1)
    return cost["nemo"], cost["llm-foundry"], ctx.bw_bytes_s


def test_te_layernorm_modules_write_the_fp8_inputs_of_qkv_fc1_and_fc2() -> None:
    # Megatron-Core/NeMo build the layer from TE LayerNormLinear/LayerNormMLP: under delayed
    # scaling the two norm outputs (QKV, FC1 inputs) and the activation output (FC2 input) cost
    # the wgrad transpose less the byte the producer no longer writes, 1 B per element, where
    # llm-foundry's te.Linear behind its own norm pays the 4-byte cast-transpose. Llama 3.1 8B
    # at TP 1: (2 x 4096 + 14336) elements per token x (4 - 1) B saved, forward only.
    from flopwise.plan.train.context import ModelContext
    from flopwise.plan.train.fp8_recipes import PRODUCER_FP8_CAST_BYTES

    te, plain, bw = _te_and_plain_casts("llama-3.1-8b")
    assert PRODUCER_FP8_CAST_BYTES == 1.0
    saved = (2 * 4096 + 14336) * 4096 * (4.0 - PRODUCER_FP8_CAST_BYTES) / bw
    assert plain.fwd_s - te.fwd_s == pytest.approx(saved)
    assert plain.bwd_s == pytest.approx(te.bwd_s)
    # a recipe whose norm cannot write FP8 (current scaling needs the amax first) is unchanged
    cur = TrainJob(
        gpus=8, seq_len=4096, global_batch_seqs=8, dtype="fp8", fp8_recipe="current",
        framework="nemo",
    )  # fmt: skip
    assert get_fp8_recipe("current").producer_writes_fp8 is False
    assert PROFILES["nemo"].te_layernorm_modules and not PROFILES["torchtitan"].te_layernorm_modules
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    assert ModelContext(load_model("llama-3.1-8b"), hw, cur).fp8_recipe.name == "current"


def test_te_moe_layers_keep_the_cast_of_their_expert_inputs() -> None:
    # Megatron-Core's MoE layers norm with a separate TENorm (the router reads its output) and
    # run the activation between the grouped expert GEMMs: only the attention norm's output
    # (the QKV input) is written in FP8 by its producer. Mixtral 8x7B, every layer MoE, TP 1.
    from flopwise.plan.train.fp8_recipes import PRODUCER_FP8_CAST_BYTES

    te, plain, bw = _te_and_plain_casts("mixtral-8x7b")
    saved = load_model("mixtral-8x7b").hidden * 4096 * (4.0 - PRODUCER_FP8_CAST_BYTES) / bw
    assert plain.fwd_s - te.fwd_s == pytest.approx(saved)


def test_mxfp8_runs_on_block_scaled_tensor_cores_only() -> None:
    job = ["--gpus", "8", "--tokens", "1T", "--dtype", "fp8", "--framework", "nemo", "--json"]
    refused = run_cli(
        "plan", "train", "llama-3.1-8b", "-a", "h100-sxm", *job, "--fp8-recipe", "mxfp8"
    )
    assert refused.returncode == 2
    assert "mxfp8" in refused.stderr and "h100-sxm" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    steps = {}
    for recipe in ("mxfp8", "current"):
        proc = run_cli(
            "plan", "train", "llama-3.1-8b", "-a", "b200", *job, "--fp8-recipe", recipe,
            "--tp", "1", "--pp", "1", "--dp", "8", "--microbatch", "2",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        steps[recipe] = json.loads(proc.stdout)["step_time_s"]
    # no amax pass before each quantization: 4.06 B per activation element against 6
    assert steps["mxfp8"] < steps["current"]


def test_mxfp8_cast_bytes_by_hand() -> None:
    r = get_fp8_recipe("mxfp8")
    # read 16-bit, write the row-wise and column-wise FP8 copies and an E8M0 scale per 32 each
    assert r.act_bytes(fused=False) == pytest.approx(2 + 1 + 1 + 2 / 32)
    assert r.needs_block_scaled_mma and r.act_cast_kernels == 1


def test_nvfp4_cast_bytes_by_hand() -> None:
    r = get_fp8_recipe("nvfp4")
    # the per-tensor FP32 scale needs the amax first (read 2); then a row-wise quantize and a
    # Hadamard-transformed column-wise one, each reading 2 B and writing 0.5 B of E2M1 values
    # and one E4M3 scale byte per 16 values
    assert r.act_bytes(fused=True) == pytest.approx(2 + 2 * (2 + 0.5 + 1 / 16))
    assert r.act_cast_kernels == 3 and not r.producer_writes_fp8
    assert r.gemm_dtype == "fp4" and r.wgrad_dtype == "fp4" and r.needs_block_scaled_mma
    assert not r.fp8_tp_all_gather  # sequence-parallel gathers taken in 16 bits


def _step(accelerator: str, recipe: str, model: str = "llama-3.1-70b") -> dict[str, object]:
    proc = run_cli(
        "plan", "train", model, "-a", accelerator, "--gpus", "64", "--tokens", "1T",
        "--seq-len", "8192", "--global-batch-seqs", "256", "--dtype", "fp8", "--fp8-recipe",
        recipe, "--framework", "nemo", "--tp", "2", "--pp", "4", "--dp", "8", "--vpp", "5",
        "--microbatch", "1", "--zero", "1", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_nvfp4_runs_the_gemms_at_the_fp4_rate() -> None:
    nvfp4, mxfp8 = _step("gb200", "nvfp4"), _step("gb200", "mxfp8")
    # the same layout: FP4 GEMMs (GB200's FP4 ceiling 1.6x its FP8 one) minus the extra casts
    speedup = float(mxfp8["step_time_s"]) / float(nvfp4["step_time_s"])
    # Megatron-Bridge 26.02 published this layout at 4,458 (NVFP4) and 3,613 (MXFP8) tokens/s
    # per GPU on GB200: 1.23x. A recipe whose GEMMs stayed FP8 would give < 1; one with free
    # casts and 16-bit gathers gone, the GEMM ratio (1.6x)
    assert 1.1 < speedup < 1.45, speedup
    # MFU is against the peak of the recipe's GEMM dtype
    assert nvfp4["peak_tflops"] == pytest.approx(2 * float(mxfp8["peak_tflops"]))


def test_nvfp4_is_refused_off_nvidia_blackwell() -> None:
    for accelerator, says in (("h100-sxm", "per-block scales"), ("mi355x", "NVIDIA Blackwell")):
        proc = run_cli(
            "plan", "train", "llama-3.1-8b", "-a", accelerator, "--gpus", "8", "--tokens", "1T",
            "--dtype", "fp8", "--fp8-recipe", "nvfp4",
        )  # fmt: skip
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_an_nvfp4_plan_names_the_fp4_ceiling_it_assumed() -> None:
    # GB300 publishes no MAMF: the plan's ASSUMED entry is the ceiling its GEMMs run at (FP4),
    # not FP8's
    proc = run_cli(
        "plan", "train", "llama-3.1-8b", "-a", "gb300", "--gpus", "8", "--tokens", "1T",
        "--dtype", "fp8", "--fp8-recipe", "nvfp4", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assumed = json.loads(proc.stdout)["assumed"]
    assert "matmul_tflops:fp8" not in assumed
    fp4 = assumed["matmul_tflops:fp4"]
    gb300 = hardware_from_catalog("gb300", None)
    assert fp4["value"] < 0.8 * gb300.peak("fp4") and "FP4_STAND_IN_REFERENCES" in fp4["source"]
