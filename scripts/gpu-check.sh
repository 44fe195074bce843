#!/usr/bin/env bash
# trainbpf against a real PyTorch training job on a GPU machine (DDP with
# NCCL, world size 1, DataLoader workers): attach by PID mid-training,
# launch-and-trace, and the step-time overhead, interleaved A/B.
# Usage (root): scripts/gpu-check.sh [OUTDIR]; TB=path to a trainbpf binary
# (default build/trainbpf-static), PY=python with torch+CUDA, PAIRS=A/B pairs.
set -euo pipefail
cd "$(dirname "$0")/.."
TB=${TB:-build/trainbpf-static}
PY=${PY:-python3}
PAIRS=${PAIRS:-5}
OUT=${1:-${OUT:-/tmp/gpu-check}}
JOB=(tests/workloads/ddp_train.py --device cuda --backend nccl --world-size 1
     --workers 2 --epochs 3 --samples 16384)
mkdir -p "$OUT"

{ date -u; uname -r; nvidia-smi -L || true
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$OUT/device.txt" 2>&1

# 1. Attach to a job that is already training.
"$PY" "${JOB[@]}" --print-pids > "$OUT/attach-job.log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^Epoch 1" "$OUT/attach-job.log" && break; sleep 0.1; done
sleep 1
ps -eLo pid,ppid,tid,comm | awk -v p="$job" 'NR == 1 || $1 == p || $2 == p' > "$OUT/attach-threads.txt" || true
"$TB" -i 2 --format json -o "$OUT/attach.json" -p "$job" 2> "$OUT/attach-live.txt"
wait "$job"

# 2. Launch and trace, text report with the thread table.
"$TB" -i 0 -o "$OUT/launch.txt" -- "$PY" "${JOB[@]}" > "$OUT/launch-job.log" 2>&1

# 3. Step-time overhead: untraced (A) and traced (B), alternating.
: > "$OUT/overhead.txt"
for i in $(seq "$PAIRS"); do
	a=$("$PY" "${JOB[@]}" 2>&1 | sed -n 's/^RESULT //p')
	b=$("$TB" -i 0 -o /dev/null -- "$PY" "${JOB[@]}" 2>&1 | sed -n 's/^RESULT //p')
	echo "A $a" >> "$OUT/overhead.txt"
	echo "B $b" >> "$OUT/overhead.txt"
done
"$PY" - "$OUT/overhead.txt" <<'PY' | tee "$OUT/overhead-summary.txt"
import json, statistics, sys
rows = [l.split(" ", 1) for l in open(sys.argv[1]) if l.strip()]
a = [json.loads(r)["step_time_median_s"] for k, r in rows if k == "A"]
b = [json.loads(r)["step_time_median_s"] for k, r in rows if k == "B"]
ratios = [y / x for x, y in zip(a, b)]
print("pairs %d  A median %.5f s  B median %.5f s  B/A median %.4f (min %.4f, max %.4f)"
      % (len(ratios), statistics.median(a), statistics.median(b),
         statistics.median(ratios), min(ratios), max(ratios)))
PY
