"""The state-transition stream (--states-out, user/acquire/states.c) against the
report's own totals.

Every interval a thread closes goes out as one record (a lock wait whose
critical path splits over several categories as consecutive pieces), so:
- per thread, the records tile its traced life: each starts where the
  previous one ended, none overlap;
- per thread and category, they sum to the report's time_s and
  critical_path_s to the nanosecond (the report prints ns: %.9f s), for a
  thread that exited before the report;
- for a thread still alive when the report is made, the report adds the
  interval still open at that moment, [since, report time), in one
  category of each view (account.c): the difference between report and
  stream is that one interval, whose end is the same instant for every
  thread (the TSV's trailer gives it: report_ns). since is a record
  boundary, the last one BPF had written when the slot was read: not
  always the last before report_ns, as one event may close pieces of
  time that ended before it (a wake's piece up to the enqueue, a lock
  wait's critical-path pieces).
"""
import collections
import json
import subprocess

import pytest

from conftest import (DDP_TRAIN, SYSTEM_PYTHON, disk_dir, run_trainbpf,
                      threads_by_tid, workload)

CATS = ["cpu", "gpu_wait", "comm", "data_wait", "io", "runqueue", "lock", "idle"]
# What test_accuracy.py's truth says each mixed thread blocks in.
BLOCKED_AS = {"tb_io": "io", "tb_sleep": "idle", "tb_pipe": "data_wait",
              "tb_futex": "lock", "tb_net": "comm"}


def read_tsv(path):
    """Returns ({tid: [(start, end, cat, cp_cat, pid)]}, trailer dict); the
    trailer's "kernel_skew_ns" is {tid: ns}."""
    recs, trailer, skews = collections.defaultdict(list), {}, {}
    with open(path) as f:
        assert f.readline() == "tid\tpid\tstart_ns\tend_ns\tcat\tcp_cat\n"
        for line in f:
            if line.startswith("#"):
                kv = dict(kv.split("=") for kv in line[1:].split())
                if "kernel_skew_ns" in kv:
                    skews[int(kv["tid"])] = int(kv["kernel_skew_ns"])
                else:
                    trailer = kv
                continue
            tid, pid, a, b, cat, cp = line.rstrip("\n").split("\t")
            assert cat in CATS and cp in CATS, line
            recs[int(tid)].append((int(a), int(b), cat, cp, int(pid)))
    for r in recs.values():
        r.sort()
    return recs, {**{k: int(v) for k, v in trailer.items()}, "kernel_skew_ns": skews}


def trace_with_states(tmp_path, cmd, *extra):
    out, tsv = tmp_path / "r.json", tmp_path / "states.tsv"
    r = run_trainbpf(["-i", "0", "--format", "json", "-o", str(out),
                      "--states-out", str(tsv), *extra, "--", *cmd], timeout=180)
    assert r.returncode == 0, r.stderr
    recs, trailer = read_tsv(tsv)
    return json.loads(out.read_text()), recs, trailer, r


def ns(seconds):
    return round(seconds * 1e9)


def sums(recs):
    own, cp = collections.Counter(), collections.Counter()
    for a, b, cat, cpc, _ in recs:
        own[cat] += b - a
        cp[cpc] += b - a
    return own, cp


def check_tiling(tid, recs):
    for (a0, b0, *_), (a1, b1, *_) in zip(recs, recs[1:]):
        assert a0 < b0, f"{tid}: empty or reversed interval {a0}..{b0}"
        assert b0 == a1, f"{tid}: {'gap' if b0 < a1 else 'overlap'} at {b0} / {a1}"


def check_exact(t, recs):
    """A thread that exited before the report: the stream is its books."""
    check_tiling(t["tid"], recs)
    own, cp = sums(recs)
    for c in CATS:
        assert own[c] == ns(t["time_s"][c]), (t["comm"], c, own[c], t["time_s"][c])
        assert cp[c] == ns(t["critical_path_s"][c]), (t["comm"], c, cp[c])
    assert recs[-1][1] - recs[0][0] == ns(t["lifetime_s"])


def test_stream_is_the_report_interval_by_interval(tmp_path):
    truth_path = tmp_path / "truth.json"
    report, recs, trailer, r = trace_with_states(
        tmp_path, [workload("mixed"), "-d", "3", "-o", str(truth_path), "-D", disk_dir()])
    truth = json.loads(truth_path.read_text())
    tids = threads_by_tid(report)
    assert report["counters"]["states_lost"] == 0 and trailer["states_lost"] == 0
    assert "state intervals lost" not in r.stderr
    assert set(recs) == set(tids), "a thread with no record, or a record with no thread"
    for tid, (p, t) in tids.items():
        assert t["lifetime_s"] > 0 and all(x[4] == p["pid"] for x in recs[tid])
        check_exact(t, recs[tid])
    for tt in truth["threads"]:
        blocked = BLOCKED_AS.get(tt["name"])
        if blocked:
            own, _ = sums(recs[tt["tid"]])
            # The kind of wait the thread was built for is most of its waits.
            assert own[blocked] > 0.5 * sum(v for c, v in own.items()
                                            if c not in ("cpu", "runqueue"))
    # The futex thread's waits are on traced threads: split pieces, exact in sum.
    assert any(x[2] == "lock" for x in recs[next(
        tt["tid"] for tt in truth["threads"] if tt["name"] == "tb_futex")])


# Records one BPF event closes at most: the wake's piece and the runqueue
# wait at a switch-in, or a lock wait's pieces (one per category).
BACK = len(CATS) + 2


