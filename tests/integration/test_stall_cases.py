"""Stalls of a real gloo DDP job, named live and by `trainbpf dump`, then cleared
(issue 26's cases; user/model/stall.c, docs/phases.md "A stalled job").

torch_job.py, 2 ranks (mp.spawn, gloo, torch 1.13), no DataLoader workers;
rank 1 stops twice before a step's forward while rank 0 goes on into that
step's backward and waits in its allreduce (--pause, roles.jsonl notes when):

- for PAUSE_S in time.sleep in its loop: the STALLED line names rank 1,
  waiting in idle, and rank 0 waiting in comm;
- for PAUSE_S in one read of a FUSE file whose reads take that long
  (tests/workloads/slowfs): rank 1 waiting in io.

Each time:
- the first STALLED line comes no sooner than the threshold after the
  pause began and no later than the threshold, a tick and the live
  interval after it (plus SLACK_S for a loaded host);
- `trainbpf dump` of both ranks, 2 s into the pause, agrees with what the
  job's threads say of themselves: rank 1's loop thread is in the pause
  (its own sys._current_frames, 1 s in: innermost frame pause_here), the
  dump says it sleeps ("sleeping", or "in a file syscall" on the FUSE
  file's path), for as long as the job's clock says, in the kernel function
  /proc/PID/task/TID/wchan names (the job's own read, and ours right after);
  rank 0's loop thread in the kernel function its wchan names;
- once rank 1 goes on, the stall is cleared: no STALLED line in the live
  tables after it, and none atop the final report.
A slow but healthy job is never called stalled: the model's unit test
(tests/unit/test_stall.c, slow_job_not_stalled).
"""
import json
import os
import re
import subprocess
import threading
import time

import pytest

from conftest import SYSTEM_PYTHON, TORCH_JOB, TRAINBPF, slowfs_mounted

THRESHOLD_S = 3.0
TICK_S = 0.2
INTERVAL_S = 1.0
SLACK_S = 1.0
PAUSE_S = 7.0
STEPS = (30, 70)            # global steps of rank 1 where it stops
# mp.spawn sets no RANK: the ranks are named by pid.
LINE = re.compile(r"^STALLED for ([\d.]+) s \(no step or batch for more than ([\d.]+) s\): "
                  r"culprit pid (\d+) in (\w+), waiting in (\w+) ([\d.]+) s")
ROW = re.compile(r"^    pid (\d+) in (\w+), waiting in (\w+) ")


@pytest.fixture
def slowfs(tmp_path):
    with slowfs_mounted(tmp_path / "mnt", int(PAUSE_S * 1000), 1) as mnt:
        yield mnt


