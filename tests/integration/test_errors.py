"""Bad input and faults: one clear line on stderr, a non-zero exit, and no
probe left behind however trainbpf ends."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import TRAINBPF, run_trainbpf, workload

OUR_PROGS = {"on_switch", "on_waking", "on_fork", "on_exec", "on_exit"}


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
    (["-d", "nan", "--", "true"], "invalid duration"),
    (["-d", "inf", "--", "true"], "invalid duration"),
    (["-d", "-nan", "--", "true"], "invalid duration"),
    (["-i", "nan", "--", "true"], "invalid interval"),
    (["-i", "inf", "--", "true"], "invalid interval"),
    (["--epochs", "interval:nan", "--", "true"], "invalid epoch source"),
    (["--epochs", "interval:inf", "--", "true"], "invalid epoch source"),
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


def test_btf_file_not_btf(tmp_path):
    garbage = tmp_path / "garbage.btf"
    garbage.write_bytes(os.urandom(1000))
    one_line_error(run_trainbpf(["--btf", str(garbage), "--", "true"]), 1,
                   f"{garbage} is not a valid BTF file")


def test_btf_file_missing():
    one_line_error(run_trainbpf(["--btf", "/nonexistent.btf", "--", "true"]), 1,
                   "cannot read BTF file /nonexistent.btf")


def test_command_not_found():
    r = run_trainbpf(["--", "/nonexistent/cmd"])
    one_line_error(r, 127, "cannot run command")


def test_failed_command_leaves_the_output_as_it_was(tmp_path):
    """A command that does not start: a report file trainbpf made is gone
    again, one that was there keeps what it held."""
    new = tmp_path / "new.txt"
    one_line_error(run_trainbpf(["-o", str(new), "--", "/nonexistent/cmd"]), 127,
                   "cannot run command")
    assert not new.exists()
    old = tmp_path / "old.txt"
    old.write_text("last run's report\n")
    one_line_error(run_trainbpf(["-o", str(old), "--", "/nonexistent/cmd"]), 127,
                   "cannot run command")
    assert old.read_text() == "last run's report\n"


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


def stdin_reader():
    """A process that ends when its stdin is closed, and stays a zombie
    until the test reaps it."""
    return subprocess.Popen(["python3", "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)


def test_target_exit_mid_run_is_not_an_error():
    """The target ends once traced (a zombie until the test reaps it, after
    trainbpf is done): the final report, exit 0. A fixed `sleep 1` raced
    trainbpf's start on a slow machine (a zombie before it was traced)."""
    proc = stdin_reader()
    tb = subprocess.Popen([TRAINBPF, "-i", "1", "-p", str(proc.pid)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = tb.stdout.readline()  # the first live view: the target is traced
        assert " s traced" in first, first + tb.stderr.read()
    finally:
        proc.stdin.close()
    out, err = tb.communicate(timeout=60)
    proc.wait()
    assert tb.returncode == 0, err
    assert "Headline" in out


def test_zombie_target_is_said():
    """A target that ended before trainbpf came (a zombie its parent has not
    reaped) gets the same one line as one already reaped, not a run that
    waits for an exit the probes will never see."""
    proc = stdin_reader()
    proc.stdin.close()
    deadline = time.time() + 10
    while open(f"/proc/{proc.pid}/stat").read().split(") ")[1][0] != "Z":
        assert time.time() < deadline
        time.sleep(0.02)
    r = run_trainbpf(["-i", "0", "-p", str(proc.pid)], timeout=60)
    proc.wait()
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == \
        f"trainbpf: no such process: {proc.pid}"


ZOMBIE_PARENT = """
import os, sys
child = os.fork()
if child == 0:
    os._exit(3)
print(child, flush=True)
sys.stdin.read()
"""


def test_zombie_child_does_not_hold_the_run(tmp_path):
    """A child that ended before trainbpf came, left unreaped by the target:
    no exit event will come for it (init reaps it once the target ends).
    /proc says it ended; trainbpf ends it then, and the run with its target."""
    proc = subprocess.Popen(["python3", "-c", ZOMBIE_PARENT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    report = tmp_path / "report.json"
    tb = subprocess.Popen([TRAINBPF, "-i", "1", "--format", "json", "-o", str(report),
                           "-p", str(proc.pid)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = 0
        while seen < 3:  # three live views (on stderr, beside JSON): traced, the child seen ended
            line = tb.stderr.readline()
            assert line, "trainbpf ended"
            seen += " s traced" in line
    finally:
        proc.stdin.close()
    out, err = tb.communicate(timeout=60)
    proc.wait()
    assert tb.returncode == 0, err
    procs = {p["pid"]: p for p in json.loads(report.read_text())["processes"]}
    assert procs[child]["end_s"] < procs[proc.pid]["end_s"] - 1


def wait_attached(pid, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        ids = programs_of(pid)
        if len(ids) >= len(OUR_PROGS):
            return ids
        time.sleep(0.05)
    raise AssertionError("trainbpf never attached")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                 signal.SIGKILL])
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


def start_threaded():
    """A process with a second thread; returns (proc, pid, tid of that thread)."""
    proc = subprocess.Popen(["/usr/bin/python3", "-c",
                             "import threading, time\n"
                             "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                             "print('up', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    tids = sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task"))
    return proc, proc.pid, next(t for t in tids if t != proc.pid)


def test_pid_of_a_thread_traces_its_process():
    proc, pid, tid = start_threaded()
    try:
        r = run_trainbpf(["-i", "0", "-d", "1", "--format", "json", "-p", str(tid)])
    finally:
        proc.kill()
        proc.wait()
    assert r.returncode == 0, r.stderr
    assert f"{tid} is a thread of process {pid}: tracing the process" in r.stderr
    report = json.loads(r.stdout)
    procs = {p["pid"]: p for p in report["processes"]}
    assert list(procs) == [pid]
    assert {pid, tid} <= {t["tid"] for t in procs[pid]["threads"]}


def fds_in_use(target_pid):
    """How many descriptors trainbpf holds once it traces target_pid."""
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "-p", str(target_pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_attached(tb.pid)
        time.sleep(0.5)
        return len(os.listdir(f"/proc/{tb.pid}/fd"))
    finally:
        tb.terminate()
        tb.wait()


@pytest.mark.parametrize("target", ["pid", "command"])
def test_too_many_open_files_is_said(target):
    """Short of descriptors (ulimit -n), trainbpf fails where it runs out:
    loading the probes, starting the command or tracing the target. Each
    limit from what a run holds down to 12 fewer: a run that fails says
    so in one line naming the cause, never that the process exited."""
    sleeper = subprocess.Popen(["sleep", "120"])
    args = ["-p", str(sleeper.pid)] if target == "pid" else ["--", "true"]
    failed = 0
    try:
        n = fds_in_use(sleeper.pid)
        for limit in range(n + 1, n - 12, -1):
            r = subprocess.run(["sh", "-c", f'ulimit -n {limit}; exec "$@"', "sh", TRAINBPF,
                                "-i", "0", "-d", "1", *args],
                               capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                continue
            failed += 1
            lines = one_line_error(r, 1, "Too many open files")
            assert len(lines) == 1 and "exited before" not in lines[0], (limit, r.stderr)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert failed


def test_sighup_stops_launched_command():
    """A closed terminal or systemd's SIGHUP: the final report, as for
    SIGTERM, and the command is passed the signal."""
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "--", "sleep", "60"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_attached(tb.pid)
    tb.send_signal(signal.SIGHUP)
    out, _ = tb.communicate(timeout=20)
    assert "Headline" in out
    assert tb.returncode == 128 + signal.SIGHUP


def sig_masks(status):
    return {k: int(v, 16) for k, v in (l.split(":") for l in status.splitlines()
                                       if l.startswith(("SigIgn:", "SigBlk:")))}


STATUS = ["grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"]


def plain_masks():
    """What a command started from here gets without trainbpf. Not always
    nothing: a process started by glibc's posix_spawn (GNU make starts its
    recipes so) has glibc's internal signals 32 and 33 ignored, and passes
    that on."""
    plain = sig_masks(subprocess.run(STATUS, capture_output=True, text=True).stdout)
    assert not plain["SigIgn"] & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGHUP - 1))
    assert plain["SigBlk"] == 0
    return plain


def test_command_gets_default_signals():
    """trainbpf ignores SIGPIPE for itself; the command must not inherit
    that (`yes | head -1` printed "yes: ... Broken pipe" under trainbpf
    only), nor a blocked signal."""
    plain = plain_masks()
    r = run_trainbpf(["-i", "0", "-o", "/dev/null", "--", *STATUS])
    assert r.returncode == 0, r.stderr
    assert sig_masks(r.stdout) == plain
    r = run_trainbpf(["-i", "0", "-o", "/dev/null", "--", "sh", "-c", "yes | head -1"])
    assert r.returncode == 0 and r.stdout == "y\n" and r.stderr == "", r.stderr


def test_command_keeps_what_was_ignored_before():
    """nohup trainbpf -- CMD: a signal ignored when trainbpf started stays
    ignored in the command, as it would be without trainbpf; trainbpf
    itself is not stopped by it either."""
    plain = plain_masks()

    def nohup():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tb = subprocess.Popen([TRAINBPF, "-i", "0", "--", "sh", "-c",
                           "grep -E '^Sig(Ign|Blk):' /proc/self/status; sleep 2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=nohup)
    wait_attached(tb.pid)
    time.sleep(0.5)
    tb.send_signal(signal.SIGHUP)
    out, err = tb.communicate(timeout=20)
    assert tb.returncode == 0, err
    assert sig_masks(out) == {"SigIgn": plain["SigIgn"] | 1 << (signal.SIGHUP - 1), "SigBlk": 0}
    assert "Headline" in out
