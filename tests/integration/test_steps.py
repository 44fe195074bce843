"""Steps with no annotation, from the period of the CUDA/NCCL calls.

The job (tests/workloads/stepjob.c) runs epochs of steps of a known
composition on the fakecuda stand-ins and writes when each step started:
the clock read just before the step's first call. trainbpf starts a
detected step at the entry probe of the call after the widest gap of the
period, which is that first call.

Timing model. The entry probe fires after the job's clock read and before
the stand-in library's own clock read inside the call (inside_ns), whatever
happens in between (a preemption, an interrupt, the hypervisor running
another vCPU: the last two are not in run_delay, and on this VM they
delay a probe by tens of microseconds now and then). An epoch ends at the
kernel's timestamp of the marker write, between the job's clock reads
before and after the write. So each boundary is late by 0 .. its bracket,
a step's length is off by at most the sum of its two ends' brackets, the
minimum and maximum by at most the largest such sum, the average by
(first + last bracket) / count, and the standard deviation by at most the
largest error (Minkowski).
Counts and syncs per step are exact.
"""
import json
import math

from conftest import run_trainbpf, trace_json, workload

STEPS = 40
EPOCHS = 3
WAIT_PROBES_MS = 20000


def run_stepjob(tmp_path, pattern, extra=(), fmt_json=True):
    truth = tmp_path / "truth.json"
    cmd = [workload("stepjob"), "--truth", str(truth), "--pattern", pattern,
           "--epochs", str(EPOCHS), "--steps", str(STEPS),
           "--wait-probes", str(WAIT_PROBES_MS), *extra]
    if fmt_json:
        report, _ = trace_json(cmd)
    else:
        r = run_trainbpf(["-i", "0", "--detail", "--", *cmd], timeout=180)
        assert r.returncode == 0, r.stderr
        report = r.stdout
    return report, json.loads(truth.read_text())


def truth_steps(ep):
    """[(duration_ns, slack_ns)] of an epoch's steps, the last ending at the epoch's end."""
    starts = [(s["start_ns"], s["inside_ns"] - s["start_ns"]) for s in ep["steps"]]
    ends = starts[1:] + [(ep["end_ns"], ep["end_after_ns"] - ep["end_ns"])]
    return [(e - s, bs + be) for (s, bs), (e, be) in zip(starts, ends)]


def std(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def check_epoch_steps(got, ep, syncs_per_step):
    steps = truth_steps(ep)
    durs = [d for d, _ in steps]
    worst = max(s for _, s in steps)
    n = len(steps)
    assert got["source"] == "calls", got
    assert got["count"] == n, (got, n)
    assert got["syncs"] == syncs_per_step * n, got
    assert got["syncs_per_step"] == syncs_per_step, got
    ms = 1e-6
    ends = steps[0][1] + steps[-1][1]
    assert abs(got["avg_ms"] - sum(durs) / n * ms) <= ends / n * ms + 1e-4, (got, sum(durs) / n)
    assert abs(got["min_ms"] - min(durs) * ms) <= worst * ms + 1e-4, (got, min(durs), worst)
    assert abs(got["max_ms"] - max(durs) * ms) <= worst * ms + 1e-4, (got, max(durs), worst)
    assert abs(got["std_ms"] - std(durs) * ms) <= worst * ms * math.sqrt(n / (n - 1)) + 1e-4, \
        (got, std(durs), worst)


def epochs_by_label(report):
    return {e["epoch"]: e for e in report["epochs"]["list"]}


def check_detected(report, truth, syncs_per_step):
    assert report["epochs"]["source"] == "marker"
    eps = epochs_by_label(report)
    for ep in truth["epochs"]:
        check_epoch_steps(eps[ep["epoch"]]["steps"], ep, syncs_per_step)
    total = report["steps"]
    assert total["source"] == "calls", total
    # The whole window: the very last step has no known end (nothing follows).
    assert total["count"] == EPOCHS * STEPS - 1, total
    assert total["syncs_per_step"] == syncs_per_step, total
    assert abs(total["per_s"] - 1e3 / total["avg_ms"]) < 1e-3 * total["per_s"], total


def test_mixed_calls_give_the_steps(tmp_path):
    """5 calls per step (2 all-reduces, a sync, a copy, a sync), varying step times."""
    report, truth = run_stepjob(tmp_path, "mixed")
    assert truth["syncs_per_step"] == 3
    check_detected(report, truth, 3)
    # The step times vary: the statistics are not those of a constant.
    durs = [d for ep in truth["epochs"] for d, _ in truth_steps(ep)]
    assert max(durs) - min(durs) > 1e6


def test_same_api_at_different_gaps_is_period_three(tmp_path):
    """3 cudaStreamSynchronize per step, after different gaps: 40 steps, not 120."""
    report, truth = run_stepjob(tmp_path, "same-api")
    check_detected(report, truth, 3)


def test_aperiodic_calls_give_no_steps(tmp_path):
    report, truth = run_stepjob(tmp_path, "aperiodic")
    assert report["steps"]["source"] == "none", report["steps"]
    assert report["steps"]["count"] == 0
    eps = epochs_by_label(report)
    for ep in truth["epochs"]:
        assert eps[ep["epoch"]]["steps"] is None, eps[ep["epoch"]]
    # The calls were seen: no steps is a finding, not a blind spot.
    calls = sum(a["calls"] for a in report["gpu"]["apis"]
                if a["kind"] in ("sync", "memcpy", "collective"))
    assert calls == EPOCHS * STEPS * 5, calls


def test_markers_take_precedence(tmp_path):
    """A step marker every other step: the markers are the steps."""
    report, truth = run_stepjob(tmp_path, "mixed", extra=["--markers", "2"])
    eps = epochs_by_label(report)
    for ep in truth["epochs"]:
        got = eps[ep["epoch"]]["steps"]
        assert got["source"] == "marker", got
        assert got["count"] == STEPS // 2, got
        assert got["syncs_per_step"] == 6, got
    assert report["steps"]["source"] == "marker"


def test_text_report_shows_steps(tmp_path):
    out, truth = run_stepjob(tmp_path, "same-api", fmt_json=False)
    assert f"{EPOCHS * STEPS - 1} steps (calls)" in out, out
    blocks = [l for l in out.splitlines() if l.startswith("=== Epoch")]
    assert sum(f"{STEPS} steps (calls)" in l and "3.0 syncs/step" in l for l in blocks) == EPOCHS, \
        blocks
