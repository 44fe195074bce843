"""trainbpf report / trace / diff on recordings of known contents.

The recordings come from recording_fixture.py (docs/recording.md's own
schema), so these tests need neither root nor the writer.
"""
import csv
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess

import pytest

from conftest import ROOT, TRAINBPF, run_trainbpf, schema_version
import recording_fixture as rf

SEC = 1e9


@pytest.fixture
def rec(tmp_path):
    path = str(tmp_path / "run.db")
    return path, rf.make_recording(path)


def report(path, *args):
    r = run_trainbpf(["report", path, *args])
    assert r.returncode == 0, r.stderr
    return r.stdout


def near(a, b, tol=1e-6):
    return abs(a - b) <= tol


def test_json_totals_equal_fixture_sums(rec):
    path, exp = rec
    doc = json.loads(report(path, "--format", "json"))
    assert near(doc["window"]["duration_s"], exp["duration_s"])
    threads = {t["tid"]: t for p in doc["processes"] for t in p["threads"]}
    assert set(threads) == set(exp["threads"])
    for tid, want in exp["threads"].items():
        for c, cat in enumerate(rf.CATS):
            assert near(threads[tid]["time_s"][cat], want[c] / SEC), (tid, cat)
    for p in doc["processes"]:
        for c, cat in enumerate(rf.CATS):
            assert near(p["time_s"][cat], exp["procs"][p["pid"]][c] / SEC)
    for c, cat in enumerate(rf.CATS):
        assert near(doc["headline"]["time_s"][cat], exp["headline"][c] / SEC)
    assert doc["counters"]["events_lost"] == 3
    assert [d["id"] for d in doc["diagnosis"]] == ["data_loading", "cpu_contention"]
    assert doc["diagnosis"][0]["severity"] == pytest.approx(0.6)
    apis = doc["gpu"]["apis"]
    assert apis[0]["name"] == "cudaStreamSynchronize" and apis[0]["calls"] == 40


def test_json_epochs_are_deltas_of_the_flushes_inside(rec):
    path, exp = rec
    doc = json.loads(report(path, "--format", "json"))
    ep = doc["epochs"]
    assert ep["source"] == "marker" and [e["epoch"] for e in ep["list"]] == [1, 2]
    for e in ep["list"]:
        want = exp["epochs"][e["epoch"]]
        assert near(e["duration_s"], 5.0)
        for c, cat in enumerate(rf.CATS):
            assert near(e["time_s"][cat], want[100]["main"][c] / SEC)
        procs = {p["pid"]: p for p in e["processes"]}
        for pid, d in want.items():
            for c, cat in enumerate(rf.CATS):
                assert near(procs[pid]["time_s"][cat], d["own"][c] / SEC)
        # A marker every 250 ms; the last epoch's last one runs to the end of
        # the recording, its end unknown (the teardown would be in it): left
        # out, as from the run's steps (docs/model.md, "One count").
        want_steps = 19 if e is ep["list"][-1] else 20
        assert e["steps"]["count"] == want_steps and near(e["steps"]["avg_ms"], 250.0, 1e-3)
        assert [d["id"] for d in e["diagnosis"]] == ["data_loading"]
    assert ep["list"][1]["diagnosis"][0]["severity"] == pytest.approx(0.9)
    assert doc["steps"]["source"] == "marker" and near(doc["steps"]["per_s"], 4.0, 1e-3)
    assert doc["steps"]["count"] == sum(e["steps"]["count"] for e in ep["list"])


def test_text_is_the_live_report(rec):
    path, exp = rec
    out = report(path, "--detail")
    assert out.startswith("trainbpf 0.1.0: 10.00 s traced, 2 processes, 3 threads (30.00 thread-s)")
    # The headline's shares are the trainer main thread's: 50/10/40.
    assert "  computation     50.0%   cpu 50.0% gpu_wait 0.0%" in out
    assert "  io & data       40.0%   data_wait 40.0% io 0.0%" in out
    assert "=== Epoch 2 (marker) 5.0 s, 19 steps (marker)" in out   # the last: end unknown
    assert "  slowest: data_wait; data loading 50.0%" in out
    assert "[0.60] data loading 40.0% of the trainers' time (> 15%)" in out
    assert "3 events lost" in out
    # Optional tables: one sync per step, one worker generation.
    assert "=== Epoch 1 (marker) 5.0 s, 20 steps (marker), 250.0 ms/step (min 250.0, " \
        "max 250.0, std 0.0), 1.0 syncs/step ===" in out
    assert "Worker generations: 1 (DataLoader workers forked afresh)" in out
    assert "avg 0.50 s, max 0.50 s" in out


