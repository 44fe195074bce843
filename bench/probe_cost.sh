#!/bin/bash
# probe_cost.sh: what one hit of each kind of CUDA/NCCL probe costs the
# calling thread.
#
# bench/build/{push,xol}/probe_loop calls a stand-in CUDA/NCCL function
# (bench/standin.c: returns at once) N times and prints ns/call
# (CLOCK_MONOTONIC around the loop). Traced runs wait until trainbpf has
# attached every probe (gpu_lib.sh: traced_run) and are checked against
# trainbpf's own counts (JSON gpu.apis): a run whose calls were not all
# seen by the probes stops the benchmark.
#   A  untraced, push/ stand-ins (functions start with push %rbp, as the
#      real libcudart.so.13 and libnccl.so.2 do): every mode below
#   B  trainbpf (default set): cuStreamSynchronize, entry + return probe
#   C  trainbpf: ncclAllReduce, entry + return probe reading count and
#      datatype (bytes)
#   D  trainbpf --launches: cuLaunchKernel called directly (one entry-only
#      probe, with the return-address check), then cudaLaunchKernel, which
#      calls cuLaunchKernel (two entry-only probes, as the real runtime)
#   E  trainbpf: cudaStreamSynchronize -> cuStreamSynchronize (two entry +
#      return pairs, the inner one counted as nested)
#   F  untraced, xol/ stand-ins (first instruction single-stepped by the
#      kernel): every mode
#   G  trainbpf --launches, xol/ stand-ins: every mode
#   R  reference (REF=1): bpftrace with empty entry and return probes on
#      push/ cuStreamSynchronize: the kernel's uprobe cost alone
#   H, I  B and C, traced by another build, OLD_TRAINBPF=F: an A/B of two
#      builds in the same rounds (e.g. before and after a probe change)
# Rounds run every variant, in an order rotated by one each round; costs
# are traced - untraced ns/call within a round, then summarised.
#
# Environment: ROUNDS (7) N (200000 calls per mode and run) N_XOL (N/4:
# the same for F and G, whose calls cost ~10x more) REF (1) BENCH_OUT
# VARIANTS (default "A B C D E F G": a subset to run) TRACE_OPTS (more
# trainbpf options for every traced variant, e.g. "--ringbuf-size 16384")
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gpu_lib.sh"

ROUNDS=${ROUNDS:-7}
N=${N:-200000}
N_XOL=${N_XOL:-$((N / 4))}
REF=${REF:-1}
WARM=1000

need_root
build_all
build_gpu
[ "$REF" = 1 ] && need_cmd bpftrace "apt install bpftrace (or REF=0)"
cd "$REPO"
OUT=$(bench_outdir probe_cost)
RAW=$OUT/raw.tsv
: > "$RAW"
PUSH=$GPU_BUILD/push
XOL=$GPU_BUILD/xol
MODES=(sync nccl drvlaunch launch nested)

{
	echo "# probe_cost: $N calls per mode and run ($N_XOL for xol/), $ROUNDS rounds"
	describe_setup
	for v in push xol; do
		printf 'first instructions (%s/): ' "$v"
		for l in libcuda.so.1:cuStreamSynchronize libcuda.so.1:cuLaunchKernel \
			 libcudart.so.13:cudaStreamSynchronize libcudart.so.13:cudaLaunchKernel \
			 libnccl.so.2:ncclAllReduce; do
			printf '%s "%s"; ' "${l#*:}" "$(first_insn "$GPU_BUILD/$v/${l%%:*}" "${l#*:}")"
		done
		echo
	done
} | tee "$OUT/setup.txt"

# record ROUND VARIANT LOG CALLS: "MODE ns_per_call=X calls=C" lines to
# the raw data, as VARIANT_MODE_ns; checks each mode made CALLS calls.
record() {
	local m ns c line=""
	while read -r m ns c; do
		ns=${ns#ns_per_call=}
		[ "${c#calls=}" = "$4" ] || die "round $1 $2: $m made ${c#calls=} calls, not $4"
		printf '%s\t%s_%s_ns\t%s\n' "$1" "$2" "$m" "$ns" >> "$RAW"
		line+=" $m=$ns"
	done < <(grep -E '^[a-z]+ ns_per_call=' "$3")
	log "  $2:$line"
}

# traced ROUND VARIANT DIR N OPTS -- MODES...: one run under trainbpf,
# N calls per mode, checked against trainbpf's counts.
traced() {
	local round=$1 v=$2 dir=$3 n=$4 opts=() m
	local CALLS=$((n + WARM))
	shift 4
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	opts+=("${TOPTS[@]}")
	local json=$OUT/$v.$round.json log=$OUT/$v.$round.log
	traced_run "$json" "$log" "${opts[@]}" -- "$dir/probe_loop" -w -n "$n" -W "$WARM" "$@" ||
		die "round $round $v: trainbpf or probe_loop failed (see $log)"
	for m in "$@"; do
		case $m in
		sync)	  check_count "$json" cuStreamSynchronize calls "$CALLS" "round $round $v" ;;
		nccl)	  check_count "$json" ncclAllReduce calls "$CALLS" "round $round $v"
			  check_count "$json" ncclAllReduce bytes $((CALLS * 4 << 20)) "round $round $v" ;;
		drvlaunch) check_count "$json" cuLaunchKernel calls "$CALLS" "round $round $v" ;;
		launch)	  check_count "$json" cudaLaunchKernel calls "$CALLS" "round $round $v"
			  check_count "$json" cuLaunchKernel nested "$CALLS" "round $round $v" ;;
		nested)	  check_count "$json" cudaStreamSynchronize calls "$CALLS" "round $round $v" ;;
		esac
	done
	# nested: the driver's probe fired inside the runtime's; sync: it was
	# an outermost call itself, so the two modes add up.
	case " $* " in *" nested "*)
		local want=0
		case " $* " in *" sync "*) want=$CALLS ;; esac
		check_count "$json" cuStreamSynchronize nested "$CALLS" "round $round $v"
		check_count "$json" cuStreamSynchronize calls "$want" "round $round $v"
	esac
	record "$round" "$v" "$log" "$CALLS"
}

