"""The headline follows the trainer's main thread through who-woke-whom.

critpath's main thread only ever waits on a condition variable for a
helper thread: its own time is "lock". What it waits for is the helper's
work: in data mode the helper waits on a pipe fed by a forked worker
process (so the main thread's wait is data_wait), in compute mode the
helper spins (so it is cpu, plus the helper's run-queue time).
"""
import json

from conftest import threads_by_tid, trace_json, workload

TOL_PP = 3.0


def run(tmp_path, mode):
    out = tmp_path / "truth.json"
    report, _ = trace_json([workload("critpath"), "-m", mode, "-d", "3", "-o", str(out)])
    return report, json.loads(out.read_text())


def pct(times, cat):
    return 100.0 * times[cat] / sum(times.values())


def test_data_wait_through_helper(tmp_path):
    report, truth = run(tmp_path, "data")
    _, main = threads_by_tid(report)[truth["main"]["tid"]]
    life = (truth["main"]["end_ns"] - truth["main"]["start_ns"])
    want = 100.0 * truth["main"]["wait_ns"] / life
    # Its own view: a lock wait; its critical path: data loading.
    assert pct(main["time_s"], "lock") >= want - TOL_PP
    assert abs(pct(main["critical_path_s"], "data_wait") - want) <= TOL_PP
    assert report["headline"]["rollup_pct"]["io_data"] >= want - TOL_PP
    procs = {p["pid"]: p for p in report["processes"]}
    assert procs[truth["worker_pid"]]["role"] == "worker"


def test_compute_through_helper(tmp_path):
    report, truth = run(tmp_path, "compute")
    _, main = threads_by_tid(report)[truth["main"]["tid"]]
    helper = truth["helper"]
    life = truth["main"]["end_ns"] - truth["main"]["start_ns"]
    # While main waited, the helper was on a CPU or waiting for one.
    want = 100.0 * (helper["cpu_ns"] + helper["rq_ns"]) / life
    got = pct(main["critical_path_s"], "cpu") + pct(main["critical_path_s"], "runqueue")
    assert abs(got - want) <= TOL_PP
    assert pct(main["critical_path_s"], "data_wait") < 1.0
    assert report["headline"]["rollup_pct"]["computation"] >= 80.0
