"""`trainbpf serve` (docs/metrics.md): the node daemon, scraped for real.

A real Prometheus (Debian's) scrapes two `trainbpf serve` instances every
second, one per "node": each watches one rank of a real PyTorch CPU DDP
job (gloo), the ranks started on their own as on two nodes, rank 1
slowed on purpose from a step on. The test asks Prometheus' HTTP API:
- the series exist with the job's labels (TORCHELASTIC_RUN_ID, RANK,
  LOCAL_RANK, WORLD_SIZE) and never a pid;
- each rank's phase counters against the rank's own timing of its phases
  (tests/workloads/torch_job.py), within the phase table's bound (3 points
  of the rank's life, tests/integration/test_phases.py);
- each rank's category counters add up to its traced life (every second
  of a thread lands in one category);
- the straggler rule (deploy/prometheus/trainbpf.rules.yml) fires for the
  slowed rank only, not before its slowdown and within 30 s after it;
- once the job's processes are gone, its series leave /metrics after the
  grace period, within a scrape.
"""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from conftest import ROOT, SYSTEM_PYTHON, TORCH_JOB, TRAINBPF
from test_stall_nccl import STEPS_BEFORE as STALL_AT_STEP, stall_rank_cmd

RULES = os.path.join(ROOT, "deploy", "prometheus", "trainbpf.rules.yml")
GRACE_S = 5
BOUND = 0.03          # of a rank's life: the phase table's (test_phases.py)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_for(what, fn, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def serving(port):
    try:
        return get(f"http://127.0.0.1:{port}/metrics")[0] == 200
    except OSError:
        return False


class Serve:
    """One `trainbpf serve`, stopped with SIGTERM (it must exit 0)."""

    def __init__(self, tmp_path, name, *args):
        self.port = free_port()
        self.log = open(tmp_path / f"{name}.log", "w")
        self.p = subprocess.Popen([TRAINBPF, "serve", "--listen", f"127.0.0.1:{self.port}",
                                   "--grace", str(GRACE_S), *args],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(f"{name} to serve", lambda: self.p.poll() is not None or serving(self.port), 60)
        assert self.p.poll() is None, open(self.log.name).read()

    def metrics(self):
        return get(f"http://127.0.0.1:{self.port}/metrics")[1]

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        return self.p.wait(timeout=30)


def samples(text, name):
    """{frozenset(labels): value} of one family in an exposition."""
    out = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels, value = line[len(name) + 1:].rsplit("} ", 1)
        out[frozenset(tuple(kv.split("=", 1)) for kv in labels.split(","))] = float(value)
    return out


def test_one_job_found_by_its_libraries(tmp_path):
    """No --match: a process that maps libtorch is found (here already
    running when the daemon starts, as after a restart), its rank and job
    from its environment; trainbpf's own cost is there; SIGTERM: exit 0."""
    truth = tmp_path / "t.json"
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
               TORCHELASTIC_RUN_ID="libs-found")
    job = subprocess.Popen([SYSTEM_PYTHON, TORCH_JOB, "--variant", "dl-fork", "--epochs", "6",
                            "--truth", str(truth)], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.STDOUT)
    try:
        wait_for("torch to be imported", lambda: "libtorch_cpu" in
                 open(f"/proc/{job.pid}/maps").read(), 60)
        srv = Serve(tmp_path, "serve")
        text = wait_for("the trainer's steps", lambda: (lambda t: t if any(
            ("training_job", '"libs-found"') in k for k in samples(
                t, "trainbpf_steps_total")) else None)(srv.metrics()), 60)
        assert job.wait(timeout=120) == 0
    finally:
        if job.poll() is None:
            job.kill()
    steps = samples(text, "trainbpf_steps_total")
    # its series (a node may run other jobs: the daemon finds them too)
    key = next(k for k in steps if ("training_job", '"libs-found"') in k)
    assert dict(key) == {"training_job": '"libs-found"', "rank": '"0"', "local_rank": '"0"',
                         "world_size": '"1"', "role": '"trainer"'}
    # `job` is left to Prometheus (the scrape job's name): never set here.
    assert '{job="' not in text and ',job="' not in text
    assert "pid" not in text and "tid=" not in text
    assert "process_resident_memory_bytes " in text and "process_cpu_seconds_total " in text
    # A client that connects and sends nothing holds no scrape up.
    with socket.create_connection(("127.0.0.1", srv.port)):
        t = time.monotonic()
        assert "trainbpf_build_info" in srv.metrics()
        assert time.monotonic() - t < 1.0
    # SIGHUP looks again at once; the daemon goes on.
    srv.p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert srv.p.poll() is None and serving(srv.port)
    links = bpf_links(srv.p.pid)
    assert len(links) >= 3, links     # the scheduler hooks at least
    assert srv.stop() == 0
    # SIGTERM: nothing of it left attached in the kernel
    left = subprocess.run(["bpftool", "link", "show", "-j"], capture_output=True, text=True,
                          check=True).stdout
    assert not links & {l["id"] for l in json.loads(left)}, (links, left)


