"""Bad input and faults: one clear line on stderr, a non-zero exit, and no
probe left behind however trainbpf ends."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import TRAINBPF, run_trainbpf, workload

OUR_PROGS = {"on_switch", "on_waking", "on_wakeup", "on_fork", "on_exec", "on_exit"}


def programs():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True,
                         text=True).stdout
    return json.loads(out or "[]")


def programs_of(pid):
    """IDs of the BPF programs process pid holds, from its fds' fdinfo
    (prog and link fds both name their program)."""
    ids = set()
    fddir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fddir):
        try:
            with open(os.path.join(fddir, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids & {p["id"] for p in programs() if p.get("name") in OUR_PROGS}


def gone(ids, timeout=5):
    """True once none of ids is loaded (the kernel frees them after an RCU
    grace period, so give it a moment)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not ids & {p["id"] for p in programs()}:
            return True
        time.sleep(0.1)
    return False


def one_line_error(r, code, text):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert lines and text in lines[0], r.stderr
    assert lines[0].startswith("trainbpf: ")
    return lines


def test_no_such_pid():
    one_line_error(run_trainbpf(["-p", "999999999"]), 1, "no such process: 999999999")


def test_kernel_thread():
    one_line_error(run_trainbpf(["-p", "2"]), 1, "is a kernel thread")


@pytest.mark.parametrize("args,text", [
    ([], "nothing to trace"),
    (["-p", "abc"], "invalid PID"),
    (["-p", "1", "--", "true"], "not both"),
    (["-i", "-1", "--", "true"], "invalid interval"),
    (["-d", "0", "--", "true"], "invalid duration"),
    (["--format", "xml", "--", "true"], "invalid format"),
    (["--ringbuf-size", "5", "--", "true"], "power of two"),
])
def test_invalid_options(args, text):
    r = run_trainbpf(args)
    assert r.returncode == 2
    assert text in r.stderr.splitlines()[0]


def test_not_root():
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", "--bounding-set=-all", TRAINBPF, "--", "true"],
                       capture_output=True, text=True, timeout=30)
    one_line_error(r, 1, "needs root")


def test_no_kernel_btf():
    # A kernel without BTF, as the tool sees one: /sys/kernel/btf hidden
    # under an empty tmpfs in a private mount namespace.
    r = subprocess.run(["unshare", "-m", "sh", "-c",
                        f"mount -t tmpfs none /sys/kernel/btf && exec {TRAINBPF} -- true"],
                       capture_output=True, text=True, timeout=30)
    one_line_error(r, 1, "kernel has no BTF")


def test_btf_file_missing():
    one_line_error(run_trainbpf(["--btf", "/nonexistent.btf", "--", "true"]), 1,
                   "cannot read BTF file /nonexistent.btf")


def test_command_not_found():
    r = run_trainbpf(["--", "/nonexistent/cmd"])
    one_line_error(r, 127, "cannot run command")


def test_unwritable_output():
    one_line_error(run_trainbpf(["-o", "/nonexistent/dir/r.txt", "--", "true"]), 1,
                   "cannot write /nonexistent/dir/r.txt")


def test_events_lost_are_counted_and_reported(tmp_path):
    out = tmp_path / "r.json"
    r = run_trainbpf(["-i", "0", "--format", "json", "--ringbuf-size", "4", "-o", str(out),
                      "--", workload("forkstorm"), "-n", "20000"])
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    lost = report["counters"]["events_lost"]
    assert lost > 0
    assert f"warning: {lost} events lost (process lifecycle" in r.stderr
    # Loss costs names and exit codes, not time: every child is still there,
    # most of them folded into one row per parent (docs/model.md, "What
    # trainbpf keeps"), which says how many it stands for.
    assert sum(p.get("folded", 1) for p in report["processes"]) > 20000 * 0.99


def test_target_exit_mid_run_is_not_an_error():
    proc = subprocess.Popen(["sleep", "1"])
    r = run_trainbpf(["-i", "0", "-p", str(proc.pid)])
    proc.wait()
    assert r.returncode == 0, r.stderr
    assert "Headline" in r.stdout


def wait_attached(pid, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        ids = programs_of(pid)
        if len(ids) >= len(OUR_PROGS):
            return ids
        time.sleep(0.05)
    raise AssertionError("trainbpf never attached")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_probes_left_after_signal(sig):
    target = subprocess.Popen(["sleep", "60"])
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "-p", str(target.pid)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ids = wait_attached(tb.pid)
        tb.send_signal(sig)
        out, err = tb.communicate(timeout=20)
    finally:
        target.kill()
        target.wait()
    if sig != signal.SIGKILL:
        assert tb.returncode == 0, err
        assert "Headline" in out  # the final report is printed
    # Nothing is pinned: the kernel frees the programs with the last fd,
    # even when trainbpf is killed outright.
    assert gone(ids)


def test_no_probes_left_after_normal_exit():
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "--", "sleep", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ids = wait_attached(tb.pid)
    tb.communicate(timeout=20)
    assert tb.returncode == 0
    assert gone(ids)


def test_sigterm_stops_launched_command():
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "--", "sleep", "60"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_attached(tb.pid)
    tb.send_signal(signal.SIGTERM)
    out, _ = tb.communicate(timeout=20)
    assert "Headline" in out
    # The command got the SIGTERM too, and trainbpf exits with its status.
    assert tb.returncode == 128 + signal.SIGTERM
