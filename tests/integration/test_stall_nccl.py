"""A rank stuck in its own subgroup's collective, named by its NCCL calls per
communicator (user/model/stall.c, docs/phases.md "A stalled job").

Two ranks of gpujob on the NCCL stand-in (--comm-init: the same unique ids on
both), each step 9 NCCL data calls on the loop's communicator (deadbeef0102...).
At step S (--stall-at) rank 0 blocks in that step's first ncclAllReduce on it,
and rank 1 makes 3 ncclAllReduce on its own split communicator (color = its
rank: one member) and blocks in a 4th. Both wait inside an NCCL call; in all,
rank 1 entered more calls (9 S + 4 against 9 S + 1), so a rule on totals names
rank 0. Per communicator, rank 1 is one call behind on the shared one: it is
the culprit, and the final JSON report has each communicator's exact count.

Timing: gpujob waits until its probes are in place before it makes its
communicators (--wait-probes), so their ids are seen. Steps are ~6 ms;
--stall-after 2 makes the threshold its floor, 2 s (10 median steps is 60 ms).
The first STALLED line comes no sooner than 2 s after the stall and no later
than the threshold, a tick (0.2 s), the live interval (1 s) and the steps'
period detection (steps are found from the call period at each tick, one more
tick) after it, plus SLACK_S for a loaded host.
"""
import json
import os
import re
import signal
import subprocess
import threading
import time

from conftest import TRAINBPF, workload

STEPS_BEFORE = 150
CALLS_PER_STEP = 9          # 7 collectives, a send and a receive (ncclBcast's inner call is nested)
THRESHOLD_S = 2.0
TICK_S = 0.2
INTERVAL_S = 1.0
SLACK_S = 1.0
SHARED = "deadbeef01020304"
LINE = re.compile(r"^STALLED for ([\d.]+) s .*: culprit rank (\d) \(pid (\d+)\) in (\w+), "
                  r"waiting in (\w+) ([\d.]+) s inside (\w+) \(([\d.]+ \w+)\), 1 NCCL call "
                  r"behind on communicator ([0-9a-f]{16})$")


def stall_rank_cmd(rank, truth):
    """gpujob as rank of 2 that stalls at step STEPS_BEFORE (test_serve.py's too)."""
    return [workload("gpujob"), "--truth", str(truth), "--comm-init", "--rank", str(rank),
            "--nranks", "2", "--steps", "1000000", "--stall-at", str(STEPS_BEFORE),
            "--cpu-us", "2000", "--sync-us", "100", "--nccl-us", "100", "--mode", "sleep",
            "--wait-probes", "60000"]


def start_rank(rank, tmp_path):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2")
    return subprocess.Popen(stall_rank_cmd(rank, tmp_path / f"truth{rank}.json"), env=env,
                            stderr=subprocess.PIPE, text=True)


def read_lines(stream, out):
    for line in stream:
        out.append((time.monotonic_ns(), line.rstrip("\n")))


def comms_of(report, pid):
    proc = next(p for p in report["processes"] if p["pid"] == pid)
    return {c["id"][:16]: c for c in proc["gpu"]["nccl_comms"]}


def test_rank_behind_on_a_communicator(tmp_path):
    ranks = [start_rank(r, tmp_path) for r in (0, 1)]
    out = tmp_path / "final.json"
    tb = subprocess.Popen([TRAINBPF, "-p", f"{ranks[0].pid},{ranks[1].pid}", "-i", "1",
                           "--stall-after", "2", "--format", "json", "-o", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, job_err = [], [[], []]
    readers = [threading.Thread(target=read_lines, args=(tb.stdout, lines), daemon=True)]
    readers += [threading.Thread(target=read_lines, args=(r.stderr, job_err[i]), daemon=True)
                for i, r in enumerate(ranks)]
    for t in readers:
        t.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(l.startswith("STALLED") for _, l in lines):
            assert tb.poll() is None, "\n".join(l for _, l in lines)
            time.sleep(0.1)
        seen = [(t, LINE.match(l), l) for t, l in lines if l.startswith("STALLED")]
        assert seen, "no STALLED line:\n" + "\n".join(l for _, l in lines)
        tb.send_signal(signal.SIGINT)
        assert tb.wait(timeout=60) == 0
    finally:
        if tb.poll() is None:
            tb.kill()
        for r in ranks:
            r.kill()
            r.wait()
    t_seen, m, line = seen[0]
    assert m, line
    assert (int(m.group(2)), int(m.group(3))) == (1, ranks[1].pid), line
    assert m.group(5) == "comm" and m.group(7) == "ncclAllReduce", line
    assert m.group(9) == SHARED, line
    # When each rank stalled, by its own clock (CLOCK_MONOTONIC, as ours).
    stalls = {}
    for i, err in enumerate(job_err):
        for _, l in err:
            s = re.match(r"gpujob: rank (\d) stalls in step \d+ at (\d+)$", l)
            if s:
                stalls[i] = int(s.group(2))
    assert set(stalls) == {0, 1}, job_err
    after_s = (t_seen - max(stalls.values())) / 1e9
    assert THRESHOLD_S <= after_s <= THRESHOLD_S + 2 * TICK_S + INTERVAL_S + SLACK_S, after_s

    report = json.loads(out.read_text())
    stall = report["stall"]
    assert stall["culprit_pid"] == ranks[1].pid
    by_pid = {r["pid"]: r for r in stall["ranks"]}
    assert by_pid[ranks[1].pid]["behind"] == {"communicator": SHARED, "nccl_calls": 1}
    assert by_pid[ranks[0].pid]["behind"] is None
    assert by_pid[ranks[0].pid]["inside"] == "ncclAllReduce"
    # Both block in an ncclAllReduce of 1024 float32 (gpujob.c's stall_here).
    assert by_pid[ranks[0].pid]["inside_bytes"] == by_pid[ranks[1].pid]["inside_bytes"] == 4096
    # Each communicator's data calls, exact (the stand-in's ids: gpujob.c).
    c0, c1 = comms_of(report, ranks[0].pid), comms_of(report, ranks[1].pid)
    assert c0[SHARED]["calls"] == CALLS_PER_STEP * STEPS_BEFORE + 1
    assert c1[SHARED]["calls"] == CALLS_PER_STEP * STEPS_BEFORE
    assert c0["5a5b5c5d5e5f6061"]["calls"] == c1["5a5b5c5d5e5f6061"]["calls"] == 0
    # The splits: one member each (color = rank), so ids of their own.
    split0 = [k for k, c in c0.items() if c["init"] == "ncclCommSplit"]
    split1 = [k for k, c in c1.items() if c["init"] == "ncclCommSplit"]
    assert len(split0) == len(split1) == 1 and split0 != split1
    assert c0[split0[0]]["calls"] == 0 and c1[split1[0]]["calls"] == 4
    # Bytes: count x sizeof(float32) of each call on the split (1024 floats).
    assert c1[split1[0]]["bytes"] == 4 * 1024 * 4
