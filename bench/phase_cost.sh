#!/bin/bash
# phase_cost.sh: what do the training-phase probes (libtorch's brackets,
# bpf/torch.bpf.h) cost a PyTorch training step?
#
# Job: bench/torch_loop.py on Debian 13's torch 2.6 (scripts/torch-root.sh),
# or with TORCH=1.13 on Debian 12's (named through its legacy ops):
# an MLP of LAYERS Linear+ReLU layers, SGD, a DataLoader with
# num_workers=0, one CPU thread; it prints the median step time.
#   A = the job alone
#   B = under trainbpf --no-phases (everything but the phase probes)
#   C = under trainbpf (the default: phases probed)
# Each round runs A, B and C in a rotating order; ratios are per round,
# reported as medians with their spread: C/B is what the phase probes
# cost, C/A what trainbpf costs in all.
#
# Then, with bpftrace (REF=1), one run of the job alone with count-only
# uprobes on the functions trainbpf probes: hits per step, the number the
# cost scales with (bpftrace probes the library file: any other job using
# the same torch root at the time counts too; run it on a quiet machine) (a small model's step is the worst case: the same hits
# in less time).
#
# JOB_KIND=ddp runs the bundled job instead (tests/workloads/ddp_train.py,
# what `make demo` traces: 2 gloo ranks spawned, 2 fork workers each,
# EPOCHS epochs; its RESULT line is rank 0's median step): the issue's
# bound, the probes' share of the bundled job's step.
#
# Environment: ROUNDS (7) JOB_KIND (loop|ddp) LAYERS (20) STEPS (200, per
#              epoch) EPOCHS (2, ddp) TORCH (2.6|1.13) REF (1) BENCH_OUT
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-7}
LAYERS=${LAYERS:-20}
STEPS=${STEPS:-200}
REF=${REF:-1}
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
     PYJOB=("$ROOT_SH" run python3 "${JOB[@]}")
     LIBDIR=$("$ROOT_SH" path)/usr/lib/x86_64-linux-gnu
     PYBIN=$("$ROOT_SH" path)/usr/bin/python3.13 ;;
1.13) PYJOB=(/usr/bin/python3 "${JOB[@]}")
      LIBDIR=/usr/lib/x86_64-linux-gnu
      PYBIN=/usr/bin/python3.11 ;;
*) die "TORCH is 2.6 or 1.13" ;;
esac
build_all
cd "$REPO"
OUT=$(bench_outdir phase_cost)
RAW=$OUT/raw.tsv
: > "$RAW"
{
	echo "# phase_cost: torch $TORCH, ${JOB[*]}, $ROUNDS rounds of A (alone), B (--no-phases), C (phases)"
	describe_setup
} | tee "$OUT/setup.txt"

SCEN=(A B C)
for round in $(seq 1 "$ROUNDS"); do
	log "round $round/$ROUNDS"
	for k in 0 1 2; do
		case ${SCEN[$(((round - 1 + k) % 3))]} in
		A) run_job A "$round" "${PYJOB[@]}" ;;
		B) run_job B "$round" "$TRAINBPF" -i 0 -o /dev/null --no-phases -- "${PYJOB[@]}" ;;
		C) run_job C "$round" "$TRAINBPF" -i 0 -o /dev/null -- "${PYJOB[@]}" ;;
		esac
	done
done

# hits: count-only uprobes on the functions trainbpf probes, by their
# mangled names in this root's libraries, and the interpreter's blocking
# lock wait (a wait for a producer thread: it fires only where a thread
# blocks for a Python lock), in the processes that ran a bracket (every
# Python on the machine runs the interpreter); per step of a counted run.
count_hits() {
	local lib_cpu lib_py script
	lib_cpu=$(ls "$LIBDIR"/libtorch_cpu.so.*.*.* | head -n1)
	lib_py=$(ls "$LIBDIR"/libtorch_python.so.*.*.* | head -n1)
	script=$OUT/hits.bt
	{
		for f in $(nm -D --defined-only "$lib_cpu" | awk '{print $3}' |
			   grep -E '^_ZN5torch8autograd8profiler25record_function_enter_newE'); do
			echo "uprobe:$lib_cpu:$f { @job[pid] = 1; @hits = count(); }"
		done
		echo "uprobe:$lib_py:_Z22THPEngine_run_backwardP7_objectS0_S0_ { @job[pid] = 1; @hits = count(); }"
		echo "uretprobe:$lib_py:_Z22THPEngine_run_backwardP7_objectS0_S0_ { @hits = count(); }"
		for f in $(nm -D --defined-only "$lib_py" | awk '{print $3}' |
			   grep -E '^(_ZN5torch3jit24invokeOperatorFromPythonE|_Z34DisableTorchFunctionSubclass__exit)'); do
			echo "uprobe:$lib_py:$f { @hits = count(); }"
		done
		for f in $(nm -D --defined-only "$PYBIN" | awk '{print $3}' |
			   grep -E '^(PyThread_acquire_lock_timed|_PySemaphore_Wait)$'); do
			echo "uprobe:$PYBIN:$f /@job[pid]/ { @hits = count(); @py = count(); }"
			echo "uretprobe:$PYBIN:$f /@job[pid]/ { @hits = count(); @py = count(); }"
		done
	} > "$script"
	bpftrace -q "$script" > "$OUT/hits.txt" 2>&1 &
	local bt=$!
	sleep 8	# bpftrace attaches
	run_wait "${PYJOB[@]}" > "$OUT/hits.job.log" 2>&1 || die "counted run failed"
	kill -INT "$bt"
	wait "$bt" || true
	local hits steps
	hits=$(sed -n 's/^@hits: //p' "$OUT/hits.txt")
	steps=$(sed -n 's/^RESULT //p' "$OUT/hits.job.log" |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin)["steps"])')
	[ -n "$hits" ] && [ -n "$steps" ] || die "no hit count (see $OUT/hits.txt)"
	"$PY" -c "print('%d uprobe hits in %d steps: %.2f per step' % ($hits, $steps, $hits / $steps))"
	py=$(sed -n 's/^@py: //p' "$OUT/hits.txt")
	"$PY" -c "print('of which the interpreter\'s lock wait: %d (%.2f per step)' % (${py:-0}, ${py:-0} / $steps))"
}

SUMMARY=$OUT/summary.md
{
	echo "### phase_cost: torch $TORCH, $WHAT, $ROUNDS rounds (A alone, B --no-phases, C phases)"
	echo
	"$PY" "$STATS" wide "$RAW" A_step_ms B_step_ms C_step_ms
	echo
	"$PY" "$STATS" table "$RAW"
	echo
	echo "The phase probes' cost (C over B), and trainbpf's in all (B, C over A):"
	echo
	"$PY" "$STATS" ratios "$RAW" B_step_ms C_step_ms
	echo
	"$PY" "$STATS" ratios "$RAW" A_step_ms B_step_ms C_step_ms
	if [ "$REF" = 1 ] && command -v bpftrace >/dev/null; then
		echo
		count_hits
	fi
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
