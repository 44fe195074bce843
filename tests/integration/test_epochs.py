"""Epoch boundaries (--epochs, --epoch-regex) against workloads that know
their own: tests/workloads/epochs (C, main thread only: odd epochs spin,
even epochs sleep, 0.3 s of setup sleep first) and the real PyTorch CPU
job (tests/workloads/ddp_train.py, whose rank 0 prints "Epoch e/E").

Tolerances, from the model:
- Boundaries: within 50 ms of the truth (the issue's bound). The truth is
  the workload's CLOCK_MONOTONIC read right before (and after) the write(2)
  that trainbpf timestamps in the kernel, placed in the report's window by
  a CLOCK_MONOTONIC/CLOCK_REALTIME pair read together; in fact microseconds
  apart.
- Epochs tile the window: before_first_s plus the durations equal
  window.duration_s within 1 ms (the issue's bound), and each epoch's
  headline time sums to its duration times the trainer main threads alive
  through it, within the same 1 ms per thread.
- Per-epoch split: trainbpf knows its totals at its 200 ms refresh ticks
  and interpolates linearly to a boundary inside a tick, so an epoch's
  split is exact up to the part of one tick on each side: at most
  TICK_S of a thread's time misplaced per side. Against the truth (cpu and
  runqueue from the workload's schedstat, the rest of the epoch idle),
  each category may be off by 2 * TICK_S / duration (26.7 points for
  1.5 s epochs: a spin epoch shows >= 73% cpu, a sleep epoch >= 73% idle).
  The last epoch ends at the window's end, where the totals are final (no
  interpolation), but also holds the job's exit (writing its truth file, a
  few ms), well inside that side's tick.
- Steps come from step markers, each timestamped at its write(2), which
  lies between the two clock reads that bracket it in the truth: a step's
  duration lies between the brackets' inner and outer differences, and so
  do count, total, avg, min and max; std differs from the truth's by at
  most the largest bracket width (sqrt(n/(n-1)) more for a sample std).
  A step ends at the next step marker or at its epoch's end; the last
  epoch's end is the window's end, placed by the clock pair (CONV_S).
  Plus REPORT_RES_MS for the report's rounding.
"""
import json
import math
import re
import statistics

import pytest

from conftest import DDP_TRAIN, SYSTEM_PYTHON, run_trainbpf, workload

CATS = ["cpu", "gpu_wait", "comm", "data_wait", "io", "runqueue", "lock", "idle"]
TICK_S = 0.2            # trainbpf's refresh tick
BOUNDARY_TOL_S = 0.05   # the bound on a boundary
SUM_TOL_S = 0.001       # the bound on epochs tiling the window
CONV_S = 0.001          # monotonic -> window: two clock pairs, each read back to back
REPORT_RES_MS = 0.001   # the report's rounding of step statistics (ms)


def trace(tmp_path, cmd, extra=(), timeout=180):
    """Launches cmd under trainbpf, report to a file (the job writes to
    stdout too); returns (report, CompletedProcess)."""
    out = tmp_path / "report.json"
    r = run_trainbpf(["-i", "0", "--format", "json", "-o", str(out), *extra, "--", *cmd],
                     timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text()), r


def run_epochs(tmp_path, *args, extra=()):
    """Runs tests/workloads/epochs under trainbpf; returns (report, truth, stdout)."""
    truth_path = tmp_path / "truth.json"
    report, r = trace(tmp_path, [workload("epochs"), "-o", str(truth_path), *args], extra)
    return report, json.loads(truth_path.read_text()), r.stdout


def window_s(report, truth, mono_ns):
    """A CLOCK_MONOTONIC time of the workload, in seconds from the window's start."""
    mono0, unix0 = truth["mono_at_unix"]
    return (mono_ns - mono0) / 1e9 + (unix0 / 1e9 - report["window"]["start_unix_s"])


