#!/usr/bin/env python3
"""Every PyTorch job variant (tests/workloads/torch_job.py) under trainbpf,
on torch 1.13 (this machine) and torch 2.6 (the trixie root of
scripts/torch-root.sh): the job's own truth next to what trainbpf reports.
As root, after `make`. Not a test: it describes, it does not judge.

    scripts/torch-jobs.py [--versions 1.13,2.6] [--variants a,b] [--json FILE]

Each variant runs launched (`trainbpf --format json -- JOB`); spawn and
torchrun (and any named with --attach) also run attached (`trainbpf -p
PID` once every rank has started and, with workers, the first worker too).
For each run it prints one Markdown row: the truth's phase shares (of the
ranks' lives inside trainbpf's window) and roles, and trainbpf's phase
table on the same base, headline shares, roles, diagnosis and epochs.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
JOB = os.path.join(REPO, "tests", "workloads", "torch_job.py")
ROOT_SH = os.path.join(HERE, "torch-root.sh")
TRAINBPF = os.path.join(REPO, "build", "trainbpf")
ATTACH = ("spawn", "torchrun")
# the truth's phases in the table: the rest goes to "other"
SHOWN = ("data", "forward", "backward", "optimizer", "validation", "checkpoint")


def variants():
    out = subprocess.run(["/usr/bin/python3", JOB, "--list"], check=True,
                         capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l and not l.startswith(" ")]


def job_cmd(version, variant, truth):
    cmd = ["python3", JOB, "--variant", variant, "--truth", truth]
    if version == "1.13":
        return ["/usr/bin/python3"] + cmd[1:]
    return ["/bin/bash", ROOT_SH, "run"] + cmd


def wait_or_kill(proc, timeout=600):
    """proc's exit code; past timeout its whole process group is killed
    (a hung job's ranks and workers too) and 124 returned."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return 124


def launched(version, variant, tmp):
    truth, report = (os.path.join(tmp, f"{version}-{variant}-launch.{x}.json")
                     for x in ("truth", "report"))
    log = open(os.path.join(tmp, f"{version}-{variant}-launch.log"), "w")
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "--format", "json", "-o", report, "--",
                           *job_cmd(version, variant, truth)],
                          stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                          start_new_session=True)
    return wait_or_kill(tb), truth, report, log.name


def ready(parts, want_ranks, want_worker):
    try:
        with open(os.path.join(parts, "roles.jsonl")) as f:
            kinds = [json.loads(l)["kind"] for l in f if l.strip()]
    except (OSError, ValueError):
        return False
    return kinds.count("rank") >= want_ranks and (not want_worker or "worker" in kinds)


