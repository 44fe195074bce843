"""report, trace and diff only read: no file appears beside the recording.

SQLite makes a -wal and a -shm beside a WAL database that any connection
opens, a read-only one included. A finished recording leaves WAL mode, so
it is one file; a recording cut by kill -9 is still in WAL mode with its
-wal (the commits since the last checkpoint) and -shm: it must be read
with its WAL, and left as it was. A -wal whose -shm is gone is read too,
without making one (recording_open.c reads a private copy).
"""
import hashlib
import json
import os
import shutil
import sqlite3
import pathlib
import subprocess
import tempfile

from conftest import TRAINBPF, disk_dir, workload
from test_record import start_mixed, start_record, wait_flushes


def listing(d):
    """Every file of d with its size and content hash."""
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def read_all(db, tmp_path, other=None):
    """report (every format), trace and diff of db, all exit 0; the JSON."""
    out = str(tmp_path / "out")  # not beside the recording
    runs = [["report", db, "--format", f] for f in ("text", "json", "csv")] + \
        [["trace", db, "-o", out + "/t.json"], ["diff", db, other or db]]
    os.makedirs(out, exist_ok=True)
    doc = None
    for args in runs:
        r = subprocess.run([TRAINBPF, *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (args, r.stderr)
        if "json" in args:
            doc = json.loads(r.stdout)
    return doc


def test_finished_recording_is_one_file(tmp_path):
    d = tmp_path / "rec"
    d.mkdir()
    db = str(d / "run.db")
    r = subprocess.run([TRAINBPF, "record", "-o", db, "--", workload("mixed"), "-d", "2",
                        "-o", str(tmp_path / "truth.json"), "-D", disk_dir()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    before = listing(d)
    assert list(before) == ["run.db"]
    with open(db, "rb") as f:  # file format versions: 1 rollback journal, 2 WAL
        assert f.read(20)[18:20] == b"\x01\x01"
    read_all(db, tmp_path)
    assert listing(d) == before


def killed_recording(tmp_path, d=None):
    """A recording of mixed cut by kill -9 after a few flushes, in d (waited
    for, not slept: attaching took over 3.5 s once in CI, and the recording
    held no samples)."""
    d = d or tmp_path / "rec"
    d.mkdir()
    job, _ = start_mixed(tmp_path, 30)
    try:
        rec = start_record(d / "run.db", job.pid)
        wait_flushes(d / "run.db", 3, rec)
        rec.kill()
        rec.wait(timeout=10)
    finally:
        job.kill()
        job.wait()
    return d


def last_flush_in_wal(d, tmp_path):
    """What a reader must find: the last flush, read by SQLite from a copy
    (reading the original would make files beside it)."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in os.listdir(d):
        shutil.copy(d / name, copy / name)
    con = sqlite3.connect(str(copy / "run.db"))
    start = int(con.execute("SELECT value FROM meta WHERE key = 'start_mono_ns'").fetchone()[0])
    last = con.execute("SELECT max(ts_ns) FROM samples").fetchone()[0]
    con.close()
    return (last - start) / 1e9


def test_killed_recording_read_with_its_wal_left_as_it_was(tmp_path):
    d = killed_recording(tmp_path)
    before = listing(d)
    assert set(before) == {"run.db", "run.db-wal", "run.db-shm"}
    want = last_flush_in_wal(d, tmp_path)
    assert want > 1.0
    doc = read_all(str(d / "run.db"), tmp_path)
    assert abs(doc["window"]["duration_s"] - want) < 1e-6, (doc["window"], want)
    assert listing(d) == before


def test_wal_without_shm_is_read_without_making_one(tmp_path):
    # Somewhere another user can reach, for the read-only case below.
    base = pathlib.Path(tempfile.mkdtemp(dir=disk_dir()))
    try:
        check_wal_without_shm(tmp_path, base)
    finally:
        shutil.rmtree(base)


def check_wal_without_shm(tmp_path, base):
    os.chmod(base, 0o755)
    d = killed_recording(tmp_path, base / "rec")
    want = last_flush_in_wal(d, tmp_path)
    os.unlink(d / "run.db-shm")
    before = listing(d)
    tmp = base / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    env = dict(os.environ, TMPDIR=str(tmp))
    r = subprocess.run([TRAINBPF, "report", str(d / "run.db"), "--format", "json"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert abs(json.loads(r.stdout)["window"]["duration_s"] - want) < 1e-6
    assert listing(d) == before
    assert os.listdir(tmp) == []  # the private copy is gone
    # A directory the reader cannot write to: the same, not the checkpoint alone.
    # Recordings are made 0600: sharing one with another user is a chmod.
    for f in ("run.db", "run.db-wal"):
        os.chmod(d / f, 0o644)
    before = listing(d)
    os.chmod(d, 0o555)
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            TRAINBPF, "report", str(d / "run.db"), "--format", "json"],
                           capture_output=True, text=True, timeout=120, env=env)
    finally:
        os.chmod(d, 0o755)
    assert r.returncode == 0, r.stderr
    assert abs(json.loads(r.stdout)["window"]["duration_s"] - want) < 1e-6
    assert listing(d) == before
