# shellcheck shell=bash
# Shared helpers of probe_cost.sh and gpu_overhead.sh (the CUDA/NCCL probe
# benchmarks). Sourced after lib.sh, never run.

GPU_BUILD=$BENCH_DIR/build

# Builds the stand-ins and bench programs (bench/Makefile) and checks the
# first instruction of each probed stand-in function: push %rbp in push/
# (what the real libcudart.so.13 and libnccl.so.2 functions start with),
# anything else in xol/. What the kernel does on a uprobe hit depends on it.
build_gpu() {
	need_cmd objdump "apt install binutils"
	make -C "$BENCH_DIR" -s >/dev/null || die "make -C bench failed"
	local v l want insn
	for v in push xol; do
		for l in libcuda.so.1:cuStreamSynchronize libcuda.so.1:cuLaunchKernel \
			 libcudart.so.13:cudaStreamSynchronize libcudart.so.13:cudaLaunchKernel \
			 libnccl.so.2:ncclAllReduce; do
			insn=$(first_insn "$GPU_BUILD/$v/${l%%:*}" "${l#*:}")
			[ -n "$insn" ] || die "${l#*:} not found in $GPU_BUILD/$v/${l%%:*}"
			want=no
			case $insn in push*) want=push ;; esac
			[ "$v" = xol ] && want=$([ $want = push ] && echo bad || echo xol)
			[ "$want" = "$v" ] ||
				die "$v/${l%%:*}: ${l#*:} starts with '$insn' (see bench/Makefile)"
		done
	done
}

# first_insn LIB SYM: the first instruction of SYM, e.g. "push %rbp".
# (awk reads to the end: an early exit would kill objdump with SIGPIPE.)
first_insn() {
	objdump -d --no-show-raw-insn "$1" |
		awk -v s="<$2>:" '!done && $2 == s { getline; sub(/^ *[0-9a-f]+:[ \t]*/, "");
			gsub(/[ \t]+/, " "); print; done = 1 }'
}

# traced_run JSON LOG [TRAINBPF OPTIONS] -- CMD...
# Runs CMD under `trainbpf -i 0 --format json -o JSON OPTIONS --`, with the
# handshake of probe_wait.h: CMD (started with -w) sees its probes and
# creates $BENCH_READY; once trainbpf's BPF link count has not changed for
# 1 s (all probes attached), we create $BENCH_GO and CMD starts its timed
# part. CMD's and trainbpf's output go to LOG. Returns trainbpf's status
# (CMD's exit status), 99 if the handshake failed.
traced_run() {
	local json=$1 log=$2 opts=() tp rc=0 wrc=0 hs n prev=-1 stable=0 i
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	hs=$(mktemp -d "${TMPDIR:-/tmp}/trainbpf-bench.XXXXXX")
	rm -f "$json"
	BENCH_READY=$hs/ready BENCH_GO=$hs/go \
		"$TRAINBPF" -i 0 --format json -o "$json" "${opts[@]}" -- "$@" > "$log" 2>&1 &
	tp=$!
	for ((i = 0; i < 600; i++)); do	# 60 s
		is_running "$tp" || break
		if [ -e "$hs/ready" ]; then
			n=$(nlinks "$tp")
			if [ "$n" = "$prev" ]; then stable=$((stable + 1)); else stable=0; fi
			prev=$n
			[ $stable -ge 10 ] && break
		fi
		sleep 0.1
	done
	if [ $stable -ge 10 ]; then
		touch "$hs/go"
	else
		log "  no handshake with the traced program (see $log)"
		rc=99
		kill -INT "$tp" 2>/dev/null || true
	fi
	wait "$tp" || wrc=$?
	[ $rc -ne 0 ] || rc=$wrc
	rm -rf "$hs"
	return $rc
}

# api_count JSON NAME FIELD: gpu.apis[NAME].FIELD of a trainbpf JSON report
# (0 if NAME is not there, "none" if the report is unreadable).
api_count() {
	"$PY" - "$@" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("none")
    sys.exit()
for a in d.get("gpu", {}).get("apis", []):
    if a["name"] == sys.argv[2]:
        print(a[sys.argv[3]])
        break
else:
    print(0)
EOF
}

# check_count JSON NAME FIELD WANT WHAT: dies unless trainbpf counted WANT.
check_count() {
	local got
	got=$(api_count "$1" "$2" "$3")
	[ "$got" = "$4" ] ||
		die "$5: trainbpf counted $2 $3=$got, the program made $4: the probes did not (all) fire (see $1)"
}