def bpf_links(pid):
    """The ids of the BPF links a process holds (its fds' fdinfo)."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("link_id:"):
                        out.add(int(line.split()[1]))
        except OSError:
            pass
    return out


def test_bad_options_one_line(tmp_path):
    r = subprocess.run([TRAINBPF, "serve", "--listen", "nowhere:x"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--listen" in r.stderr, r.stderr
    r = subprocess.run([TRAINBPF, "serve", "--match", "("], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--match" in r.stderr, r.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([TRAINBPF, "serve", "--listen", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot listen" in r.stderr, r.stderr


PROM_CONFIG = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [{rules}]
scrape_configs:
  - job_name: trainbpf
    static_configs:
      - targets: [{targets}]
"""


class Prometheus:
    def __init__(self, tmp_path, targets):
        self.port = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(PROM_CONFIG.format(rules=json.dumps(RULES), targets=", ".join(
            f'"127.0.0.1:{t}"' for t in targets)))
        self.log = open(tmp_path / "prometheus.log", "w")
        self.p = subprocess.Popen(["prometheus", f"--config.file={cfg}",
                                   f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                   f"--web.listen-address=127.0.0.1:{self.port}"],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("prometheus", lambda: self.ready(), 60)

    def ready(self):
        assert self.p.poll() is None, open(self.log.name).read()[-2000:]
        try:
            return get(f"http://127.0.0.1:{self.port}/-/ready")[0] == 200
        except OSError:
            return False

    def query(self, q):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        body = json.loads(get(url)[1])
        assert body["status"] == "success", body
        return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)


def rank_cmd(rank, port, truth, slow_from):
    return [SYSTEM_PYTHON, TORCH_JOB, "--launch", "node", "--rank", str(rank), "--port",
            str(port), "--world-size", "2", "--workers", "0", "--epochs", "1",
            "--steps", "420", "--slow-rank", "1", "--slow-ms", "60", "--setup-s", "3",
            "--slow-from-step", str(slow_from), "--truth", str(truth)]


@pytest.mark.skipif(not os.path.exists("/usr/bin/prometheus"),
                    reason="never: scripts/setup.sh installs prometheus")
def test_two_nodes_straggler_in_prometheus(tmp_path):
    job_id = f"straggler-{os.getpid()}"
    truth = tmp_path / "truth.json"
    nodes = [Serve(tmp_path, f"node{r}", "--match", f"torch_job\\.py .*--rank {r} ")
             for r in (0, 1)]
    prom = Prometheus(tmp_path, [n.port for n in nodes])
    port = free_port()
    ranks, fired, spawned = [], {}, []
    try:
        for r in (0, 1):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK="0", WORLD_SIZE="2",
                       TORCHELASTIC_RUN_ID=job_id, USE_LIBUV="0")
            spawned.append(time.monotonic())
            ranks.append(subprocess.Popen(rank_cmd(r, port, truth, 150), env=env,
                                          stdout=open(tmp_path / f"rank{r}.log", "w"),
                                          stderr=subprocess.STDOUT))
        # While it runs: when the straggler alert fires, and for whom; when
        # each rank was seen ended (at or after its exit).
        exited = {}
        while len(exited) < len(ranks):
            for m, _ in prom.query('ALERTS{alertname="TrainbpfStraggler",alertstate="firing"}'):
                fired.setdefault(m.get("rank"), time.time())
            for r, p in enumerate(ranks):
                if p.poll() is not None:
                    exited.setdefault(r, time.monotonic())
            time.sleep(0.5)
        assert [p.returncode for p in ranks] == [0, 0]
        parts = [json.loads((tmp_path / "truth.json.parts" / f"rank-{r}.json").read_text())
                 for r in (0, 1)]
        time.sleep(3)   # the last update after the exits, scraped
        check_series(prom, job_id, parts, [(spawned[r], exited[r]) for r in (0, 1)])
        slow_unix = parts[1]["slow_start"][0]
        print(f"straggler alert: {fired}, {fired.get('1', 0) - slow_unix:.1f} s after the "
              f"slowdown; comm-wait ratios then: "
              f"{prom.query('last_over_time(trainbpf:rank_comm_wait:ratio30s[5m])')}")
        assert set(fired) == {"1"}, fired
        assert slow_unix < fired["1"] <= slow_unix + 30, (fired["1"] - slow_unix)
        check_step_time_and_findings(prom, job_id, nodes)
        # Gone: from /metrics after the grace, then from Prometheus' latest scrape.
        wait_for("the job's series to leave /metrics",
                 lambda: all(job_id not in n.metrics() for n in nodes), GRACE_S + 5)
        wait_for("the job's series to leave Prometheus",
                 lambda: not prom.query(f'trainbpf_processes{{training_job="{job_id}"}}'), 10)
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
        prom.stop()
        codes = [n.stop() for n in nodes]
    assert codes == [0, 0]


