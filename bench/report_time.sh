#!/usr/bin/env bash
# How long does `trainbpf report` take on a long recording? Two synthetic
# recordings written by tests/integration/recording_fixture.py:
#   1h:   1 hour, 100 threads (one flush a second: 360k sample rows, 2
#         epochs, 14k step markers);
#   many: 24 hours, 200,000 short-lived processes with reused pids and
#         1,440 interval epochs (~600k rows: make_many_procs).
# Each is read ROUNDS times per format; prints each run's wall time and
# the median (min-max). With BEFORE_BIN=FILE, another build (the one
# before a change) is timed the same way, side by side; a run past
# TIMEOUT_S is killed and shown as ">TIMEOUT_S". No root needed.
# Targets: under 1 s (1h); seconds (many).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
TIMEOUT_S=${TIMEOUT_S:-120}
DB=${DB:-/tmp/trainbpf-bench-1h.db}
MANY_DB=${MANY_DB:-/tmp/trainbpf-bench-200k.db}

make -s build/trainbpf
/usr/bin/python3 - "$DB" "$MANY_DB" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
import recording_fixture as rf
rf.make_recording(sys.argv[1], rf.big_spec(threads=100, hours=1.0))
rf.make_many_procs(sys.argv[2])
PY
echo "recording 1h: $DB, $(du -h "$DB" | cut -f1), $(sqlite3 "$DB" 'SELECT count(*) FROM samples') sample rows"
echo "recording many: $MANY_DB, $(du -h "$MANY_DB" | cut -f1)," \
     "$(sqlite3 "$MANY_DB" 'SELECT count(*) FROM processes') processes," \
     "$(sqlite3 "$MANY_DB" 'SELECT count(*) FROM samples') sample rows"

# runs BIN DB ARGS...: ROUNDS wall times in ms (">T" when killed), then the summary.
runs() {
	local bin=$1 db=$2 times=() t0 t1 ok=()
	shift 2
	for _ in $(seq "$ROUNDS"); do
		t0=$(date +%s%N)
		if timeout "$TIMEOUT_S" "$bin" report "$db" "$@" > /dev/null; then
			t1=$(date +%s%N)
			times+=("$(( (t1 - t0) / 1000000 ))")
			ok+=("$(( (t1 - t0) / 1000000 ))")
		else
			times+=(">$((TIMEOUT_S * 1000))")
			break	# one killed run says it
		fi
	done
	if [ ${#ok[@]} -eq ${#times[@]} ]; then
		local sorted median
		sorted=$(printf '%s\n' "${ok[@]}" | sort -n)
		median=$(echo "$sorted" | sed -n "$(( (${#ok[@]} + 1) / 2 ))p")
		echo "$(echo "$sorted" | tr '\n' ' ')ms (median $median ms," \
		     "$(echo "$sorted" | head -1)-$(echo "$sorted" | tail -1))"
	else
		echo "${times[*]} ms"
	fi
}

for build in ${BEFORE_BIN:+before} now; do
	bin=build/trainbpf
	[ "$build" = before ] && bin=$BEFORE_BIN
	echo "== $build: $bin"
	for fmt in text json csv; do
		echo "1h   report --format $fmt: $(runs "$bin" "$DB" --format "$fmt")"
	done
	echo "1h   report --epoch 2 --pid 1000: $(ROUNDS=1 runs "$bin" "$DB" --epoch 2 --pid 1000)"
	for fmt in text json; do
		echo "many report --format $fmt: $(runs "$bin" "$MANY_DB" --format "$fmt")"
	done
done
