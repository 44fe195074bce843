"""`trainbpf serve` on a node shared with other users: what it probes.

The daemon finds training processes by the libraries they map and puts
uprobes in them. These tests hold it to what a process computes, not to
what trainbpf says: tests/workloads/magic builds `magic()`, whose result
shows a byte of its code changed, as libclean.so and as libbait.so, the
same code naming the middle of magic's first instruction
`cudaStreamSynchronize`. A uprobe there makes magic return 0x919191cc
(callmagic exits 3). A library named libcudart is found by default.

- A library rewritten in place (same inode, as `cp` onto it does) is read
  again: the old file's offsets are never put in the new one.
- Another user's library, or a world-writable one, is not probed in a
  process that is not its owner's.
- One process mapping many look-alike libraries gets at most
  LP_MAX_PROBED (32) of them probed, and a job started after it is still
  found.

Each case's first process shows the probes do land where asked (the bait
in its owner's own process returns the wrong value): without it a test
that sees no corruption could pass with nothing probed at all.
"""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import workload
from test_serve import Prometheus, Serve, samples, wait_for

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
RIGHT, WRONG = 0, 3     # callmagic's exit: every call right, or not
LIB = "libcudart.so.13"
JOB_LABEL = "training_job"


@pytest.fixture
def shared_dir():
    """A sticky world-writable directory like /tmp, with the programs in it
    (pytest's own tmp_path is root's, 0700: nobody could not reach it)."""
    d = tempfile.mkdtemp(prefix="tb-shared-", dir="/tmp")
    os.chmod(d, 0o1777)
    for f in ("callmagic", "magic/libbait.so", "magic/libclean.so"):
        shutil.copy(workload(f), d)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def callmagic(d, lib, seconds, job, user=()):
    """callmagic in the background with its own job label; its output piped."""
    env = dict(os.environ, TORCHELASTIC_RUN_ID=job, RANK="0")
    return subprocess.Popen([*user, os.path.join(d, "callmagic"), str(seconds),
                             *([lib] if isinstance(lib, str) else lib)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def job_processes(text, job):
    """trainbpf_processes of job's series (any rank and role), or None."""
    found = [v for labels, v in samples(text, "trainbpf_processes").items()
             if (JOB_LABEL, f'"{job}"') in labels]
    return sum(found) if found else None


def watched(srv, job):
    """Serve has a series for job (discovered, traced, labelled): its processes."""
    return job_processes(srv.metrics(), job)


def run_watched(srv, d, lib, job, user=()):
    """Runs callmagic until serve has watched it for 3 s (its maps scanned
    and probed, at once and at every look after); its exit code and output."""
    p = callmagic(d, lib, 12, job, user)
    try:
        wait_for(f"{job} to be watched", lambda: p.poll() is not None or watched(srv, job), 20)
        time.sleep(3)
        out = p.communicate(timeout=30)[0]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out


def plain_value(text, name):
    """The value of a family with no labels."""
    return next(float(l.split()[1]) for l in text.splitlines() if l.startswith(name + " "))


def log(srv):
    with open(srv.log.name) as f:
        return f.read()


def test_a_library_rewritten_in_place_is_read_again(tmp_path, shared_dir):
    """Root's library upgraded in place: root's next process maps the new
    code at the old file's inode, and must run it untouched."""
    lib = os.path.join(shared_dir, LIB)
    shutil.copy(os.path.join(shared_dir, "libbait.so"), lib)
    srv = Serve(tmp_path, "serve")
    try:
        rc, out = run_watched(srv, shared_dir, lib, "bait")
        assert rc == WRONG, out         # the bait's own probe landed: probing works
        ino = os.stat(lib).st_ino
        with open(os.path.join(shared_dir, "libclean.so"), "rb") as src, open(lib, "r+b") as dst:
            dst.truncate(0)             # what cp onto an existing file does
            dst.write(src.read())
        assert os.stat(lib).st_ino == ino
        rc, out = run_watched(srv, shared_dir, lib, "victim")
        assert rc == RIGHT, out + log(srv)
    finally:
        assert srv.stop() == 0


def test_another_users_library_is_not_probed_in_root_process(tmp_path, shared_dir):
    """nobody leaves a library named like the CUDA runtime in a shared
    directory: probed in nobody's own process, never in root's."""
    lib = os.path.join(shared_dir, LIB)
    subprocess.run([*NOBODY, "cp", os.path.join(shared_dir, "libbait.so"), lib], check=True)
    assert os.stat(lib).st_uid == 65534
    srv = Serve(tmp_path, "serve")
    try:
        rc, out = run_watched(srv, shared_dir, lib, "own", NOBODY)
        assert rc == WRONG, out         # its owner's process: probed
        rc, out = run_watched(srv, shared_dir, lib, "root")
        assert rc == RIGHT, out + log(srv)
        assert f"{lib} (pid " in log(srv) and "owned by another user: not probed" in log(srv)
    finally:
        assert srv.stop() == 0


def test_a_world_writable_library_is_not_probed(tmp_path, shared_dir):
    lib = os.path.join(shared_dir, LIB)
    shutil.copy(os.path.join(shared_dir, "libbait.so"), lib)
    srv = Serve(tmp_path, "serve")
    try:
        rc, out = run_watched(srv, shared_dir, lib, "before")
        assert rc == WRONG, out
        os.chmod(lib, 0o666)
        rc, out = run_watched(srv, shared_dir, lib, "writable")
        assert rc == RIGHT, out + log(srv)
    finally:
        assert srv.stop() == 0


def test_many_look_alikes_in_one_process_are_bounded(tmp_path, shared_dir):
    """nobody maps 300 libraries that each define a CUDA call: serve probes
    32 of them, says so once, its descriptors stay bounded, it keeps 256 of
    nobody's files (each kept for the daemon's life: before, all of them,
    and as many as a user could make), and root's job started afterwards
    is found and probed."""
    libs = [os.path.join(shared_dir, f"libcudart-{i:03d}.so.13") for i in range(300)]
    subprocess.run([*NOBODY, "sh", "-c", 'src=$1; shift; for f; do cp "$src" "$f"; done',
                    "cp", os.path.join(shared_dir, "libbait.so"), *libs], check=True)
    # Only these processes (a node's other jobs would hold descriptors too).
    srv = Serve(tmp_path, "serve", "--match", "callmagic")
    hog = None
    try:
        fds0 = len(os.listdir(f"/proc/{srv.p.pid}/fd"))
        hog = callmagic(shared_dir, libs, 60, "hog", NOBODY)
        wait_for("the hog to be watched", lambda: watched(srv, "hog"), 20)
        wait_for("the bound to be said", lambda: "one library too many" in log(srv), 20)
        time.sleep(2)   # a look more: nothing past the bound then either
        fds = len(os.listdir(f"/proc/{srv.p.pid}/fd"))
        # uprobe_multi: a descriptor per program and library (2 for a sync
        # call: entry and return); one per probe without it: 2 as well.
        assert fds - fds0 <= 32 * 2 + 8, (fds0, fds)
        lib = os.path.join(shared_dir, LIB)
        shutil.copy(os.path.join(shared_dir, "libbait.so"), lib)
        rc, out = run_watched(srv, shared_dir, lib, "legit")
        assert rc == WRONG, out + log(srv)   # found and probed
        assert log(srv).count("one library too many") == 1, log(srv)
        assert log(srv).count("uid 65534 owns 256 libraries kept already") == 1, log(srv)
        t = time.monotonic()
        hog.kill()
        hog.wait()
        # its 32 libraries' probes go without holding the scrapes up
        wait_for("the hog's probes to go", lambda: len(os.listdir(f"/proc/{srv.p.pid}/fd"))
                 <= fds0 + 8, 30)
        assert srv.metrics()
        detach_s = time.monotonic() - t
    finally:
        if hog and hog.poll() is None:
            hog.kill()
            hog.wait()
        t = time.monotonic()
        assert srv.stop() == 0
    assert time.monotonic() - t < 10, "SIGTERM took too long"
    assert detach_s < 30


def test_labels_from_bad_bytes_keep_every_scrape_valid(tmp_path, shared_dir):
    """A run id that is not UTF-8, or is cut mid-character at the label's
    63 bytes, made every scrape of the node fail in Prometheus (up 0).
    Debian's Prometheus scrapes it: up stays 1 and the series are there,
    the bad bytes as U+FFFD; promtool check metrics accepts the text."""
    lib = os.path.join(shared_dir, LIB)
    shutil.copy(os.path.join(shared_dir, "libclean.so"), lib)
    ids = {b"bad-\xff\xfe-id": "bad-\ufffd\ufffd-id",
           b"x" * 62 + "é".encode(): "x" * 62,
           b"esc-\x1b[31m": "esc-\ufffd[31m"}
    srv = Serve(tmp_path, "serve")
    prom = Prometheus(tmp_path, [srv.port])
    procs = []
    try:
        for raw in ids:
            env = {k.encode(): v.encode() for k, v in os.environ.items()}
            env.update({b"TORCHELASTIC_RUN_ID": raw, b"RANK": b"0"})
            procs.append(subprocess.Popen([*NOBODY, os.path.join(shared_dir, "callmagic"), "60",
                                           lib], env=env, stdout=subprocess.DEVNULL))
        text = wait_for("the three jobs", lambda: (lambda t: t if all(
            job_processes(t, job) for job in ids.values()) else None)(srv.metrics()), 30)
        r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=30)
        # promtool also lints (exit 3 for lint problems only); a parse error is 1
        assert r.returncode in (0, 3) and b"error" not in r.stderr.lower(), r.stderr
        # Prometheus scrapes every second: a scrape with the three in it
        query = 'count(trainbpf_processes{training_job=~"bad-.*|x{62}|esc-.*"})'
        wait_for("Prometheus to store the three", lambda: prom.query(query) and
                 prom.query(query)[0][1] == 3, 30)
        assert [v for _, v in prom.query('up{job="trainbpf"}')] == [1.0]
    finally:
        for p in procs:
            p.kill()
            p.wait()
        prom.stop()
        assert srv.stop() == 0


def test_another_user_cannot_add_to_a_jobs_series(tmp_path, shared_dir):
    """nobody's process sets root's job's TORCHELASTIC_RUN_ID and RANK: it
    is a job of its own (victim~uid65534), root's series keeps 1 process."""
    lib = os.path.join(shared_dir, LIB)
    shutil.copy(os.path.join(shared_dir, "libclean.so"), lib)
    srv = Serve(tmp_path, "serve")
    procs = []
    try:
        procs.append(callmagic(shared_dir, lib, 30, "victim"))
        wait_for("the victim to be watched", lambda: watched(srv, "victim"), 20)
        procs.append(callmagic(shared_dir, lib, 30, "victim", NOBODY))
        wait_for("the claimant to be watched", lambda: watched(srv, "victim~uid65534"), 20)
        assert watched(srv, "victim") == 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
        assert srv.stop() == 0


def job_seconds(text, job):
    """trainbpf_time_seconds_total of job's series, every category: 0 if none."""
    return sum(v for labels, v in samples(text, "trainbpf_time_seconds_total").items()
               if (JOB_LABEL, f'"{job}"') in labels)


def test_threads_past_a_processs_share_are_said(tmp_path, shared_dir):
    """nobody's process starts more threads than there are slots: it holds
    its share (an eighth: 32 of 256), what did not fit is counted in
    /metrics and said on stderr, and root's job started after it is traced
    (before, the threads took every slot: the job had 0 s of time and
    nothing said why)."""
    lib = os.path.join(shared_dir, LIB)
    shutil.copy(os.path.join(shared_dir, "libclean.so"), lib)
    srv = Serve(tmp_path, "serve", "--max-threads", "256")
    code = ("import ctypes, sys, threading, time\n"
            "ctypes.CDLL(sys.argv[1])\n"
            "for _ in range(300):\n"
            "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([*NOBODY, "/usr/bin/python3", "-c", code, lib],
                         env=dict(os.environ, TORCHELASTIC_RUN_ID="threads"))
    victim = None
    try:
        wait_for("the hog to be watched", lambda: watched(srv, "threads"), 30)
        wait_for("the threads to be counted",
                 lambda: plain_value(srv.metrics(), "trainbpf_threads_untraced_total") >= 300 - 32,
                 30)
        wait_for("the warning", lambda: "threads not traced so far" in log(srv)
                 and "than 32 in one process" in log(srv), 10)
        victim = callmagic(shared_dir, lib, 30, "victim")
        wait_for("the victim to be watched", lambda: watched(srv, "victim"), 20)
        # Its main thread has a slot: its series gains a second a second.
        wait_for("the victim's time", lambda: job_seconds(srv.metrics(), "victim") > 1.0, 10)
    finally:
        for q in (p, victim):
            if q:
                q.kill()
                q.wait()
        assert srv.stop() == 0