def test_report_of_a_live_job_is_stream_plus_open_interval(tmp_path):
    # trainbpf stops after 1.5 s; the job runs on, its threads alive.
    report, recs, trailer, _ = trace_with_states(
        tmp_path, [workload("mixed"), "-d", "4", "-o", str(tmp_path / "t.json"),
                   "-D", disk_dir()], "-d", "1.5")
    cut = trailer["report_ns"]
    open_seen = 0
    for tid, (_, t) in threads_by_tid(report).items():
        r = recs[tid]
        check_tiling(tid, r)
        before = [x for x in r if x[1] <= cut]
        after = [x for x in r if x[1] > cut]
        # The report holds what BPF had closed when the slot was read, and
        # the open interval from there to the cut. Where that interval
        # began is a record boundary, but not always the last before the
        # cut: an event after the read may close pieces that end before it
        # (switch_in ends a wake at the enqueue, a lock wait is split by
        # its waker's critical path). The read comes a moment after
        # report_ns too: an interval closed in between is in it whole.
        candidates = [(before[:i], cut - before[i - 1][1])
                      for i in range(len(before), max(len(before) - BACK, 0), -1)]
        if len(before) < BACK:
            candidates.append(([], cut - r[0][0]))
        if after:
            candidates.append((before + after[:1], 0))
        ok, tried = False, []
        for got, open_ns in candidates:
            own, cp = sums(got)
            d_own = {c: ns(t["time_s"][c]) - own[c] for c in CATS}
            d_cp = {c: ns(t["critical_path_s"][c]) - cp[c] for c in CATS}
            nz_own = [v for v in d_own.values() if v]
            nz_cp = [v for v in d_cp.values() if v]
            tried.append((open_ns, {c: v for c, v in d_own.items() if v},
                          {c: v for c, v in d_cp.items() if v}))
            if (sum(d_own.values()) == open_ns == sum(d_cp.values()) and
                    len(nz_own) <= 1 and len(nz_cp) <= 1 and
                    all(v >= 0 for v in nz_own + nz_cp)):
                ok = True
                open_seen += open_ns > 0
                break
        assert ok, (t["comm"], tid, cut, before[-BACK:], after[:2], tried[:3])
    # The job outlived trainbpf: its threads had intervals open at the cut.
    assert open_seen >= 5


def test_short_threads_keep_exact_books(tmp_path):
    # ~50k threads of 0.1 ms, born and dead between refreshes.
    truth_path = tmp_path / "truth.json"
    report, recs, trailer, _ = trace_with_states(
        tmp_path, [workload("threadstorm"), "-d", "3", "-o", str(truth_path)])
    assert trailer["states_lost"] == 0
    seen = collections.Counter(t["tid"] for p in report["processes"] for t in p["threads"])
    checked = 0
    for p in report["processes"]:
        for t in p["threads"]:
            if seen[t["tid"]] == 1:	# a reused tid mixes two threads' records
                check_exact(t, recs[t["tid"]])
                checked += 1
    assert checked > 0.9 * len(seen)


def test_a_full_ring_counts_and_reports_its_losses(tmp_path):
    report, recs, trailer, r = trace_with_states(
        tmp_path, [workload("mixed"), "-d", "2", "-o", str(tmp_path / "t.json"),
                   "-D", disk_dir()], "--states-ring", "4")
    lost = report["counters"]["states_lost"]
    assert lost > 0
    assert f"warning: {lost} state intervals lost (state stream ring full" in r.stderr
    assert trailer["states_lost"] >= lost
    # Its own ring: lifecycle events do not suffer, and the totals are whole.
    assert report["counters"]["events_lost"] == 0
    for p in report["processes"]:
        for t in p["threads"]:
            assert abs(sum(t["time_s"].values()) - t["lifetime_s"]) < 1e-6
    # What did arrive is whole records that still never overlap.
    for tid, rr in recs.items():
        for (a0, b0, *_), (a1, *_) in zip(rr, rr[1:]):
            assert a0 < b0 <= a1


@pytest.mark.skipif(subprocess.run([SYSTEM_PYTHON, "-c", "import torch"]).returncode != 0,
                    reason="python3-torch not installed")
def test_a_real_pytorch_job_keeps_exact_books(tmp_path):
    # Forked DataLoader workers, gloo threads, pools: nobody here wrote it.
    report, recs, trailer, _ = trace_with_states(
        tmp_path, [SYSTEM_PYTHON, DDP_TRAIN, "--world-size", "1", "--epochs", "1"])
    assert trailer["states_lost"] == 0 and report["counters"]["states_lost"] == 0
    tids = threads_by_tid(report)
    assert len(tids) >= 10
    for tid, (_, t) in tids.items():
        check_exact(t, recs[tid])
    # Waits on traced threads were split on the critical path: the rank's
    # main thread waited on its workers (data_wait) and pieces of lock.
    assert any(x[2] == "data_wait" for r in recs.values() for x in r)


def test_probed_gpu_regions_keep_exact_books(tmp_path):
    # CUDA sync and NCCL calls of the stand-in libraries, spinning: the
    # uprobes close intervals too (entry as cpu, return as the region).
    report, recs, trailer, _ = trace_with_states(
        tmp_path, [workload("gpujob"), "--truth", str(tmp_path / "t.json"),
                   "--steps", "10", "--mode", "spin", "--cpu-us", "1000",
                   "--sync-us", "20000", "--nccl-us", "20000", "--threads", "2",
                   "--wait-probes", "20000"])
    assert trailer["states_lost"] == 0
    for tid, (_, t) in threads_by_tid(report).items():
        check_exact(t, recs[tid])
    cats = {x[2] for r in recs.values() for x in r}
    assert {"gpu_wait", "comm"} <= cats
