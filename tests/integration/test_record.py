"""trainbpf record: the recording against the workload's own truth, and
what is left of it when trainbpf is stopped or killed.

The samples are per-thread gains per flush; summed, they are the thread's
totals, so the per-category check of test_accuracy applies to them as is.
A live thread's totals at a flush are its whole life up to that flush (the
open interval included), so the sum of a thread's rows is, to the
nanosecond, its last row's time minus its start: that holds in a recording
cut by kill -9 too, where no final report was ever made.
"""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time

from conftest import TRAINBPF, disk_dir, schema_version, steal_s, workload
from test_accuracy import CATS, check_composition

FLUSH_S = 1.0
TICK_S = 0.2


def open_db(path):
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    return db


def meta(db):
    return {r["key"]: r["value"] for r in db.execute("SELECT key, value FROM meta")}


def as_report(db):
    """The recording's threads in the shape of the JSON report's."""
    sums = {r["tid"]: r for r in db.execute(
        "SELECT tid, " + ", ".join(f"sum({c}) AS {c}" for c in CATS) +
        " FROM samples GROUP BY tid")}
    procs = {}
    for t in db.execute("SELECT * FROM threads"):
        s = sums[t["tid"]]
        procs.setdefault(t["pid"], []).append({
            "tid": t["tid"], "comm": t["comm"],
            "time_s": {c: s[c] / 1e9 for c in CATS},
            "lifetime_s": (t["end_ns"] - t["start_ns"]) / 1e9,
        })
    return {"processes": [{"pid": p, "threads": th} for p, th in procs.items()]}


def check_header(db):
    assert db.execute("PRAGMA application_id").fetchone()[0] == 0x74627066
    assert db.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def check_sums_are_lifetimes(db):
    """Each thread's rows, summed up to any of them, are its life up to
    that row, exactly: own and critical-path time alike."""
    threads = {t["tid"]: t for t in db.execute("SELECT tid, start_ns, end_ns FROM threads")}
    own = " + ".join(CATS)
    cp = " + ".join(f"cp_{c}" for c in CATS)
    rows = db.execute(f"SELECT tid, ts_ns, {own} AS own, {cp} AS cp FROM samples "
                      "ORDER BY tid, ts_ns").fetchall()
    assert rows
    sums = {}
    for r in rows:
        t = threads[r["tid"]]
        s = sums.setdefault(r["tid"], [0, 0])
        s[0] += r["own"]
        s[1] += r["cp"]
        # An exited thread's last row comes at the flush after its exit.
        upto = min(r["ts_ns"], t["end_ns"]) if t["end_ns"] else r["ts_ns"]
        life = upto - t["start_ns"]
        assert abs(s[0] - life) <= 1000 and abs(s[1] - life) <= 1000, \
            (dict(t), r["ts_ns"], s[0] - life, s[1] - life)


