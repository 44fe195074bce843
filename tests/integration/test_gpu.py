"""CUDA and NCCL uprobes: calls, nesting, bytes, gpu_wait and comm time.

The jobs (tests/workloads/gpujob.c, realcuda.c) count every call they make
and time it; the stand-in libraries (tests/workloads/fakecuda/) block for
a chosen time, spinning or sleeping, and make the nested calls the real
ones make (cudaStreamSynchronize -> cuStreamSynchronize through the PLT,
ncclBcast -> ncclBroadcast).

Timing model. The job times each call from just before to just after it
(outer); the stand-ins time their own blocking inside it (inner: after the
entry probes have fired, before the return probes fire). trainbpf times a
call from its entry probe to its return probe, so inner <= measured <=
outer, whatever happens around the probes: a preemption, an interrupt,
the hypervisor running another vCPU (the last two are invisible to the
job's schedstat, and on this VM they delay a probe by up to ~100 us now
and then). EPS_NS per call is for the report's rounding. Inside a call
every interval is the call's category, whether the thread spins, sleeps
or waits for a CPU (docs/model.md, "CUDA and NCCL calls"): the spinning
job runs more threads than CPUs to check the last.
Calls, nested calls and bytes are exact.

Discovery. trainbpf finds a CUDA library after it is mapped (at exec for
a linked job, at dlopen) and then attaches: the contract is "within a
second". test_loaded_after_attach checks that. The other tests ask the
job to wait until its functions carry a uprobe (--wait-probes: the int3
at each entry) before its first call, so their counts do not depend on
how loaded the machine is; the latency is in the truth (probes_ms).
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import TRAINBPF, run_trainbpf, threads_by_tid, trace_json, workload

EPS_NS = 1000              # per call: the report's rounding, with room
BLOCK_US = 2000            # every blocking stand-in call (sync and NCCL)
PROBES_WAIT_MS = 20000     # the longest a job waits for its probes
DISCOVERY_MS = 1000        # the contract: new libraries probed within 1 s
# Mapped while the process's code keeps growing, a library named like one
# to probe wakes trainbpf (bpf/libraries.bpf.h), which then reads the maps,
# the new files' symbols and attaches: its scheduling on a loaded 2-CPU VM
# (tens of ms), a few ms each for the rest. Paced looks (every 800 ms while
# the code grows) took 167-856 ms in 4 runs.
DISCOVERY_WOKEN_MS = 150
FAKE_DIR = workload("fakecuda")
LIBS = {"cuda": "libcuda.so.1", "cudart": "libcudart.so.13", "nccl": "libnccl.so.2"}
FAKE_NCCL_VERSION = "2.27.3"   # fakecuda/nccl.c's "NCCL version" string
CUDA_LIB = "/usr/local/cuda/lib64"
NOT_PROBED = {"ncclGetVersion"}  # realcuda calls it; no kind in the contract


# ---------------------------------------------------------------- helpers

def gpujob_args(truth, steps=10, mode="sleep", launches=0, threads=1, wait_probes=True,
                extra=()):
    args = ["--truth", str(truth), "--steps", str(steps), "--mode", mode,
            "--cpu-us", "1000", "--sync-us", str(BLOCK_US), "--nccl-us", str(BLOCK_US),
            "--launches", str(launches), "--threads", str(threads), *extra]
    if wait_probes:
        args += ["--wait-probes", str(PROBES_WAIT_MS)]
        if launches:
            args.append("--launch-probes")
    return args


def run_gpujob(tmp_path, exe="gpujob", trainbpf_args=(), **kw):
    """Launches a gpujob build under trainbpf; returns (report, truth)."""
    truth = tmp_path / "truth.json"
    report, _ = trace_json([workload(exe), *gpujob_args(truth, **kw)], extra=trainbpf_args)
    return report, json.loads(truth.read_text())


def proc_of(report, pid):
    for p in report["processes"]:
        if p["pid"] == pid:
            return p
    raise AssertionError(f"pid {pid} not in the report")


def apis_of(entry):
    """{name: api} of a gpu object (top level or a process's)."""
    return {a["name"]: a for a in entry["apis"]}


def libs_of(report, pid):
    """{kind: [library entries]} of one process."""
    out = {}
    for lib in report["gpu"]["libraries"]:
        if lib["pid"] == pid:
            out.setdefault(lib["kind"], []).append(lib)
    return out


def close(got_s, outer_ns, inner_ns, calls=1):
    """got (seconds) lies between the stand-ins' own blocking (inner: within
    the probes) and the job's clock reads around the calls (outer)."""
    got = got_s * 1e9
    return inner_ns - calls * EPS_NS <= got <= outer_ns + calls * EPS_NS


def check_apis(gpu, truth, launches=False):
    """Per-API calls, nested and bytes exact, time between inner and outer."""
    got = apis_of(gpu)
    for name, want in truth["apis"].items():
        if want["kind"] == "launch" and not launches:
            continue
        assert name in got, (name, sorted(got))
        a = got[name]
        assert a["kind"] == want["kind"], (name, a)
        assert (a["calls"], a["nested"]) == (want["calls"], want["nested"]), (name, a, want)
        if want["kind"] in ("collective", "p2p"):
            # Bytes of outermost calls: ncclBcast's, not its nested ncclBroadcast's again.
            assert a["bytes"] == want["bytes"], (name, a, want)
        if want["kind"] != "launch" and want["ns"] >= 1e6:
            assert close(a["time_s"], want["ns"], want["inner_ns"], want["calls"]), (name, a, want)
    for name, a in got.items():
        if name not in truth["apis"]:
            assert a["calls"] == 0 and a["nested"] == 0, (name, a)
    kinds = {a["kind"] for a in gpu["apis"]}
    assert launches or "launch" not in kinds, kinds


def check_threads(report, truth):
    tids = threads_by_tid(report)
    calls = sum(a["calls"] for a in truth["apis"].values())
    for tt in truth["threads"]:
        _, t = tids[tt["tid"]]
        ts = t["time_s"]
        assert close(ts["gpu_wait"], tt["gpu_wait_ns"], tt["gpu_wait_inner_ns"], calls), (ts, tt)
        assert close(ts["comm"], tt["comm_ns"], tt["comm_inner_ns"], calls), (ts, tt)


def check_job(report, truth, launches=False):
    assert truth["probes_ms"] >= 0, "the job's functions never got their uprobes"
    proc = proc_of(report, truth["pid"])
    check_apis(proc["gpu"], truth, launches)
    check_threads(report, truth)
    assert report["gpu"]["launches"] == ("on" if launches else "off")


def check_libs(report, pid, paths, static=False):
    """paths: {kind: the file it must be}; the stand-ins' versions."""
    libs = libs_of(report, pid)
    for kind, path in paths.items():
        assert kind in libs, (kind, report["gpu"]["libraries"])
        match = [l for l in libs[kind] if os.path.realpath(l["path"]) == os.path.realpath(path)
                 or l["path"] == path]
        assert match, (kind, path, libs[kind])
        lib = match[0]
        assert lib["static"] is static, lib
        assert lib["probes"] > 0, lib
        assert isinstance(lib["missing"], list)
        if kind == "nccl":
            assert lib["version"] == FAKE_NCCL_VERSION, lib
        if kind == "cudart" and not static:
            assert lib["version"].startswith("13"), lib
    return libs


def fake_paths():
    return {k: os.path.join(FAKE_DIR, v) for k, v in LIBS.items()}


def copy_libs(dst, names=None):
    """Copies the stand-ins to dst, under names {kind: name}; returns the paths."""
    names = names or LIBS
    os.makedirs(dst, exist_ok=True)
    out = {}
    for kind, name in names.items():
        out[kind] = os.path.join(dst, name)
        shutil.copy2(os.path.join(FAKE_DIR, LIBS[kind]), out[kind])
    return out


def dl_args(d, names=None):
    names = names or LIBS
    return ["--dlopen", str(d), "--cudart", names["cudart"], "--cuda", names["cuda"],
            "--nccl", names["nccl"]]


# ---------------------------------------------------- a. the stand-ins

@pytest.fixture(scope="module")
def spin_run(tmp_path_factory):
    """A spinning job (its syncs busy-wait, as CUDA's do by default), one
    loop thread more than CPUs (so calls are preempted), communicators made
    by ncclCommInitRank & co."""
    return run_gpujob(tmp_path_factory.mktemp("spin"), mode="spin",
                      threads=min(os.cpu_count() + 1, 8),
                      extra=["--comm-init", "--rank", "5", "--nranks", "16"])


@pytest.fixture(scope="module")
def sleep_run(tmp_path_factory):
    """Two loop threads that sleep in their calls, launches counted."""
    return run_gpujob(tmp_path_factory.mktemp("sleep"), mode="sleep", threads=2,
                      launches=40, trainbpf_args=["--launches"])


def test_spin(spin_run):
    report, truth = spin_run
    check_job(report, truth)
    check_libs(report, truth["pid"], fake_paths())
    gpu = report["gpu"]
    assert gpu["syncs_per_s"] > 0 and gpu["nccl_ops_per_s"] > 0
    assert not any("no CUDA" in n for n in gpu["notes"])
    # One process: the top level is that process.
    top, own = apis_of(gpu), apis_of(proc_of(report, truth["pid"])["gpu"])
    assert {n: a["calls"] for n, a in top.items()} == {n: a["calls"] for n, a in own.items()}


def test_nested_not_counted(spin_run):
    report, truth = spin_run
    api, want = apis_of(proc_of(report, truth["pid"])["gpu"]), truth["apis"]
    assert api["cuStreamSynchronize"]["nested"] == want["cudaStreamSynchronize"]["calls"]
    assert api["cuStreamSynchronize"]["calls"] == want["cuStreamSynchronize"]["calls"]
    assert api["cuCtxSynchronize"]["calls"] == 0
    assert api["cuCtxSynchronize"]["nested"] == want["cudaDeviceSynchronize"]["calls"]
    assert api["ncclBroadcast"]["nested"] == want["ncclBcast"]["calls"]


def test_sleep_two_threads(sleep_run):
    # Two threads calling at once: nesting is per thread.
    report, truth = sleep_run
    assert len(truth["threads"]) == 2
    check_job(report, truth, launches=True)


def test_launches(sleep_run):
    report, truth = sleep_run
    assert report["gpu"]["launches"] == "on"
    api = apis_of(proc_of(report, truth["pid"])["gpu"])
    for name, calls in truth["launches"].items():
        assert api[name]["calls"] == calls, (name, api[name])
    # The runtime's own driver launch is nested, not a second launch.
    assert api["cuLaunchKernel"]["nested"] == truth["launches"]["cudaLaunchKernel"]
    assert api["cuGraphLaunch"]["nested"] == truth["launches"]["cudaGraphLaunch"]


# ------------------------------------------- b. the real CUDA runtime and NCCL

@pytest.mark.parametrize("exe", ["realcuda", "realcuda-static"])
def test_real_libraries(tmp_path, exe):
    if not os.path.exists(workload(exe)):
        pytest.skip(f"{exe} not built (no /usr/local/cuda)")
    truth_path = tmp_path / "truth.json"
    report, _ = trace_json([workload(exe), "--truth", str(truth_path), "-n", "50",
                            "--wait-probes", str(PROBES_WAIT_MS), "--launch-probes"],
                           extra=["--launches"])
    truth = json.loads(truth_path.read_text())
    assert truth["probes_ms"] >= 0, "the real functions never got their uprobes"
    api = apis_of(proc_of(report, truth["pid"])["gpu"])
    for name, n in truth["calls"].items():
        if name in NOT_PROBED:
            continue
        assert name in api, (name, sorted(api))
        assert api[name]["calls"] == n, (name, api[name])
        assert api[name]["bytes"] == truth["bytes"][name], (name, api[name])
    libs = libs_of(report, truth["pid"])
    cudart = [l for l in libs.get("cudart", [])
              if os.path.realpath(l["path"]) == os.path.realpath(truth["cudart"])]
    assert cudart, report["gpu"]["libraries"]
    assert cudart[0]["static"] is truth["static"]
    assert cudart[0]["probes"] > 0
    if not truth["static"]:
        assert cudart[0]["version"].startswith("13"), cudart[0]
    nccl = [l for l in libs.get("nccl", [])
            if os.path.realpath(l["path"]) == os.path.realpath(truth["nccl"])]
    assert nccl and nccl[0]["version"] == "2.28.9", libs.get("nccl")
    assert not nccl[0]["static"]


# ------------------------------------------------------- c. discovery

def discovered_after_attach(tmp_path, wait_ms, *extra):
    """gpujob-dl attached first (-p); wait_ms later it dlopens the
    libraries, gives trainbpf DISCOVERY_MS to probe them, and starts its
    loop. The report and the truth, checked as every run is."""
    truth_path, attached = tmp_path / "truth.json", tmp_path / "attached"
    out = tmp_path / "report.json"
    # wait_ms after its start, and not before trainbpf has attached: its
    # first live table (a loaded 2-CPU VM took 2.5-4 s to load and attach).
    job = subprocess.Popen([workload("gpujob-dl"), "--wait-ms", str(wait_ms), *dl_args(FAKE_DIR),
                            *gpujob_args(truth_path, wait_probes=False),
                            "--wait-probes", str(DISCOVERY_MS), "--wait-file", str(attached),
                            *extra])
    try:
        tb = subprocess.Popen([TRAINBPF, "-i", "0.2", "--format", "json", "-o", str(out), "-p",
                               str(job.pid)], stderr=subprocess.PIPE, text=True)
        first = tb.stderr.readline()
        attached.touch()
        err = first + tb.stderr.read()
        tb.wait(timeout=120)
    finally:
        attached.touch()
        job.wait(timeout=120)
    assert tb.returncode == 0, err
    report, truth = json.loads(out.read_text()), json.loads(truth_path.read_text())
    assert report["window"]["start_unix_s"] < truth["load_unix_ns"] / 1e9, \
        "trainbpf attached after the libraries were loaded: nothing to discover"
    check_job(report, truth)
    return report, truth


def test_loaded_after_attach(tmp_path):
    report, truth = discovered_after_attach(tmp_path, 2500)
    assert 0 <= truth["probes_ms"] <= DISCOVERY_MS, \
        f"libraries probed {truth['probes_ms']} ms after dlopen (-1: not in {DISCOVERY_MS} ms)"
    check_libs(report, truth["pid"], fake_paths())


def test_loaded_while_loading(tmp_path):
    # The same while the job maps more code every 10 ms from its start
    # (--loading), as import torch does before torch trains.
    _, truth = discovered_after_attach(tmp_path, 3000, "--loading")
    assert 0 <= truth["probes_ms"] <= DISCOVERY_WOKEN_MS, \
        f"libraries probed {truth['probes_ms']} ms after dlopen (-1: not in {DISCOVERY_MS} ms)"


def test_two_copies(tmp_path):
    # Two processes, each with its own copy (other files, other inodes),
    # attached together.
    dirs = [tmp_path / "a", tmp_path / "b"]
    paths = [copy_libs(d) for d in dirs]
    truths = [tmp_path / "a.json", tmp_path / "b.json"]
    jobs = [subprocess.Popen([workload("gpujob-dl"), "--wait-ms", "1000", *dl_args(d),
                              *gpujob_args(t)])
            for d, t in zip(dirs, truths)]
    try:
        r = run_trainbpf(["-i", "0", "--format", "json", "-p",
                          ",".join(str(j.pid) for j in jobs)], timeout=120)
    finally:
        for j in jobs:
            j.wait(timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    sums = {}
    for t, p in zip(truths, paths):
        truth = json.loads(t.read_text())
        check_job(report, truth)
        check_libs(report, truth["pid"], p)
        for name, a in truth["apis"].items():
            if a["kind"] != "launch":
                sums[name] = sums.get(name, 0) + a["calls"]
    # The top level sums the processes.
    top = apis_of(report["gpu"])
    assert {n: top[n]["calls"] for n in sums} == sums


def test_hashed_names(tmp_path):
    # As bundled by auditwheel (PyTorch wheels): a hash in the file name.
    names = {"cudart": "libcudart-1a2b3c4d.so.13", "cuda": "libcuda-5e6f7a8b.so.1",
             "nccl": "libnccl-9c0d1e2f.so.2"}
    paths = copy_libs(tmp_path / "libs", names)
    report, truth = run_gpujob(tmp_path, exe="gpujob-dl",
                               extra=dl_args(tmp_path / "libs", names))
    check_job(report, truth)
    check_libs(report, truth["pid"], paths)


@pytest.mark.parametrize("how", ["launch", "attach"])
def test_static_executable(tmp_path, how):
    # The stand-ins linked into the executable: symbols only in its .symtab.
    # Probed from exec on (launched), or while it sleeps before loading
    # anything (-p).
    exe = workload("gpujob-static")
    if how == "launch":
        report, truth = run_gpujob(tmp_path, exe="gpujob-static", mode="spin",
                                   extra=["--comm-init"])
    else:
        truth_path = tmp_path / "truth.json"
        job = subprocess.Popen([exe, "--wait-ms", "1500", "--comm-init",
                                *gpujob_args(truth_path, mode="spin")])
        try:
            r = run_trainbpf(["-i", "0", "--format", "json", "-p", str(job.pid)], timeout=120)
        finally:
            job.wait(timeout=120)
        assert r.returncode == 0, r.stderr
        report, truth = json.loads(r.stdout), json.loads(truth_path.read_text())
    check_job(report, truth)
    check_libs(report, truth["pid"], {k: exe for k in LIBS}, static=True)


def test_through_symlinks(tmp_path):
    # As installed by the toolkit and the driver: libcudart.so.13 ->
    # libcudart.so.13.0.96; the mapping names the target.
    real = copy_libs(tmp_path / "real", {"cudart": "libcudart.so.13.0.96",
                                         "cuda": "libcuda.so.580.95.05",
                                         "nccl": "libnccl.so.2.27.3"})
    links = tmp_path / "links"
    links.mkdir()
    for kind, name in LIBS.items():
        os.symlink(real[kind], links / name)
    report, truth = run_gpujob(tmp_path, exe="gpujob-dl", extra=dl_args(links))
    check_job(report, truth)
    check_libs(report, truth["pid"], real)


NS_DIR = "/opt/fakecuda-ns"


def test_other_mount_namespace(tmp_path):
    # The libraries are at /opt/fakecuda-ns only inside the job's mount
    # namespace (a tmpfs over /opt there, the directory bound into it):
    # trainbpf must open them through /proc/PID/root.
    src = tmp_path / "libs"
    copy_libs(src)
    truth_path = tmp_path / "truth.json"
    args = " ".join(gpujob_args(truth_path))
    script = (f"mount -t tmpfs none /opt && mkdir {NS_DIR} && mount --bind {src} {NS_DIR} && "
              f"exec {workload('gpujob-dl')} --dlopen {NS_DIR} {args}")
    report, _ = trace_json(["unshare", "-m", "--propagation", "private", "sh", "-c", script])
    truth = json.loads(truth_path.read_text())
    assert not os.path.exists(os.path.join(NS_DIR, LIBS["cudart"])), "visible outside"
    check_job(report, truth)
    libs = libs_of(report, truth["pid"])
    for kind, name in LIBS.items():
        assert any(l["path"] == os.path.join(NS_DIR, name) for l in libs.get(kind, [])), \
            (kind, report["gpu"]["libraries"])


# ------------------------------------------------ d. communicator identity

def test_comm_identity(spin_run):
    report, truth = spin_run
    comms = {int(c["comm"], 16): c for c in proc_of(report, truth["pid"])["gpu"]["nccl_comms"]}
    for want in truth["comms"]:
        got = comms.get(int(want["comm"], 16))
        assert got, (want, comms)
        assert got["init"] == want["init"], got
        assert got["destroyed"] is True, got   # ncclCommDestroy, or ncclCommAbort
        if want["init"] == "ncclCommSplit":
            continue                            # its rank is the parent's business
        assert (got["rank"], got["nranks"]) == (want["rank"], want["nranks"]), got
        assert len(got["id"]) >= 16 and want["id_full"].startswith(got["id"].lower()), got
    main = comms[int(truth["comm"]["comm"], 16)]
    assert (main["init"], main["rank"], main["nranks"]) == ("ncclCommInitRank", 5, 16)


# ------------------------------------------------------- e. no CUDA at all

def test_no_cuda():
    report, _ = trace_json(["sleep", "0.3"])
    gpu = report["gpu"]
    assert any("no CUDA library" in n for n in gpu["notes"]), gpu
    assert gpu["libraries"] == [] and all(a["calls"] == 0 for a in gpu["apis"])
    for p in report["processes"]:
        assert p["gpu"]["nccl_comms"] == []
