# shellcheck shell=bash
# shellcheck disable=SC2034  # PY, SNAP, STATS are used by the scripts sourcing this
# Shared helpers for the trainbpf benchmarks. Sourced, never run.
# Callers have already done `set -euo pipefail`.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
TRAINBPF=$REPO/build/trainbpf
THREADS_BIN=$REPO/tests/workloads/build/threads
PY=/usr/bin/python3
SNAP=$BENCH_DIR/snapshot.py
STATS=$BENCH_DIR/stats.py

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_root() {
	[ "$(id -u)" -eq 0 ] || die "needs root (BPF, sysctl): sudo $0"
}

need_cmd() {	# need_cmd CMD "where it comes from"
	command -v "$1" >/dev/null 2>&1 || die "missing $1 ($2)"
}

# Which trainbpf is measured:
#   default          the working tree, built with `make` (only what changed);
#   BENCH_REV=REV    a clean copy of git revision REV (git archive), built
#                    under bench/out/src-REV/: for measuring a commit while
#                    the working tree is being edited;
#   TRAINBPF_BIN=F   an already built binary F.
# The threads workload is always built from tests/workloads.
TRAINBPF_SRC="working tree"
build_all() {
	need_cmd make "apt install make"
	if [ -n "${TRAINBPF_BIN:-}" ]; then
		TRAINBPF=$(readlink -f "$TRAINBPF_BIN")
		TRAINBPF_SRC="given binary $TRAINBPF_BIN"
	elif [ -n "${BENCH_REV:-}" ]; then
		local rev src
		rev=$(git -C "$REPO" rev-parse --short "$BENCH_REV^{commit}") ||
			die "BENCH_REV=$BENCH_REV is not a commit"
		src=$BENCH_DIR/out/src-$rev
		if [ ! -x "$src/build/trainbpf" ]; then
			log "building trainbpf at $rev in $src"
			rm -rf "$src" && mkdir -p "$src"
			git -C "$REPO" archive "$rev" | tar -x -C "$src"
			make -C "$src" -s >/dev/null || die "make failed in $src"
		fi
		TRAINBPF=$src/build/trainbpf
		TRAINBPF_SRC="commit $rev (clean copy in $src)"
	else
		log "building trainbpf (make)"
		make -C "$REPO" -s >/dev/null || die "make failed"
	fi
	make -C "$REPO/tests/workloads" -s build/threads >/dev/null ||
		die "make -C tests/workloads build/threads failed"
	[ -x "$TRAINBPF" ] || die "$TRAINBPF not built"
	[ -x "$THREADS_BIN" ] || die "$THREADS_BIN not built"
}

# Raw data goes to $BENCH_OUT/<name>/ (default bench/out/<timestamp>/<name>/).
bench_outdir() {
	local d=${BENCH_OUT:-$BENCH_DIR/out/$(date +%Y%m%d-%H%M%S)}/$1
	mkdir -p "$d"
	echo "$d"
}

# What was measured: commit, dirty sources, binary hash, machine.
describe_setup() {
	echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "kernel:   $(uname -r)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "trainbpf: $TRAINBPF_SRC; sha256 $(sha256sum "$TRAINBPF" | cut -c1-16)"
	echo "tree:     HEAD $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')," \
	     "$(git -C "$REPO" status --porcelain -- bpf user include 2>/dev/null | wc -l) changed file(s) in bpf/ user/ include/"
}

# ---- background processes: every one we start is ended on exit ---------
# Only this shell's own unreaped background jobs (`jobs -p`) and their
# direct children (e.g. trainbpf under /usr/bin/time) are signalled, by PID.
CLEANUP_HOOKS=()

is_running() {	# is_running PID: exists and is not a zombie
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

cleanup() {
	local p c victims=()
	for p in $(jobs -p); do
		for c in $(pgrep -P "$p" || true); do victims+=("$c"); done
		victims+=("$p")
	done
	if [ ${#victims[@]} -gt 0 ]; then
		for p in "${victims[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
		for _ in $(seq 30); do
			local any=0
			for p in "${victims[@]}"; do is_running "$p" && any=1; done
			[ $any -eq 0 ] && break
			sleep 0.2
		done
		for p in "${victims[@]}"; do is_running "$p" && kill -KILL "$p" 2>/dev/null; done
		wait 2>/dev/null || true
	fi
	local h
	for h in "${CLEANUP_HOOKS[@]}"; do "$h" || true; done
	CLEANUP_HOOKS=()
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# Runs a command in the background and waits for it, so that a signal to
# this script runs the trap at once instead of after the command ends.
# Returns the command's exit status.
run_wait() {
	"$@" &
	local rc=0
	wait $! || rc=$?
	return $rc
}

# child_of PID: the first child of PID (waits up to 5 s for it to appear).
child_of() {
	local c
	for _ in $(seq 50); do
		c=$(pgrep -P "$1" | head -n1 || true)
		[ -n "$c" ] && { echo "$c"; return 0; }
		sleep 0.1
	done
	return 1
}

nlinks() { ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'bpf_link' || true; }

# wait_links PID N [TIMEOUT_S]: waits until PID holds at least N BPF links
# and their number has stopped growing for 0.2 s (all programs attached).
wait_links() {
	local pid=$1 n=$2 t=${3:-20} i have prev=-1
	for ((i = 0; i < t * 20; i++)); do
		is_running "$pid" || return 1
		have=$(nlinks "$pid")
		if [ "${have:-0}" -ge "$n" ]; then
			[ "$have" -eq "$prev" ] && return 0
			prev=$have
			sleep 0.2
			continue
		fi
		sleep 0.05
	done
	return 1
}

# stop_wait PID [WAITPID]: SIGINT to PID, then reap WAITPID (default PID,
# a background job of this shell); SIGKILL to PID after 15 s.
# Returns WAITPID's exit status.
stop_wait() {
	local pid=$1 wp=${2:-$1} rc=0
	kill -INT "$pid" 2>/dev/null || true
	for _ in $(seq 150); do
		is_running "$pid" || break
		sleep 0.1
	done
	is_running "$pid" && kill -KILL "$pid" 2>/dev/null
	wait "$wp" || rc=$?
	return $rc
}

# run_job LABEL ROUND CMD...: one run of a job that prints a RESULT line
# (bench/torch_loop.py, ddp_train.py); its median step time into $RAW (a
# row "ROUND LABEL_step_ms MS") and STEP. Logs go to $OUT.
run_job() {
	local label=$1 round=$2 log
	shift 2
	log="$OUT/$label.$round.log"
	run_wait "$@" > "$log" 2>&1 || die "$label run $round failed (see $log)"
	STEP=$(sed -n 's/^RESULT //p' "$log" | tail -n1 |
	       "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step_time_median_s"])') ||
		die "$label run $round printed no RESULT line (see $log)"
	printf '%s\t%s_step_ms\t%s\n' "$round" "$label" "$("$PY" -c "print($STEP * 1e3)")" >> "$RAW"
	log "  $label: step $STEP s"
}
