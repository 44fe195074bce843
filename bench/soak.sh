#!/bin/bash
# soak.sh: does trainbpf stay bounded while a job churns processes and
# threads for a long time (the always-on monitor's case)?
#
# Job: tests/workloads/build/soak -p PROCS -t THREADS: PROCS processes/s
# forked without exec (each lives LIFE_MS, 1 ms of it on a CPU) and
# THREADS threads/s of the main process (0.2 ms each), for DURATION s.
# trainbpf launches it in MODE "live" (`-i 5 --format json -o FILE`, the
# live table every 5 s to a file) or "record" (`record -o FILE`), with the
# default `--epochs auto`. Every SAMPLE_S seconds: trainbpf's VmRSS and
# utime+stime (/proc/PID/status, /proc/PID/stat; 10 ms ticks).
#
# Summary (summary.md): RSS at 60 s, its maximum and last value, and the
# least-squares slope of RSS after the first minute; CPU as % of one core
# per BLOCK_S block after the first minute, median (min-max), and over
# the whole run after the first minute. Target (the always-on goal): at
# 50 births/s for an hour, RSS <= 64 MB and flat after the first minute,
# CPU <= 2 % of a core.
#
# The side by side is between builds (BENCH_REV=REV or TRAINBPF_BIN for
# the one before a change; a short DURATION for a build that grows).
# Environment: DURATION (3600) PROCS (25) THREADS (25) LIFE_MS (20)
#              MODE (live) SAMPLE_S (10) BLOCK_S (600) BENCH_OUT
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-3600}
PROCS=${PROCS:-25}
THREADS=${THREADS:-25}
LIFE_MS=${LIFE_MS:-20}
MODE=${MODE:-live}
SAMPLE_S=${SAMPLE_S:-10}
BLOCK_S=${BLOCK_S:-600}

need_root
[ -x "$PY" ] || die "missing $PY"
build_all
make -C "$REPO/tests/workloads" -s build/soak >/dev/null || die "cannot build the soak workload"
cd "$REPO"
OUT=$(bench_outdir soak)
{
	echo "# soak: $MODE, ${PROCS} processes/s + ${THREADS} threads/s (life ${LIFE_MS} ms)," \
	     "${DURATION}s, a sample every ${SAMPLE_S}s"
	describe_setup
	echo "other load: $(ps -eo pcpu=,comm= --sort=-pcpu | head -5 | tr -s ' ' | paste -sd ';')"
} | tee "$OUT/setup.txt"

case $MODE in
live) ARGS=(-i 5 --format json -o "$OUT/report.json") ;;
record) ARGS=(record -o "$OUT/run.db") ;;
*) die "MODE is live or record" ;;
esac

"$TRAINBPF" "${ARGS[@]}" -- tests/workloads/build/soak -d "$DURATION" -p "$PROCS" \
	-t "$THREADS" -l "$LIFE_MS" -o "$OUT/truth.json" > "$OUT/trainbpf.log" 2>&1 &
tb=$!
echo -e "t_s\trss_mb\tcpu_s" > "$OUT/samples.tsv"
t0=$(date +%s.%N)
while is_running "$tb"; do
	"$PY" - "$tb" "$t0" >> "$OUT/samples.tsv" <<'EOF' || true
import os, sys, time
pid, t0 = int(sys.argv[1]), float(sys.argv[2])
with open("/proc/%d/stat" % pid) as f:
    fields = f.read().rsplit(")", 1)[1].split()
with open("/proc/%d/status" % pid) as f:
    rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
print("%.1f\t%.2f\t%.2f" % (time.time() - t0, rss / 1024, cpu))
EOF
	sleep "$SAMPLE_S"
done
wait "$tb" || die "trainbpf failed (see $OUT/trainbpf.log)"

"$PY" - "$OUT" "$BLOCK_S" <<'EOF' | tee "$OUT/summary.md"
import json, statistics, sys
out, block = sys.argv[1], float(sys.argv[2])
rows = [l.split("\t") for l in open(out + "/samples.tsv").read().split("\n")[1:] if l]
s = [(float(t), float(r), float(c)) for t, r, c in rows]
after = [x for x in s if x[0] >= 60]
truth = json.load(open(out + "/truth.json"))
print("soak: %d processes and %d threads in %.0f s" % (truth["procs"], truth["threads"],
                                                      truth["seconds"]))
if len(after) < 3:
    sys.exit("too short: no samples after the first minute")
n = len(after)
mx = sum(t for t, _, _ in after) / n
my = sum(r for _, r, _ in after) / n
k = sum((t - mx) * (r - my) for t, r, _ in after) / sum((t - mx) ** 2 for t, _, _ in after)
print()
print("| RSS at 60 s | max | last | slope after 60 s |")
print("|---|---|---|---|")
print("| %.1f MB | %.1f MB | %.1f MB | %+.1f kB/min |" % (after[0][1], max(r for _, r, _ in s),
                                                       s[-1][1], k * 1024 * 60))
blocks, start = [], after[0]
for x in after[1:]:
    if x[0] - start[0] >= block:
        blocks.append(100 * (x[2] - start[2]) / (x[0] - start[0]))
        start = x
whole = 100 * (after[-1][2] - after[0][2]) / (after[-1][0] - after[0][0])
print()
print("| CPU after 60 s, whole | per %.0f s block: median (min-max), n |" % block)
print("|---|---|")
if blocks:
    print("| %.2f %% | %.2f %% (%.2f-%.2f), %d |" % (whole, statistics.median(blocks), min(blocks),
                                                    max(blocks), len(blocks)))
else:
    print("| %.2f %% | (shorter than a block) |" % whole)
EOF
log "done: $OUT"