def roles(parts, kind):
    path = os.path.join(parts, "roles.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in (json.loads(l) for l in f if l.strip()) if r["kind"] == kind]


def wait_role(parts, kind, n, timeout, tb):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = roles(parts, kind)
        if len(got) >= n:
            return got[n - 1]
        assert tb.poll() is None, f"trainbpf ended before {kind} {n}"
        time.sleep(0.05)
    raise AssertionError(f"no {kind} {n} in {timeout} s")


def wchan(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/wchan") as f:
        return f.read().strip()


def dump(pids):
    t = time.monotonic()
    out = subprocess.run([TRAINBPF, "dump", "-p", ",".join(map(str, pids)), "--format", "json"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), t


def thread_of(d, pid, tid):
    for p in d["processes"]:
        for t in p["threads"]:
            if p["pid"] == pid and t["tid"] == tid:
                return t
    raise AssertionError(f"{tid} of {pid} not in the dump")


def check_dump(pause, rank0, mnt):
    """2 s into the pause: the dump against the job's own view of itself."""
    time.sleep(max(0.0, pause["start_mono"] + 2.0 - time.monotonic()))
    d, t = dump([pause["pid"], rank0["pid"]])
    after = {pause["tid"]: wchan(pause["pid"], pause["tid"]),
             rank0["pid"]: wchan(rank0["pid"], rank0["pid"])}
    me = thread_of(d, pause["pid"], pause["tid"])
    assert me["wchan"] == after[pause["tid"]], me
    # How long it has slept: the job's clock from the pause's start to the dump.
    assert abs(me["asleep_s"] - (t - pause["start_mono"])) <= 0.3, (me, t, pause)
    if pause["how"] == "sleep":
        assert me["now"] == "sleeping", me
    else:
        assert me["now"] == "in a file syscall", me
        assert me["fd_target"] == str(mnt / "data"), me
    loop0 = thread_of(d, rank0["pid"], rank0["pid"])
    assert loop0["wchan"] == after[rank0["pid"]], loop0
    return me


def read_lines(stream, out):
    for line in stream:
        out.append((time.monotonic(), line.rstrip("\n")))


def test_rank_paused_in_its_loop_then_resumed(tmp_path, slowfs):
    truth, final = tmp_path / "truth.json", tmp_path / "final.txt"
    parts = str(truth) + ".parts"
    pauses = [f"{STEPS[0]}:{PAUSE_S}:sleep", f"{STEPS[1]}:{PAUSE_S}:read={slowfs}/data"]
    tb = subprocess.Popen([TRAINBPF, "-i", str(INTERVAL_S), "--stall-after", str(THRESHOLD_S),
                           "-o", str(final), "--", SYSTEM_PYTHON, TORCH_JOB,
                           "--truth", str(truth), "--launch", "spawn", "--world-size", "2",
                           "--epochs", "1", "--steps", "110", "--workers", "0",
                           *[a for p in pauses for a in ("--pause", p)], "--pause-rank", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
    lines = []
    threading.Thread(target=read_lines, args=(tb.stdout, lines), daemon=True).start()
    try:
        for n, cat in ((1, "idle"), (2, "io")):
            pause = wait_role(parts, "pause", n, 120, tb)
            rank0 = next(r for r in roles(parts, "rank") if r["rank"] == 0)
            me = check_dump(pause, rank0, slowfs)
            frames = wait_role(parts, "frames", n, 10, tb)
            assert frames["tid"] == pause["tid"] and frames["names"][0] == "pause_here", frames
            assert frames["wchan"] == me["wchan"], (frames, me)
            resume = wait_role(parts, "resume", n, PAUSE_S + 30, tb)
            stalled = [(t, LINE.match(l), l) for t, l in lines
                       if l.startswith("STALLED") and pause["start_mono"] <= t <= resume["mono"]]
            assert stalled, "\n".join(l for _, l in lines[-40:])
            t, m, line = stalled[0]
            assert m, line
            since = t - pause["start_mono"]
            print(f"pause {n} ({pause['how']}): STALLED {since:.2f} s in: {line}")
            # The stall is timed from the rank's last progress, the batch
            # it began before the pause (milliseconds before).
            early = pause["start_mono"] - pause["fetched_mono"]
            assert THRESHOLD_S - early <= since <= THRESHOLD_S + TICK_S + INTERVAL_S + SLACK_S, \
                (since, early)
            assert int(m.group(3)) == pause["pid"] and m.group(5) == cat, line
            if cat == "io":     # the file it waits on, from its syscall's fd
                assert line.endswith(f"waiting in io {m.group(6)} s on {slowfs}/data"), line
            row0 = next(ROW.match(l) for tt, l in lines if tt >= t and ROW.match(l))
            assert int(row0.group(1)) == rank0["pid"] and row0.group(3) == "comm", row0.group(0)
            # Cleared: a table two intervals after it goes on has no STALLED line.
            clear = resume["mono"] + 2 * INTERVAL_S + TICK_S
            while time.monotonic() < clear + INTERVAL_S:
                time.sleep(0.1)
            late = [l for tt, l in lines if tt >= clear and l.startswith("STALLED")]
            assert not late, late
        assert tb.wait(timeout=120) == 0, tb.stderr.read()[-2000:]
        assert not final.read_text().startswith("STALLED")
    finally:
        if tb.poll() is None:
            tb.kill()
            tb.wait()
