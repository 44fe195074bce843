"""Everything trainbpf keeps is bounded: a soak of steady births, and a
report on a recording of 200,000 processes.

The goal (an always-on monitor): a 1-hour soak at 50 process and thread
births per second keeps trainbpf's RSS <= 64 MB, flat after the first
minute, and trainbpf <= 2% of a core. The suite cannot spend an hour, so
it runs SOAK_S and derives its thresholds from that goal:

- An exited process keeps its row 10 s (JOB_FOLD_AGE_NS), the last 256
  whatever their age, then is folded: from there on, what trainbpf holds
  stops growing (the allocator settles within a few tens of seconds).
  The goal says flat after the first minute: the steady window starts at
  STEADY_FROM_S = 60 s.
- RSS is VmRSS with each BPF ring buffer counted once at its full size
  (VmRSS counts its pages twice, as they are first written: record mode's
  16 MB state ring reads as up to 32 MB, growing for most of an hour at
  this rate; see ring_adjust_kb).
- RSS: its growth in the steady window, projected over the rest of the
  hour from the last sample, must stay <= 64 MB. A trend recurs: the growth
  is the lesser of the two halves' of the window, so that a rise made once
  (a 0.34 MB one at 62 s of a record soak, flat to 100 s, was read as
  9 kB/s: 89 MB at 1 h, in one CI run) is not projected, while a leak,
  which rises in both, is. Within each half, a rise of STEP_MB or
  more within STEP_S samples in a row is the allocator settling (the heap,
  SQLite's page cache growing by a block), not a trend: in a 300 s record
  soak RSS rose 1 MB a step in the first 50 s, once more at 130 s (1.1 MB)
  and not again to 300 s; the hour-long live soak stepped once after the
  first minute, at 745 s (bench/RESULTS.md). At most MAX_STEPS such steps
  in the window; the rest of the growth is projected. (A least-squares
  slope over these 40 s read the 130 s kind of step as 24 kB/s: 129 MB at
  1 h, in one CI run of three.) Before the fix the slope was 14 MB/s with
  the default --epochs auto (every fork made an epoch, and each epoch a
  table as long as the process list: 620 MB after 70 s), and ~10 kB per
  process seen with interval epochs: a ramp, rising at every sample.
- CPU: per-tick work must not grow with what was seen: trainbpf's own
  user+sys time (ticks of 10 ms, from /proc/PID/stat) over the second half
  of the steady window may cost at most 1.5x the first, plus 0.3 points
  (the tick resolution over half the window is 0.08 points; the rest is
  load from other tests on this 2-core machine). Before the fix the CPU
  grew with the square of the processes seen (the roles were judged
  pairwise). The goal's absolute figure (<= 2% of a core) is a benchmark's,
  not this test's: bench/soak.sh measures it over an hour (RESULTS.md).
  A 40 s window on this VM cannot tell 2% from 1.3%: the same build's
  record soak cost 1.35% here and 2.42% in a CI run whose suite took as
  long as here, and 20 s blocks of one 160 s soak spread 1.32-2.34%.

The report: a 24-hour recording with 200,000 short-lived processes and
1,440 interval epochs (recording_fixture.make_many_procs; ~600,000 rows)
must be read and reported in REPORT_BOUND_S. Reading is one pass over the
rows plus sorting: bench/report_time.sh reads 360,000 sample rows in
~0.2 s, so ~1 s is expected; 10 s leaves room for a loaded 2-core VM.
Before the fix, the time grew with the square of the processes (linear
pid lookups per thread, per-epoch tables as large as the process list):
20,000 processes took 15 s, 200,000 more than 100 s.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import TRAINBPF, run_trainbpf, workload
import recording_fixture as rf

SOAK_S = 100
STEADY_FROM_S = 60
RATE = 25                    # processes/s, and as many threads/s: 50 births/s
GOAL_RSS_MB = 64
STEP_MB = 0.5       # a rise this large within STEP_S: the allocator settling
STEP_S = 3
MAX_STEPS = 2
HOUR_S = 3600
REPORT_BOUND_S = 10.0


def ring_adjust_kb(pid):
    """What to add to VmRSS (kB) to count each BPF ring buffer once and
    whole. Its data pages are mapped twice in a row (the read-only
    "anon_inode:bpf-map" mapping, so that a record can wrap): VmRSS counts
    each page twice, and only once it is touched, so a ring that fills
    slowly (record mode's 16 MB state ring at this soak's rate takes most
    of an hour to wrap) reads as RSS growing up to twice its size. Counted
    at its full size once, it is the fixed cost it is."""
    kb, ring, size = 0, False, 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if len(head) >= 6 and "-" in head[0] and ":" not in head[0]:
                ring = head[1] == "r--s" and head[5] == "anon_inode:bpf-map"
            elif ring and line.startswith("Size:"):
                size = int(head[1])
            elif ring and line.startswith("Rss:"):
                kb += (size - 4) // 2 - int(head[1])    # a producer page, data twice
    return kb


def proc_sample(pid):
    """(utime+stime in s, RSS in MB with the ring buffers counted once and
    whole) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
        rss += ring_adjust_kb(pid)
    except (OSError, StopIteration):
        return None
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK"), rss / 1024