def test_optional_tables_may_be_absent(rec):
    path, exp = rec
    db = sqlite3.connect(path)
    for t in ("gpu_libraries", "syncs", "worker_gens"):
        db.execute("DROP TABLE %s" % t)
    db.commit()
    db.close()
    out = report(path, "--detail")
    assert "cudart -                     pid 100     (file not recorded)" in out
    assert "0.0 syncs/step" in out and "Worker generations" not in out


def test_gpu_libraries_listed(rec):
    path, _ = rec
    db = sqlite3.connect(path)
    db.execute("INSERT INTO gpu_libraries (pid, family, path, version, static) VALUES "
               "(100, 'cudart', '/opt/lib/libcudart.so.13', '13.0.96', 0)")
    db.commit()
    db.close()
    doc = json.loads(report(path, "--format", "json"))
    libs = doc["gpu"]["libraries"]
    assert [(l["pid"], l["kind"], l["path"], l["version"]) for l in libs] == [
        (100, "cudart", "/opt/lib/libcudart.so.13", "13.0.96")]


def csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_rows_per_process_and_thread(rec):
    path, exp = rec
    rows = csv_rows(report(path, "--format", "csv"))
    procs = {int(r["pid"]): r for r in rows if r["kind"] == "process"}
    threads = {int(r["tid"]): r for r in rows if r["kind"] == "thread"}
    assert set(procs) == set(exp["procs"]) and set(threads) == set(exp["threads"])
    for tid, want in exp["threads"].items():
        for c, cat in enumerate(rf.CATS):
            assert near(float(threads[tid][cat + "_s"]), want[c] / SEC)
        assert near(float(threads[tid]["time_s"]), sum(want) / SEC)
    for pid, want in exp["procs"].items():
        for c, cat in enumerate(rf.CATS):
            assert near(float(procs[pid][cat + "_s"]), want[c] / SEC)


def test_epoch_filter_is_that_window(rec):
    path, exp = rec
    rows = csv_rows(report(path, "--format", "csv", "--epoch", "2"))
    want = exp["epochs"][2]
    for r in rows:
        if r["kind"] == "process":
            for c, cat in enumerate(rf.CATS):
                assert near(float(r[cat + "_s"]), want[int(r["pid"])]["own"][c] / SEC)
    doc = json.loads(report(path, "--format", "json", "--epoch", "2"))
    assert near(doc["window"]["duration_s"], 5.0)
    assert [e["epoch"] for e in doc["epochs"]["list"]] == [2]
    assert [d["severity"] for d in doc["diagnosis"]] == [pytest.approx(0.9)]
    assert doc["steps"]["count"] == 19  # the last one runs past the window's end


def test_pid_filter_is_that_process(rec):
    path, exp = rec
    rows = csv_rows(report(path, "--format", "csv", "--pid", "101"))
    assert {r["pid"] for r in rows} == {"101"}
    assert [int(r["tid"]) for r in rows if r["kind"] == "thread"] == [101]
    doc = json.loads(report(path, "--format", "json", "--pid", "100", "--epoch", "1"))
    assert [p["pid"] for p in doc["processes"]] == [100]
    assert near(doc["processes"][0]["time_s"]["cpu"],
                exp["epochs"][1][100]["own"][0] / SEC)


def test_signed_gains_move_time_between_categories(tmp_path):
    """A row may take time back from a category (an open wait counted idle
    at one flush closes as data_wait at the next): the sum is the total."""
    path = str(tmp_path / "moved.db")
    exp = rf.make_recording(path)
    db = sqlite3.connect(path)
    # Flushes 1 and 2 of the trainer: 200 ms first counted idle, then moved.
    db.execute("UPDATE samples SET idle = idle + 200000000, cp_idle = cp_idle + 200000000, "
               "data_wait = data_wait - 200000000, cp_data_wait = cp_data_wait - 200000000 "
               "WHERE tid = 100 AND ts_ns = ?", (rf.T0 + rf.SEC,))
    db.execute("UPDATE samples SET idle = idle - 200000000, cp_idle = cp_idle - 200000000, "
               "data_wait = data_wait + 200000000, cp_data_wait = cp_data_wait + 200000000 "
               "WHERE tid = 100 AND ts_ns = ?", (rf.T0 + 2 * rf.SEC,))
    db.commit()
    db.close()
    doc = json.loads(report(path, "--format", "json"))
    for c, cat in enumerate(rf.CATS):
        assert near(doc["headline"]["time_s"][cat], exp["headline"][c] / SEC), cat
    assert near(sum(doc["headline"]["time_s"].values()), doc["window"]["duration_s"])


