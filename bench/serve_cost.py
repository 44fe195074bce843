#!/usr/bin/python3
"""serve_cost.py: what `trainbpf serve` costs while it watches a node.

The daemon (--match on a tag in the jobs' command lines) watches JOBS
PyTorch jobs at once (tests/workloads/torch_job.py, dl-fork: a trainer and
2 DataLoader workers re-forked every epoch), each restarted as soon as it
ends, under its own TORCHELASTIC_RUN_ID: trainers, workers and whole jobs
are born and die all along. For DURATION seconds:
  * the daemon's CPU (utime + stime of /proc/PID/stat) as % of one core,
    over the steady state (after WARM s), and per 60 s window;
  * its RSS (VmRSS) sampled every 5 s: the first and last minute's medians
    and the maximum, to see it stay flat;
  * BPF events lost (its own counter, from /metrics).
Then, with FAKE more watched processes (sleeping, each a rank of one job:
their series fill /metrics to about 1,000 samples), SCRAPES scrapes one
after another on fresh connections, as Prometheus makes them: p50, p99
and max latency, and the exposition's size.

With BASELINE=path/to/another/trainbpf (a build of an earlier commit), a
second daemon watches the same jobs through the same run: its CPU and RSS
are measured beside the first's, and the ratio of the two is printed (the
load varies from run to run far more than between two daemons of one).

A run of two BLOCKs or more also prints, block by block, the RSS median
and the CPU, and the RSS slope after the first minute.

Environment: DURATION (600) JOBS (8) WARM (30) FAKE (60) SCRAPES (1000)
BASELINE (none) BLOCK (600 s). Needs root (BPF) and a built trainbpf (make).
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINBPF = os.path.join(REPO, "build", "trainbpf")
JOB = os.path.join(REPO, "tests", "workloads", "torch_job.py")
TAG = "serve_cost_job"
HZ = os.sysconf("SC_CLK_TCK")

DURATION = float(os.environ.get("DURATION", 600))
JOBS = int(os.environ.get("JOBS", 8))
WARM = float(os.environ.get("WARM", 30))
FAKE = int(os.environ.get("FAKE", 60))
SCRAPES = int(os.environ.get("SCRAPES", 1000))
BASELINE = os.environ.get("BASELINE")
BLOCK = float(os.environ.get("BLOCK", 600))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def scrape(port):
    t = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        body = r.read()
    return time.perf_counter() - t, body.decode()


def value(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def start_job(k, n, tmp):
    env = dict(os.environ, TORCHELASTIC_RUN_ID=f"bench-{k}-{n}", RANK="0", WORLD_SIZE="1",
               LOCAL_RANK="0")
    truth = os.path.join(tmp, f"{TAG}-{k}-{n}.json")
    return subprocess.Popen(["/usr/bin/python3", JOB, "--variant", "dl-fork", "--epochs", "4",
                             "--truth", truth], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def main():
    if os.geteuid():
        sys.exit("serve_cost.py: needs root (BPF)")
    tmp = f"/tmp/{TAG}.{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    port = free_port()
    daemon = start_daemon(TRAINBPF, port)
    base = start_daemon(BASELINE, free_port()) if BASELINE else None
    jobs, fakes, started = [], [], 0
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                scrape(port)
                break
            except OSError:
                time.sleep(0.2)
        jobs = [start_job(k, 0, tmp) for k in range(JOBS)]
        runs = [0] * JOBS
        t0 = time.monotonic()
        samples = []        # (t, cpu_s, rss_mb)
        while time.monotonic() - t0 < DURATION:
            for k, p in enumerate(jobs):
                if p.poll() is not None:
                    runs[k] += 1
                    started += 1
                    jobs[k] = start_job(k, runs[k], tmp)
            samples.append((time.monotonic() - t0, cpu_s(daemon.pid), rss_mb(daemon.pid),
                            cpu_s(base.pid) if base else 0, rss_mb(base.pid) if base else 0))
            time.sleep(5)
        _, text = scrape(port)
        lost = value(text, "trainbpf_events_lost_total")
        for p in jobs:
            p.terminate()
        for p in jobs:
            p.wait()
        # Many series: sleeping processes, each a rank of one job.
        for i in range(FAKE):
            env = dict(os.environ, TORCHELASTIC_RUN_ID="bench-fake", RANK=str(i),
                       WORLD_SIZE=str(FAKE))
            fakes.append(subprocess.Popen(["/bin/bash", "-c", f"exec -a {TAG}-sleep sleep 3600"],
                                          env=env))
        time.sleep(4)       # a scan (2 s) and an update (0.5 s)
        lat, size, nsamples = [], 0, 0
        for _ in range(SCRAPES):
            d, body = scrape(port)
            lat.append(d)
            size = len(body)
            nsamples = sum(1 for l in body.splitlines() if l and not l.startswith("#"))
        report(samples, lost, started + JOBS, lat, size, nsamples)
    finally:
        for p in jobs + fakes:
            if p.poll() is None:
                p.kill()
                p.wait()
        for d in [daemon] + ([base] if base else []):
            d.send_signal(signal.SIGTERM)
            print(f"daemon exit status after SIGTERM: {d.wait(timeout=60)}")


def start_daemon(path, port):
    return subprocess.Popen([path, "serve", "--listen", f"127.0.0.1:{port}",
                             "--match", TAG, "--grace", "10"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def cpu_rows(steady, ci, ri, name):
    """CPU over the steady state, per 60 s window, and RSS, of one daemon."""
    ta, tb = steady[0][0], steady[-1][0]
    per_min = []
    for i in range(len(steady)):
        j = next((j for j in range(i, len(steady)) if steady[j][0] - steady[i][0] >= 60), None)
        if j is not None:
            per_min.append(100 * (steady[j][ci] - steady[i][ci]) / (steady[j][0] - steady[i][0]))
    print(f"| {name} CPU, % of one core, {tb - ta:.0f} s steady state | "
          f"{100 * (steady[-1][ci] - steady[0][ci]) / (tb - ta):.2f} | <= 1 |")
    if per_min:
        print(f"| the same per 60 s window: median (min-max) | {statistics.median(per_min):.2f} "
              f"({min(per_min):.2f}-{max(per_min):.2f}) | |")
    return per_min


def blocks(samples, ci=1, ri=2, name="daemon"):
    """A long run, block by block: does the daemon drift?"""
    n = int(samples[-1][0] // BLOCK)
    if n < 2:
        return
    rss, cpu = [], []
    for b in range(n):
        blk = [s for s in samples if b * BLOCK <= s[0] < (b + 1) * BLOCK]
        rss.append(f"{statistics.median(s[ri] for s in blk):.1f}")
        cpu.append(f"{100 * (blk[-1][ci] - blk[0][ci]) / (blk[-1][0] - blk[0][0]):.2f}")
    late = [s for s in samples if s[0] >= 60]
    print(f"| {name} RSS MB, median of each {BLOCK:.0f} s block | {', '.join(rss)} | flat |")
    if len(late) >= 2:
        slope = statistics.linear_regression([s[0] / 60 for s in late],
                                             [s[ri] for s in late]).slope
        print(f"| {name} RSS slope after the first minute, kB/min (least squares) | "
              f"{1024 * slope:+.1f} | |")
    print(f"| {name} CPU % of one core, each {BLOCK:.0f} s block | {', '.join(cpu)} | <= 1 |")


def report(samples, lost, runs, lat, size, nsamples):
    steady = [s for s in samples if s[0] >= WARM]
    first = [s[2] for s in samples if s[0] < 60]
    last = [s[2] for s in samples if s[0] >= samples[-1][0] - 60]
    lat_ms = sorted(1e3 * x for x in lat)
    p = lambda q: lat_ms[min(len(lat_ms) - 1, int(q * len(lat_ms)))]
    print(f"# serve_cost: {JOBS} jobs at once for {DURATION:.0f} s ({runs} runs of torch_job "
          f"dl-fork: a trainer and 2 workers re-forked every epoch), then {FAKE} more "
          f"processes and {SCRAPES} scrapes")
    print("| what | measured | target |")
    print("|---|---|---|")
    cpu_rows(steady, 1, 2, "daemon")
    print(f"| RSS MB: first minute median, last minute median, max | "
          f"{statistics.median(first):.1f}, {statistics.median(last):.1f}, "
          f"{max(s[2] for s in samples):.1f} | <= 64, flat |")
    blocks(samples)
    if BASELINE:
        cpu_rows(steady, 3, 4, "baseline")
        print(f"| baseline RSS MB: first minute median, last minute median | "
              f"{statistics.median(s[4] for s in samples if s[0] < 60):.1f}, "
              f"{statistics.median(s[4] for s in samples if s[0] >= samples[-1][0] - 60):.1f} | |")
        blocks(samples, 3, 4, "baseline")
        d = (steady[-1][1] - steady[0][1]) / (steady[-1][3] - steady[0][3])
        print(f"| daemon CPU / baseline CPU, same jobs, same time | {d:.3f} | |")
    print(f"| BPF events lost | {lost:.0f} | 0 |")
    print(f"| scrape latency ms, {nsamples} samples ({size / 1024:.0f} KiB): p50, p99, max | "
          f"{p(0.5):.2f}, {p(0.99):.2f}, {lat_ms[-1]:.2f} | p99 <= 10 |")


if __name__ == "__main__":
    main()
