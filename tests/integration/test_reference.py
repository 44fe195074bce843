"""On-CPU time against a reference tool: bpftrace summing each thread's
sched_switch-in to sched_switch-out intervals.

This is the check that separates trainbpf's errors from the kernel's:
schedstat moves a switch back to the wakeup when a wakeup preempts (see
test_schedstat.py), bpftrace timestamps the switch itself, as trainbpf
does. bpftrace follows threads named mixed or tb_* (they rename themselves
as they start). Tolerance: 1% + 2 ms per thread (the exit tail after
trainbpf's exit tracepoint is inside bpftrace's sums, not trainbpf's).
"""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import disk_dir, threads_by_tid, trace_json, workload

SCRIPT = r'''
tracepoint:sched:sched_switch /strncmp(args->next_comm, "tb_", 3) == 0 || args->next_comm == "mixed"/ {
    @in[args->next_pid] = nsecs;
}
tracepoint:sched:sched_switch /(strncmp(args->prev_comm, "tb_", 3) == 0 || args->prev_comm == "mixed") && @in[args->prev_pid]/ {
    @cpu[args->prev_pid] += nsecs - @in[args->prev_pid];
    delete(@in[args->prev_pid]);
}
'''


def ensure_tracefs():
    if not os.path.exists("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=True)


def wait_attached(bt, timeout=120):
    """Until bpftrace holds its two programs (compiling can take a while
    on a cold machine): its fds' fdinfo name them."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert bt.poll() is None, bt.stderr.read()
        progs = 0
        for fd in os.listdir(f"/proc/{bt.pid}/fdinfo"):
            try:
                with open(f"/proc/{bt.pid}/fdinfo/{fd}") as f:
                    progs += any(l.startswith("prog_id:") for l in f)
            except OSError:
                pass
        if progs >= 2:
            return
        time.sleep(0.1)
    raise AssertionError("bpftrace did not attach")


@pytest.mark.parametrize("hogs", [0, 3])
def test_oncpu_matches_bpftrace(tmp_path, hogs):
    ensure_tracefs()
    script = tmp_path / "oncpu.bt"
    script.write_text(SCRIPT)
    bt = subprocess.Popen(["bpftrace", str(script)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        wait_attached(bt)
        out = tmp_path / "truth.json"
        report, _ = trace_json([workload("mixed"), "-d", "3", "-o", str(out),
                                "-D", disk_dir(), "-c", str(hogs)])
    finally:
        bt.send_signal(2)
        stdout, _ = bt.communicate(timeout=120)
    ref = {int(t): int(ns) for t, ns in re.findall(r"@cpu\[(\d+)\]: (\d+)", stdout)}
    truth = json.loads(out.read_text())
    tids = threads_by_tid(report)
    for tt in truth["threads"]:
        ours = tids[tt["tid"]][1]["time_s"]["cpu"]
        theirs = ref.get(tt["tid"], 0) / 1e9
        assert abs(ours - theirs) <= 0.01 * theirs + 0.002, \
            f"{tt['name']}: trainbpf {ours:.4f}s, bpftrace {theirs:.4f}s"