def test_record_matches_truth(tmp_path):
    db_path, truth_path = tmp_path / "run.db", tmp_path / "truth.json"
    steal0 = steal_s()
    r = subprocess.run([TRAINBPF, "record", "-o", str(db_path), "--",
                        workload("mixed"), "-d", "4", "-o", str(truth_path),
                        "-D", disk_dir()], capture_output=True, text=True, timeout=120)
    steal = steal_s() - steal0
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    db = open_db(db_path)
    check_header(db)
    m = meta(db)
    assert m["complete"] == "1" and m["format"] == "trainbpf-recording"
    assert int(m["end_mono_ns"]) > int(m["start_mono_ns"])
    truth = json.loads(truth_path.read_text())
    truth["steal_s"] = steal
    check_composition(as_report(db), truth)
    check_sums_are_lifetimes(db)
    # A thread busy all along has a row per flush, none with zero gains.
    spin = next(t for t in truth["threads"] if t["name"] == "tb_spin")
    n = db.execute("SELECT count(*) FROM samples WHERE tid = ?", (spin["tid"],)).fetchone()[0]
    assert 4 <= n <= 6
    zero = db.execute("SELECT count(*) FROM samples WHERE " +
                      " AND ".join(f"{c} = 0 AND cp_{c} = 0" for c in CATS) +
                      " AND io_rbytes = 0 AND io_wbytes = 0 AND nswitch = 0").fetchone()[0]
    assert zero == 0
    # The feeder process: forked, exited; its events and its row say so.
    kinds = [e["type"] for e in db.execute(
        "SELECT type FROM events WHERE pid = ? ORDER BY ts_ns", (truth["feeder_pid"],))]
    assert kinds == ["fork", "exit"]
    feeder = db.execute("SELECT * FROM processes WHERE pid = ?",
                        (truth["feeder_pid"],)).fetchone()
    assert feeder["ppid"] == truth["pid"] and feeder["role"] == "worker"
    assert feeder["end_ns"] is not None
    io = next(t for t in truth["threads"] if t["name"] == "tb_io")
    got = db.execute("SELECT sum(io_rbytes) FROM samples WHERE tid = ?", (io["tid"],)).fetchone()[0]
    assert got == io["bytes"]
    counters = dict(db.execute("SELECT key, value FROM counters").fetchall())
    assert counters["events_lost"] == 0 and counters["record_flushes"] >= 3


def start_mixed(tmp_path, seconds, *args):
    truth = tmp_path / "truth.json"
    job = subprocess.Popen([workload("mixed"), "-d", str(seconds), "-o", str(truth),
                            "-D", disk_dir(), *args])
    time.sleep(0.3)     # its threads exist
    return job, truth


