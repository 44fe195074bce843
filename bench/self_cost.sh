#!/bin/bash
# self_cost.sh: what trainbpf itself costs while it traces a busy job.
#
# Job: tests/workloads/build/threads -t 100 -r 10000 (100 threads, ~10k
# context switches/s). trainbpf attaches with `-i 5 -p PID` (live table
# every 5 s, as a user would run it) for DURATION seconds. Per repetition:
#   * trainbpf user+sys CPU, % of one core, from /proc/PID/stat
#     utime+stime (10 ms ticks; also from schedstat, in ns) between "all BPF links attached" and "about to stop"
#     (steady state), and over its whole life from /usr/bin/time
#     (includes loading/verifying the BPF programs and the final report);
#   * peak RSS: VmHWM just before it is stopped, and /usr/bin/time's max RSS;
#   * kernel side: with kernel.bpf_stats_enabled=1, run_time_ns/run_cnt of
#     each of trainbpf's BPF programs (bpftool -j prog show, programs found
#     through /proc/PID/fdinfo), as ns per invocation, invocations/s and
#     CPU % of one core. The programs hook scheduler tracepoints, so they
#     run for every context switch on the machine, traced or not.
#
# Environment: REPS (5) DURATION (20 s) NTHREADS (100) RATE (10000)
#              INTERVAL (5) BENCH_OUT (raw data directory)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

REPS=${REPS:-5}
DURATION=${DURATION:-20}
NTHREADS=${NTHREADS:-100}
RATE=${RATE:-10000}
INTERVAL=${INTERVAL:-5}

need_root
need_cmd bpftool "apt install bpftool"
[ -x /usr/bin/time ] || die "missing /usr/bin/time (apt install time)"
[ -x "$PY" ] || die "missing $PY"
[ -e /proc/sys/kernel/bpf_stats_enabled ] || die "kernel has no kernel.bpf_stats_enabled"
build_all
cd "$REPO"
OUT=$(bench_outdir self_cost)
RAW=$OUT/raw.tsv
: > "$RAW"

OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
restore_stats() {
	sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"
	log "kernel.bpf_stats_enabled restored to $OLD_STATS"
}
CLEANUP_HOOKS+=(restore_stats)
sysctl -qw kernel.bpf_stats_enabled=1

{
	echo "# self_cost: trainbpf -i $INTERVAL -p PID on threads -t $NTHREADS -r $RATE," \
	     "${DURATION}s traced, $REPS reps"
	describe_setup
} | tee "$OUT/setup.txt"

for rep in $(seq 1 "$REPS"); do
	log "rep $rep/$REPS: workload + trainbpf for ${DURATION}s"
	"$THREADS_BIN" -t "$NTHREADS" -r "$RATE" -d $((DURATION + 5)) > "$OUT/workload.$rep.json" &
	wl=$!
	sleep 1		# let the 100 threads start
	/usr/bin/time -f '%e %U %S %M' -o "$OUT/time.$rep" \
		"$TRAINBPF" -i "$INTERVAL" -p "$wl" > "$OUT/trainbpf.$rep.log" 2>&1 &
	tp=$!
	tb=$(child_of "$tp") || die "trainbpf did not start"
	wait_links "$tb" 10 20 || die "trainbpf did not attach (see $OUT/trainbpf.$rep.log)"
	"$PY" "$SNAP" snap "$tb" > "$OUT/snap0.$rep.json"
	sleep "$DURATION"
	"$PY" "$SNAP" snap "$tb" > "$OUT/snap1.$rep.json"
	stop_wait "$tb" "$tp" || die "trainbpf failed (see $OUT/trainbpf.$rep.log)"
	wait "$wl" || die "workload failed"

	"$PY" - "$OUT/time.$rep" "$OUT/workload.$rep.json" "$rep" >> "$RAW" <<'EOF'
import json, sys
tfile, wfile, rep = sys.argv[1:]
line = [l for l in open(tfile).read().split("\n") if l.strip()][-1]
e, u, s, m = (float(x) for x in line.split())
w = json.load(open(wfile))
print("%s\ttrainbpf_cpu_lifetime_pct\t%r" % (rep, 100.0 * (u + s) / e))
print("%s\ttrainbpf_maxrss_mb\t%r" % (rep, m / 1024.0))
print("%s\tworkload_switches_per_s\t%r" % (rep, w["switches"] / w["duration_s"]))
EOF
	"$PY" "$SNAP" diff "$OUT/snap0.$rep.json" "$OUT/snap1.$rep.json" "$rep" >> "$RAW"
done

SUMMARY=$OUT/summary.md
{
	echo "### self_cost: trainbpf -i $INTERVAL -p PID, threads -t $NTHREADS -r $RATE, ${DURATION} s x $REPS reps"
	echo
	"$PY" "$STATS" table "$RAW" \
		--target trainbpf_cpu_pct '<=' 1 \
		--target trainbpf_cpu_pct_schedstat '<=' 1 \
		--target trainbpf_cpu_lifetime_pct '<=' 1 \
		--target bpf_cpu_pct_total '<=' 1 \
		--target 'total_cpu_pct (user+sys+bpf)' '<=' 1 \
		--target trainbpf_vmhwm_mb '<=' 64 \
		--target trainbpf_maxrss_mb '<=' 64
	echo
	echo "Per BPF program (kernel.bpf_stats_enabled=1):"
	echo
	"$PY" "$STATS" progs "$RAW"
	echo
	echo "on_switch calls/s counts every context switch on the machine" \
	     "(all CPUs, traced or not); workload_switches_per_s is the job's own rate."
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
