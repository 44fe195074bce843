#!/bin/bash
# run_all.sh: runs the three trainbpf benchmarks one after the other and
# collects their summaries in bench/out/<timestamp>/summary.md.
#
#   sudo bench/run_all.sh
#   sudo BENCH_REV=HEAD bench/run_all.sh     # measure a commit, not the tree
#
# The benchmarks' own knobs pass through the environment (REPS, DURATION,
# PAIRS, JOB_ARGS, ROUNDS, LOOPS, TARGET_S; see each script's header).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root
# Resolve the revision once, so that a commit landing mid-run changes nothing.
if [ -n "${BENCH_REV:-}" ]; then
	BENCH_REV=$(git -C "$REPO" rev-parse --short "$BENCH_REV^{commit}") ||
		die "BENCH_REV is not a commit"
	export BENCH_REV
fi
build_all	# once here; the scripts then find everything up to date
BENCH_OUT=${BENCH_OUT:-$BENCH_DIR/out/$(date +%Y%m%d-%H%M%S)}
export BENCH_OUT
mkdir -p "$BENCH_OUT"
log "results in $BENCH_OUT"

t0=$(date +%s)
for b in self_cost step_overhead sched_pipe; do
	log "=== $b"
	run_wait "$BENCH_DIR/$b.sh" || die "$b failed"
done
{
	echo "# trainbpf benchmarks, $(date -u +%Y-%m-%d)"
	echo
	echo '```'
	cat "$BENCH_OUT/self_cost/setup.txt"
	echo '```'
	for b in self_cost step_overhead sched_pipe; do
		echo
		cat "$BENCH_OUT/$b/summary.md"
	done
} > "$BENCH_OUT/summary.md"
log "all done in $(( $(date +%s) - t0 )) s; summary: $BENCH_OUT/summary.md"