untraced() {	# untraced ROUND VARIANT DIR N
	local log=$OUT/$2.$1.log
	run_wait "$3/probe_loop" -n "$4" -W "$WARM" "${MODES[@]}" > "$log" 2>&1 ||
		die "round $1 $2: probe_loop failed (see $log)"
	record "$1" "$2" "$log" $(($4 + WARM))
}

reference() {	# reference ROUND: bpftrace, empty probes
	local log=$OUT/R.$1.log lib=$PUSH/libcuda.so.1 got CALLS=$((N + WARM))
	run_wait bpftrace -e "uprobe:$lib:cuStreamSynchronize { @n = count(); }
		uretprobe:$lib:cuStreamSynchronize { }" \
		-c "$PUSH/probe_loop -w -n $N -W $WARM sync" > "$log" 2>&1 ||
		die "round $1 R: bpftrace failed (see $log)"
	got=$(sed -n 's/^@n: //p' "$log")
	[ "$got" = "$CALLS" ] || die "round $1 R: bpftrace counted ${got:-nothing}, not $CALLS (see $log)"
	record "$1" R "$log" "$CALLS"
}

read -r -a VARS <<< "${VARIANTS:-A B C D E F G}"
read -r -a TOPTS <<< "${TRACE_OPTS:-}"
[ "$REF" = 1 ] && VARS+=(R)
case " ${VARS[*]} " in *" H "*|*" I "*)
	OLD=$(readlink -f "${OLD_TRAINBPF:-}") && [ -x "$OLD" ] ||
		die "variants H and I need OLD_TRAINBPF=a trainbpf binary" ;;
esac
NV=${#VARS[@]}
t0=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
	log "round $round/$ROUNDS"
	for k in $(seq 0 $((NV - 1))); do
		case ${VARS[$(((round - 1 + k) % NV))]} in
		A) untraced "$round" A "$PUSH" "$N" ;;
		B) traced "$round" B "$PUSH" "$N" -- sync ;;
		C) traced "$round" C "$PUSH" "$N" -- nccl ;;
		D) traced "$round" D "$PUSH" "$N" --launches -- drvlaunch launch ;;
		E) traced "$round" E "$PUSH" "$N" -- nested ;;
		F) untraced "$round" F "$XOL" "$N_XOL" ;;
		G) traced "$round" G "$XOL" "$N_XOL" --launches -- "${MODES[@]}" ;;
		R) reference "$round" ;;
		H) TRAINBPF=$OLD traced "$round" H "$PUSH" "$N" -- sync ;;
		I) TRAINBPF=$OLD traced "$round" I "$PUSH" "$N" -- nccl ;;
		esac
	done
done
log "$ROUNDS rounds in $(( $(date +%s) - t0 )) s"

# Costs: traced - untraced within each round.
"$PY" - "$RAW" >> "$RAW" <<'EOF'
import sys
from collections import defaultdict
v = defaultdict(dict)
for line in open(sys.argv[1]):
    rep, m, x = line.rstrip("\n").split("\t")
    v[rep][m] = float(x)