def start_record(db_path, pid):
    """trainbpf record -p pid, started; wait_flushes tells when it has recorded."""
    return subprocess.Popen([TRAINBPF, "record", "-o", str(db_path), "-p", str(pid)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_flushes(db_path, n, rec, timeout=60):
    """Until the recording being written holds n flushes of samples (read
    beside the writer, as SQLite's WAL allows), or the recorder ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and rec.poll() is None:
        try:
            db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)
            try:
                got = db.execute("SELECT count(DISTINCT ts_ns) FROM samples").fetchone()[0]
            finally:
                db.close()
            if got >= n:
                return
        except sqlite3.Error:
            pass    # not created yet, or its tables not yet
        time.sleep(0.2)
    raise AssertionError(f"no {n} flushes in {db_path} (recorder {rec.poll()})")


def record_then_stop(tmp_path, sig, flushes=1, *job_args):
    """Records a 30 s mixed job until the recording holds flushes flushes
    (not a fixed sleep: attaching takes 2-7 s by the machine's load), stops
    trainbpf with sig; returns when it was sent."""
    job, _ = start_mixed(tmp_path, 30, *job_args)
    try:
        rec = start_record(tmp_path / "run.db", job.pid)
        wait_flushes(tmp_path / "run.db", flushes, rec)
        sent = time.monotonic_ns()
        rec.send_signal(sig)
        _, err = rec.communicate(timeout=30)
        assert rec.returncode == 0, err
    finally:
        job.kill()
        job.wait()
    return sent


def test_record_target_exits(tmp_path):
    # Long enough to outlast the attach: 2.2 s idle, 3.8 s under load, more
    # than 4 s with other suites beside it (then "exited before it could be
    # traced", exit 1).
    job, truth_path = start_mixed(tmp_path, 10)
    rec = subprocess.run([TRAINBPF, "record", "-o", str(tmp_path / "run.db"),
                          "-p", str(job.pid)], capture_output=True, text=True, timeout=60)
    job.wait(timeout=30)
    assert rec.returncode == 0, rec.stderr
    db = open_db(tmp_path / "run.db")
    check_header(db)
    assert meta(db)["complete"] == "1"
    assert meta(db)["command"] == f"-p {job.pid}"
    check_sums_are_lifetimes(db)
    truth = json.loads(truth_path.read_text())
    tids = {t["tid"] for t in db.execute("SELECT tid FROM threads")}
    assert {t["tid"] for t in truth["threads"]} <= tids
    assert all(t["end_ns"] for t in db.execute("SELECT end_ns FROM threads"))


def stop_and_check(tmp_path, sig):
    sent = record_then_stop(tmp_path, sig)
    db = open_db(tmp_path / "run.db")
    check_header(db)
    m = meta(db)
    assert m["complete"] == "1"
    assert int(m["end_mono_ns"]) >= sent
    # The final flush came after the signal: the threads' rows reach it.
    last = db.execute("SELECT max(ts_ns) FROM samples").fetchone()[0]
    assert last >= sent
    check_sums_are_lifetimes(db)


def test_record_rows_under_load(tmp_path):
    """Two CPUs, four spinning threads and trainbpf's own refreshes: BPF
    closes intervals while the slots are read, and no row may count time
    past its own instant (nor stop short of it)."""
    record_then_stop(tmp_path, signal.SIGINT, 8, "-c", "3")
    db = open_db(tmp_path / "run.db")
    assert db.execute("SELECT count(DISTINCT ts_ns) FROM samples").fetchone()[0] >= 5
    check_sums_are_lifetimes(db)


def test_record_sigint(tmp_path):
    stop_and_check(tmp_path, signal.SIGINT)


def test_record_sigterm(tmp_path):
    stop_and_check(tmp_path, signal.SIGTERM)


def test_record_sighup(tmp_path):
    stop_and_check(tmp_path, signal.SIGHUP)


def test_record_survives_kill_9(tmp_path):
    job, _ = start_mixed(tmp_path, 30)
    try:
        # Two flushes after the attach, however long loading and verifying
        # the programs takes (2.2 s on an idle 2-CPU VM, 3.8 s under load,
        # more than 6.5 s with four other suites running beside it).
        rec = start_record(tmp_path / "run.db", job.pid)
        wait_flushes(tmp_path / "run.db", 2, rec)
        killed = time.monotonic_ns()
        rec.kill()
        rec.wait(timeout=10)
    finally:
        job.kill()
        job.wait()
    assert os.path.exists(str(tmp_path / "run.db") + "-wal")
    db = open_db(tmp_path / "run.db")
    check_header(db)
    m = meta(db)
    assert "complete" not in m and "end_mono_ns" not in m
    last = db.execute("SELECT max(ts_ns) FROM samples").fetchone()[0]
    assert killed - last <= (FLUSH_S + TICK_S + 0.1) * 1e9, (killed - last) / 1e9
    check_sums_are_lifetimes(db)
    # Every thread of the job is there, busy ones with a row per flush.
    spin = db.execute("SELECT count(*) FROM samples s JOIN threads t ON s.tid = t.tid "
                      "WHERE t.comm = 'tb_spin'").fetchone()[0]
    assert spin >= 2


def test_record_disk_full(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(small)],
                   check=True)
    job, _ = start_mixed(tmp_path, 40)
    try:
        t0 = time.monotonic()
        rec = subprocess.run([TRAINBPF, "record", "-o", str(small / "run.db"),
                              "-p", str(job.pid)], capture_output=True, text=True,
                             timeout=60)
        took = time.monotonic() - t0
        assert job.poll() is None       # -p: the job is not ours to stop
    finally:
        job.kill()
        job.wait()
        subprocess.run(["umount", str(small)], check=True)
    assert rec.returncode == 1, rec.stderr
    lines = rec.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk is full" in lines[0], rec.stderr
    assert took < 30


def test_record_disk_full_launched_job_runs_on(tmp_path):
    """The disk fills ~1.5 s into the recording of a launched job: the
    recording stops with one line and keeps what it committed; the job is
    not signalled, runs to its end, and its exit status is trainbpf's."""
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=500k", "tmpfs", str(small)],
                   check=True)
    done = tmp_path / "done"
    job = (f"{workload('mixed')} -d 5 -o {tmp_path}/truth.json -D {disk_dir()}; "
           f"echo finished > {done}; exit 7")
    try:
        rec = subprocess.run([TRAINBPF, "record", "-o", str(small / "run.db"), "--",
                              "sh", "-c", job], capture_output=True, text=True, timeout=60)
        for name in ("run.db", "run.db-wal"):
            if os.path.exists(small / name):
                shutil.copy(small / name, tmp_path / name)
    finally:
        subprocess.run(["umount", str(small)], check=True)
    lines = rec.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk is full" in lines[0] and \
        "recording stopped" in lines[0], rec.stderr
    assert done.read_text() == "finished\n"
    assert rec.returncode == 7, rec.stderr
    db = open_db(tmp_path / "run.db")
    check_header(db)
    m = meta(db)
    assert "complete" not in m and m["command"].startswith("sh -c ")
    rows = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ("samples", "states"))
    assert rows > 0


def test_record_cannot_create(tmp_path):
    r = subprocess.run([TRAINBPF, "record", "-o", str(tmp_path / "no" / "run.db"),
                        "--", "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"trainbpf: cannot create {tmp_path}/no/run.db: No such file or directory"]


def test_record_epochs_steps_and_lines(tmp_path):
    db_path, truth_path = tmp_path / "run.db", tmp_path / "truth.json"
    r = subprocess.run([TRAINBPF, "record", "-o", str(db_path), "--",
                        workload("epochs"), "-e", "3", "-d", "0.5", "-s", "5",
                        "-o", str(truth_path), "--mode", "both"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    truth = json.loads(truth_path.read_text())
    db = open_db(db_path)
    assert meta(db)["epoch_source"] == "marker"
    marker = db.execute("SELECT * FROM epochs WHERE source = 'marker' "
                        "ORDER BY start_ns").fetchall()
    assert [e["label"] for e in marker] == [1, 2, 3]
    assert [e["complete"] for e in marker] == [1, 1, 0]
    for e, t in zip(marker, truth["epochs"]):
        assert t["start_ns"] <= e["start_ns"] <= t["mark_end_ns"]
    assert db.execute("SELECT count(*) FROM steps WHERE source = 'marker' AND pid = ?",
                      (truth["pid"],)).fetchone()[0] == 15
    lines = [e["text"] for e in db.execute(
        "SELECT text FROM events WHERE type = 'text' ORDER BY ts_ns")]
    assert lines == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]
    marks = db.execute("SELECT count(*) FROM events WHERE type = 'mark'").fetchone()[0]
    assert marks == 3 + 15


def test_record_states_then_report_and_trace(tmp_path):
    """record turns the state stream on: every closed interval is a row of
    `states`, and per thread they tile its life and sum to its samples
    (both are the BPF books: exact up to a ns of rounding per row). Then
    report and trace read the file back without root."""
    db_path = tmp_path / "run.db"
    r = subprocess.run([TRAINBPF, "record", "-o", str(db_path), "--",
                        workload("bottleneck"), "-m", "data-cpu", "-d", "2",
                        "-o", str(tmp_path / "truth.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    db = open_db(db_path)
    counters = dict(db.execute("SELECT key, value FROM counters"))
    assert counters["states_lost"] == 0 and counters["states_dropped"] == 0
    assert counters["states_rows"] == db.execute("SELECT count(*) FROM states").fetchone()[0] > 0
    for (tid,) in db.execute("SELECT DISTINCT tid FROM samples"):
        rows = db.execute("SELECT start_ns, end_ns, cat FROM states WHERE tid = ? "
                          "ORDER BY start_ns", (tid,)).fetchall()
        for (s0, e0, _), (s1, _, _) in zip(rows, rows[1:]):
            assert e0 == s1, (tid, e0, s1)
        got = [0] * len(CATS)
        for s, e, c in rows:
            got[c] += e - s
        want = db.execute("SELECT " + ",".join(f"sum({c})" for c in CATS) +
                          " FROM samples WHERE tid = ?", (tid,)).fetchone()
        for c, (g, w) in enumerate(zip(got, want)):
            assert abs(g - w) <= 1000, (tid, CATS[c], g, w)
    rep = subprocess.run([TRAINBPF, "report", str(db_path), "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    assert "data_loading" in [d["id"] for d in json.loads(rep.stdout)["diagnosis"]]
    trace = tmp_path / "trace.json"
    tr = subprocess.run([TRAINBPF, "trace", str(db_path), "-o", str(trace)],
                        capture_output=True, text=True, timeout=60)
    assert tr.returncode == 0, tr.stderr
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    slices = [e for e in events if e["ph"] == "X" and e.get("cat") != "epoch"]
    # a state that only continues the one before it is merged into it (d4e3921)
    merged = json.loads(trace.read_text())["otherData"]["slices_merged"]
    assert len(slices) + merged >= counters["states_rows"], \
        (len(slices), merged, counters["states_rows"])


def test_record_cuda_steps_and_worker_generations(tmp_path):
    """What is only final at the end (syncs, libraries, generations) is in
    the file too, and report reads it back as the live tool prints it."""
    db_path = tmp_path / "gpu.db"
    truth = tmp_path / "truth.json"
    r = subprocess.run([TRAINBPF, "record", "-o", str(db_path), "--", workload("stepjob"),
                        "--truth", str(truth), "--pattern", "mixed", "--epochs", "2",
                        "--steps", "30", "--wait-probes", "20000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    want = json.loads(truth.read_text())
    rep = subprocess.run([TRAINBPF, "report", str(db_path), "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    report = json.loads(rep.stdout)
    for e in report["epochs"]["list"]:
        if e["steps"]:
            assert e["steps"]["syncs_per_step"] == want["syncs_per_step"], e["steps"]
    kinds = {lib["kind"] for lib in report["gpu"]["libraries"] if lib["pid"] == want["pid"]}
    assert kinds == {"cudart", "cuda", "nccl"}, report["gpu"]["libraries"]

    db_path = tmp_path / "workers.db"
    r = subprocess.run([TRAINBPF, "record", "-o", str(db_path), "--epochs", "workers", "--",
                        workload("workers"), "-e", "3", "-w", "2", "-n", "20",
                        "-o", str(tmp_path / "wt.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    wt = json.loads((tmp_path / "wt.json").read_text())
    db = open_db(db_path)
    gens = [tuple(g) for g in db.execute(
        "SELECT parent, nworkers, epoch FROM worker_gens ORDER BY fork_ns")]
    assert gens == [(wt["pid"], 2, k + 1) for k in range(3)], gens


# The recording's file: never another file destroyed, never two writers.

def record(args, timeout=60):
    return subprocess.run([TRAINBPF, "record", *args], capture_output=True, text=True,
                          timeout=timeout)


def one_line(r, code, text):
    """One line; a bad option (2) has argp's pointer to --help after it."""
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip() and
             not (code == 2 and (l.startswith("Try `") or l == "information."))]
    assert len(lines) == 1 and lines[0].startswith("trainbpf") and text in lines[0], r.stderr


def test_record_refuses_what_is_not_a_file(tmp_path):
    import stat
    one_line(record(["-o", "/dev/full", "--", "true"]), 1, "not a regular file")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    one_line(record(["-o", str(tmp_path), "--", "true"]), 1, "not a regular file")
    one_line(record(["-o", "", "--", "true"]), 2, "invalid output")


def test_record_does_not_replace_the_script(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("echo trained\n")
    r = record(["-o", str(script), "--", "sh", str(script)])
    one_line(r, 1, "exists")
    assert "trained" not in r.stdout
    assert script.read_text() == "echo trained\n"
    # Not even when told to: --force replaces recordings only.
    r = record(["-o", str(script), "--force", "--", "sh", str(script)])
    one_line(r, 1, "not a trainbpf recording")
    assert script.read_text() == "echo trained\n"


def test_record_replaces_a_recording_with_force_only(tmp_path):
    import stat
    db_path = tmp_path / "run.db"
    r = record(["-o", str(db_path), "--", "true"])
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
    first = meta(open_db(db_path))["start_mono_ns"]
    one_line(record(["-o", str(db_path), "--", "true"]), 1, "use --force")
    assert meta(open_db(db_path))["start_mono_ns"] == first
    r = record(["-o", str(db_path), "--force", "--", "true"])
    assert r.returncode == 0, r.stderr
    db = open_db(db_path)
    check_header(db)
    assert meta(db)["start_mono_ns"] != first and meta(db)["complete"] == "1"


def test_record_stale_log_is_not_replayed(tmp_path):
    """A -wal left by a recording killed with -9, its file deleted since:
    a new recording under that name would replay it."""
    db_path = tmp_path / "run.db"
    wal = tmp_path / "run.db-wal"
    wal.write_bytes(b"stale")
    one_line(record(["-o", str(db_path), "--", "true"]), 1, "run.db-wal exists")
    assert wal.read_bytes() == b"stale"
    r = record(["-o", str(db_path), "--force", "--", "true"])
    assert r.returncode == 0, r.stderr
    check_header(open_db(db_path))


def test_record_twice_at_once(tmp_path):
    db_path = tmp_path / "same.db"
    stop = tmp_path / "stop"
    # The first records until the test says stop: two more attaches take
    # seconds each on a slow machine, and a job of fixed length can end first.
    hold = f"while [ ! -e {stop} ]; do sleep 0.05; done"
    first = subprocess.Popen([TRAINBPF, "record", "-o", str(db_path), "--", "sh", "-c", hold],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The first is writing once its WAL is there (after its attach: seconds).
        deadline = time.time() + 60
        while not os.path.exists(str(db_path) + "-wal") and time.time() < deadline:
            time.sleep(0.05)
        assert os.path.exists(str(db_path) + "-wal"), "the first recorder never began writing"
        for force in ([], ["--force"]):
            one_line(record(["-o", str(db_path), *force, "--", "true"]), 1,
                     "being written by another trainbpf")
        assert first.poll() is None, "the first recorder ended before the test said stop"
        stop.touch()
        _, err = first.communicate(timeout=60)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == 0, err
    db = open_db(db_path)
    check_header(db)
    m = meta(db)
    assert m["complete"] == "1" and m["command"] == f"sh -c {hold}", m


def test_read_commands_refuse_to_write_their_input(tmp_path):
    db_path = tmp_path / "run.db"
    r = record(["-o", str(db_path), "--", "true"])
    assert r.returncode == 0, r.stderr
    before = db_path.read_bytes()
    (tmp_path / "sub").mkdir()
    other_name = str(tmp_path / "sub" / ".." / "run.db")   # same file, another string
    for argv in (["trace", str(db_path), "-o", str(db_path)],
                 ["trace", str(db_path), "-o", other_name],
                 ["report", str(db_path), "-o", other_name],
                 ["diff", str(db_path), str(db_path), "-o", other_name]):
        r = subprocess.run([TRAINBPF, *argv], capture_output=True, text=True, timeout=60)
        one_line(r, 1, "is an input")
        assert db_path.read_bytes() == before
    check_header(open_db(db_path))


def test_a_reader_at_the_start_does_not_stop_the_recording(tmp_path):
    """A reader of the file (a report in a loop, a test polling it) holds a
    shared lock as the recorder writes the header and switches to WAL: the
    recorder waits it out (0.3 s here) and records, instead of "cannot
    create ...: database is locked" (3 starts in 10 beside a reader in a
    loop; test_recording_keeps_the_stall failed so on CI). The reader lets
    go 0.3 s after the recorder made its -shm, right before SQLite opens
    the file: without the wait the recorder has failed by then."""
    db = tmp_path / "run.db"
    db.touch()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    con.execute("BEGIN")
    con.execute("SELECT count(*) FROM sqlite_master").fetchall()
    p = subprocess.Popen([TRAINBPF, "record", "-o", str(db), "--", "true"],
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{db}-shm") and p.poll() is None:
            assert time.monotonic() < deadline, "the recorder made no -shm"
            time.sleep(0.01)
        time.sleep(0.3)
    finally:
        con.execute("COMMIT")
        con.close()
    assert p.wait(timeout=60) == 0, p.stderr.read()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == schema_version()
