#!/bin/bash
# scope_cost.sh: what does a record_function block cost under --functions?
#
# Each block of no phase the loop opens (the user's record_function) makes
# the torch probe read the thread's Python stack where it opened and keep
# it with the name (bpf/pystack.bpf.h, py_scope_open). Wall-clock rounds
# do not resolve a few microseconds a block on a 2-CPU host, so this
# measures the probe programs' own run time (kernel.bpf_stats_enabled,
# polled with bpftool while the job runs): the job is
# tests/workloads/torch_sections.py --scopes (five blocks, one nested, one
# a decorated function), traced
#   B = with --functions off (the blocks are brackets, no stack read),
#   C = with --functions on;
# and, as a control, the same job without its blocks (--scopes off) under
# both. (C - B) of the torch probes' run time on the blocks' job, less the
# control's, over the blocks opened, is what a block costs; per step, its
# share of the job's step time.
#
# Environment: TORCH (1.13|2.6) STEPS (200) BENCH_OUT
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TORCH=${TORCH:-1.13}
STEPS=${STEPS:-200}
need_root
need_cmd bpftool "Debian: bpftool"
case $TORCH in
2.6) PY=("$REPO/scripts/torch-root.sh" run python3) ;;
1.13) PY=(/usr/bin/python3) ;;
*) die "TORCH is 2.6 or 1.13" ;;
esac
build_all
cd "$REPO"
OUT=$(bench_outdir scope_cost)
{
	echo "# scope_cost: torch $TORCH, torch_sections.py --steps $STEPS"
	describe_setup
} | tee "$OUT/setup.txt"

# The torch probes' run time (ns) and calls, last seen while trainbpf ran.
probe_time() {
	local last="" pid
	"$@" > "$OUT/run.txt" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		last=$(bpftool prog show --json 2>/dev/null | python3 -c '
import json, sys
t = n = 0
for p in json.load(sys.stdin):
    if p.get("name", "").startswith(("torch_entry", "torch_return")):
        t += p.get("run_time_ns", 0)
        n += p.get("run_cnt", 0)
print(t, n)' 2>/dev/null || echo "$last")
		sleep 0.2
	done
	wait "$pid" || true
	echo "$last"
}

trap 'sysctl -qw kernel.bpf_stats_enabled=0' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
for blocks in --scopes ""; do
	for fn in "" --functions; do
		read -r ns calls < <(probe_time ./build/trainbpf $fn -i 0 -- "${PY[@]}" \
			tests/workloads/torch_sections.py --truth "$OUT/truth.json" \
			--steps "$STEPS" $blocks)
		step=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["loop_s"] / d["steps"])' "$OUT/truth.json")
		printf '%s\t%s\t%s\t%s\t%s\n' "${blocks:-none}" "${fn:-off}" "$ns" "$calls" "$step" |
			tee -a "$OUT/raw.tsv"
	done
done
python3 - "$OUT/raw.tsv" "$STEPS" <<'PY' | tee "$OUT/summary.txt"
import sys
rows = {}
for line in open(sys.argv[1]):
    blocks, fn, ns, calls, step = line.split()
    rows[blocks, fn] = (int(ns), int(calls), float(step))
steps = int(sys.argv[2])
# Blocks opened: augment, ema, metrics a step; visuals and sampling every 4th; save every 10th.
opened = 3 * steps + 2 * ((steps + 3) // 4) + steps // 10
extra = (rows["--scopes", "--functions"][0] - rows["--scopes", "off"][0]) - \
        (rows["none", "--functions"][0] - rows["none", "off"][0])
step_s = rows["--scopes", "--functions"][2]
print(f"blocks opened: {opened}; torch probes' extra time with --functions: "
      f"{extra / 1e3:.0f} us ({extra / opened / 1e3:.2f} us a block)")
print(f"a step: {extra / steps / 1e3:.1f} us of {step_s * 1e3:.2f} ms "
      f"({100 * extra / steps / 1e9 / step_s:.3f}%)")
PY
