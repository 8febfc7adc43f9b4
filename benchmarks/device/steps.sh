#!/usr/bin/env bash
# bench step on one GPU at four shapes, after the MAMF and bandwidth measurements the
# prediction uses, plus a kernel-category profile of two of them. Output in $OUT (default
# ./gpu-out): the step JSONs and the log, tarred.
set -u
OUT=${OUT:-./gpu-out}
PY=${PY:-python3}
mkdir -p "$OUT/r"
export FLOPWISE_HOME="$OUT/r/home" PYTHONUNBUFFERED=1
{
$PY -m flopwise bench matmul --dtype bf16 --budget-s 30 --json --out "$OUT/r/mamf_bf16.json" >/dev/null
$PY -m flopwise bench matmul --dtype fp8 --budget-s 30 --json --out "$OUT/r/mamf_fp8.json" >/dev/null
$PY -m flopwise bench memory --json --out "$OUT/r/memory.json" >/dev/null
for args in "--seq-len 4096" "--seq-len 8192" "--seq-len 2048 --microbatch 2"; do
  $PY -m flopwise bench step llama-3.1-8b --device cuda $args --json --out "$OUT/r/step_8b_${args// /_}.json" | $PY -c "import json,sys;d=json.load(sys.stdin);print(d['optimizer'],d['layers'],d['seq_len'],d['microbatch'],'meas',round(d['step_time_s'],4),'pred',round(d['predicted']['step_time_s'],4),'ratio',round(d['calibration'],3))"
done
$PY -m flopwise bench step llama-3.1-70b --device cuda --layers 1 --json --out "$OUT/r/step_70b_1l.json" | $PY -c "import json,sys;d=json.load(sys.stdin);print(d['optimizer'],d['layers'],d['seq_len'],d['microbatch'],'meas',round(d['step_time_s'],4),'pred',round(d['predicted']['step_time_s'],4),'ratio',round(d['calibration'],3))"
$PY benchmarks/device/profile_step.py llama-3.1-8b 6 4096 2>&1 | grep -v -i warn
$PY benchmarks/device/profile_step.py llama-3.1-8b 4 8192 2>&1 | grep -v -i warn
} 2>&1 | tee "$OUT/log.txt"
tar czf "$OUT/steps.tgz" -C "$OUT/r" .
rm -rf "$OUT/r"
