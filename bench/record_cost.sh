#!/bin/bash
# record_cost.sh: does recording cost the traced job more than live tracing?
#
# Job: tests/workloads/ddp_train.py (2 DDP ranks over gloo, 2 DataLoader
# workers per rank, small MLP), one short epoch; it prints
# `RESULT {"step_time_median_s": ...}` (median over the run's steps).
#   A = live:    build/trainbpf -i 0 -o /dev/null -- python3 ddp_train.py ARGS
#   B = record:  build/trainbpf record -o OUT/run.N.db -- python3 ddp_train.py ARGS
# Runs are interleaved A B A B ... and compared pair by pair (B/A), so slow
# phases of a shared machine hit both members of a pair. The recordings
# are kept beside the raw data (their size is in the summary).
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
OUT=$(bench_outdir record_cost)
RAW=$OUT/raw.tsv
: > "$RAW"

# shellcheck disable=SC2206
ARGS=($JOB_ARGS)
{
	echo "# record_cost: $PY $JOB ${ARGS[*]}, $PAIRS live/record pairs"
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
	run_job A "$pair" "$TRAINBPF" -i 0 -o /dev/null -- "$PY" "$JOB" "${ARGS[@]}"
	a=$STEP
	run_job B "$pair" "$TRAINBPF" record -o "$OUT/run.$pair.db" -- "$PY" "$JOB" "${ARGS[@]}"
	printf '%s\tratio_B_over_A\t%s\n' "$pair" "$("$PY" -c "print($STEP / $a)")" >> "$RAW"
	printf '%s\tB_db_bytes\t%s\n' "$pair" "$(stat -c %s "$OUT/run.$pair.db")" >> "$RAW"
	printf '%s\tB_flush_max_ms\t%s\n' "$pair" "$("$PY" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT value / 1e6 FROM counters WHERE key = ?",
      ("record_flush_max_ns",)).fetchone()[0])' "$OUT/run.$pair.db")" >> "$RAW"
done

SUMMARY=$OUT/summary.md
{
	echo "### record_cost: ddp_train.py ${ARGS[*]}, $PAIRS interleaved live (A) / record (B) pairs"
	echo
	echo "Per pair (in run order):"
	echo
	"$PY" "$STATS" wide "$RAW" A_step_time_median_s B_step_time_median_s ratio_B_over_A A_wall_s B_wall_s B_db_bytes B_flush_max_ms
	echo
	"$PY" "$STATS" table "$RAW"
	echo
	"$PY" "$STATS" ratios "$RAW" A_step_time_median_s --max-pct 1 B_step_time_median_s
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
