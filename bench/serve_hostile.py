#!/usr/bin/python3
"""serve_hostile.py: `trainbpf serve` on a node where another user tries
to take it over (docs/metrics.md, "Threat model").

As nobody (uid 65534), at once:
  * PROCS processes, each with its own TORCHELASTIC_RUN_ID, mapping a
    library named libcudart (discovered by default; nothing to probe);
  * one process mapping LOOKALIKES libraries that each define a CUDA call
    (probed: at most LP_MAX_PROBED of them);
  * one process mapping FILES distinct plain libraries (the daemon's cache
    of files read: LP_MAX_OBJECTS).
Then root starts a legitimate job (a library it owns, its own run id).
Measured: the time from the legitimate job's start to its series in
/metrics, the exposition's size and samples, the daemon's CPU (% of a
core over the run) and RSS at the end, its descriptors, and how long
SIGTERM takes. With BASELINE=path/to/another/trainbpf the same is run with
that build after this one's, for the ratio.

Environment: PROCS (2000), LOOKALIKES (600), FILES (6000), SETTLE (20 s:
the hostile processes' discovery before the legitimate job), BASELINE.
Needs root, a built trainbpf and tests/workloads (make workloads).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "tests", "workloads", "build")
HZ = os.sysconf("SC_CLK_TCK")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

PROCS = int(os.environ.get("PROCS", 2000))
LOOKALIKES = int(os.environ.get("LOOKALIKES", 600))
FILES = int(os.environ.get("FILES", 6000))
SETTLE = float(os.environ.get("SETTLE", 20))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read()


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


def copies(d, src, name, n):
    """n copies of src in d, owned by nobody; their paths."""
    paths = []
    for i in range(n):
        paths.append(os.path.join(d, name.format(i)))
        shutil.copy(src, paths[-1])
        os.chown(paths[-1], 65534, 65534)
    return paths


def start_hostile(d):
    lib = os.path.join(d, "libcudart.so.13")
    shutil.copy(os.path.join(BUILD, "magic", "libclean.so"), lib)
    os.chown(lib, 65534, 65534)
    call = os.path.join(d, "callmagic")
    env = dict(os.environ, CALLMAGIC_TICK_MS="1000")
    procs = []
    for i in range(PROCS):
        procs.append(subprocess.Popen([*NOBODY, call, "3600", lib],
                                      env=dict(env, TORCHELASTIC_RUN_ID=f"hostile-{i}"),
                                      stdout=subprocess.DEVNULL))
    looks = copies(d, os.path.join(BUILD, "magic", "libbait.so"), "libcudart-{:04d}.so.13",
                   LOOKALIKES)
    procs.append(subprocess.Popen([*NOBODY, call, "3600", *looks], env=env,
                                  stdout=subprocess.DEVNULL))
    plain = copies(d, os.path.join(BUILD, "magic", "libclean.so"), "libplain{:05d}.so", FILES)
    # the library named to be found first: the rest are read with it
    procs.append(subprocess.Popen([*NOBODY, call, "3600", lib, *plain], env=env,
                                  stdout=subprocess.DEVNULL))
    return procs


def try_scrape(port, failed):
    """A scrape, or b"" counted in failed[0] (a refused or reset connection)."""
    try:
        return scrape(port)
    except OSError:
        failed[0] += 1
        return b""


def legit_found(port, t0, failed):
    """Seconds from t0 until the legitimate job has a series."""
    while time.monotonic() - t0 < 120:
        if b'training_job="legit"' in try_scrape(port, failed):
            return time.monotonic() - t0
        time.sleep(0.2)
    return float("inf")


def run(trainbpf, d):
    port = free_port()
    log = open(os.path.join(d, "serve.log"), "w")
    srv = subprocess.Popen([trainbpf, "serve", "--listen", f"127.0.0.1:{port}"], stdout=log,
                           stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            scrape(port)
            break
        except OSError:
            time.sleep(0.2)
    c0, t0 = cpu_s(srv.pid), time.monotonic()
    hostile = []
    try:
        return measure(srv, port, d, hostile, c0, t0)
    finally:
        for p in hostile:
            p.kill()
            p.wait()
        if srv.poll() is None:
            srv.kill()
            srv.wait()
        log.close()


def measure(srv, port, d, hostile, c0, t0):
    hostile += start_hostile(d)
    time.sleep(SETTLE)
    own = os.path.join(d, "root", "libcudart.so.13")
    os.makedirs(os.path.dirname(own), exist_ok=True)
    shutil.copy(os.path.join(BUILD, "magic", "libclean.so"), own)
    tl = time.monotonic()
    legit = subprocess.Popen([os.path.join(d, "callmagic"), "3600", own],
                             env=dict(os.environ, TORCHELASTIC_RUN_ID="legit",
                                      CALLMAGIC_TICK_MS="1000"), stdout=subprocess.DEVNULL)
    failed = [0]
    found = legit_found(port, tl, failed)
    body = try_scrape(port, failed)
    out = {"found_s": found, "scrape_kb": len(body) / 1024, "failed": failed[0],
           "samples": sum(1 for l in body.splitlines() if l and not l.startswith(b"#")),
           "cpu_pct": 100 * (cpu_s(srv.pid) - c0) / (time.monotonic() - t0),
           "rss_mb": rss_mb(srv.pid), "fds": len(os.listdir(f"/proc/{srv.pid}/fd"))}
    hostile.append(legit)
    for p in hostile:
        p.kill()
    for p in hostile:
        p.wait()
    ts = time.monotonic()
    srv.send_signal(signal.SIGTERM)
    try:
        srv.wait(timeout=120)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()
    out["sigterm_s"] = time.monotonic() - ts
    return out


def main():
    builds = [("this", os.path.join(REPO, "build", "trainbpf"))]
    if os.environ.get("BASELINE"):
        builds.append(("baseline", os.environ["BASELINE"]))
    print(f"PROCS={PROCS} LOOKALIKES={LOOKALIKES} FILES={FILES} SETTLE={SETTLE}")
    for name, path in builds:
        d = tempfile.mkdtemp(prefix="tb-hostile-", dir="/tmp")
        os.chmod(d, 0o755)
        shutil.copy(os.path.join(BUILD, "callmagic"), d)
        try:
            r = run(path, d)
        finally:
            shutil.rmtree(d)
        print(f"{name:9s} legit found {r['found_s']:.1f} s, scrape {r['scrape_kb']:.0f} kB "
              f"({r['samples']} samples), CPU {r['cpu_pct']:.1f}% of a core, "
              f"RSS {r['rss_mb']:.1f} MB, {r['fds']} fds, SIGTERM {r['sigterm_s']:.1f} s, "
              f"{r['failed']} scrapes failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
