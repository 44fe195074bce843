#!/bin/bash
# functions_cost.sh: what does --functions (the Python stack reader,
# bpf/pystack.bpf.h) cost a PyTorch training step?
#
# Job: bench/torch_loop.py on Debian 13's torch 2.6 (scripts/torch-root.sh),
# or with TORCH=1.13 on Debian 12's: an MLP of LAYERS Linear+ReLU layers,
# SGD, a DataLoader with num_workers=0, one CPU thread; it prints the
# median step time.
#   A = the job alone
#   B = under trainbpf (the default: phases probed, no stacks)
#   C = under trainbpf --functions (the stack reader on: a stack read at
#       each switch off a CPU of a Python thread, and at each on-CPU
#       sample, HZ a second of each CPU)
# Each round runs A, B and C in a rotating order; ratios are per round,
# reported as medians with their spread: C/B is what the stack reader
# costs (the issue's bound: 0.5% of a step), C/A what trainbpf costs in all.
#
# JOB_KIND=ddp runs the bundled job instead (tests/workloads/ddp_train.py,
# what `make demo` traces: 2 gloo ranks spawned, 2 fork workers each).
#
# Environment: ROUNDS (7) JOB_KIND (loop|ddp) LAYERS (20) STEPS (200, per
#              epoch) EPOCHS (2, ddp) TORCH (2.6|1.13) HZ (97) BENCH_OUT
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-7}
LAYERS=${LAYERS:-20}
STEPS=${STEPS:-200}
HZ=${HZ:-97}
ROOT_SH=$REPO/scripts/torch-root.sh
JOB_KIND=${JOB_KIND:-loop}
EPOCHS=${EPOCHS:-2}
TORCH=${TORCH:-2.6}
case $JOB_KIND in
loop) JOB=(bench/torch_loop.py --layers "$LAYERS" --steps "$STEPS")
      WHAT="MLP, $LAYERS layers" ;;
ddp) JOB=(tests/workloads/ddp_train.py --epochs "$EPOCHS")
     WHAT="the bundled DDP job (ddp_train.py, 2 ranks, $EPOCHS epochs)" ;;
*) die "JOB_KIND is loop or ddp" ;;
esac

need_root
case $TORCH in
2.6) "$ROOT_SH" path >/dev/null || die "no torch 2.6 root: run scripts/torch-root.sh"
     PYJOB=("$ROOT_SH" run python3 "${JOB[@]}") ;;
1.13) PYJOB=(/usr/bin/python3 "${JOB[@]}") ;;
*) die "TORCH is 2.6 or 1.13" ;;
esac
build_all
cd "$REPO"
OUT=$(bench_outdir functions_cost)
RAW=$OUT/raw.tsv
: > "$RAW"
{
	echo "# functions_cost: torch $TORCH, ${JOB[*]}, $ROUNDS rounds of A (alone), B (trainbpf), C (--functions --stack-hz $HZ)"
	describe_setup
} | tee "$OUT/setup.txt"

SCEN=(A B C)
for round in $(seq 1 "$ROUNDS"); do
	log "round $round/$ROUNDS"
	for k in 0 1 2; do
		case ${SCEN[$(((round - 1 + k) % 3))]} in
		A) run_job A "$round" "${PYJOB[@]}" ;;
		B) run_job B "$round" "$TRAINBPF" -i 0 -o /dev/null -- "${PYJOB[@]}" ;;
		C) run_job C "$round" "$TRAINBPF" -i 0 -o /dev/null --functions \
			   --stack-hz "$HZ" -- "${PYJOB[@]}" ;;
		esac
	done
done

# The cost where it lands, exactly: the BPF programs' own run time
# (kernel.bpf_stats_enabled), which the host's noise does not reach. The
# stack reader runs in the job's threads: in on_switch (a read at each
# switch-out) and py_sample (its perf samples). One run under B and one
# under C, each polled with bpftool until its end; the extra time per
# step is C's py_sample plus what on_switch costs more a call times its
# calls, over the job's steps.
prog_stats() {	# prog_stats LABEL CMD...: "name run_time_ns run_cnt" lines, last seen
	local label=$1 snap=$OUT/$1.progs.json pid
	shift
	"$@" > "$OUT/$label.stats.log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		bpftool prog show -j > "$snap.new" 2>/dev/null && mv "$snap.new" "$snap"
		sleep 0.3
	done
	wait "$pid" || die "$label stats run failed (see $OUT/$label.stats.log)"
	"$PY" - "$snap" <<'PYEOF'
import json, sys
for p in json.load(open(sys.argv[1])):
    if p.get("name") in ("on_switch", "py_sample"):
        print(p["name"], p.get("run_time_ns", 0), p.get("run_cnt", 0))
PYEOF
}

bpf_cost() {
	local old b c steps step
	old=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -qw kernel.bpf_stats_enabled=1
	b=$(prog_stats statsB "$TRAINBPF" -i 0 -o /dev/null -- "${PYJOB[@]}")
	c=$(prog_stats statsC "$TRAINBPF" -i 0 -o /dev/null --functions --stack-hz "$HZ" \
		-- "${PYJOB[@]}")
	sysctl -qw kernel.bpf_stats_enabled="$old"
	steps=$(sed -n 's/^RESULT //p' "$OUT/statsC.stats.log" | tail -n1 |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin)["steps"])')
	step=$(sed -n 's/^RESULT //p' "$OUT/statsC.stats.log" | tail -n1 |
	       "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step_time_median_s"])')
	"$PY" - "$steps" "$step" "$b" "$c" <<'PYEOF'
import sys
steps, step = int(sys.argv[1]), float(sys.argv[2])
def parse(t):
    return {l.split()[0]: (int(l.split()[1]), int(l.split()[2])) for l in t.splitlines() if l}
b, c = parse(sys.argv[3]), parse(sys.argv[4])
(bt, bn), (ct, cn) = b["on_switch"], c["on_switch"]
st, sn = c.get("py_sample", (0, 0))
sw_extra = (ct / cn - bt / bn) * cn
print(f"on_switch: {bt / bn:.0f} ns a call without --functions, {ct / cn:.0f} ns with "
      f"({bn} and {cn} calls, every task's)")
print(f"py_sample: {sn} samples, {st / max(sn, 1):.0f} ns each")
per_step = (sw_extra + st) / steps
print(f"the stack reader's BPF time: {per_step / 1e3:.1f} us a step of {step * 1e3:.2f} ms "
      f"({100 * per_step / (step * 1e9):.3f}% of a step; {steps} steps)")
PYEOF
}

SUMMARY=$OUT/summary.md
{
	echo "### functions_cost: torch $TORCH, $WHAT, $ROUNDS rounds (A alone, B trainbpf, C --functions at $HZ Hz)"
	echo
	"$PY" "$STATS" wide "$RAW" A_step_ms B_step_ms C_step_ms
	echo
	"$PY" "$STATS" table "$RAW"
	echo
	echo "The stack reader's cost (C over B), and trainbpf's in all (B, C over A):"
	echo
	"$PY" "$STATS" ratios "$RAW" B_step_ms C_step_ms
	echo
	"$PY" "$STATS" ratios "$RAW" A_step_ms B_step_ms C_step_ms
	echo
	echo "The stack reader's own time in the job's threads (BPF run time, bpf_stats):"
	echo
	bpf_cost
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
