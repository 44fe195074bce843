"""`trainbpf report a.db b.db`: one job's ranks recorded on two "nodes"
(each rank under its own `trainbpf record`, as on two machines), merged.

A real PyTorch CPU DDP job (gloo), its two ranks started on their own with
the launcher's environment (TORCHELASTIC_RUN_ID, RANK, WORLD_SIZE), rank 1
slowed on purpose (it sleeps in each step's forward): the merged report
names rank 1 the straggler with its node, each rank's row is its own
recording's (the same figures as that recording's report), and each
rank's steps are the job's own count. Recordings that are not one job are
refused with one line.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest

from conftest import ROOT, SYSTEM_PYTHON, TORCH_JOB, TRAINBPF
from test_serve import free_port

STEPS = 80


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("merged")
    port = free_port()
    truth = tmp / "truth.json"
    procs = []
    for r in (0, 1):
        env = {"RANK": str(r), "LOCAL_RANK": "0", "WORLD_SIZE": "2",
               "TORCHELASTIC_RUN_ID": "merge-test", "USE_LIBUV": "0", "PATH": "/usr/bin:/bin"}
        procs.append(subprocess.Popen(
            [TRAINBPF, "record", "-o", str(tmp / f"rank{r}.db"), "--report",
             str(tmp / f"rank{r}.json"), "--format", "json", "--",
             SYSTEM_PYTHON, TORCH_JOB, "--launch", "node", "--rank", str(r), "--port",
             str(port), "--world-size", "2", "--workers", "0", "--epochs", "1", "--steps",
             str(STEPS), "--slow-rank", "1", "--slow-ms", "40", "--setup-s", "1",
             "--slow-from-step", "0", "--truth", str(truth)],
            env=env, stdout=open(tmp / f"rank{r}.log", "w"), stderr=subprocess.STDOUT))
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    parts = [json.loads((tmp / "truth.json.parts" / f"rank-{r}.json").read_text())
             for r in (0, 1)]
    return tmp, parts


def report(*args):
    return subprocess.run([TRAINBPF, "report", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_straggler_named_across_recordings(recordings):
    tmp, parts = recordings
    r = report(tmp / "rank0.db", tmp / "rank1.db", "--format", "json")
    assert r.returncode == 0, r.stderr
    merged = json.loads(r.stdout)
    assert merged["job"] == "merge-test"
    assert [k["rank"] for k in merged["ranks"]] == [0, 1]
    slow = [f for f in merged["diagnosis"] if f["id"] == "slow_rank"]
    assert slow and "rank 1 (PID" in slow[0]["summary"] and "on rank1.db" in slow[0]["summary"]
    for k, part in zip(merged["ranks"], parts):
        # each rank's row is its own recording's: its trainer's figures there
        own = json.loads((tmp / f"rank{k['rank']}.json").read_text())
        proc = next(p for p in own["processes"] if p["pid"] == k["pid"])
        main = next(t for t in proc["threads"] if t["tid"] == k["pid"])
        for cat, s in main["critical_path_s"].items():
            assert k["time_s"][cat] == pytest.approx(s, abs=1e-6), (cat, k, main)
        assert k["steps"] == part["steps"] == STEPS
    # the slow rank computes longer and waits less in the collectives
    comm = [k["time_s"]["comm"] / sum(k["time_s"].values()) for k in merged["ranks"]]
    assert comm[1] < comm[0], comm
    text = report(tmp / "rank1.db", tmp / "rank0.db")
    assert text.returncode == 0, text.stderr
    assert "job merge-test, 2 recordings merged, 2 ranks" in text.stdout
    assert "slow rank: rank 1 (PID" in text.stdout


def changed_copy(tmp, name, sql, src="rank1.db"):
    dst = tmp / name
    shutil.copy(tmp / src, dst)
    db = sqlite3.connect(dst)
    db.executescript(sql)
    db.commit()
    db.close()
    return dst


def test_recorded_names_reach_the_terminal_escaped(recordings):
    """A recording is a file anyone may have written: its host name and job
    id must not put escape sequences on the terminal of whoever reads it."""
    tmp, _ = recordings
    evil = "'x' || char(27) || ']0;owned' || char(7) || char(27) || '[2J'"
    sql = (f"UPDATE meta SET value = {evil} WHERE key = 'hostname';"
           f"UPDATE meta SET value = {evil} WHERE key = 'job';")
    a = changed_copy(tmp, "evil0.db", sql, src="rank0.db")
    b = changed_copy(tmp, "evil1.db", sql.replace("'x'", "'y'", 1))
    r = subprocess.run([TRAINBPF, "report", str(a), str(b)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout, r.stdout[:400]
    assert b"job x\\033]0;owned\\007\\033[2J," in r.stdout, r.stdout[:400]


def test_many_communicators_compared_in_linear_time(tmp_path):
    """Two crafted recordings of 200k NCCL communicators each, none shared
    and no job id: refused as not one job, without comparing every pair
    (100k each took 10 s pair by pair: 200k would take 40)."""
    src = os.path.join(ROOT, "tests", "golden", "recordings", "gpujob.db")
    paths = []
    for salt in (1, 2):
        dst = tmp_path / f"crafted{salt}.db"
        shutil.copy(src, dst)
        db = sqlite3.connect(dst)
        seq, pid, api = db.execute("SELECT seq, pid, api FROM nccl_comms").fetchone()
        db.execute("DELETE FROM nccl_comms")    # the copies would share these
        db.executemany("INSERT INTO nccl_comms VALUES (?,?,?,?,?,?,?,?,?)",
                       ((seq, pid, i, 0, 0, 2, f"{salt:08x}{i:024x}", api, 0)
                        for i in range(200000)))
        db.commit()
        db.close()
        paths.append(dst)
    t = time.monotonic()
    r = report(*paths)
    elapsed = time.monotonic() - t
    assert r.returncode == 1 and "cannot tell it is the same job" in r.stderr, r.stderr
    assert elapsed < 10, elapsed


def test_not_one_job_is_refused(recordings):
    tmp, _ = recordings
    other = changed_copy(tmp, "other.db", "UPDATE meta SET value = 'another' WHERE key = 'job';")
    r = report(tmp / "rank0.db", other)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "not one job" in r.stderr and "another" in r.stderr
    nameless = changed_copy(tmp, "nameless.db", "DELETE FROM meta WHERE key = 'job';")
    for pair in ((tmp / "rank0.db", nameless), (nameless, tmp / "rank0.db")):
        r = report(*pair)
        # the recording without a job id is the one named, whichever comes first
        assert r.returncode == 1 and "cannot tell it is the same job" in r.stderr, r.stderr
        assert r.stderr.startswith(f"trainbpf: {nameless}: no job id"), r.stderr
    r = report(tmp / "rank0.db", tmp / "rank0.db")
    assert r.returncode == 1 and "rank 0 is in" in r.stderr, r.stderr
    r = report(tmp / "rank0.db", tmp / "rank1.db", "--format", "csv")
    assert r.returncode == 2 and "text or json" in r.stderr, r.stderr
    r = report(tmp / "rank0.db", tmp / "rank1.db", "--epoch", "1")
    assert r.returncode == 2, r.stderr
