#!/usr/bin/env bash
# trainbpf against a real PyTorch training job on a GPU machine (DDP with
# NCCL, world size 1, DataLoader workers):
#  1. attach by PID mid-training: CUDA runtime, driver and NCCL must be found
#     from the job's own maps, ncclAllReduce counted, gpu_wait reported;
#  2. launch-and-trace with --launches (text report);
#  3. step-time overhead, interleaved: none / trainbpf / trainbpf --launches /
#     torch.profiler on the same loop.
# Usage (root): scripts/gpu-check.sh [OUTDIR]; TB=path to a trainbpf binary
# (default build/trainbpf-static), PY=python with torch+CUDA, ROUNDS=rounds.
# Exits non-zero when a check of step 1 fails.
set -euo pipefail
cd "$(dirname "$0")/.."
TB=${TB:-build/trainbpf-static}
PY=${PY:-python3}
ROUNDS=${ROUNDS:-5}
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
"$PY" - "$OUT/attach.json" <<'PY' | tee "$OUT/attach-checks.txt"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gpu"]
kinds = {l["kind"] for l in g["libraries"]}
for l in g["libraries"]:
    print("library pid %d %-6s %-10s static=%s probes=%d missing=%s %s" % (
        l["pid"], l["kind"], l["version"] or "-", l["static"], l["probes"], l["missing"], l["path"]))
apis = {a["name"]: a for a in g["apis"]}
for a in g["apis"]:
    print("api %-28s %-10s calls %8d nested %6d bytes %12d time %.3f s" % (
        a["name"], a["kind"], a["calls"], a["nested"], a["bytes"], a["time_s"]))
ranks = [p for p in d["processes"] if p["role"] == "trainer"]
for p in ranks:
    main = [t for t in p["threads"] if t["tid"] == p["pid"]][0]
    print("trainer %d main thread: %s" % (p["pid"], ", ".join(
        "%s %.2f" % (k, v) for k, v in main["time_s"].items() if v > 0.005)))
    for c in p["gpu"]["nccl_comms"]:
        print("communicator", c)
print("headline", d["headline"]["rollup_pct"])
checks = {
    "cudart found": "cudart" in kinds,
    "driver found": "cuda" in kinds,
    "nccl found": "nccl" in kinds,
    "ncclAllReduce counted": apis.get("ncclAllReduce", {}).get("calls", 0) > 0,
    "gpu_wait reported": any(t["time_s"]["gpu_wait"] > 0 for p in ranks for t in p["threads"]),
}
for k, v in checks.items():
    print("CHECK %-24s %s" % (k, "ok" if v else "FAILED"))
sys.exit(0 if all(checks.values()) else 1)
PY

# 2. Launch and trace with launch counting, text report.
"$TB" -i 0 --launches -o "$OUT/launch.txt" -- "$PY" "${JOB[@]}" > "$OUT/launch-job.log" 2>&1

# 3. Step-time overhead: A untraced, B trainbpf, C trainbpf --launches,
#    D torch.profiler, interleaved.
: > "$OUT/overhead.txt"
for i in $(seq "$ROUNDS"); do
	for v in A B C D; do
		case $v in
		A) r=$("$PY" "${JOB[@]}" 2>&1) ;;
		B) r=$("$TB" -i 0 -o /dev/null -- "$PY" "${JOB[@]}" 2>&1) ;;
		C) r=$("$TB" -i 0 --launches -o /dev/null -- "$PY" "${JOB[@]}" 2>&1) ;;
		D) r=$("$PY" "${JOB[@]}" --torch-profiler 2>&1) ;;
		esac
		echo "$v $(sed -n 's/^RESULT //p' <<< "$r")" >> "$OUT/overhead.txt"
	done
done
"$PY" - "$OUT/overhead.txt" <<'PY' | tee "$OUT/overhead-summary.txt"
import json, statistics, sys
rows = [l.split(" ", 1) for l in open(sys.argv[1]) if l.strip()]
t = {}
for k, r in rows:
    if r.strip():
        t.setdefault(k, []).append(json.loads(r)["step_time_median_s"])
names = {"B": "trainbpf", "C": "trainbpf --launches", "D": "torch.profiler"}
print("rounds %d; A (untraced) median step %.5f s" % (len(t["A"]), statistics.median(t["A"])))
for k in "BCD":
    ratios = [y / x for x, y in zip(t["A"], t.get(k, []))]
    if ratios:
        print("%-20s median step %.5f s  ratio to A: median %.4f (min %.4f, max %.4f)"
              % (names[k], statistics.median(t[k]), statistics.median(ratios), min(ratios), max(ratios)))
PY
