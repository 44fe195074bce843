#!/bin/bash
# run_all.sh: runs the trainbpf benchmarks one after the other and
# collects their summaries in bench/out/<timestamp>/summary.md.
#   self_cost, step_overhead, sched_pipe: the scheduler side;
#   probe_cost, gpu_overhead: the CUDA/NCCL probes (on stand-in libraries);
#   write_cost: the write(2) hook (markers, epoch lines).
#
#   sudo bench/run_all.sh
#   sudo BENCH_REV=HEAD bench/run_all.sh     # measure a commit, not the tree
#
# The benchmarks' own knobs pass through the environment (REPS, DURATION,
# PAIRS, JOB_ARGS, ROUNDS, LOOPS, TARGET_S, N, N_XOL, N_EV, REF, STEPS,
# STEP_MS, XOL; see each script's header): a knob goes to every script that
# has it (ROUNDS: sched_pipe, probe_cost, gpu_overhead, write_cost; N and
# REF: probe_cost, write_cost). ONLY="probe_cost
# gpu_overhead" runs a subset, in that order.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root
# Resolve the revision once, so that a commit landing mid-run changes nothing.
if [ -n "${BENCH_REV:-}" ]; then
	BENCH_REV=$(git -C "$REPO" rev-parse --short "$BENCH_REV^{commit}") ||
		die "BENCH_REV is not a commit"
	export BENCH_REV
fi
BENCHES=${ONLY:-self_cost step_overhead sched_pipe probe_cost gpu_overhead write_cost}
build_all	# once here; the scripts then find everything up to date
BENCH_OUT=${BENCH_OUT:-$BENCH_DIR/out/$(date +%Y%m%d-%H%M%S)}
export BENCH_OUT
mkdir -p "$BENCH_OUT"
log "results in $BENCH_OUT"

t0=$(date +%s)
for b in $BENCHES; do
	[ -x "$BENCH_DIR/$b.sh" ] || die "no benchmark $b"
	log "=== $b"
	run_wait "$BENCH_DIR/$b.sh" || die "$b failed"
done
{
	echo "# trainbpf benchmarks, $(date -u +%Y-%m-%d)"
	echo
	echo '```'
	for b in $BENCHES; do cat "$BENCH_OUT/$b/setup.txt"; break; done
	echo '```'
	for b in $BENCHES; do
		echo
		cat "$BENCH_OUT/$b/summary.md"
	done
} > "$BENCH_OUT/summary.md"
log "all done in $(( $(date +%s) - t0 )) s; summary: $BENCH_OUT/summary.md"
