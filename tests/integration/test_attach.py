"""Attaching to processes that already run (-p), and their lifecycles."""
import json
import os
import signal
import subprocess
import time

from conftest import TRAINBPF, disk_dir, run_trainbpf, threads_by_tid, workload
from test_accuracy import BLOCKED_AS


def start_mixed(tmp_path, duration):
    out = tmp_path / "truth.json"
    proc = subprocess.Popen([workload("mixed"), "-d", str(duration), "-o", str(out),
                             "-D", disk_dir()])
    time.sleep(0.7)  # threads and the feeder child exist by now
    return proc, out


def test_attach_finds_threads_and_children(tmp_path):
    # The job must outlive the attach (its feeder child exits with it):
    # about 2 s on this machine alone, over 3 s with the other cores busy.
    proc, out = start_mixed(tmp_path, 6)
    r = run_trainbpf(["-i", "0", "--format", "json", "-p", str(proc.pid)])
    proc.wait()
    assert r.returncode == 0, r.stderr  # the target exiting is no error
    report, truth = json.loads(r.stdout), json.loads(out.read_text())
    pids = {p["pid"]: p for p in report["processes"]}
    assert truth["feeder_pid"] in pids, "existing child not traced"
    assert pids[truth["feeder_pid"]]["role"] == "worker"
    tids = threads_by_tid(report)
    for tt in truth["threads"]:
        _, t = tids[tt["tid"]]
        total = sum(t["time_s"].values())
        assert abs(total - t["lifetime_s"]) < 1e-6 * max(total, 1)
        if tt["name"] == "tb_spin":
            assert max(t["time_s"], key=t["time_s"].get) == "cpu", t["time_s"]
            continue
        # Of what it spent off a CPU, the kind of wait it was built for is
        # most. Not of its whole time: how much CPU an O_DIRECT read costs
        # beside its wait is the machine's (CI's storage made tb_io mostly
        # cpu), and test_accuracy holds the cpu share to schedstat.
        blocked = {c: v for c, v in t["time_s"].items() if c not in ("cpu", "runqueue")}
        want = BLOCKED_AS[tt["name"]]
        assert blocked[want] > 0.5 * sum(blocked.values()), (tt["name"], t["time_s"])
    # The window starts at attach: lifetimes are shorter than the run.
    assert all(p["start_s"] >= 0 for p in report["processes"])


def test_thread_without_events_is_accounted(tmp_path):
    # sleep blocks the whole window: no scheduler event ever names it, so
    # its time comes from schedstat and /proc/PID/syscall.
    proc = subprocess.Popen(["sleep", "30"])
    try:
        r = run_trainbpf(["-i", "0", "--format", "json", "-d", "1", "-p", str(proc.pid)])
    finally:
        proc.kill()
        proc.wait()
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)["processes"][0]["threads"][0]
    assert 0.9 <= t["lifetime_s"] <= 1.5
    assert t["time_s"]["idle"] >= 0.99 * t["lifetime_s"]


def test_exec_keeps_tracing(tmp_path):
    script = f"sleep 0.3; exec {workload('mixed')} -d 1 -o {tmp_path}/t.json -D {disk_dir()}"
    r = run_trainbpf(["-i", "0", "--format", "json", "--", "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    root = report["processes"][0]
    assert root["comm"] == "mixed"          # renamed by exec
    names = {t["comm"] for t in root["threads"]}
    assert {"tb_spin", "tb_io"} <= names     # threads started after exec
    assert any(p["comm"] == "sleep" for p in report["processes"][1:])


def test_launch_exit_status_is_the_commands():
    r = run_trainbpf(["-i", "0", "--", "sh", "-c", "exit 3"])
    assert r.returncode == 3
    assert "Headline" in r.stdout


def test_live_table_fits_80_columns(tmp_path):
    # The truth file goes to tmp_path: the workload renames its output into
    # place, and with -o /dev/null that replaced the device with a file.
    r = run_trainbpf(["-i", "0.5", "--", workload("mixed"), "-d", "1.6",
                      "-o", str(tmp_path / "truth.json"), "-D", disk_dir()])
    assert r.returncode == 0, r.stderr
    live = r.stdout.split("trainbpf 0.")[0]
    assert live.count(" ROLE ") >= 2
    assert max(len(l) for l in live.splitlines()) <= 80
    assert "headline, 1 trainer: computation" in live
