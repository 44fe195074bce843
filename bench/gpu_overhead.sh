#!/bin/bash
# gpu_overhead.sh: how much slower does a training step get when trainbpf
# probes its CUDA and NCCL calls?
#
# Job: bench/build/push/gpu_step (bench/gpu_step.c), a synthetic training
# loop on the stand-in libraries (bench/standin.c, functions starting with
# push %rbp like the real ones) at the call rates of a PyTorch DDP loop on
# an H100: a 50 ms step of 1250 cudaLaunchKernel (-> cuLaunchKernel) with
# fixed CPU work before each, 17.5 ncclAllReduce, and one
# cudaStreamSynchronize (-> cuStreamSynchronize) that spins 5 ms: ~20
# syncs/s, ~350 NCCL calls/s, 25k launches/s. The CPU work is a fixed
# iteration count (measured once, `gpu_step -c`), so probe time adds to the
# step: the host-bound worst case. It prints its median step time.
#   A = the job alone
#   B = under trainbpf, default probes (syncs and NCCL)
#   C = under trainbpf --launches (also the launch functions)
#   with XOL=1 also D, E = B, C on the xol/ stand-ins (first instruction
#   single-stepped by the kernel), to show what such a prologue costs.
# Traced runs wait until every probe is attached (gpu_lib.sh: traced_run)
# and are checked against trainbpf's counts. Rounds run A B C (D E) in
# an order rotated by one each time; ratios are taken within a round.
#
# Environment: ROUNDS (7) STEPS (120) STEP_MS (50) XOL (0) BENCH_OUT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gpu_lib.sh"

ROUNDS=${ROUNDS:-7}
STEPS=${STEPS:-120}
STEP_MS=${STEP_MS:-50}
XOL=${XOL:-0}
WARM=5
LAUNCHES=1250
NCCL=18
SYNC_MS=5

need_root
build_all
build_gpu
cd "$REPO"
OUT=$(bench_outdir gpu_overhead)
RAW=$OUT/raw.tsv
: > "$RAW"

K=$("$GPU_BUILD/push/gpu_step" -c) || die "gpu_step -c failed"
ARGS=(-k "$K" -s "$STEPS" -W "$WARM" -t "$STEP_MS" -S "$SYNC_MS" -L "$LAUNCHES" -n "$NCCL")
{
	echo "# gpu_overhead: gpu_step ${ARGS[*]}, $ROUNDS rounds"
	echo "(K = $K work iterations per microsecond, measured once, untraced)"
	describe_setup
} | tee "$OUT/setup.txt"

# result LOG FIELD: a field of gpu_step's RESULT line.
result() {
	sed -n 's/^RESULT //p' "$1" | tail -n1 |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["calls"][sys.argv[1]] if sys.argv[1] in d["calls"] else d[sys.argv[1]])' "$2"
}

# run VARIANT REP: one run of the job, recorded; traced runs checked.
run() {
	local v=$1 rep=$2 dir=$GPU_BUILD/push opts=() log=$OUT/$1.$2.log json=$OUT/$1.$2.json
	local step ns nn nl
	case $v in D | E) dir=$GPU_BUILD/xol ;; esac
	case $v in
	A) run_wait "$dir/gpu_step" "${ARGS[@]}" > "$log" 2>&1 ||
		die "$v run $rep failed (see $log)" ;;
	B | D) traced_run "$json" "$log" -- "$dir/gpu_step" -w "${ARGS[@]}" ||
		die "$v run $rep: trainbpf or gpu_step failed (see $log)" ;;
	C | E) traced_run "$json" "$log" --launches -- "$dir/gpu_step" -w -l "${ARGS[@]}" ||
		die "$v run $rep: trainbpf or gpu_step failed (see $log)" ;;
	esac
	step=$(result "$log" step_time_median_s) || die "$v run $rep printed no RESULT (see $log)"
	if [ "$v" != A ]; then
		ns=$(result "$log" cudaStreamSynchronize)
		nn=$(result "$log" ncclAllReduce)
		nl=$(result "$log" cudaLaunchKernel)
		check_count "$json" cudaStreamSynchronize calls "$ns" "$v run $rep"
		check_count "$json" cuStreamSynchronize nested "$ns" "$v run $rep"
		check_count "$json" ncclAllReduce calls "$nn" "$v run $rep"
		case $v in
		B | D) check_count "$json" cudaLaunchKernel calls 0 "$v run $rep" ;;
		C | E) check_count "$json" cudaLaunchKernel calls "$nl" "$v run $rep"
		       check_count "$json" cuLaunchKernel nested "$nl" "$v run $rep" ;;
		esac
	fi
	printf '%s\t%s_step_time_median_s\t%s\n' "$rep" "$v" "$step" >> "$RAW"
	STEP_LINE+=" $v=$step"
}

VARS=(A B C)
[ "$XOL" = 1 ] && VARS+=(D E)
NV=${#VARS[@]}
t0=$(date +%s)
for rep in $(seq 1 "$ROUNDS"); do
	STEP_LINE=""
	for k in $(seq 0 $((NV - 1))); do
		run "${VARS[$(((rep - 1 + k) % NV))]}" "$rep"
	done
	log "round $rep/$ROUNDS: step_time_median_s$STEP_LINE"
done
log "$ROUNDS rounds in $(( $(date +%s) - t0 )) s"

SUMMARY=$OUT/summary.md
{
	echo "### gpu_overhead: synthetic DDP loop, ${STEP_MS} ms steps, $ROUNDS interleaved rounds of ${VARS[*]}"
	echo
	echo "Per step: $LAUNCHES cudaLaunchKernel (-> cuLaunchKernel), 17.5 ncclAllReduce, 1 cudaStreamSynchronize"
	echo "(-> cuStreamSynchronize) spinning $SYNC_MS ms, fixed CPU work; $STEPS steps per run (median step time, s)."
	echo "A = untraced; B = trainbpf (syncs + NCCL); C = trainbpf --launches."
	[ "$XOL" = 1 ] && echo "D, E = B, C with stand-ins whose first instruction is single-stepped."
	echo
	cols=()
	for v in "${VARS[@]}"; do cols+=("${v}_step_time_median_s"); done
	"$PY" "$STATS" wide "$RAW" "${cols[@]}"
	echo
	"$PY" "$STATS" table "$RAW"
	echo
	"$PY" "$STATS" ratios "$RAW" A_step_time_median_s --max-pct 1 B_step_time_median_s
	echo
	echo "With --launches (no target: what users weigh before turning it on)$([ "$XOL" = 1 ] && echo ", and D, E"):"
	echo
	"$PY" "$STATS" ratios "$RAW" A_step_time_median_s "${cols[@]:2}"
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
