#!/bin/bash
# write_cost.sh: what trainbpf's write(2) hook costs, the traced job and
# everything else on the machine.
#
# trainbpf attaches a BPF program to the syscall tracepoint
# syscalls:sys_enter_write (bpf/output.bpf.h). It runs on every write(2)
# on the machine: untraced tasks stop at task_slot() (one load); traced
# threads read the first 9 bytes of the buffer (marker test) and, with
# --epochs auto (default) or regex, copy up to 255 bytes of each write to
# fd 1/2 into the ring buffer with a forced wakeup; marker lines
# ("TRAINBPF step N") are copied and woken for whatever the fd. Enabling
# any syscall tracepoint also sends every task's syscalls, all of them,
# through the kernel's slow path (syscall_trace_enter).
#
# bench/build/write_loop (write_loop.c) makes one syscall N times and
# prints ns/call (CLOCK_MONOTONIC) and CPU ns/call (its thread's CPU clock):
#   null    write(2) of 64 bytes to a descriptor on /dev/null (fd >= 3)
#   stdout  write(2) of 64 bytes to fd 1 (redirected to /dev/null)
#   mark    write(2) of a 64-byte "TRAINBPF step K" line to /dev/null
#   getpid  syscall(SYS_getpid): not a write
# "/dev/null" is the null device: if /dev/null is not (a regular file left
# by something that renamed a file over it), a private node, mknod c 1 3
# in the output directory, is used instead, and setup.txt says so.
# Variants:
#   A  untraced, no trainbpf running: null stdout mark getpid
#   B  the same, untraced, while `trainbpf -i 0 -o /dev/null -- sleep S`
#      traces another process: the machine-wide cost (slow syscall path,
#      and the program's early return on writes)
#   C  trainbpf -i 0 -- write_loop null: traced; task_slot + 9-byte read
#   D  trainbpf -i 0 -- write_loop stdout >/dev/null (--epochs auto, the
#      default): + copy to the ring buffer and wakeup, every write
#   E  trainbpf -i 0 -- write_loop mark: a marker event every write
#   R  reference (REF=1): bpftrace with a near-empty program on the same
#      tracepoint, `tracepoint:syscalls:sys_enter_write /pid == cpid/
#      { @n = count(); }`, -c write_loop null getpid: what any BPF program
#      on this tracepoint costs (slow path, tracepoint record, a filter and
#      a count); its count must match the loop's writes
# D and E make N_EV calls (N/10: they cost ~50x more here). trainbpf
# starts a command only once all its programs are attached, so the timed
# loop never runs half-attached. Traced runs are checked with trainbpf's
# JSON report: the loop must be a traced process, E's step count plus the
# events lost must cover its writes, and D's and E's events_lost is
# recorded (a lost event is a cheaper write: the ring buffer was full, no
# copy). Rounds run every variant, in an order rotated by one each round;
# deltas and ratios against A are taken within a round, then summarised.
#
# Environment: ROUNDS (7) N (1000000 calls per mode and run) N_EV (N/10:
#              the same for D and E) REF (1) BENCH_OUT
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-7}
N=${N:-1000000}
N_EV=${N_EV:-$((N / 10))}
REF=${REF:-1}
WARM=1000
SLEEP_S=3600	# B's traced `sleep`: outlives its run, stopped right after

need_root
[ "$REF" = 1 ] && need_cmd bpftrace "apt install bpftrace (or REF=0)"
build_all
make -C "$BENCH_DIR" -s build/write_loop >/dev/null || die "make -C bench build/write_loop failed"
LOOP=$BENCH_DIR/build/write_loop
cd "$REPO"
OUT=$(bench_outdir write_cost)
RAW=$OUT/raw.tsv
: > "$RAW"
: > "$OUT/checks.tsv"
MODES=(null stdout mark getpid)