def check_tiling(report):
    """Epochs follow one another from before_first_s to the window's end,
    or to where a tail begins (after_last_s: the teardown after a PyTorch
    loop's last step, or after the last epoch's summary line)."""
    ep = report["epochs"]
    lst = ep["list"]
    win = report["window"]["duration_s"]
    tail = ep["after_last_s"]
    assert lst, ep
    assert ep["before_first_s"] >= 0 and tail >= 0, ep
    assert abs(ep["before_first_s"] + sum(e["duration_s"] for e in lst) + tail - win) \
        <= SUM_TOL_S, (ep["before_first_s"], [e["duration_s"] for e in lst], tail, win)
    assert abs(lst[0]["start_s"] - ep["before_first_s"]) <= SUM_TOL_S
    for a, b in zip(lst, lst[1:]):
        assert abs(a["end_s"] - b["start_s"]) <= SUM_TOL_S, (a, b)
    assert abs(lst[-1]["end_s"] + tail - win) <= SUM_TOL_S, (lst[-1], tail, win)
    for e in lst:
        assert abs(e["end_s"] - e["start_s"] - e["duration_s"]) <= SUM_TOL_S, e
    # Ended by the next boundary, except the last: by the window's end, or,
    # complete, at the last step of a loop whose processes all exited (a tail).
    assert [e["complete"] for e in lst] == [True] * (len(lst) - 1) + [tail > 0], (tail, lst)
    for e in lst:
        assert set(e["time_s"]) == set(CATS) == set(e["percent"]), e
        total = sum(e["time_s"].values())
        for c in CATS:
            want = 100.0 * e["time_s"][c] / total if total > 0 else 0.0
            assert abs(e["percent"][c] - want) <= 0.01, (c, e)


def check_headline_sum(epoch, mains, late_s=0.0):
    """time_s sums to duration_s x the trainer main threads alive through it,
    less late_s: how long after the epoch's start the threads were traced
    (a launched job's main thread, registered after the window opened)."""
    total = sum(epoch["time_s"].values())
    assert abs(total + late_s - mains * epoch["duration_s"]) <= mains * SUM_TOL_S, \
        f"epoch {epoch['epoch']}: {total:.6f} s vs {mains} x {epoch['duration_s']:.6f} s"


def check_boundaries(report, truth):
    ep = report["epochs"]
    lst = ep["list"]
    assert [e["epoch"] for e in lst] == [t["epoch"] for t in truth["epochs"]], lst
    for e, t in zip(lst, truth["epochs"]):
        want = window_s(report, truth, t["start_ns"])
        assert abs(e["start_s"] - want) <= BOUNDARY_TOL_S, \
            f"epoch {e['epoch']} starts at {e['start_s']:.4f} s, truth {want:.4f} s"
    first = window_s(report, truth, truth["epochs"][0]["start_ns"])
    assert abs(ep["before_first_s"] - first) <= BOUNDARY_TOL_S, (ep["before_first_s"], first)


def check_split(report, truth):
    """Each epoch's headline split and the workload's own process entry
    against the truth: cpu and runqueue from schedstat, the rest idle."""
    pid = truth["pid"]
    lst = report["epochs"]["list"]
    for e, t in zip(lst, truth["epochs"]):
        dur = (t["end_ns"] - t["start_ns"]) / 1e9
        tol_pp = 100.0 * 2 * TICK_S / dur
        exp = dict.fromkeys(CATS, 0.0)
        exp["cpu"] = 100.0 * t["cpu_ns"] / 1e9 / dur
        exp["runqueue"] = 100.0 * t["rq_ns"] / 1e9 / dur
        exp["idle"] = 100.0 - exp["cpu"] - exp["runqueue"]
        for c in CATS:
            assert abs(e["percent"][c] - exp[c]) <= tol_pp, \
                f"epoch {e['epoch']} ({t['kind']}) {c}: {e['percent'][c]:.2f}% " \
                f"vs truth {exp[c]:.2f}% (+-{tol_pp:.1f})"
        procs = {p["pid"]: p for p in e["processes"]}
        assert pid in procs, e["processes"]
        got = procs[pid]["time_s"]["cpu"]
        assert abs(got - t["cpu_ns"] / 1e9) <= 2 * TICK_S, \
            f"epoch {e['epoch']}: process cpu {got:.4f} s vs truth {t['cpu_ns'] / 1e9:.4f} s"
    for e in lst[:-1]:
        check_headline_sum(e, 1)   # the workload's one main thread
    assert sum(lst[-1]["time_s"].values()) <= lst[-1]["duration_s"] + SUM_TOL_S