pairs = [("B_sync", "A_sync"), ("C_nccl", "A_nccl"), ("D_drvlaunch", "A_drvlaunch"),
         ("D_launch", "A_launch"), ("E_nested", "A_nested"), ("R_sync", "A_sync"),
         ("H_sync", "A_sync"), ("I_nccl", "A_nccl")]
pairs += [("G_" + m, "F_" + m) for m in ("sync", "nccl", "drvlaunch", "launch", "nested")]
for rep, d in v.items():
    for t, u in pairs:
        if t + "_ns" in d and u + "_ns" in d:
            print("%s\tcost_%s_ns\t%.2f" % (rep, t, d[t + "_ns"] - d[u + "_ns"]))
    # This build against OLD_TRAINBPF, in the same round.
    for t, u in (("B_sync", "H_sync"), ("C_nccl", "I_nccl")):
        if t + "_ns" in d and u + "_ns" in d:
            print("%s\tdiff_%s_ns\t%.2f" % (rep, t, d[t + "_ns"] - d[u + "_ns"]))
EOF

SUMMARY=$OUT/summary.md
{
	echo "### probe_cost: cost of a CUDA/NCCL probe hit, $N calls per mode and run ($N_XOL for xol), $ROUNDS interleaved rounds"
	echo
	echo "ns per call of probe_loop; cost = traced - untraced within a round, median (min-max)."
	echo "push = stand-ins starting with push %rbp (emulated on a hit, like the real"
	echo "libcudart.so.13 / libnccl.so.2); xol = starting with an instruction the kernel single-steps."
	echo
	"$PY" - "$RAW" <<'EOF'
import statistics, sys
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    rep, m, x = line.rstrip("\n").split("\t")
    v[m].append(float(x))
def cell(m):
    x = v.get(m)
    if not x:
        return "-"
    return "%.1f (%.1f-%.1f)" % (statistics.median(x), min(x), max(x))
rows = [
    ("B", "sync", "cuStreamSynchronize", "default", "entry+return", 1, "push"),
    ("C", "nccl", "ncclAllReduce (bytes)", "default", "entry+return", 1, "push"),
    ("D", "drvlaunch", "cuLaunchKernel", "--launches", "entry", 1, "push"),
    ("D", "launch", "cudaLaunchKernel -> cuLaunchKernel", "--launches", "entry", 2, "push"),
    ("E", "nested", "cudaStreamSynchronize -> cuStreamSynchronize", "default", "entry+return", 2, "push"),
    ("G", "sync", "cuStreamSynchronize", "default", "entry+return", 1, "xol"),
    ("G", "nccl", "ncclAllReduce (bytes)", "default", "entry+return", 1, "xol"),
    ("G", "drvlaunch", "cuLaunchKernel", "--launches", "entry", 1, "xol"),
    ("G", "launch", "cudaLaunchKernel -> cuLaunchKernel", "--launches", "entry", 2, "xol"),
    ("G", "nested", "cudaStreamSynchronize -> cuStreamSynchronize", "default", "entry+return", 2, "xol"),
    ("R", "sync", "cuStreamSynchronize, bpftrace empty probes", "reference", "entry+return", 1, "push"),
    ("H", "sync", "cuStreamSynchronize, OLD_TRAINBPF", "default", "entry+return", 1, "push"),
    ("I", "nccl", "ncclAllReduce (bytes), OLD_TRAINBPF", "default", "entry+return", 1, "push"),
]
print("| variant | call | probe set | probes | hits/call | prologue | untraced ns/call | traced ns/call | cost ns/call | cost per hit (median) |")
print("|---|---|---|---|---:|---|---:|---:|---:|---:|")
for var, mode, what, pset, kind, hits, pro in rows:
    t = "%s_%s" % (var, mode)
    if t + "_ns" not in v:
        continue
    base = ("A_" if pro == "push" else "F_") + mode + "_ns"
    c = v.get("cost_%s_ns" % t, [])
    per = "%.0f" % (statistics.median(c) / hits) if c else "-"
    print("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |" % (
        var, what, pset, kind, hits, pro, cell(base), cell(t + "_ns"),
        cell("cost_%s_ns" % t), per))
for t, what in (("B_sync", "cuStreamSynchronize"), ("C_nccl", "ncclAllReduce")):
    if "diff_%s_ns" % t in v:
        print()
        print("%s: this build - OLD_TRAINBPF, ns/call within a round: %s" % (what, cell("diff_%s_ns" % t)))
EOF
	echo
	echo "All ns/call values:"
	echo
	"$PY" "$STATS" table "$RAW"
} | tee "$SUMMARY"
log "raw data and summary in $OUT"
