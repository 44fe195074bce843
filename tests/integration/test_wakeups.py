"""Wakeups across CPUs, tens of thousands a second, against bpftrace.

trainbpf ends a wait at the waker's sched_waking, where it learns who woke
the thread, and gives the time from there to the enqueue back to the wait
at the switch-in (docs/model.md): the enqueue is where a wait for a CPU
starts. A wakeup sent to another CPU spends microseconds between the two
(tens on this VM when the vCPU has to be woken by the host); counted as
runqueue, the 25,000-odd wakeups a second of tests/workloads/pingpong.c
(a thread and a worker process, pinned to CPUs 0 and 1, handing a byte
back and forth) would move a third of each thread's life from its wait to
runqueue. Some wakings also come while the wakee is still on its way to
sleep (its partner answers that fast); those waits end at the switch-in,
at the enqueue the kernel recorded.

The reference is bpftrace timing the enqueue itself: sched_wakeup fires
right after it, on the wakee's CPU, under its runqueue lock. Not
schedstat: when a wakeup preempts (waking an idle CPU does), schedule()
skips its clock update (rq_clock_skip_update) and run_delay misses the
time from the enqueue to the switch-in, which schedstat gives to the
task's CPU time instead (test_schedstat.py's skew).

Tolerance, per wakeup (PER_WAKEUP): trainbpf places the enqueue by the
runqueue clock's reading at it (sched_info.last_queued), earlier than
sched_wakeup by the enqueue's own work, plus the offset between that clock
and its own, which it takes as the least seen at a switch (later than the
true offset by the quickest pick); bpftrace stamps the wakeup after the
enqueue and after trainbpf's and its own programs for it. A microsecond
or two each way on this VM; with the mistake this test exists for, 20 us
or more. Plus 2 ms per thread for the tails the tools see differently
(the renames that start bpftrace's view, the exit).
"""
import json

from conftest import threads_by_tid, trace_json_beside_bpftrace, workload

PER_WAKEUP = 3e-6
TAILS = 0.002
WAIT = {"tb_ping": "data_wait", "tb_pong": "lock"}

# Runnable from the enqueue (sched_wakeup) or a preemption (a switch-out
# still TASK_RUNNING: prev_state 0, or TASK_REPORT_MAX) to the switch-in;
# blocked from a sleeping switch-out to the enqueue. A wakeup of a thread
# not yet switched out (woken as it went to sleep) leaves it running: its
# switch-out decides again.
SCRIPT = r'''
tracepoint:sched:sched_wakeup /strncmp(args->comm, "tb_p", 4) == 0/ {
    if (@slept[args->pid]) {
        @blk[args->pid] += nsecs - @slept[args->pid];
        delete(@slept[args->pid]);
    }
    @queued[args->pid] = nsecs;
    @wakeups[args->pid] += 1;
}
tracepoint:sched:sched_switch /strncmp(args->prev_comm, "tb_p", 4) == 0/ {
    if ((args->prev_state & 0xff) == 0) {
        @queued[args->prev_pid] = nsecs;
    } else {
        delete(@queued[args->prev_pid]);
        @slept[args->prev_pid] = nsecs;
    }
}
tracepoint:sched:sched_switch /strncmp(args->next_comm, "tb_p", 4) == 0/ {
    if (@queued[args->next_pid]) {
        @rq[args->next_pid] += nsecs - @queued[args->next_pid];
        delete(@queued[args->next_pid]);
    }
}
'''


def test_cross_cpu_wakeups_match_bpftrace(tmp_path):
    out = tmp_path / "truth.json"
    report, maps = trace_json_beside_bpftrace(
        tmp_path, SCRIPT, [workload("pingpong"), "-d", "3", "-o", str(out)])
    rq, blk, wakeups = maps.get("rq", {}), maps.get("blk", {}), maps.get("wakeups", {})
    truth = json.loads(out.read_text())
    tids = threads_by_tid(report)
    for tt in truth["threads"]:
        tid = tt["tid"]
        ours = tids[tid][1]["time_s"]
        n = wakeups.get(tid, 0)
        tol = TAILS + PER_WAKEUP * n
        what = f"{tt['name']} ({n} wakeups, life {(tt['end_ns'] - tt['start_ns']) / 1e9:.3f}s)"
        assert n > 1000, f"{what}: too few wakeups to tell anything"
        assert abs(ours["runqueue"] - rq.get(tid, 0) / 1e9) <= tol, \
            f"{what}: runqueue {ours['runqueue']:.4f}s vs bpftrace {rq.get(tid, 0) / 1e9:.4f}s"
        wait = WAIT[tt["name"]]
        assert abs(ours[wait] - blk.get(tid, 0) / 1e9) <= tol, \
            f"{what}: {wait} {ours[wait]:.4f}s vs bpftrace {blk.get(tid, 0) / 1e9:.4f}s ({ours})"