def test_schema2_epochs_are_the_recorded_deltas(tmp_path):
    """Schema 2 keeps each epoch's deltas as the live tool took them: the
    reader prints those, not sums of the flushes inside the epoch."""
    path = str(tmp_path / "v2.db")
    exp = rf.make_recording(path, version=2)
    db = sqlite3.connect(path)
    db.execute("UPDATE epoch_procs SET cpu = cpu + 1000000000, cp_cpu = cp_cpu + 1000000000 "
               "WHERE seq = 0 AND pid = 100")
    db.execute("UPDATE epochs SET step_count = 7 WHERE seq = 1")
    db.commit()
    db.close()
    doc = json.loads(report(path, "--format", "json"))
    e1, e2 = doc["epochs"]["list"]
    p100 = next(p for p in e1["processes"] if p["pid"] == 100)
    assert near(p100["time_s"]["cpu"], exp["epochs"][1][100]["own"][0] / SEC + 1)
    assert near(e1["time_s"]["cpu"], exp["epochs"][1][100]["main"][0] / SEC + 1)
    assert e2["steps"]["count"] == 7
    # The run's totals are still the flushes' sums.
    threads = {t["tid"]: t for p in doc["processes"] for t in p["threads"]}
    assert near(threads[100]["time_s"]["cpu"], exp["threads"][100][0] / SEC)
    assert doc["gpu"]["apis"][0]["calls"] == 40
    lib, = doc["gpu"]["libraries"]
    assert (lib["pid"], lib["kind"], lib["probes"], lib["missing"]) == (100, "cudart", 3,
                                                                        ["cudaMemcpy"])
    comm, = next(p for p in doc["processes"] if p["pid"] == 100)["gpu"]["nccl_comms"]
    assert comm == {"comm": "0x1000", "rank": 1, "nranks": 8,
                    "id": "deadbeef0102030405060708090a0b0c", "init": "ncclCommInitRank",
                    "parent": "0x0", "destroyed": True,
                    "calls": 0, "bytes": 0}   # not in the file: 0 (schema 11 counts them)
    out = report(path, "--detail")
    assert "=== Epoch 2 (marker) 5.0 s, 7 steps (marker)" in out
    assert "communicator pid 100: rank 1 of 8, id deadbeef01020304 (ncclCommInitRank), " \
        "destroyed" in out


def test_schema2_recording_reports_its_live_report(tmp_path):
    """tests/golden/recordings/gpujob.db (states trimmed to 3000 rows) was
    recorded with --report gpujob.live.json: its report is those bytes."""
    rec = os.path.join(ROOT, "tests", "golden", "recordings", "gpujob.db")
    shutil.copy(rec, tmp_path / "gpujob.db")
    with open(os.path.join(ROOT, "tests", "golden", "recordings", "gpujob.live.json")) as f:
        live = f.read()
    out = report(str(tmp_path / "gpujob.db"), "--format", "json")
    # Added since it was recorded: each finding's cost (schema 6; from its
    # value here), the steps' micro-batches and unit (schema 9), each
    # communicator's calls and bytes (schema 11; 0 in a file that has none),
    # the communicators not listed (0: a file without the count had none).
    for field in (r'"cost":[0-9.]+,', r'"micro_batches":\d+,', r'"steps_per_trainer":\d+,',
                  r'"step_unit":"\w+",', r',"calls":0,"bytes":0(?=})',
                  r'"nccl_comms_not_listed":0,'):
        out = re.sub(field, "", out)
    assert out == live
    assert os.listdir(tmp_path) == ["gpujob.db"]


V1_RECORDINGS = [os.path.join(ROOT, "tests", "fuzz", "corpus", n)
                 for n in ("full.db", "two_flushes.db", "no_states.db", "crashed.db")] + \
                [os.path.join(ROOT, "tests", "golden", "recordings", n)
                 for n in ("stepjob.db", "epochs.db", "workers.db", "ddp.db")]