NULLDEV=/dev/null
NULLNOTE="/dev/null (char 1:3)"
if [ "$(stat -c '%F %t:%T' /dev/null)" != "character special file 1:3" ]; then
	NULLDEV=$OUT/null
	rm -f "$NULLDEV"
	mknod -m 666 "$NULLDEV" c 1 3 || die "/dev/null is not the null device and mknod failed"
	NULLNOTE="$NULLDEV (mknod c 1 3): /dev/null is a $(stat -c %F /dev/null), not the null device"
	log "warning: /dev/null is a $(stat -c %F /dev/null); writing to $NULLDEV instead"
fi

{
	echo "# write_cost: write_loop, $N calls per mode and run ($N_EV for D and E), $ROUNDS rounds"
	describe_setup
	echo "cpu:      $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
	echo "null:     $NULLNOTE"
} | tee "$OUT/setup.txt"

# record ROUND VARIANT LOG CALLS: the "MODE ns_per_call=X cpu_ns_per_call=Y
# calls=C" lines of LOG to the raw data, as VARIANT_MODE_ns and
# VARIANT_MODE_cpu_ns; checks each mode made CALLS calls.
record() {
	local m ns cpu c line="" k=0
	while read -r m ns cpu c; do
		ns=${ns#ns_per_call=}
		cpu=${cpu#cpu_ns_per_call=}
		[ "${c#calls=}" = "$4" ] || die "round $1 $2: $m made ${c#calls=} calls, not $4"
		printf '%s\t%s_%s_ns\t%s\n%s\t%s_%s_cpu_ns\t%s\n' "$1" "$2" "$m" "$ns" \
			"$1" "$2" "$m" "$cpu" >> "$RAW"
		line+=" $m=$ns"
		k=$((k + 1))
	done < <(grep -E '^[a-z]+ ns_per_call=' "$3")
	[ $k -gt 0 ] || die "round $1 $2: no result in $3"
	log "  $2:$line"
}

untraced() {	# untraced ROUND VARIANT: all modes, stdout to /dev/null
	local log=$OUT/$2.$1.log
	run_wait "$LOOP" -f "$NULLDEV" -n "$N" -W "$WARM" "${MODES[@]}" > "$NULLDEV" 2> "$log" ||
		die "round $1 $2: write_loop failed (see $log)"
	record "$1" "$2" "$log" $((N + WARM))
}

# check ROUND VARIANT JSON MODE CALLS: the loop was traced; for mark, every
# marker was seen; events_lost to checks.tsv.
check() {
	local r
	r=$("$PY" - "$@" <<'EOF'
import json, sys
rnd, var, path, mode, calls = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception as e:
    print("bad unreadable report %s: %s" % (path, e))
    sys.exit()
if not any(p.get("comm") == "write_loop" for p in d.get("processes", [])):
    print("bad write_loop is not among the traced processes (%s)" % path)
    sys.exit()
lost = d["counters"]["events_lost"]
steps = sum((e.get("steps") or {}).get("count", 0)
            for e in d.get("epochs", {}).get("list", []))
print("ok\t%s\t%s\tevents_lost\t%d" % (rnd, var, lost))
print("ok\t%s\t%s\tsteps\t%d" % (rnd, var, steps))
# A marker whose event did not fit in the ring buffer is lost, and counted.
if mode == "mark" and not (steps <= int(calls) <= steps + lost):
    print("bad trainbpf counted %d steps (%d events lost), write_loop wrote %s markers (%s)"
          % (steps, lost, calls, path))
EOF
)
	if grep -q '^bad' <<<"$r"; then
		die "round $1 $2: $(sed -n 's/^bad //p' <<<"$r" | head -n1)"
	fi
	sed -n 's/^ok\t//p' <<<"$r" >> "$OUT/checks.tsv"
	local lost
	lost=$(awk -F'\t' '$1 == "ok" && $4 == "events_lost" { print $5 }' <<<"$r")
	if [ "$4" != null ] && [ "${lost:-0}" != 0 ]; then
		log "  warning: $2: $lost events lost (ring buffer full): those writes were cheaper"
	fi
}

# traced ROUND VARIANT CALLS MODE: write_loop MODE under trainbpf, its
# stdout to /dev/null; loop's and trainbpf's stderr to the log.
traced() {
	local json=$OUT/$2.$1.json log=$OUT/$2.$1.log
	rm -f "$json"
	run_wait "$TRAINBPF" -i 0 --format json -o "$json" -- \
		"$LOOP" -f "$NULLDEV" -n "$3" -W "$WARM" "$4" > "$NULLDEV" 2> "$log" ||
		die "round $1 $2: trainbpf or write_loop failed (see $log)"
	check "$1" "$2" "$json" "$4" $(($3 + WARM))
	record "$1" "$2" "$log" $(($3 + WARM))
}

# beside ROUND: B, the untraced loop while trainbpf traces a sleep.
beside() {
	local tb sl
	"$TRAINBPF" -i 0 -o "$NULLDEV" -- sleep "$SLEEP_S" > "$OUT/tracer.$1.log" 2>&1 &
	tb=$!
	sl=$(child_of "$tb") || die "round $1 B: trainbpf did not start its command (see $OUT/tracer.$1.log)"
	wait_links "$tb" 10 20 || die "round $1 B: trainbpf did not attach (see $OUT/tracer.$1.log)"
	is_running "$sl" || die "round $1 B: the traced sleep is gone"
	untraced "$1" B
	stop_wait "$tb" || true		# its sleep gets SIGTERM with it (PDEATHSIG)
}

# reference ROUND: R, bpftrace's near-empty program on sys_enter_write.
reference() {
	local log=$OUT/R.$1.log got want=$((N + WARM))
	run_wait bpftrace -e 'tracepoint:syscalls:sys_enter_write /pid == cpid/ { @n = count(); }' \
		-c "$LOOP -f $NULLDEV -n $N -W $WARM null getpid" > "$log" 2>&1 ||
		die "round $1 R: bpftrace failed (see $log)"
	got=$(sed -n 's/^@n: //p' "$log")
	# every write of mode null, and the loop's few result lines on stderr
	if [ -z "$got" ] || [ "$got" -lt "$want" ] || [ "$got" -gt $((want + 10)) ]; then
		die "round $1 R: bpftrace counted ${got:-nothing} writes, the loop made $want (see $log)"
	fi
	record "$1" R "$log" "$want"
}

VARS=(A B C D E)
[ "$REF" = 1 ] && VARS+=(R)
NV=${#VARS[@]}
t0=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
	log "round $round/$ROUNDS"
	for k in $(seq 0 $((NV - 1))); do
		case ${VARS[$(((round - 1 + k) % NV))]} in
		A) untraced "$round" A ;;
		B) beside "$round" ;;
		C) traced "$round" C "$N" null ;;
		D) traced "$round" D "$N_EV" stdout ;;
		E) traced "$round" E "$N_EV" mark ;;
		R) reference "$round" ;;
		esac
	done