def soak_start(args, out_dir):
    """Starts trainbpf with args over its own soak workload; live tables
    go to stderr: a file, never a pipe nobody reads."""
    truth = out_dir / "truth.json"
    cmd = [TRAINBPF, *args, "--", workload("soak"), "-d", str(SOAK_S), "-p", str(RATE),
           "-t", str(RATE), "-o", str(truth)]
    with open(out_dir / "stderr.txt", "w") as err:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)


def soak(runs):
    """Runs trainbpf once per (args, out_dir) of runs, each over its own
    soak workload, side by side (the two soaks are the suite's longest
    tests: run one after the other they took 200 s), and samples each
    every second. Returns, per run, (samples [(t, cpu_s, rss_mb)], truth).
    Each trainbpf traces its own workload only; the other's births are
    load on the machine, as other tests' were when they ran alone."""
    procs = [soak_start(args, out_dir) for args, out_dir in runs]
    t0, samples = time.monotonic(), [[] for _ in procs]
    try:
        while any(p.poll() is None for p in procs) and time.monotonic() - t0 < SOAK_S + 60:
            for p, got in zip(procs, samples):
                s = proc_sample(p.pid) if p.poll() is None else None
                if s and time.monotonic() - t0 <= SOAK_S:
                    got.append((time.monotonic() - t0, *s))
            time.sleep(1)
        for p in procs:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    out = []
    for p, got, (_, out_dir) in zip(procs, samples, runs):
        err = (out_dir / "stderr.txt").read_text()
        assert p.returncode == 0, err[-2000:]
        out.append((got, json.loads((out_dir / "truth.json").read_text())))
    return out


def alloc_steps(rss):
    """The rises of at least STEP_MB made within STEP_S samples in a row
    (a block the allocator or SQLite took, caught between two samples or
    across three); a leak rises a little at most samples, in runs longer
    than that."""
    steps, i = [], 1
    while i < len(rss):
        j = i
        while j < len(rss) and rss[j] > rss[j - 1]:
            j += 1
        if j > i and j - i <= STEP_S and rss[j - 1] - rss[i - 1] >= STEP_MB:
            steps.append(rss[j - 1] - rss[i - 1])
        i = j + 1 if j > i else i + 1
    return steps


def growth(part):
    """(MB/s besides the allocator's steps, the steps) over part, a run of
    (t, cpu_s, rss_mb) samples."""
    steps = alloc_steps([r for _, _, r in part])
    return (part[-1][2] - part[0][2] - sum(steps)) / (part[-1][0] - part[0][0]), steps


def check_soak(samples):
    steady = [s for s in samples if s[0] >= STEADY_FROM_S]
    assert len(steady) >= 20, samples
    rss_max = max(r for _, _, r in samples)
    t_end, _, rss_end = steady[-1]
    half = len(steady) // 2
    # A trend recurs: a leak rises in both halves of the window, a rise the
    # allocator makes once (of any size) in one of them only.
    k1, steps1 = growth(steady[:half + 1])
    k2, steps2 = growth(steady[half:])
    k, steps = min(k1, k2), steps1 + steps2
    hour = rss_end + max(k, 0) * (HOUR_S - t_end)
    a, b, c = steady[0], steady[half], steady[-1]
    cpu = 100 * (c[1] - a[1]) / (c[0] - a[0])
    cpu1 = 100 * (b[1] - a[1]) / (b[0] - a[0])
    cpu2 = 100 * (c[1] - b[1]) / (c[0] - b[0])
    print(f"RSS max {rss_max:.1f} MB, end {rss_end:.1f} MB, steps {steps} MB, "
          f"growth besides {k1 * 1024:.2f} then {k2 * 1024:.2f} kB/s, projected at 1 h {hour:.1f} MB; "
          f"CPU {cpu:.2f}% ({cpu1:.2f}%, then {cpu2:.2f}%)")
    assert rss_max <= GOAL_RSS_MB, f"RSS {rss_max:.1f} MB"
    assert len(steps) <= MAX_STEPS, f"RSS stepped {len(steps)} times: {steps} MB"
    # The whole series: whether a rise is settling or a trend shows in its shape.
    series = " ".join(f"{t:.0f}:{r:.2f}" for t, _, r in steady)
    assert hour <= GOAL_RSS_MB, \
        f"RSS grows {k * 1024:.1f} kB/s: {hour:.0f} MB at 1 h (s:MB {series})"
    assert cpu2 <= 1.5 * cpu1 + 0.3, f"CPU per tick grows: {cpu1:.2f}% then {cpu2:.2f}%"