@pytest.mark.parametrize("path", V1_RECORDINGS, ids=os.path.basename)
def test_version1_recordings_read(path, tmp_path):
    """Schema-1 files (no epoch_procs, no GPU entries) read the old way:
    epochs from the flushes inside them, every process and thread."""
    copy = str(tmp_path / os.path.basename(path))
    shutil.copy(path, copy)
    db = sqlite3.connect(f"file:{copy}?immutable=1", uri=True)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    nproc = db.execute("SELECT count(*) FROM processes").fetchone()[0]
    nthr = db.execute("SELECT count(*) FROM threads").fetchone()[0]
    epochs = db.execute("SELECT count(*) FROM epochs").fetchone()[0]
    db.close()
    doc = json.loads(report(copy, "--format", "json"))
    assert len(doc["processes"]) == nproc
    assert sum(len(p["threads"]) for p in doc["processes"]) == nthr
    if epochs:
        assert doc["epochs"]["list"]
        for e in doc["epochs"]["list"]:  # rebuilt from the flushes: some time in each
            assert e["duration_s"] >= 0 and isinstance(e["processes"], list)
    r = run_trainbpf(["trace", copy, "-o", str(tmp_path / "t.json")])
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(path), "t.json"])


def test_crashed_recording_ends_at_its_last_flush(tmp_path):
    path = str(tmp_path / "cut.db")
    exp = rf.make_recording(path, complete=False, flushes=6)
    doc = json.loads(report(path, "--format", "json"))
    assert near(doc["window"]["duration_s"], 6.0)
    assert near(doc["headline"]["time_s"]["cpu"], exp["headline"][0] / SEC)