done
log "$ROUNDS rounds in $(( $(date +%s) - t0 )) s"

# Within each round: X - A (ns/call, wall and CPU) and X/A.
PAIRS=(B_null:A_null B_stdout:A_stdout B_mark:A_mark B_getpid:A_getpid C_null:A_null
       D_stdout:A_stdout E_mark:A_mark R_null:A_null R_getpid:A_getpid)
"$PY" - "$RAW" "${PAIRS[@]}" >> "$RAW" <<'EOF'
import sys
from collections import defaultdict
v = defaultdict(dict)
for line in open(sys.argv[1]):
    rep, m, x = line.rstrip("\n").split("\t")
    v[rep][m] = float(x)
for rep, d in v.items():
    for p in sys.argv[2:]:
        t, u = p.split(":")
        for s in ("ns", "cpu_ns"):
            a, b = "%s_%s" % (t, s), "%s_%s" % (u, s)
            if a in d and b in d:
                print("%s\tdelta_%s\t%.2f" % (rep, a, d[a] - d[b]))
                if s == "ns" and d[b] > 0:
                    print("%s\tratio_%s\t%.4f" % (rep, t, d[a] / d[b]))
EOF

SUMMARY=$OUT/summary.md
REF_G=() REF_N=()
if [ "$REF" = 1 ]; then REF_G=(R_getpid_ns) REF_N=(R_null_ns); fi
{
	echo "### write_cost: ns per write(2) of 64 bytes, $N calls per mode and run ($N_EV for D, E), $ROUNDS interleaved rounds"
	echo
	echo "write_loop ns per call (wall); delta and ratio = X - A and X / A within a round,"
	echo "median (min-max) over the rounds; CPU delta from the loop thread's CPU clock."
	echo
	"$PY" - "$RAW" "$OUT/checks.tsv" <<'EOF'
import statistics, sys
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    rep, m, x = line.rstrip("\n").split("\t")
    v[m].append(float(x))
lost = defaultdict(list)
for line in open(sys.argv[2]):
    rep, var, what, x = line.rstrip("\n").split("\t")
    if what == "events_lost":
        lost[var].append(int(x))
def cell(m, f="%.1f"):
    x = v.get(m)
    if not x:
        return "-"
    return (f + " (" + f + "-" + f + ")") % (statistics.median(x), min(x), max(x))
rows = [
    ("B", "getpid", "getpid()", "untraced; trainbpf traces a sleep"),
    ("B", "null", "write(/dev/null)", "untraced; trainbpf traces a sleep"),
    ("B", "stdout", "write(stdout)", "untraced; trainbpf traces a sleep"),
    ("C", "null", "write(/dev/null)", "traced: task_slot + 9-byte read"),
    ("D", "stdout", "write(stdout)", "traced, --epochs auto: + copy, ring buffer, wakeup"),
    ("E", "mark", "write(\"TRAINBPF step K\")", "traced: marker event"),
    ("R", "getpid", "getpid()", "untraced; bpftrace on sys_enter_write (reference)"),
    ("R", "null", "write(/dev/null)", "bpftrace: pid filter + count (reference)"),
]
print("| variant | call | tracer | A ns/call | X ns/call | X / A | delta ns/call | delta CPU ns/call | events lost (most in a run) |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for var, mode, call, what in rows:
    t = "%s_%s" % (var, mode)
    if t + "_ns" not in v:
        continue
    l = lost.get(var)
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        var, call, what, cell("A_%s_ns" % mode), cell(t + "_ns"),
        cell("ratio_" + t, "%.3f"), cell("delta_%s_ns" % t),
        cell("delta_%s_cpu_ns" % t), (str(max(l)) if l else "-")))
EOF
	echo
	echo "Every round (ns/call):"
	echo
	"$PY" "$STATS" wide "$RAW" A_getpid_ns B_getpid_ns A_null_ns B_null_ns C_null_ns \
		A_stdout_ns D_stdout_ns A_mark_ns E_mark_ns "${REF_G[@]}" "${REF_N[@]}"
	echo
	echo "Ratios with the noise check (stats.py):"
	echo
	"$PY" "$STATS" ratios "$RAW" A_getpid_ns B_getpid_ns "${REF_G[@]}"
	echo
	"$PY" "$STATS" ratios "$RAW" A_null_ns B_null_ns C_null_ns "${REF_N[@]}"
	echo
	"$PY" "$STATS" ratios "$RAW" A_stdout_ns B_stdout_ns D_stdout_ns
	echo
	"$PY" "$STATS" ratios "$RAW" A_mark_ns B_mark_ns E_mark_ns
	echo
	echo "All values:"
	echo
	"$PY" "$STATS" table "$RAW"
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