def step_brackets(report, truth, k):
    """[lo, hi] (s) of each step of epoch k (0-based), as trainbpf must see it."""
    te = truth["epochs"]
    t = te[k]
    starts = [window_s(report, truth, ns) for ns in t["step_start_ns"]]
    marked = [window_s(report, truth, ns) for ns in t["step_mark_end_ns"]]
    if k + 1 < len(te):   # ends at the next epoch's marker
        end_lo = window_s(report, truth, te[k + 1]["start_ns"])
        end_hi = window_s(report, truth, te[k + 1]["mark_end_ns"])
    else:                 # at the window's end
        win = report["window"]["duration_s"]
        end_lo, end_hi = win - CONV_S, win + CONV_S
    ends_lo = starts[1:] + [end_lo]
    ends_hi = marked[1:] + [end_hi]
    br = [(lo_end - m, hi_end - s)
          for s, m, lo_end, hi_end in zip(starts, marked, ends_lo, ends_hi)]
    # The run's last step has no known end (the teardown follows): the
    # steps leave it out, the last epoch's with them (docs/model.md).
    return br if k + 1 < len(te) else br[:-1]


def check_steps(report, truth, steps):
    res = REPORT_RES_MS
    for k, e in enumerate(report["epochs"]["list"]):
        st = e["steps"]
        assert st is not None, e
        br = step_brackets(report, truth, k)
        assert st["count"] == len(br) == steps - (k + 1 == len(report["epochs"]["list"])), st
        lo = [a * 1e3 for a, _ in br]
        hi = [b * 1e3 for _, b in br]
        n = len(br)
        assert sum(lo) / 1e3 - res <= st["total_s"] <= sum(hi) / 1e3 + res, (st, br)
        assert sum(lo) / n - res <= st["avg_ms"] <= sum(hi) / n + res, \
            f"epoch {e['epoch']} avg {st['avg_ms']:.4f} ms, truth {sum(lo) / n:.4f}..{sum(hi) / n:.4f}"
        assert min(lo) - res <= st["min_ms"] <= min(hi) + res, (st, lo, hi)
        assert max(lo) - res <= st["max_ms"] <= max(hi) + res, (st, lo, hi)
        mid = [(a + b) / 2 for a, b in zip(lo, hi)]
        width = max(b - a for a, b in zip(lo, hi)) / 2 + res
        if n < 2:   # one step: no spread to compare
            continue
        pop, sample = statistics.pstdev(mid), statistics.stdev(mid)
        assert (abs(st["std_ms"] - pop) <= width
                or abs(st["std_ms"] - sample) <= width * math.sqrt(n / (n - 1))), \
            (st["std_ms"], pop, sample, width)
        # Against the workload's own per-step measurement (its clock before
        # each marker), for the epochs a marker ends.
        if k + 1 < len(report["epochs"]["list"]):
            own = statistics.mean(truth["epochs"][k]["step_ns"]) / 1e6
            assert abs(st["avg_ms"] - own) <= max(b - a for a, b in zip(lo, hi)) + res, \
                (st["avg_ms"], own)


def test_marker_epochs_and_steps(tmp_path):
    report, truth, _ = run_epochs(tmp_path, "-e", "3", "-d", "1.5", "-s", "5",
                                  "--mode", "marker")
    ep = report["epochs"]
    assert ep["source"] == "marker"
    assert [e["epoch"] for e in ep["list"]] == [1, 2, 3]
    check_tiling(report)
    check_boundaries(report, truth)
    check_split(report, truth)
    check_steps(report, truth, 5)


def test_printed_epochs_default_regex(tmp_path):
    # "Epoch k/3" on stdout, printed again at every step: only a change of
    # number starts an epoch.
    report, truth, out = run_epochs(tmp_path, "-e", "3", "-d", "1.5", "-s", "5",
                                    "--mode", "print", "-r")
    assert out.count("Epoch 2/3\n") == 5, out
    ep = report["epochs"]
    assert ep["source"] == "regex"
    assert [e["epoch"] for e in ep["list"]] == [1, 2, 3]
    check_tiling(report)
    check_boundaries(report, truth)
    check_split(report, truth)
    assert all(e["steps"] is None for e in ep["list"])  # no step markers