def attached(version, variant, tmp, settings):
    truth, report = (os.path.join(tmp, f"{version}-{variant}-attach.{x}.json")
                     for x in ("truth", "report"))
    log = open(os.path.join(tmp, f"{version}-{variant}-attach.log"), "w")
    job = subprocess.Popen(job_cmd(version, variant, truth), stdout=log,
                           stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    ranks = settings["world_size"] if settings["launch"] != "single" else 1
    deadline = time.monotonic() + 120
    while not ready(truth + ".parts", ranks, settings["workers"] > 0):
        if job.poll() is not None or time.monotonic() > deadline:
            wait_or_kill(job, 0)
            return 1, truth, report, log.name
        time.sleep(0.05)
    if not settings["workers"]:
        time.sleep(1.0)
    tb = subprocess.Popen([TRAINBPF, "-p", str(job.pid), "-i", "0", "--format", "json",
                           "-o", report], stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)
    tb_rc = wait_or_kill(tb)
    rc = wait_or_kill(job)
    return tb_rc or rc, truth, report, log.name


def settings_of(variant):
    """The variant's options, from a --list of the workload itself."""
    sys.path.insert(0, os.path.dirname(JOB))
    import torch_job  # noqa: E402  (torch 1.13 is importable here)
    a = torch_job.parse_args(["--variant", variant, "--truth", "x"])
    return vars(a)


def truth_in_window(t, lo_mono):
    """Phase seconds of all ranks from lo_mono (trainbpf's start) on."""
    tot = {ph: 0.0 for ph in t["phases"]}
    life = 0.0
    for r in t["ranks"]:
        a = max(lo_mono, r["start_mono"])
        life += max(0.0, r["end_mono"] - a)
        for i, s, d in r["intervals"]:
            x, y = max(s, a), min(s + d, r["end_mono"])
            if y > x:
                tot[t["phases"][i]] += y - x
    tot["untimed"] = life - sum(tot.values())
    return tot, life


def roles_line(t, rep):
    role = {p["pid"]: p["role"] for p in rep["processes"]}

    def tally(pids):
        got = [role.get(p, "unseen") for p in pids]
        return ",".join(f"{got.count(r)} {r}" for r in sorted(set(got))) or "-"
    ranks = [r["pid"] for r in t["roles"]["ranks"]]
    workers = [w["pid"] for w in t["roles"]["workers"]]
    helpers = [h["pid"] for h in t["roles"]["helpers"]]
    top = t["roles"]["top"]
    known = set(ranks) | set(workers) | set(helpers) | {top}
    extra_trainers = [p for p, r in role.items() if r == "trainer" and p not in ranks]
    s = (f"ranks {len(ranks)}: {tally(ranks)}; workers {len(workers)}: {tally(workers)}; "
         f"helpers {len(helpers)}: {tally(helpers)}")
    if top not in ranks:
        s += f"; top: {role.get(top, 'unseen')}"
    if extra_trainers:
        s += f"; other trainers {len(extra_trainers)}"
    others = [p for p in role if p not in known]
    if others:
        s += f"; unknown pids {len(others)}"
    return s


def row(version, variant, mode, rc, truth, report, log):
    if rc != 0 or not (os.path.exists(truth) and os.path.exists(report)):
        return f"| {variant} | {version} | {mode} | failed (rc {rc}, see {log}) ||||||", None
    with open(truth) as f:
        t = json.load(f)
    with open(report) as f:
        rep = json.load(f)
    off = t["wall"]["start_unix"] - t["wall"]["start_mono"]
    lo = rep["window"]["start_unix_s"] - off
    tot, life = truth_in_window(t, lo)
    shown = {ph: tot[ph] / life * 100 for ph in SHOWN}
    other = 100 - sum(shown.values())
    truth_s = " ".join(f"{ph[:4]} {v:.0f}" for ph, v in shown.items() if v >= 0.5)
    truth_s += f" oth {other:.0f}"
    hl = rep["headline"]
    ru = hl["rollup_pct"]
    cats = {k: v for k, v in hl["time_s"].items()}
    hs = sum(cats.values()) or 1
    fine = " ".join(f"{k} {v / hs * 100:.0f}" for k, v in cats.items() if v / hs >= 0.005)
    tb_s = (f"comp {ru['computation']:.0f} comm {ru['communication']:.0f} "
            f"io/data {ru['io_data']:.0f} oth {ru['other']:.0f} ({fine})")
    ep = rep["epochs"]
    eps = (f"{len(t['ranks'][0]['epochs'])} / {ep['source']} "
           f"{sum(1 for e in ep['list'] if e['complete'])}+"
           f"{sum(1 for e in ep['list'] if not e['complete'])}")
    # each trainbpf epoch start against the nearest truth epoch start (rank 0's)
    starts = [e["start_mono"] + off for e in t["ranks"][0]["epochs"]]
    errs = [min((rep["window"]["start_unix_s"] + e["start_s"] - s for s in starts), key=abs)
            for e in ep["list"]]
    if errs:
        eps += " (" + ",".join(f"{x:+.2f}" for x in errs) + ")"
    # trainbpf's phase table in the same terms: each phase's wall time, of the ranks' lives
    ph = {e["phase"]: e["wall_s"] for e in rep.get("phases", {}).get("list", [])}
    ph_s = " ".join(f"{p[:4]} {ph[p] / life * 100:.0f}" for p in SHOWN
                    if p in ph and ph[p] / life >= 0.005) or "-"
    if ph:
        ph_s += f" oth {100 - sum(ph.get(p, 0) for p in SHOWN) / life * 100:.0f}"
    diag = ",".join(d["id"] for d in rep["diagnosis"]) or "-"
    secs = f"{life:.1f} / {hs:.1f}"
    line = (f"| {variant} | {version} | {mode} | {secs} | {truth_s} | {ph_s} | {tb_s} | "
            f"{roles_line(t, rep)} | {diag} | {eps} |")
    return line, {"variant": variant, "torch": version, "mode": mode,
                  "truth_seconds": tot, "truth_life_s": life,
                  "headline": hl, "diagnosis": rep["diagnosis"], "phases_s": ph,
                  "epochs_source": ep["source"], "epochs": len(ep["list"]),
                  "epoch_start_errors_s": errs,
                  "roles": roles_line(t, rep)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="1.13,2.6")
    ap.add_argument("--variants", help="comma-separated (default: all)")
    ap.add_argument("--attach", default=",".join(ATTACH),
                    help="variants also run attached with -p (default: spawn,torchrun)")
    ap.add_argument("--json", help="write every row's figures here")
    ap.add_argument("--keep", help="keep truths, reports and logs in this directory")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("torch-jobs: needs root (trainbpf)")
    if not os.access(TRAINBPF, os.X_OK):
        sys.exit("torch-jobs: build/trainbpf missing: run make")
    names = a.variants.split(",") if a.variants else variants()
    versions = a.versions.split(",")
    if "2.6" in versions and subprocess.run([ROOT_SH, "path"],
                                            capture_output=True).returncode != 0:
        sys.exit("torch-jobs: no trixie root: run scripts/torch-root.sh first")
    tmp = a.keep or tempfile.mkdtemp(prefix="torch-jobs.")
    os.makedirs(tmp, exist_ok=True)
    print("| variant | torch | mode | s truth / trainbpf | truth % (ranks' main threads) "
          "| trainbpf phases % (same base) | trainbpf headline % | roles (truth -> trainbpf) "
          "| diagnosis | epochs: truth / trainbpf complete+cut (start - truth's, s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    t0 = time.monotonic()
    for v in names:
        st = settings_of(v)
        for version in versions:
            runs = [("launch", launched)]
            if v in a.attach.split(","):
                runs.append(("attach", lambda ver, var, d: attached(ver, var, d, st)))
            for mode, fn in runs:
                line, fig = row(version, v, mode, *fn(version, v, tmp))
                print(line, flush=True)
                if fig:
                    rows.append(fig)
    print(f"\n{len(rows)} runs in {time.monotonic() - t0:.0f} s; files in {tmp}",
          file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
