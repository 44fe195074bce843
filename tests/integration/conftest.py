"""Shared helpers for trainbpf's integration tests.

These tests run for real: as root, BPF programs load and attach, and real
processes run. Paths are relative to the repository root.
"""
import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINBPF = os.path.join(ROOT, "build", "trainbpf")
WORKLOADS = os.path.join(ROOT, "tests", "workloads", "build")
DDP_TRAIN = os.path.join(ROOT, "tests", "workloads", "ddp_train.py")
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, the one with python3-torch
TORCH_JOB = os.path.join(ROOT, "tests", "workloads", "torch_job.py")
# Python with Debian 13's torch 2.6, in the root scripts/setup.sh builds
TORCH26_PYTHON = [os.path.join(ROOT, "scripts", "torch-root.sh"), "run", "python3"]


def schema_version():
    """REC_SCHEMA_VERSION, as this build writes recordings (user/record/recording.h)."""
    with open(os.path.join(ROOT, "user", "record", "recording.h")) as f:
        return int(re.search(r"#define REC_SCHEMA_VERSION (\d+)", f.read())[1])


def workload(name):
    return os.path.join(WORKLOADS, name)


@contextlib.contextmanager
def slowfs_mounted(mnt, delay_ms, size_mib):
    """tests/workloads/slowfs on mnt (made here): one file, /data, every read
    of which takes delay_ms in its daemon; unmounted after."""
    mnt.mkdir()
    fs = subprocess.Popen([workload("slowfs"), "-d", str(delay_ms), "-s", str(size_mib),
                           str(mnt)])
    try:
        deadline = time.time() + 10
        while str(mnt) not in open("/proc/mounts").read():
            assert fs.poll() is None and time.time() < deadline, "slowfs did not mount"
            time.sleep(0.05)
        yield mnt
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
        fs.wait(timeout=10)


def run_trainbpf(args, timeout=120, **kw):
    """Runs trainbpf to completion; returns the CompletedProcess."""
    return subprocess.run([TRAINBPF] + args, capture_output=True, text=True,
                          timeout=timeout, **kw)


def trace_json(cmd, extra=(), timeout=180):
    """Launches cmd under trainbpf --format json; returns (report, proc)."""
    r = run_trainbpf(["-i", "0", "--format", "json", *extra, "--", *cmd],
                     timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r


def steal_s():
    """The host's steal so far, all CPUs together (/proc/stat), in seconds.

    A VM's vCPU taken by the hypervisor while a thread runs on it: the
    guest's scheduler sees the thread on its CPU all along (sched_switch,
    so trainbpf says cpu), the kernel's schedstat leaves the stolen time
    out (CONFIG_PARAVIRT_TIME_ACCOUNTING). A test that holds trainbpf to
    schedstat allows a thread the steal of its run: at most all of it."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def disk_dir():
    """A directory on a real block-device filesystem (O_DIRECT works)."""
    return "/var/tmp"


def threads_by_tid(report):
    out = {}
    for p in report["processes"]:
        for t in p["threads"]:
            out[t["tid"]] = (p, t)
    return out


def lifetime_ns(truth_thread):
    return truth_thread["end_ns"] - truth_thread["start_ns"]


def ensure_tracefs():
    if not os.path.exists("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=True)


def attached(bt):
    """bpftrace holds its two programs: its fds' fdinfo name them."""
    progs = 0
    try:
        fds = os.listdir(f"/proc/{bt.pid}/fdinfo")
    except OSError:
        return False  # exited meanwhile
    for fd in fds:
        try:
            with open(f"/proc/{bt.pid}/fdinfo/{fd}") as f:
                progs += any(l.startswith("prog_id:") for l in f)
        except OSError:
            pass
    return progs >= 2


def kill_group(bt):
    try:
        os.killpg(bt.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    bt.wait()


def start_bpftrace(script, tries=2, timeout=60):
    """bpftrace, attached. It runs clang to find include paths, and that
    child was seen to spin forever now and then: give it its own session
    (no child may outlive the test and hold our pipes) and one more try."""
    for _ in range(tries):
        bt = subprocess.Popen(["bpftrace", str(script)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline and bt.poll() is None and not attached(bt):
            time.sleep(0.1)
        if bt.poll() is None and attached(bt):
            return bt
        kill_group(bt)
    raise AssertionError("bpftrace did not attach (twice)")


def bpftrace_maps(stdout):
    """bpftrace's maps as it prints them at exit, those keyed by one
    integer (a tid): {name: {key: value}}."""
    maps = {}
    for name, key, value in re.findall(r"@(\w+)\[(\d+)\]: (\d+)", stdout):
        maps.setdefault(name, {})[int(key)] = int(value)
    return maps


def trace_json_beside_bpftrace(tmp_path, script, cmd, extra=()):
    """cmd under trainbpf (trace_json, with extra options) while bpftrace
    runs script beside it, attached before cmd starts and stopped after
    trainbpf's report. Returns (report, bpftrace_maps)."""
    ensure_tracefs()
    path = tmp_path / "reference.bt"
    path.write_text(script)
    bt = start_bpftrace(path)
    try:
        report, _ = trace_json(cmd, extra)
        bt.send_signal(signal.SIGINT)  # bpftrace prints its maps and exits
        # Its own exit, not EOF: a child of its (clang, see start_bpftrace)
        # can hold the pipes open after it (a 60 s timeout in CI, stop 20).
        bt.wait(timeout=60)
    finally:
        kill_group(bt)
    stdout, _ = bt.communicate(timeout=10)
    return report, bpftrace_maps(stdout)


@pytest.fixture
def tmpdir_disk():
    with tempfile.TemporaryDirectory(dir=disk_dir()) as d:
        yield d


@pytest.fixture(autouse=True, scope="session")
def _require_root_and_build():
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (BPF)")
    for path in (TRAINBPF, workload("mixed")):
        if not os.path.exists(path):
            pytest.fail(f"{path} missing: run 'make all workloads' first")
