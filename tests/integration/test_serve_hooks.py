"""`trainbpf serve` between jobs and at a job's exec (issue 26, "Also in
serve"): with no process traced, the node's tasks pay nothing for it, not
even its hooks' floor; a process that --match names is traced from its
exec, not from the next scan (every 2 s).

What the daemon holds attached is read from the kernel: the BPF links
among its file descriptors (/proc/PID/fdinfo) and their programs' names
(bpftool). What a job was traced for: its own CPU time (it prints it as it
ends) against the daemon's cpu seconds for it (its label from
TORCHELASTIC_RUN_ID).
"""
import os
import subprocess
import time

from conftest import SYSTEM_PYTHON
from test_errors import programs
from test_serve import Serve, samples, wait_for

# Spins at once for SPIN_S of CPU, writes its CPU time, sleeps, exits.
JOB = r"""
import os, sys, time
t = time.process_time()
while time.process_time() - t < float(sys.argv[1]):
    pass
with open(sys.argv[2], "w") as f:
    f.write(str(time.process_time()))
time.sleep(1.5)
"""
SPIN_S = 1.5
MARK = "tb-serve-exec-mark"
# Found at its exec: traced once serve's loop has read the exec's record and
# /proc (one refresh, 0.2 s, at most) and attached its hooks again. The
# CPU before that is the job's and not the daemon's: at most this much.
FOUND_WITHIN_S = 0.3
WATCH = ["on_exec_watch"]


def attached(pid):
    """The names of the programs of the BPF links pid holds, sorted."""
    ids = []
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue    # closed meanwhile
        if "link_type" in info:
            ids.append(int(info["prog_id"]))
    names = {p["id"]: p.get("name", "?") for p in programs()}
    return sorted(names.get(i, "?") for i in ids)


def cpu_of(text, job):
    v = [val for k, val in samples(text, "trainbpf_time_seconds_total").items()
         if ("training_job", f'"{job}"') in k and ("category", '"cpu"') in k]
    return sum(v) if v else None


def test_idle_hooks_detach_and_a_job_is_traced_from_its_exec(tmp_path):
    srv = Serve(tmp_path, "serve", "--match", MARK)
    jobs = []
    try:
        # Nothing to trace: all but the exec watch go, within two scans.
        wait_for("serve's hooks to be detached", lambda: attached(srv.p.pid) == WATCH, 15)
        # Two jobs 0.7 s apart: one scan cannot have found both as they began.
        for i in range(2):
            env = dict(os.environ, TORCHELASTIC_RUN_ID=f"exec-found-{i}")
            jobs.append(subprocess.Popen([SYSTEM_PYTHON, "-c", JOB, str(SPIN_S),
                                          str(tmp_path / f"cpu{i}"), MARK], env=env))
            time.sleep(0.7)
        wait_for("the hooks to be attached again", lambda: len(attached(srv.p.pid)) > 1, 10)
        last = {}
        while any(j.poll() is None for j in jobs):
            text = srv.metrics()
            for i in range(2):
                v = cpu_of(text, f"exec-found-{i}")
                if v is not None:
                    last[i] = v
            time.sleep(0.2)
        assert [j.returncode for j in jobs] == [0, 0]
        time.sleep(1)       # a last update (every 0.5 s), within the grace period
        text = srv.metrics()
        for i in range(2):
            ours = cpu_of(text, f"exec-found-{i}") or last.get(i, 0)
            own = float((tmp_path / f"cpu{i}").read_text())
            print(f"job {i}: {ours:.3f} s of CPU traced of its own {own:.3f} s")
            assert own - FOUND_WITHIN_S <= ours <= own + 0.05, \
                f"job {i}: {ours:.3f} s of CPU seen of its {own:.3f} s"
        # Their exits leave nothing traced: the hooks go again.
        wait_for("serve's hooks to be detached after the jobs", lambda: attached(srv.p.pid) == WATCH,
                 15)
    finally:
        for j in jobs:
            if j.poll() is None:
                j.kill()
                j.wait()
        assert srv.stop() == 0


def test_idle_without_match_holds_no_hook(tmp_path):
    """Found by their libraries (no --match), jobs need no exec watch: an
    idle daemon holds no BPF link at all."""
    srv = Serve(tmp_path, "serve")
    try:
        wait_for("serve's hooks to be detached", lambda: attached(srv.p.pid) == [], 15)
    finally:
        assert srv.stop() == 0