def check_step_time_and_findings(prom, job_id, nodes):
    """The ranks step together (the allreduce), at least the slowed rank's
    sleep a step once it slows; the fast rank's node finds its job
    communication-bound (it waits for the slow one), judged on its own
    rank alone."""
    steps = {m["rank"]: v for m, v in prom.query(
        f'last_over_time(trainbpf_last_step_seconds{{training_job="{job_id}"}}[5m])')}
    print(f"step time: {steps}")
    assert set(steps) == {"0", "1"} and all(v >= 0.060 for v in steps.values()), steps
    assert abs(steps["0"] - steps["1"]) <= 0.2 * max(steps.values()), steps
    node0 = f"127.0.0.1:{nodes[0].port}"
    found = {m["finding"]: v for m, v in prom.query(
        f'last_over_time(trainbpf_finding{{training_job="{job_id}",instance="{node0}"}}[5m])')}
    print(f"findings of rank 0's node: {found}")
    assert "comm_bound" in found and 0 < found["comm_bound"] <= 1, found


def check_series(prom, job_id, parts, lives):
    """Each rank's last samples against its own timing; lives[rank]: just
    before its exec, and when it was seen ended (CLOCK_MONOTONIC, as the
    parts' clocks)."""
    last = lambda q: {m["rank"]: (m, v) for m, v in prom.query(f"last_over_time({q}[5m])")}
    for rank, part in enumerate(parts):
        r = str(rank)
        life = part["end_mono"] - part["start_mono"]
        procs = last(f'trainbpf_processes{{training_job="{job_id}",role="trainer"}}')
        m, _ = procs[r]
        assert (m["local_rank"], m["world_size"], m["instance"] != "") == ("0", "2", True), m
        assert m["job"] == "trainbpf", m     # the scrape job's, with no honor_labels
        assert "pid" not in m
        # every second of the main thread in one category: its traced life
        cats = prom.query(f'sum by (rank) (last_over_time(trainbpf_time_seconds_total'
                          f'{{training_job="{job_id}",role="trainer",rank="{r}"}}[5m]))')
        traced = cats[0][1]
        # traced from its exec (--match: the exec watch), or the first scan
        # that saw it (every 2 s), to its exit, which comes after its own
        # clock stops (its process group's and interpreter's teardown); the
        # same 0.5 s as before above that (an update's period, SERVE_PUBLISH_NS)
        spawned, exited = lives[rank]
        assert life - 3.0 <= traced <= exited - spawned + 0.5, \
            (rank, traced, life, exited - spawned)
        for ph in ("forward", "backward", "optimizer"):
            got = prom.query(f'last_over_time(trainbpf_phase_seconds_total{{training_job="{job_id}",'
                             f'rank="{r}",phase="{ph}"}}[5m])')[0][1]
            want = part["totals"][ph]
            print(f"rank {rank} {ph}: prometheus {got:.3f} s, the job {want:.3f} s "
                  f"(life {life:.1f} s, traced {traced:.1f} s)")
            assert abs(got - want) <= BOUND * life, (rank, ph, got, want, life)
        # The job's setup (3 s) outlasts a scan's period (2 s): every step is
        # seen, each closed by the next fetch (the last by the pass's end).
        steps = prom.query(f'last_over_time(trainbpf_steps_total{{training_job="{job_id}",'
                           f'rank="{r}"}}[5m])')[0][1]
        assert steps == part["steps"], (rank, steps, part["steps"])


