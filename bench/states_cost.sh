#!/bin/bash
# states_cost.sh: what the state-transition stream (record mode; here
# --states-out) costs a traced job per context switch.
#
# The traced job is `perf bench sched pipe -l LOOPS`: two processes
# ping-ponging through a pipe, nearly pure context switches and wakeups,
# every one of them traced (the worst case for the stream: nothing but
# interval closes). Scenarios, interleaved, order rotating each round:
#   A  build/trainbpf -i 0 -o /dev/null -p JOB                 (no stream)
#   B  build/trainbpf -i 0 -o /dev/null -p JOB --states-out F  (stream on;
#      F on tmpfs, so user space formats every record as text: more than a
#      binary consumer would spend)
# JOB is a shell that waits on a fifo until the tracer is attached, runs
# perf bench, then waits again until the tracer's snapshot is taken, so
# that snapshots bracket exactly the perf bench run.
# Reported per round: usecs per pipe operation, state records per operation
# (B), and with BPF_STATS=1 the tracer's BPF ns per operation and per
# program (kernel.bpf_stats_enabled=1, restored after; the stats cost time
# themselves, so use a separate run for the usecs/op ratios).
#
# Environment: ROUNDS (7) LOOPS (200000) BPF_STATS (0) BENCH_OUT (raw dir)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-7}
LOOPS=${LOOPS:-200000}
BPF_STATS=${BPF_STATS:-0}

need_root
need_cmd perf "apt install linux-perf"
build_all
cd "$REPO"
OUT=$(bench_outdir states_cost)
RAW=$OUT/raw.tsv
SHM=$(mktemp -d /dev/shm/states_cost.XXXXXX)
rm_shm() { rm -rf "$SHM"; }
CLEANUP_HOOKS+=(rm_shm)
: > "$RAW"
: > "$OUT/bpf.tsv"

if [ "$BPF_STATS" = 1 ]; then
	need_cmd bpftool "apt install bpftool"
	OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
	restore_stats() { sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; }
	CLEANUP_HOOKS+=(restore_stats)
	sysctl -qw kernel.bpf_stats_enabled=1
fi

{
	echo "# states_cost: perf bench sched pipe -l $LOOPS traced by trainbpf, without (A) and with (B) the state stream; $ROUNDS rounds"
	describe_setup
} | tee "$OUT/setup.txt"

# run_one SCENARIO ROUND: one traced perf bench run; prints usecs/op
run_one() {
	local s=$1 round=$2 go=$SHM/go job tracer u recs
	rm -f "$go" "$SHM/done" "$SHM/states.tsv"
	mkfifo "$go"
	sh -c "read _ < $go; perf bench sched pipe -l $LOOPS > $SHM/pipe.out 2>&1; touch $SHM/done; read _ < $go" &
	job=$!
	if [ "$s" = B ]; then
		"$TRAINBPF" -i 0 -o /dev/null -p "$job" --states-out "$SHM/states.tsv" > "$OUT/tracer.log" 2>&1 &
	else
		"$TRAINBPF" -i 0 -o /dev/null -p "$job" > "$OUT/tracer.log" 2>&1 &
	fi
	tracer=$!
	wait_links "$tracer" 10 20 || die "scenario $s: tracer did not attach (see $OUT/tracer.log)"
	[ "$BPF_STATS" = 1 ] && "$PY" "$SNAP" snap "$tracer" > "$SHM/snap0.json"
	echo > "$go"
	while [ ! -e "$SHM/done" ]; do sleep 0.05; done
	if [ "$BPF_STATS" = 1 ]; then
		"$PY" "$SNAP" snap "$tracer" > "$SHM/snap1.json"
		"$PY" "$SNAP" diff "$SHM/snap0.json" "$SHM/snap1.json" "$round" \
			--tag "$s" --ops "$LOOPS" | awk -F'\t' '$2 ~ /^bpf_/ || $2 ~ /_bpf_(cpu_pct_total|ns_per_op)$/' >> "$OUT/bpf.tsv"
	fi
	echo > "$go"
	wait "$job"
	wait "$tracer" || log "warning: scenario $s tracer exited non-zero"
	u=$(awk '/usecs\/op/ { print $1 }' "$SHM/pipe.out")
	[ -n "$u" ] || die "no result from perf bench: $(cat "$SHM/pipe.out")"
	printf '%s\t%s_usecs_per_op\t%s\n' "$round" "$s" "$u" >> "$RAW"
	if [ "$s" = B ]; then
		grep -q 'states_lost=0$' "$SHM/states.tsv" || log "warning: state records lost: $(tail -n1 "$SHM/states.tsv")"
		recs=$(grep -vc '^[t#]' "$SHM/states.tsv" || true)
		printf '%s\tB_records_per_op\t%s\n' "$round" \
			"$("$PY" -c "print($recs / $LOOPS)")" >> "$RAW"
	fi
	echo "$u"
}

SCEN=(A B)
for round in $(seq 1 "$ROUNDS"); do
	line="round $round/$ROUNDS:"
	for k in 0 1; do
		s=${SCEN[$(((round - 1 + k) % 2))]}
		line+=" $s=$(run_one "$s" "$round")"
	done
	log "$line"
done

SUMMARY=$OUT/summary.md
{
	echo "### states_cost: perf bench sched pipe -l $LOOPS traced (usecs/op), $ROUNDS interleaved rounds"
	echo
	echo "A = traced, no state stream; B = traced with --states-out (tmpfs)."
	echo
	"$PY" "$STATS" table "$RAW"
	echo
	"$PY" "$STATS" ratios "$RAW" A_usecs_per_op --max-pct 5 B_usecs_per_op
	if [ "$BPF_STATS" = 1 ]; then
		echo
		echo "BPF run time during the perf bench runs (X_bpf_ns_per_op = BPF ns per pipe operation):"
		echo
		"$PY" "$STATS" table "$OUT/bpf.tsv"
		echo
		"$PY" "$STATS" progs "$OUT/bpf.tsv"
	fi
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