def validate_trace(doc):
    events = doc["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    pids = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    tracks = {}
    for e in events:
        for k in ("ph", "ts", "pid", "tid"):
            assert k in e, e
        assert e["ph"] != "B" and e["ph"] != "E"  # complete events only
        if e["ph"] == "M":
            continue
        assert e["pid"] in pids, e
        if e["ph"] != "C":
            assert (e["pid"], e["tid"]) in named, e
        if e["ph"] == "X":
            assert e["dur"] >= 0
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
    for key, spans in tracks.items():
        spans.sort()
        for (t0, d0), (t1, _) in zip(spans, spans[1:]):
            # Each ends before the next begins, added in doubles as viewers do.
            assert t0 + d0 < t1, (key, t0, d0, t1)
    flat_in_speedscope(events)
    return events


def flat_in_speedscope(events):
    """speedscope's trace-event import (src/import/trace-event.ts), replayed:
    each X becomes B at ts and E at ts + dur (JS doubles: Python floats),
    sorted by time with B before E on a tie; per track, an E must close the
    frame on top. Tracks of states, phases and epochs never nest: a
    mis-paired E is the staircase speedscope drew. And no state merely
    continues the one before it (the same name and arguments, touching)."""
    durations = []
    for i, e in enumerate(events):
        if e["ph"] == "X":
            key = (e["name"], json.dumps(e.get("args"), sort_keys=True))
            durations.append((e["ts"], 1, i, "B", e, key))
            durations.append((e["ts"] + e["dur"], 2, i, "E", e, key))
    durations.sort(key=lambda d: (d[0], d[1], d[2]))
    stacks = {}
    for _, _, _, ph, e, key in durations:
        stack = stacks.setdefault((e["pid"], e["tid"]), [])
        if ph == "B":
            stack.append(key)
            assert len(stack) == 1, ("nested", e, stack)
        else:
            assert stack and stack[-1] == key, ("mis-paired", e, stack)
            stack.pop()
    last = {}
    for e in events:
        if e["ph"] != "X" or e.get("cat") != "state":
            continue
        track, key = (e["pid"], e["tid"]), (e["name"], json.dumps(e.get("args")))
        prev = last.get(track)
        assert not (prev and prev[0] == key and abs(prev[1] - e["ts"]) <= 0.001), \
            ("not merged", e)
        last[track] = (key, e["ts"] + e["dur"])


def trace(path, out):
    r = run_trainbpf(["trace", path, "-o", out])
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return r, json.load(f)


def test_trace_structure(rec, tmp_path):
    path, exp = rec
    r, doc = trace(path, str(tmp_path / "t.json"))
    events = validate_trace(doc)
    states = [e for e in events if e["ph"] == "X" and e["cat"] == "state"]
    assert len(states) == exp["nstates"]
    main = [e for e in states if e["tid"] == 100]
    by_cat, slices = {}, {}
    for e in main:
        by_cat[e["name"]] = by_cat.get(e["name"], 0) + e["dur"]
        slices[e["name"]] = slices.get(e["name"], 0) + 1
    for c, cat in enumerate(rf.CATS):
        # each slice ends up to a nanosecond before the next one begins
        assert near(by_cat.get(cat, 0), exp["threads"][100][c] / 1e3,
                    1e-3 * (1 + slices.get(cat, 0)))
    assert min(e["ts"] for e in states) == 0  # relative to the start
    epochs = [e for e in events if e["ph"] == "X" and e["cat"] == "epoch"]
    # epoch 1 ends where epoch 2 begins: a nanosecond short in the trace
    assert [(e["name"], e["ts"], e["dur"]) for e in epochs] == [
        ("epoch 1", 0, 5e6 - 1e-3), ("epoch 2", 5e6, 5e6)]
    assert sum(e["ph"] == "i" and e["s"] == "g" for e in events) == 2
    assert sum(e["ph"] == "i" and e["cat"] == "step" for e in events) == exp["steps"]
    counters = [e for e in events if e["ph"] == "C" and e["pid"] == 100]
    assert len(counters) == 10
    half = counters[:5]
    # Process 100 in the first half: (600 + 250) ms cpu of 2 s thread time.
    assert all(near(e["args"]["cpu"], 42.5, 0.01) for e in half)
    assert r.stderr == ""


def test_trace_without_states_says_so(tmp_path):
    path = str(tmp_path / "ns.db")
    rf.make_recording(path, states=False)
    r, doc = trace(path, str(tmp_path / "t.json"))
    assert "no states recorded" in r.stderr
    events = validate_trace(doc)
    assert any(e["ph"] == "C" for e in events)
    assert any(e["ph"] == "i" for e in events)


def test_trace_gzipped_when_named_gz(rec, tmp_path):
    """-o trace.json.gz: the same trace, gzip'ed (Perfetto opens it so)."""
    import gzip
    path, _ = rec
    plain, gz = tmp_path / "t.json", tmp_path / "t.json.gz"
    trace(path, str(plain))
    r = run_trainbpf(["trace", path, "-o", str(gz)])
    assert r.returncode == 0, r.stderr
    data = gz.read_bytes()
    assert data[:2] == b"\x1f\x8b" and len(data) < plain.stat().st_size / 4
    assert gzip.decompress(data) == plain.read_bytes()


def test_diff_deltas(tmp_path):
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    rf.make_recording(a)
    threads = [list(t) for t in rf.DEFAULT["threads"]]
    # B: the trainer's data wait halves into cpu in the second half.
    threads[0][4] = rf._mix(cpu=650, data_wait=250, comm=100)
    rf.make_recording(b, threads=[tuple(t) for t in threads], steps_per_s=5, diagnosis=[
        (None, "data_loading", 0.2, "data loading 32.5% of the trainers' time (> 15%)"),
        (1, "data_loading", 0.3, "data loading 30.0% of the trainers' time (> 15%)"),
        (None, "host_bound", 0.5, "host-bound")])
    db = sqlite3.connect(b)
    db.execute("UPDATE meta SET value = 'python3 train.py --workers 4' WHERE key = 'command'")
    db.commit()
    db.close()
    r = run_trainbpf(["diff", a, b])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # The verdict first: steps/s, and the share that moved most (no phases
    # here: the roll-up, computation 50 -> 62.5 of the headline).
    lines = out.splitlines()
    assert lines[1] == ("Verdict: B faster (25.0% more steps/s); "
                        "computation 50.0% -> 62.5% of the trainers' time"), lines[:3]
    assert "  A ran: python3 train.py\n  B ran: python3 train.py --workers 4\n" in out
    # cpu 50% -> 62.5%, data_wait 40% -> 27.5% on the headline.
    assert "    cpu              50.0%   62.5%     +12.5" in out
    assert "    data_wait        40.0%   27.5%     -12.5" in out
    assert "Steps/s: A 4.00, B 5.00 (+25.0%)" in out
    line2 = next(l for l in out.splitlines() if l.strip().startswith("2 "))
    assert line2.split()[6:10] == ["+25.0", "+0.0", "+0.0", "-25.0"]
    line1 = next(l for l in out.splitlines() if l.strip().startswith("1 "))
    assert line1.split()[6:10] == ["+0.0", "+0.0", "+0.0", "+0.0"]
    assert "  better    data_loading       0.60 -> 0.20" in out
    assert "  gone      cpu_contention     0.20 ->   - " in out
    assert "  appeared  host_bound           -  -> 0.50" in out


def test_diff_fails_if_slower(tmp_path):
    """--fail-if-slower PCT: exit 3 and one line when B's steps/s is more
    than PCT% below A's; 0 within it or faster; 1 without steps to compare."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    rf.make_recording(a, steps_per_s=5)
    rf.make_recording(b, steps_per_s=4)     # B 20% slower
    r = run_trainbpf(["diff", a, b, "--fail-if-slower", "10"])
    assert r.returncode == 3 and r.stdout.startswith("trainbpf diff\n"), r.returncode
    assert r.stderr == ("trainbpf diff: B is 20.0% slower than A (steps/s), "
                        "more than 10%\n"), r.stderr
    assert run_trainbpf(["diff", a, b, "--fail-if-slower", "25"]).returncode == 0
    assert run_trainbpf(["diff", b, a, "--fail-if-slower", "0"]).returncode == 0
    assert run_trainbpf(["diff", a, b]).returncode == 0
    none = str(tmp_path / "none.db")
    rf.make_recording(none)
    db = sqlite3.connect(none)
    db.execute("DELETE FROM steps")
    db.commit()
    db.close()
    r = run_trainbpf(["diff", a, none, "--fail-if-slower", "10"])
    assert r.returncode == 1 and "no training steps to compare" in r.stderr, r.stderr
    r = run_trainbpf(["diff", a, b, "--fail-if-slower", "x"])
    assert r.returncode == 2 and "invalid percentage" in r.stderr, r.stderr


def bad(args):
    r = run_trainbpf(args)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("trainbpf: "), r.stderr
    assert r.stdout == ""
    return r.stderr


def test_errors_are_one_line(rec, tmp_path):
    path, _ = rec
    assert "No such file" in bad(["report", str(tmp_path / "missing.db")])
    text = tmp_path / "text.db"
    text.write_text("not a database, just text\n" * 100)
    assert "not a database" in bad(["report", str(text)])
    with open(path, "rb") as f:
        head = f.read(5000)
    (tmp_path / "cut.db").write_bytes(head)
    assert "malformed" in bad(["report", str(tmp_path / "cut.db")])
    other = str(tmp_path / "other.db")
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.execute("PRAGMA application_id = 42")
    db.commit()
    db.close()
    assert "not a trainbpf recording" in bad(["report", other])
    newer = str(tmp_path / "newer.db")
    rf.make_recording(newer, version=schema_version() + 1)
    assert "newer trainbpf" in bad(["report", newer])
    for sub in (["trace", newer, "-o", str(tmp_path / "t.json")], ["diff", path, newer]):
        assert "newer trainbpf" in bad(sub)
    assert "no epoch 9" in bad(["report", path, "--epoch", "9"])
    r = run_trainbpf(["report", path, "--format", "xml"])
    assert r.returncode == 2
    r = run_trainbpf(["trace", path])
    assert r.returncode == 2


def test_corrupt_pages_never_crash(rec, tmp_path):
    """Every 512th byte flipped in turn, over the whole file: 0 or 1, no signal."""
    path, _ = rec
    with open(path, "rb") as f:
        data = bytearray(f.read())
    bad_path = str(tmp_path / "flip.db")
    for off in range(100, len(data), len(data) // 60):
        flipped = bytearray(data)
        flipped[off] ^= 0xff
        with open(bad_path, "wb") as f:
            f.write(flipped)
        r = run_trainbpf(["report", bad_path, "--format", "json"])
        assert r.returncode in (0, 1), (off, r.returncode, r.stderr)
        if r.returncode:
            assert r.stderr.count("\n") == 1, r.stderr


FUZZER = os.path.join(ROOT, "build", "fuzz_recording")


def test_fuzz_bounded_run(tmp_path):
    """A short libFuzzer run (ASan) from the seed corpus: no crash, no leak."""
    if not shutil.which("clang"):
        pytest.skip("clang is needed for the fuzzer")
    subprocess.run(["make", "-C", ROOT, "build/fuzz_recording"], check=True,
                   capture_output=True, timeout=300)
    work = tmp_path / "corpus"
    work.mkdir()
    r = subprocess.run([FUZZER, "-runs=3000", "-timeout=10", str(work),
                        os.path.join(ROOT, "tests", "fuzz", "corpus")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Done 3000 runs" in r.stderr
