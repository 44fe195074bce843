"""`trainbpf serve` reads NCCL's RAS service from outside the job's network
namespace (issue 26 item 5), against a stand-in (tests/workloads/ras_standin.py)
that speaks NCCL's protocol with replies shaped as NCCL's source prints them.
No real NCCL here (no GPU on this machine).

Each job is one process in a network namespace of its own (unshare -n,
loopback up), all on RAS's default port 28028, under one daemon:
- text: NCCL 2.27 (the stand-in's default library): the text reply's figures;
- json: NCCL 2.29: asked for JSON (2.28.7 on), its figures;
- squatted: the job does not listen, another process (not the job's,
  nsenter'ed into its namespace) does: refused, and it never gets a byte;
- badaddr: NCCL_RAS_ADDR names a non-loopback address: refused;
- old: NCCL 2.23 (no RAS): never asked, no series;
- silent: accepts and never answers: down (timeout), and scrapes are not
  slowed by it (the exposition is rendered apart from the queries).
"""
import os
import subprocess
import time

from conftest import ROOT, WORKLOADS
from test_serve import Serve, samples, wait_for

STANDIN = os.path.join(ROOT, "tests", "workloads", "ras_standin.py")
FAKE = os.path.join(WORKLOADS, "fakecuda")
MARK = "tb-ras-mark"
# What the stand-in's text scenario says (ras_standin.py SUMMARY, GROUPS, Errors, Warnings).
TEXT = {"nodes": 2, "processes": 8, "gpus": 8, "ranks_missing": 1, "processes_missing": 1,
        "processes_dead": 0, "timeouts": 1}
TEXT_COMMS = {"running": 3, "init": 0}
TEXT_FLAGS = {"incomplete": 1, "mismatch": 0, "error": 0}
# The JSON scenario: one 2-rank communicator, rank 1 unresponsive.
JSON = {"nodes": 1, "processes": 1, "gpus": 1, "ranks_missing": 1, "processes_missing": 1,
        "processes_dead": 0, "timeouts": 0}


def start_job(name, lib, *flags, env_extra=None):
    env = dict(os.environ, TORCHELASTIC_RUN_ID=f"ras-{name}", RANK="0", WORLD_SIZE="1",
               **(env_extra or {}))
    args = ["python3", STANDIN, *flags, MARK] + (["--nccl", lib] if lib else [])
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *args]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", name
    return p


def squatter(job):
    """A process that is not the job's, listening on RAS's port in the job's namespace."""
    p = subprocess.Popen(["nsenter", "-t", str(job.pid), "-n", "python3", STANDIN, "--squat",
                          "squatter"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def value(text, family, job, **labels):
    for k, v in samples(text, family).items():
        d = dict(k)
        if d.get("training_job") == f'"{job}"' and all(d.get(a) == f'"{b}"'
                                                      for a, b in labels.items()):
            return v
    return None


def test_ras_read_from_outside_the_namespace(tmp_path):
    srv = Serve(tmp_path, "serve", "--match", MARK)
    procs = []
    try:
        procs.append(start_job("text", os.path.join(FAKE, "libnccl.so.2")))
        procs.append(start_job("json", os.path.join(FAKE, "v2.29", "libnccl.so.2")))
        sq = start_job("squatted", os.path.join(FAKE, "libnccl.so.2"), "--no-listen")
        procs += [sq, squatter(sq)]
        procs.append(start_job("badaddr", os.path.join(FAKE, "libnccl.so.2"), "--no-listen",
                               env_extra={"NCCL_RAS_ADDR": "10.1.2.3:28028"}))
        procs.append(start_job("old", os.path.join(FAKE, "v2.23", "libnccl.so.2")))
        procs.append(start_job("silent", os.path.join(FAKE, "libnccl.so.2"), "--silent"))

        jobs = ["ras-text", "ras-json", "ras-squatted", "ras-badaddr", "ras-silent"]
        scrapes = []

        def all_reported():
            t = time.monotonic()
            text = srv.metrics()
            scrapes.append(time.monotonic() - t)
            ups = [value(text, "trainbpf_nccl_ras_up", j) for j in jobs]
            return text if None not in ups else None
        text = wait_for("every job's RAS to be asked", all_reported, 40)
        # One more round (10 s apart): the silent job's 2 s budget passes in them.
        deadline = time.monotonic() + 11
        while time.monotonic() < deadline:
            all_reported()
            time.sleep(0.2)
        text = all_reported()
        print(open(srv.log.name).read())
        print("\n".join(l for l in text.splitlines() if "nccl_ras" in l and "#" not in l))

        assert value(text, "trainbpf_nccl_ras_up", "ras-text") == 1
        for k, v in TEXT.items():
            assert value(text, f"trainbpf_nccl_ras_{k}", "ras-text") == v, k
        for s, v in TEXT_COMMS.items():
            assert value(text, "trainbpf_nccl_ras_communicators", "ras-text", status=s) == v
        for f, v in TEXT_FLAGS.items():
            assert value(text, "trainbpf_nccl_ras_communicators_flagged", "ras-text",
                         flag=f) == v
        assert value(text, "trainbpf_nccl_ras_up", "ras-json") == 1
        for k, v in JSON.items():
            assert value(text, f"trainbpf_nccl_ras_{k}", "ras-json") == v, k
        assert value(text, "trainbpf_nccl_ras_communicators", "ras-json", status="running") == 1

        for job, reason in [("ras-squatted", "not_the_jobs_socket"),
                            ("ras-badaddr", "address_refused"), ("ras-silent", "timeout")]:
            assert value(text, "trainbpf_nccl_ras_up", job) == 0, job
            assert value(text, "trainbpf_nccl_ras_down_reason", job, reason=reason) == 1, job
            assert value(text, "trainbpf_nccl_ras_nodes", job) is None, job
        assert value(text, "trainbpf_nccl_ras_up", "ras-old") is None
        # The squatter was never connected to (it prints each connection it accepts).
        procs[3].terminate()
        assert procs[3].communicate(timeout=10)[0].strip() == "", "the squatter was connected to"
        # Scrapes answered from the rendered exposition: never the 2 s a silent RAS takes
        # (a bound half of it, for a loaded machine).
        print(f"{len(scrapes)} scrapes, slowest {max(scrapes) * 1e3:.0f} ms")
        assert max(scrapes) < 1.0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert srv.stop() == 0