def test_custom_epoch_regex(tmp_path):
    # "ROUND k": the default regex does not match it, so auto falls back to
    # intervals of 60 s, one here.
    args = ["-e", "3", "-d", "0.6", "-s", "1", "--mode", "print", "--format", "ROUND %d"]
    report, _, out = run_epochs(tmp_path, *args)
    assert "ROUND 2\n" in out
    ep = report["epochs"]
    assert ep["source"] == "interval", ep
    assert [e["epoch"] for e in ep["list"]] == [1]
    check_tiling(report)
    assert abs(ep["before_first_s"]) <= SUM_TOL_S
    # Case-insensitive; the number is the first group that matched digits.
    report, truth, _ = run_epochs(tmp_path, *args, extra=["--epoch-regex", "(round) ([0-9]+)"])
    ep = report["epochs"]
    assert ep["source"] == "regex", ep
    assert [e["epoch"] for e in ep["list"]] == [1, 2, 3]
    check_tiling(report)
    check_boundaries(report, truth)


@pytest.mark.parametrize("args,text", [
    (["--epoch-regex", "round ([0-9]+"], "regex"),
    (["--epochs", "bogus"], "bogus"),
    (["--epochs", "interval:-1"], "interval:-1"),
])
def test_bad_epoch_options(args, text):
    r = run_trainbpf(args + ["--", "true"], timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert lines and lines[0].startswith("trainbpf: ") and text in lines[0], r.stderr


def test_interval_epochs(tmp_path):
    # 0.3 s setup + 3.2 s spin: a window of ~3.5 s in 1 s epochs. Markers
    # are written too: an explicit interval ignores them.
    report, truth, _ = run_epochs(tmp_path, "-e", "1", "-d", "3.2", "-s", "1",
                                  "--mode", "marker", extra=["--epochs", "interval:1"])
    ep = report["epochs"]
    win = report["window"]["duration_s"]
    assert ep["source"] == "interval"
    assert 3.3 < win < 3.95, win  # 4 epochs, the last one shorter
    lst = ep["list"]
    assert [e["epoch"] for e in lst] == [1, 2, 3, 4]
    assert abs(ep["before_first_s"]) <= SUM_TOL_S
    check_tiling(report)
    for i, e in enumerate(lst):
        assert abs(e["start_s"] - i) <= SUM_TOL_S, e
        want = 1.0 if i < 3 else win - 3
        assert abs(e["duration_s"] - want) <= SUM_TOL_S, e
    main = next(t for p in report["processes"] if p["role"] == "trainer"
                for t in p["threads"] if t["tid"] == p["pid"])
    for e in lst[:-1]:
        check_headline_sum(e, 1, max(0.0, main["start_s"] - e["start_s"]))
    # Epochs 2 and 3 lie inside the spin: the split holds for intervals too.
    t = truth["epochs"][0]
    rq_pp = 100.0 * t["rq_ns"] / (t["end_ns"] - t["start_ns"])
    for e in lst[1:3]:
        assert e["percent"]["cpu"] >= 100.0 - rq_pp - 100.0 * 2 * TICK_S / 1.0, e


def test_marker_wins_over_printed_lines(tmp_path):
    report, truth, out = run_epochs(tmp_path, "-e", "3", "-d", "0.5", "-s", "2",
                                    "--mode", "both")
    assert "Epoch 3/3\n" in out
    ep = report["epochs"]
    assert ep["source"] == "marker"
    check_tiling(report)
    check_boundaries(report, truth)
    check_steps(report, truth, 2)


def test_pytorch_epochs_from_its_log(tmp_path):
    report, r = trace(tmp_path, [SYSTEM_PYTHON, DDP_TRAIN, "--epochs", "3",
                                 "--max-steps-per-epoch", "4", "--samples", "512"],
                      timeout=300)
    m = re.search(r"^RESULT (\{.*\})$", r.stdout, re.M)
    assert m, r.stdout
    result = json.loads(m.group(1))
    ep = report["epochs"]
    assert ep["source"] == "regex", ep
    lst = ep["list"]
    assert [e["epoch"] for e in lst] == [1, 2, 3], lst
    check_tiling(report)
    start = report["window"]["start_unix_s"]
    for e, unix in zip(lst, result["epoch_start_unix"]):
        assert abs(e["start_s"] - (unix - start)) <= BOUNDARY_TOL_S, \
            f"epoch {e['epoch']} starts at {e['start_s']:.4f} s, truth {unix - start:.4f} s"
    # The two ranks' main threads run through epochs 1 and 2.
    for e in lst[:-1]:
        check_headline_sum(e, result["world_size"])
    # Steps from the first rank's DataLoader fetches (docs/model.md,
    # "Epochs and steps"), 4 an epoch. The loop leaves each pass after 4
    # steps (a new iter(), no StopIteration): passes cannot tell its
    # epochs apart, and the lines are taken. No fetch closes the run's
    # last step (the loop broke out): its rank's last event does, once the
    # rank has ended, in the epochs as in the phase table (one count).
    assert [(e["steps"]["source"], e["steps"]["count"]) for e in lst] == \
        [("fetch", 4)] * 3, [e["steps"] for e in lst]
    assert report["steps"]["count"] == 12, report["steps"]
    ranks = [p["phases"]["steps"] for p in report["processes"]
             if p.get("phases", {}).get("steps")]     # not the launcher's 0
    assert ranks == [12] * result["world_size"], ranks


def test_step_blocks(tmp_path):
    """--step-blocks 4 on 2 epochs of 10 steps of 150 ms (spin, then
    sleep): a block per 4 completed steps, numbered on. Each block's shares
    run from the tick of the previous block to its own: steps 5-8 complete
    at 1.5 s and 13-16 at 2.7 s into the job, windows that start a block
    (0.6 s) later and lie inside the spin and the sleep epoch with more
    than a tick (0.2 s) to spare."""
    r = run_trainbpf(["-i", "0", "--step-blocks", "4", "--", workload("epochs"),
                      "-o", str(tmp_path / "t2.json"), "-e", "2", "-d", "1.5", "-s", "10",
                      "--mode", "marker"], timeout=60)
    assert r.returncode == 0, r.stderr
    heads = re.findall(r"=== Steps (\d+)-(\d+) \(marker\) [\d.]+ s, ([\d.]+) ms/step "
                       r"\(min ([\d.]+), max ([\d.]+)", r.stdout)
    assert [(int(h[0]), int(h[1])) for h in heads] == [(1, 4), (5, 8), (9, 12), (13, 16)], r.stdout
    # A step runs from its marker to the next one. The workload stamps the
    # clock right before and right after each marker, so trainbpf's steps lie
    # in brackets built from those stamps; the 150 ms deadlines do not bound
    # them: a loaded machine wakes a sleeper milliseconds late.
    truth = json.loads((tmp_path / "t2.json").read_text())
    before = [ns for e in truth["epochs"] for ns in e["step_start_ns"]]
    after = [ns for e in truth["epochs"] for ns in e["step_mark_end_ns"]]
    lo_ms = [(b - a) / 1e6 for a, b in zip(after, before[1:])]
    hi_ms = [(b - a) / 1e6 for a, b in zip(before, after[1:])]
    for h in heads:
        lo, hi = lo_ms[int(h[0]) - 1:int(h[1])], hi_ms[int(h[0]) - 1:int(h[1])]
        for got, f in zip(h[2:], (statistics.mean, min, max)):
            assert f(lo) - 0.05 <= float(got) <= f(hi) + 0.05, (h, lo, hi)  # 0.1 ms print
    blocks = r.stdout.split("=== Steps ")[1:]
    cpu = [float(re.search(r"computation\s+([\d.]+)%", b).group(1)) for b in blocks]
    idle = [float(re.search(r"idle ([\d.]+)%", b).group(1)) for b in blocks]
    assert cpu[1] >= 90.0 and "slowest: cpu" in blocks[1], blocks[1]
    assert idle[3] >= 90.0 and "slowest: idle" in blocks[3], blocks[3]


def test_step_blocks_needs_a_count(tmp_path):
    r = run_trainbpf(["--step-blocks", "0", "--", "true"])
    assert r.returncode == 2 and "--step-blocks" in r.stderr
