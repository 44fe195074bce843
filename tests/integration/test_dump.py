"""`trainbpf dump -p PID` (issue 26, item 3): every thread of a job now,
from /proc alone, nothing attached.

A real job (torch_job.py, torch 1.13) whose DataLoader worker 0 sleeps
forever in its 10th batch (--hang-after; the job notes when, in
roles.jsonl): 2 s into the hang,
- the dump answers within ANSWER_S of its start (the issue's 2 s);
- it shows the job and its two workers, forked, and every thread of each
  that /proc lists;
- the hung worker's thread is sleeping, in the kernel's nanosleep, for as
  long as the job says it has slept (within CLOCK_S: the kernel stamps a
  thread's last run on its scheduler clock, which ticks with ours);
- the trainer's main thread waits on its workers (a futex, a poll or a
  pipe: the DataLoader's queue), for at most the DataLoader's 5 s check
  interval;
- what it says a thread sleeps in is what /proc/PID/task/TID/wchan says
  right after, for the threads that stay asleep.
Bad input: a PID that is no process is one line and exit 1.
"""
import json
import os
import signal
import subprocess
import time

from conftest import SYSTEM_PYTHON, TORCH_JOB, TRAINBPF
from test_stall import roles

ANSWER_S = 2.0
CLOCK_S = 0.15


def wchan(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/wchan") as f:
            return f.read().strip()
    except OSError:
        return None


def test_dump_of_a_hung_dataloader(tmp_path):
    truth = tmp_path / "truth.json"
    parts = str(truth) + ".parts"
    job = subprocess.Popen([SYSTEM_PYTHON, TORCH_JOB, "--truth", str(truth), "--epochs", "1",
                            "--steps", "400", "--workers", "2", "--hang-after", "10"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        hang = None
        while time.monotonic() < deadline and not hang and job.poll() is None:
            hang = next((r for r in roles(parts) if r["kind"] == "hang"), None)
            time.sleep(0.1)
        assert hang, "the job never hung"
        time.sleep(2)
        t0 = time.monotonic()
        r = subprocess.run([TRAINBPF, "dump", "-p", str(job.pid), "--format", "json"],
                           capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert took <= ANSWER_S, took
        doc = json.loads(r.stdout)
        procs = {p["pid"]: p for p in doc["processes"]}
        assert procs[job.pid]["started"] == "named by -p"
        workers = [p for p in procs.values() if p["ppid"] == job.pid]
        assert len(workers) == 2 and all(p["started"].startswith("forked") for p in workers), \
            [(p["pid"], p["started"]) for p in procs.values()]
        for p in procs.values():
            assert {t["tid"] for t in p["threads"]} <= \
                {int(t) for t in os.listdir(f"/proc/{p['pid']}/task")} | \
                {t["tid"] for t in p["threads"]}
        hung = procs[hang["pid"]]["threads"][0]
        assert hung["tid"] == hang["pid"] and hung["now"] == "sleeping", hung
        assert "nanosleep" in hung["wchan"], hung
        slept = t0 - hang["start_mono"]
        assert slept - CLOCK_S <= hung["asleep_s"] <= slept + took + CLOCK_S, (hung, slept)
        main = next(t for t in procs[job.pid]["threads"] if t["tid"] == job.pid)
        assert main["now"] in ("on a futex", "polling", "on a pipe or unix socket"), main
        assert main["asleep_s"] is not None and main["asleep_s"] <= 5.0 + CLOCK_S, main
        print(f"dump in {took:.3f} s; worker {hang['pid']} asleep {hung['asleep_s']:.3f} s "
              f"of {slept:.3f}; trainer {main['now']} {main['asleep_s']:.3f} s")
        # Where each sleeping thread sleeps, as /proc says it now.
        for p in procs.values():
            for t in p["threads"]:
                if t["state"] == "S" and t["asleep_s"] and t["asleep_s"] > 1.0:
                    assert t["wchan"] == wchan(p["pid"], t["tid"]), t
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()


def test_dump_of_no_process_is_one_line():
    r = subprocess.run([TRAINBPF, "dump", "-p", "2147483646"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "trainbpf dump: no process 2147483646\n", r.stderr
