"""Wakeups across CPUs, tens of thousands a second, against schedstat.

trainbpf ends a wait at the waker's sched_waking, where it learns who woke
the thread, and gives the time from there to the enqueue back to the wait
at the switch-in (docs/model.md): the kernel counts run_delay from the
enqueue. A wakeup sent to another CPU, idle or not, spends microseconds
between the two (tens on this VM when the vCPU has to be woken by the
host); counted as runqueue, the 30,000-odd wakeups a second of
tests/workloads/pingpong.c would move several points of each thread's life
from its wait to runqueue. Some wakings also come while the wakee is still
on its way to sleep (its partner answers that fast); those waits end at
the switch-in, at the enqueue the kernel recorded.

Tolerance, as in test_schedstat.py: 2 points of the thread's life for
each figure, plus the host's steal during the run (all CPUs together) where
the vCPU can be stolen from a running thread (cpu to trainbpf, to neither
of schedstat's figures). Both threads are pinned, each to its own CPU, so
no wakeup preempts (the other CPU is idle but for its partner): the
rq_clock_skip_update skew of test_schedstat.py does not arise.

The truth is the kernel's: life from the thread's first to last
instruction, cpu and runqueue from its schedstat read last, and the rest
(life - cpu - runqueue) blocked in read(2), which is the one wait each
thread has: tb_ping is fed by a worker process (data_wait), tb_pong by
its parent's thread (lock).
"""
import json

from conftest import steal_s, threads_by_tid, trace_json, workload

TOL_PP = 2.0
WAIT = {"tb_ping": "data_wait", "tb_pong": "lock"}


def test_cross_cpu_wakeups_match_schedstat(tmp_path):
    out = tmp_path / "truth.json"
    steal0 = steal_s()
    report, _ = trace_json([workload("pingpong"), "-d", "3", "-o", str(out)])
    steal = steal_s() - steal0
    truth = json.loads(out.read_text())
    tids = threads_by_tid(report)
    for tt in truth["threads"]:
        _, t = tids[tt["tid"]]
        ours = t["time_s"]
        life = (tt["end_ns"] - tt["start_ns"]) / 1e9
        cpu, rq = tt["cpu_ns"] / 1e9, tt["rq_ns"] / 1e9
        blocked = life - cpu - rq
        tol = TOL_PP / 100 * life
        what = f"{tt['name']} ({tt['calls']} wakeups, life {life:.3f}s, steal {steal:.3f}s)"
        assert tt["calls"] > 1000, f"{what}: too few wakeups to tell anything"
        assert abs(ours["runqueue"] - rq) <= tol + steal, \
            f"{what}: runqueue {ours['runqueue']:.4f}s vs run_delay {rq:.4f}s"
        assert abs(ours["cpu"] + ours["runqueue"] - cpu - rq) <= tol + steal, \
            f"{what}: cpu+runqueue {ours['cpu'] + ours['runqueue']:.4f}s vs {cpu + rq:.4f}s"
        wait = WAIT[tt["name"]]
        assert abs(ours[wait] - blocked) <= tol + steal, \
            f"{what}: {wait} {ours[wait]:.4f}s vs blocked {blocked:.4f}s ({ours})"