STALL_AFTER_S = 3.0


@pytest.mark.skipif(not os.path.exists("/usr/bin/prometheus"),
                    reason="never: scripts/setup.sh installs prometheus")
def test_stalled_ranks_in_prometheus(tmp_path):
    """Two "nodes" (a serve each, --stall-after 3) of a 2-rank job on the
    NCCL stand-in whose rank 1 gets stuck in a collective of its own
    subgroup while rank 0 waits in the world's (gpujob --stall-at, as
    test_stall_nccl.py): each node says its rank is stalled within the
    threshold, an update (0.5 s), a scrape (1 s) and our poll (0.5 s) of the
    stall, with SLACK_S for a loaded host; neither node alone can name the
    culprit (each sees one rank, waiting in a call), and across them the
    per-communicator counts do: rank 1 is one call behind rank 0 on the
    loop's communicator (the TrainbpfRankBehindInCollectives expression),
    and only rank 1 made calls on its own split communicator."""
    job_id = f"stall-{os.getpid()}"
    nodes = [Serve(tmp_path, f"node{r}", "--stall-after", str(STALL_AFTER_S), "--match",
                   f"gpujob .*--rank {r} ") for r in (0, 1)]
    prom = Prometheus(tmp_path, [n.port for n in nodes])
    ranks, stalls, seen = [], {}, {}
    slack_s = 1.5
    try:
        for r in (0, 1):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK="0", WORLD_SIZE="2",
                       TORCHELASTIC_RUN_ID=job_id)
            ranks.append(subprocess.Popen(stall_rank_cmd(r, tmp_path / f"t{r}.json"), env=env,
                                          stderr=open(tmp_path / f"rank{r}.log", "w")))
        mono_to_unix = time.time() - time.monotonic()
        deadline = time.monotonic() + 120
        while len(seen) < 2 and time.monotonic() < deadline:
            for r in (0, 1):
                text = (tmp_path / f"rank{r}.log").read_text()
                if r not in stalls and " stalls in step " in text:
                    stalls[r] = int(text.rsplit(" at ", 1)[1]) / 1e9 + mono_to_unix
            for m, v in prom.query(f'trainbpf_job_stalled{{training_job="{job_id}"}} == 1'):
                seen.setdefault(m["rank"], time.time())
            assert all(p.poll() is None for p in ranks)
            time.sleep(0.5)
        assert set(seen) == {"0", "1"} and set(stalls) == {0, 1}, (seen, stalls)
        start = max(stalls.values())
        late = {r: t - start for r, t in seen.items()}
        print(f"stalled in Prometheus {late} s after the stall")
        assert all(STALL_AFTER_S <= d <= STALL_AFTER_S + 0.2 + 0.5 + 1.0 + 0.5 + slack_s
                   for d in late.values()), late
        assert not prom.query(f'trainbpf_job_stall_culprit{{training_job="{job_id}"}}')
        lag = {m["rank"]: (m["communicator"], v) for m, v in prom.query(
            f'max by (training_job, communicator) (trainbpf_nccl_collectives_total'
            f'{{training_job="{job_id}", communicator!~"unknown|other"}}) - on (training_job, '
            f'communicator) group_right () trainbpf_nccl_collectives_total'
            f'{{training_job="{job_id}", communicator="deadbeef01020304"}}')}
        assert lag == {"0": ("deadbeef01020304", 0.0), "1": ("deadbeef01020304", 1.0)}, lag
        counts = {(m["rank"], m["communicator"]): v for m, v in prom.query(
            f'trainbpf_nccl_collectives_total{{training_job="{job_id}"}}')}
        assert counts[("0", "deadbeef01020304")] == 9 * STALL_AT_STEP + 1, counts
        own = {k: v for k, v in counts.items() if k[1] not in ("deadbeef01020304",)}
        assert list(own.values()) == [4.0] and list(own)[0][0] == "1", counts
    finally:
        for p in ranks:
            p.kill()
            p.wait()
        prom.stop()
        codes = [n.stop() for n in nodes]
    assert codes == [0, 0]
