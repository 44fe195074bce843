#!/bin/bash
# step_overhead.sh: how much slower does a training step get under trainbpf?
#
# Job: tests/workloads/ddp_train.py (2 DDP ranks over gloo, 2 DataLoader
# workers per rank, small MLP), one short epoch; it prints
# `RESULT {"step_time_median_s": ...}` (median over the run's steps).
#   A = the job alone:  /usr/bin/python3 tests/workloads/ddp_train.py ARGS
#   B = the same job launched under trainbpf:
#       build/trainbpf -i 0 -o /dev/null -- /usr/bin/python3 tests/workloads/ddp_train.py ARGS
# Runs are interleaved A B A B ... and compared pair by pair (B/A), so
# slow phases of a shared machine hit both members of a pair.
#
# Environment: PAIRS (7) JOB_ARGS ("--epochs 1") BENCH_OUT (raw data dir)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PAIRS=${PAIRS:-7}
JOB_ARGS=${JOB_ARGS:---epochs 1}
JOB=tests/workloads/ddp_train.py

need_root
[ -x "$PY" ] || die "missing $PY"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch"
build_all
cd "$REPO"
[ -f "$JOB" ] || die "missing $JOB"
OUT=$(bench_outdir step_overhead)
RAW=$OUT/raw.tsv
: > "$RAW"

# shellcheck disable=SC2206
ARGS=($JOB_ARGS)
{
	echo "# step_overhead: $PY $JOB ${ARGS[*]}, $PAIRS A/B pairs"
	describe_setup
} | tee "$OUT/setup.txt"

# run_job LABEL PAIR CMD...: runs one job, records its step time and wall time.
run_job() {
	local label=$1 pair=$2 log t0 t1 step
	shift 2
	log="$OUT/$label.$pair.log"
	t0=$(date +%s.%N)
	run_wait "$@" > "$log" 2>&1 || die "$label run $pair failed (see $log)"
	t1=$(date +%s.%N)
	step=$(sed -n 's/^RESULT //p' "$log" | tail -n1 |
	       "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step_time_median_s"])') ||
		die "$label run $pair printed no RESULT line (see $log)"
	printf '%s\t%s_step_time_median_s\t%s\n' "$pair" "$label" "$step" >> "$RAW"
	printf '%s\t%s_wall_s\t%s\n' "$pair" "$label" "$("$PY" -c "print($t1 - $t0)")" >> "$RAW"
	log "  $label: step_time_median_s=$step"
	STEP=$step
}

for pair in $(seq 1 "$PAIRS"); do
	log "pair $pair/$PAIRS"
	run_job A "$pair" "$PY" "$JOB" "${ARGS[@]}"
	a=$STEP
	run_job B "$pair" "$TRAINBPF" -i 0 -o /dev/null -- "$PY" "$JOB" "${ARGS[@]}"
	printf '%s\tratio_B_over_A\t%s\n' "$pair" "$("$PY" -c "print($STEP / $a)")" >> "$RAW"
done

SUMMARY=$OUT/summary.md
{
	echo "### step_overhead: ddp_train.py ${ARGS[*]}, $PAIRS interleaved A/B pairs"
	echo
	echo "Per pair (in run order):"
	echo
	"$PY" "$STATS" wide "$RAW" A_step_time_median_s B_step_time_median_s ratio_B_over_A A_wall_s B_wall_s
	echo
	"$PY" "$STATS" table "$RAW"
	echo
	"$PY" "$STATS" ratios "$RAW" A_step_time_median_s --max-pct 1 B_step_time_median_s
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
