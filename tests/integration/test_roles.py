"""Roles from what processes do, against the jobs' own truth.

tests/workloads/torch_job.py writes who is who (roles: ranks, DataLoader
workers, helpers such as the forkserver, the resource tracker, git and
ip) into its truth JSON. trainbpf must label every rank `trainer`, every
worker `worker`, and every helper (and the launching top process when it
is no rank) `other`, however the ranks and workers were started: ranks by
mp.spawn, workers by spawn (fork + exec of python) or by the forkserver,
on torch 2.6 (which names its workers pt_data_worker) and on Debian 12's
torch 1.13 (which does not). Short helper subprocesses never become
trainers, so never the diagnosis's slow rank. One run per case, a few
seconds each; the spawn case is attached with -p as well.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import SYSTEM_PYTHON, TORCH26_PYTHON, TORCH_JOB as JOB, TRAINBPF

# variant, extra options (shorter runs), torch versions it runs on
CASES = [
    ("subprocs", ["--epochs", "2"]),
    ("dl-spawn", ["--steps", "16"]),
    ("dl-forkserver", ["--epochs", "2", "--steps", "16"]),
    ("spawn", ["--epochs", "1", "--steps", "12"]),
]


def job_cmd(variant, extra, torch26, truth):
    py = TORCH26_PYTHON if torch26 else [SYSTEM_PYTHON]
    return [*py, JOB, "--variant", variant, "--truth", str(truth), *extra]


def launched(variant, extra, torch26, tmp_path):
    truth, out = tmp_path / "truth.json", tmp_path / "report.json"
    r = subprocess.run([TRAINBPF, "-i", "0", "--format", "json", "-o", str(out), "--",
                        *job_cmd(variant, extra, torch26, truth)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text()), json.loads(truth.read_text())


def attached(variant, extra, torch26, tmp_path, ranks):
    """Attached with -p once every rank and a worker have started."""
    truth, out = tmp_path / "truth.json", tmp_path / "report.json"
    parts = str(truth) + ".parts"
    job = subprocess.Popen(job_cmd(variant, extra, torch26, truth),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                with open(os.path.join(parts, "roles.jsonl")) as f:
                    kinds = [json.loads(x)["kind"] for x in f if x.strip()]
            except (OSError, ValueError):
                kinds = []
            if kinds.count("rank") >= ranks and "worker" in kinds:
                break
            assert job.poll() is None and time.monotonic() < deadline, "job did not start"
            time.sleep(0.05)
        r = subprocess.run([TRAINBPF, "-p", str(job.pid), "-i", "0", "--format", "json",
                            "-o", str(out)], capture_output=True, text=True, timeout=600)
        assert job.wait(timeout=600) == 0
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text()), json.loads(truth.read_text())


def check_roles(report, truth, attach=False):
    role = {p["pid"]: p["role"] for p in report["processes"] if not p.get("folded")}
    t = truth["roles"]
    want = {}
    for w in t["workers"]:
        want[w["pid"]] = "worker"
    for h in t["helpers"]:
        want[h["pid"]] = "other"
    want[t["top"]] = "other"
    if t.get("launcher"):
        want[t["launcher"]] = "other"
    for r in t["ranks"]:
        want[r["pid"]] = "trainer"
    wrong = {pid: (w, role.get(pid, "unseen")) for pid, w in want.items()
             if role.get(pid, "unseen") != w}
    # attached: what ended before the attach is not seen, and rightly so
    if attach:
        wrong = {p: v for p, v in wrong.items() if v[1] != "unseen" or v[0] == "trainer"}
    assert not wrong, f"pid: (truth, trainbpf): {wrong}"
    trainers = {p for p, r in role.items() if r == "trainer"}
    assert trainers == {r["pid"] for r in t["ranks"]}, (trainers, t["ranks"])
    # The headline counts ranks: the trainers' main threads only
    for f in report.get("diagnosis", []):
        if f["id"] == "slow_rank":
            assert f["pid"] in trainers, f


@pytest.mark.parametrize("torch26", [True, False], ids=["torch2.6", "torch1.13"])
@pytest.mark.parametrize("variant,extra", CASES, ids=[c[0] for c in CASES])
def test_roles_launched(tmp_path, variant, extra, torch26):
    report, truth = launched(variant, extra, torch26, tmp_path)
    check_roles(report, truth)


@pytest.mark.parametrize("torch26", [True, False], ids=["torch2.6", "torch1.13"])
def test_roles_spawn_attached(tmp_path, torch26):
    """mp.spawn ranks with spawn workers, trainbpf attached to the launcher."""
    report, truth = attached("spawn", ["--epochs", "2", "--steps", "12"], torch26,
                             tmp_path, ranks=2)
    check_roles(report, truth, attach=True)


def test_helpers_are_never_the_slow_rank(tmp_path):
    """git and ip run every step: busy, short, and no rank."""
    report, truth = launched("subprocs", ["--epochs", "2", "--subprocs", "1"], False,
                             tmp_path)
    check_roles(report, truth)
    helpers = {h["pid"] for h in truth["roles"]["helpers"]}
    assert helpers, "the job ran no helper"
    for f in report.get("diagnosis", []):
        assert f.get("pid") not in helpers, f