def count(doc):
    """Processes and threads in a JSON report, folded ones counted."""
    np = sum(p.get("folded", 1) for p in doc["processes"])
    nt = sum(t.get("folded", 1) for p in doc["processes"] for t in p["threads"])
    return np, nt


def check_totals(doc, truth):
    np, nt = count(doc)
    # The soak process, its children, its own threads and each child's one.
    assert np == 1 + truth["procs"], (np, truth)
    assert nt == 1 + truth["threads"] + truth["procs"], (nt, truth)
    assert any(p.get("folded") for p in doc["processes"]), "nothing was folded"
    for p in doc["processes"]:
        th = sum(sum(t["time_s"].values()) for t in p["threads"])
        assert abs(th - sum(p["time_s"].values())) <= 1e-6 * max(1, th), p["pid"]


def test_soak_live_and_record(tmp_path):
    live, rec = tmp_path / "live", tmp_path / "record"
    live.mkdir()
    rec.mkdir()
    out, db = live / "r.json", rec / "run.db"
    (s_live, t_live), (s_rec, t_rec) = soak([
        (["-i", "5", "--format", "json", "-o", str(out)], live),
        (["record", "-o", str(db)], rec)])
    check_soak(s_live)
    check_soak(s_rec)
    check_totals(json.loads(out.read_text()), t_live)
    r = run_trainbpf(["report", str(db), "--format", "json"])
    assert r.returncode == 0, r.stderr
    check_totals(json.loads(r.stdout), t_rec)


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("many") / "many.db")
    return path, rf.make_many_procs(path)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_report_200k_processes(many, fmt):
    path, exp = many
    t0 = time.monotonic()
    try:
        r = run_trainbpf(["report", path, "--format", fmt], timeout=3 * REPORT_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"report --format {fmt} ran past {3 * REPORT_BOUND_S:.0f} s")
    took = time.monotonic() - t0
    print(f"report --format {fmt}: {took:.2f} s")
    assert r.returncode == 0, r.stderr
    assert took <= REPORT_BOUND_S, f"{took:.1f} s"
    if fmt != "json":
        return
    doc = json.loads(r.stdout)
    np, nt = count(doc)
    assert np == nt == 1 + exp["workers"]
    tot = {c: sum(p["time_s"][c] for p in doc["processes"]) for c in rf.CATS}
    for c, cat in enumerate(rf.CATS):
        assert abs(tot[cat] - exp["total"][c] / 1e9) < 1e-6 * exp["total"][c] / 1e9 + 1e-9, cat
        assert abs(doc["headline"]["time_s"][cat] - exp["trainer"][c] / 1e9) < 1e-6
    lst = doc["epochs"]["list"]
    assert doc["epochs"]["source"] == "interval" and len(lst) == exp["nep"]
    for e, want in zip(lst, exp["epochs"]):
        got = [sum(p["time_s"][c] for p in e["processes"]) for c in rf.CATS]
        assert all(abs(g - w / 1e9) < 1e-6 for g, w in zip(got, want)), (e["epoch"], got)


def test_soak_check_tells_a_leak_from_a_settling():
    """check_soak on series of the shapes seen: the CI run's one rise, and
    leaks at the smallest rate that breaks the goal in an hour."""
    def series(rss_at):
        return [(t, 0.01 * t, rss_at(t)) for t in range(STEADY_FROM_S, SOAK_S)]
    check_soak(series(lambda t: 58.20 if t < 62 else 58.54))     # once, early
    check_soak(series(lambda t: 58.20 if t < 90 else 58.54))     # once, late
    leaks = [lambda t: 58.2 + 0.004 * t,                        # at every sample
             lambda t: 58.2 + 0.129 * (t // 15),                # a heap block every 15 s
             lambda t: 58.2 + 0.129 * (t // 5)]                 # every 5 s
    for leak in leaks:
        with pytest.raises(AssertionError):
            check_soak(series(leak))
