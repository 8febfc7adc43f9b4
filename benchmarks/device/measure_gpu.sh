#!/usr/bin/env bash
# Everything flopwise measures on one lent GPU, in one call: environment, the directed MAMF
# search (bf16, fp8), GEMM rates at the shapes the planner prices (training and decode of
# Llama 3.1 8B/70B), STREAM bandwidth, fused attention, and a real training step. Results and a
# log land in $OUT (default ./gpu-out) as one tarball, plus the log.
set -u
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT/r"
export FLOPWISE_HOME="$OUT/r/home" PYTHONUNBUFFERED=1
PY=${PY:-python3}
export OUT PY
# stop the measurements in time to pack what was measured (a device call has 10 minutes)
timeout "${BUDGET_S:-520}" bash "$(dirname "$0")/gpu_steps.sh" 2>&1 | tee "$OUT/log.txt"
tar czf "$OUT/results.tgz" -C "$OUT/r" .
rm -rf "$OUT/r"
