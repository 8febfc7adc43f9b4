#!/usr/bin/env bash
# The measurements of measure_gpu.sh (run through it: it sets OUT, FLOPWISE_HOME and PY).
set -u
log() { echo "=== $* ($(date -u +%T))"; }
log env
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit,clocks.max.sm,clocks.max.mem --format=csv
$PY -c "import torch;print('torch',torch.__version__,'cuda',torch.version.cuda,'cudnn',torch.backends.cudnn.version(),torch.cuda.get_device_properties(0))"
# the open questions first (docs/training-planner.md, ninth round): the power-capped share of
# bf16 and FP8 GEMMs and of attention on this part, then HBM; the longer sweeps follow and
# may be cut by BUDGET_S without losing these
log bench sustained
$PY -m flopwise bench sustained --out "$OUT/r/sustained.json"
# the FP8 GEMM's share at the same cap (docs/bench.md: does FP8 keep more than bf16?)
$PY -m flopwise bench sustained --dtype fp8 --out "$OUT/r/sustained_fp8.json" || echo "sustained fp8 failed"
# each kernel class alone and GEMMs + attention interleaved at the cap (8 s each, ~1 min): does an
# attention kernel inside a GEMM-heavy step keep its own sustained share? (training-planner.md)
$PY benchmarks/device/sustained.py 8 | tee "$OUT/r/sustained_mix.txt" || echo "sustained mix failed"
log attention
$PY -m flopwise bench attention --out "$OUT/r/bench_attention.json"
$PY benchmarks/device/attention_sdpa.py "$OUT/r/attention.csv"
log bench memory
$PY -m flopwise bench memory --out "$OUT/r/memory.json"
log bench matmul bf16
$PY -m flopwise bench matmul --dtype bf16 --budget-s 50 --out "$OUT/r/mamf_bf16.json"
log bench matmul fp8
$PY -m flopwise bench matmul --dtype fp8 --budget-s 50 --out "$OUT/r/mamf_fp8.json"
# MoE expert kernels (bench matmul --groups): (experts per GPU, N, K) of gate+up and down for
# Qwen3-30B-A3B (128 experts, EP1 and EP8), GPT-OSS-120B (128, EP8) and DeepSeek-V3 (256, EP8:
# DeepGEMM's grouped shapes); M is tokens per expert
for gnk in "128 1536 2048" "128 2048 768" "16 1536 2048" "16 2048 768" "16 5760 2880" "16 2880 2880" "32 4096 7168" "32 7168 2048"; do
  set -- $gnk
  log grouped bf16 G=$1 N=$2 K=$3
  $PY -m flopwise bench matmul --dtype bf16 --groups $1 --m 128 512 2048 4096 --n $2 --k $3 \
    --iterations 20 --warmup 3 --out "$OUT/r/grouped_bf16_$1_$2_$3.json" >/dev/null || echo "grouped $gnk failed"
done
$PY benchmarks/device/grouped_vs_plan.py | tee "$OUT/r/grouped_vs_plan.txt"
# every GEMM of two jobs' microbatches, as their plans price them
$PY -m flopwise bench matmul --model qwen3-30b-a3b --ep 8 --out "$OUT/r/job_qwen3_30b_ep8.json" >/dev/null || echo "job qwen3 failed"
$PY -m flopwise bench matmul --model llama-3.1-8b --out "$OUT/r/job_llama_8b.json" >/dev/null || echo "job llama failed"
$PY -m flopwise bench matmul --model qwen3-30b-a3b --tokens 1 8 32 128 512 2048 8192 --out "$OUT/r/serve_qwen3_30b.json" >/dev/null || echo "serve qwen3 failed"
log bench step
$PY -m flopwise bench step llama-3.1-8b --device cuda --out "$OUT/r/step_8b_4k.json"
$PY -m flopwise bench step llama-3.1-8b --device cuda --seq-len 8192 --out "$OUT/r/step_8b_8k.json"
$PY -m flopwise bench step llama-3.1-8b --device cuda --seq-len 2048 --microbatch 2 --out "$OUT/r/step_8b_2kx2.json"
$PY -m flopwise bench step llama-3.1-70b --device cuda --layers 1 --out "$OUT/r/step_70b_1l_4k.json"
# MoE steps (grouped expert GEMMs): the fine-grained and the coarse end of the MoE rows' error
$PY -m flopwise bench step qwen3-30b-a3b --device cuda --layers 4 --out "$OUT/r/step_qwen3_30b_4l_4k.json"
$PY -m flopwise bench step mixtral-8x7b --device cuda --layers 1 --out "$OUT/r/step_mixtral_1l_4k.json"
# the decode/training shape grids last: the longest part, cut first when BUDGET_S runs out
# (N, K) of Llama 3.1 8B (TP1) and 70B (TP8) projections: qkv, o, gate+up, down
for dt in bf16 fp8; do
  for nk in "6144 4096" "4096 4096" "28672 4096" "4096 14336" "1280 8192" "8192 1024" "7168 8192" "8192 3584"; do
    set -- $nk
    log shapes $dt N=$1 K=$2
    $PY -m flopwise bench matmul --dtype $dt --search grid --m 1 8 32 64 128 256 512 1024 2048 4096 8192 16384 \
      --n $1 --k $2 --iterations 30 --warmup 5 --out "$OUT/r/grid_${dt}_$1_$2.json" >/dev/null || echo "grid $dt $nk failed"
  done
done
log flush effect
$PY benchmarks/device/flush_effect.py | tee "$OUT/r/flush_effect.csv"
log done
