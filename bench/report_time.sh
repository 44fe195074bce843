#!/usr/bin/env bash
# How long does `trainbpf report` take on a long recording? A synthetic
# 1-hour, 100-thread recording (one flush a second: 360k sample rows, 2
# epochs, 14k step markers), written by tests/integration/recording_fixture.py,
# read ROUNDS times per format; prints each run's wall time and the median.
# No root needed. Target: under 1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DB=${DB:-/tmp/trainbpf-bench-1h.db}

make -s build/trainbpf
/usr/bin/python3 - "$DB" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
import recording_fixture as rf
rf.make_recording(sys.argv[1], rf.big_spec(threads=100, hours=1.0))
PY
echo "recording: $DB, $(du -h "$DB" | cut -f1), $(sqlite3 "$DB" 'SELECT count(*) FROM samples') sample rows"
for fmt in text json csv; do
	times=()
	for _ in $(seq "$ROUNDS"); do
		t0=$(date +%s%N)
		build/trainbpf report "$DB" --format "$fmt" > /dev/null
		t1=$(date +%s%N)
		times+=("$(( (t1 - t0) / 1000000 ))")
	done
	sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
	median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (ROUNDS + 1) / 2 ))p")
	echo "report --format $fmt: ${sorted}ms (median ${median} ms)"
done
t0=$(date +%s%N)
build/trainbpf report "$DB" --epoch 2 --pid 1000 > /dev/null
t1=$(date +%s%N)
echo "report --epoch 2 --pid 1000: $(( (t1 - t0) / 1000000 )) ms"
