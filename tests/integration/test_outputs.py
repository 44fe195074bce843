"""The files trainbpf writes as root: never through a link or into a file
another user planted, created 0600, emptied only when the output is ready,
and every write checked: a lost output is one line and exit status 1.

The planted links and files are owned by nobody (65534) in /tmp (sticky,
world-writable), with the kernel's own protection off
(fs.protected_symlinks=0, fs.protected_regular=0): trainbpf must not
depend on it."""
import os
import shutil
import stat
import subprocess
import uuid

import pytest

from conftest import ROOT, TRAINBPF, run_trainbpf

NOBODY = 65534
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
RECORDING = os.path.join(CORPUS, "full.db")


def sysctl(name, value=None):
    path = "/proc/sys/" + name.replace(".", "/")
    with open(path) as f:
        old = f.read().strip()
    if value is not None:
        with open(path, "w") as f:
            f.write(str(value))
    return old


@pytest.fixture
def unprotected():
    """The kernel's link and file protections off for the test, then back."""
    names = ("fs.protected_symlinks", "fs.protected_regular", "fs.protected_hardlinks")
    old = {n: sysctl(n) for n in names}
    for n in names:
        sysctl(n, 0)
    try:
        yield
    finally:
        for n, v in old.items():
            sysctl(n, v)


@pytest.fixture
def shared_tmp():
    """Names in /tmp itself, removed afterwards."""
    made = []

    def name(what):
        p = f"/tmp/tb-{what}-{uuid.uuid4().hex[:8]}"
        made.append(p)
        return p
    yield name
    for p in made:
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.unlink(p)


def victim(tmp_path, text="precious\n"):
    v = tmp_path / "victim"
    v.write_text(text)
    return v


def plant_link(target, name):
    os.symlink(str(target), name)
    os.lchown(name, NOBODY, NOBODY)


def one_line(r, code, text):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("trainbpf: ") and text in lines[0], r.stderr
    return lines[0]


@pytest.mark.parametrize("option", ["-o", "--states-out"])
def test_planted_link_is_not_followed(tmp_path, unprotected, shared_tmp, option):
    v = victim(tmp_path)
    link = shared_tmp("link")
    plant_link(v, link)
    r = run_trainbpf(["-i", "0", option, link, "--", "true"])
    one_line(r, 1, "not followed")
    assert v.read_text() == "precious\n"
    assert os.path.islink(link)


def test_planted_directory_link_is_not_followed(tmp_path, unprotected, shared_tmp):
    d = tmp_path / "dir"
    d.mkdir()
    link = shared_tmp("dirlink")
    plant_link(d, link)
    r = run_trainbpf(["-i", "0", "-o", link + "/r.txt", "--", "true"])
    one_line(r, 1, "not followed")
    assert not (d / "r.txt").exists()


def test_own_link_and_device_are_written(tmp_path, shared_tmp):
    """A link that is ours (or not in a shared directory) is followed, as
    the kernel would, to a file that exists: /dev/stdout, a report pointed
    at on purpose. Nothing is created through a link."""
    target = tmp_path / "report.txt"
    link = shared_tmp("ownlink")
    os.symlink(str(target), link)
    r = run_trainbpf(["-i", "0", "-o", link, "--", "true"])
    one_line(r, 1, "a link to a missing file: not created through it")
    target.write_text("")
    r = run_trainbpf(["-i", "0", "-o", link, "--", "true"])
    assert r.returncode == 0, r.stderr
    assert "Headline" in target.read_text()
    r = run_trainbpf(["-i", "0", "-o", "/dev/stdout", "--", "true"])
    assert r.returncode == 0, r.stderr
    assert "Headline" in r.stdout
    r = run_trainbpf(["-i", "0", "-o", "/dev/null", "--", "true"])
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("how", ["owner", "hardlink"])
def test_planted_file_is_not_written(tmp_path, unprotected, shared_tmp, how):
    name = shared_tmp("file")
    if how == "owner":
        with open(name, "w") as f:
            f.write("nobody's\n")
        os.chown(name, NOBODY, NOBODY)
        watched = name
    else:
        v = victim(tmp_path)
        os.link(str(v), name)
        watched = str(v)
    before = open(watched).read()
    r = run_trainbpf(["-i", "0", "-o", name, "--", "true"])
    one_line(r, 1, "sticky world-writable directory")
    assert open(watched).read() == before


def test_new_outputs_are_0600(tmp_path):
    rep, states = tmp_path / "r.txt", tmp_path / "s.tsv"
    r = run_trainbpf(["-i", "0", "-o", str(rep), "--states-out", str(states), "--", "true"])
    assert r.returncode == 0, r.stderr
    for p in (rep, states):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
    out = tmp_path / "t.json"
    r = subprocess.run([TRAINBPF, "trace", RECORDING, "-o", str(out)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_report_is_replaced_only_when_written(tmp_path):
    """-o naming the script the job runs: the job reads it whole, then the
    report replaces it (the user named it)."""
    script = tmp_path / "job.sh"
    script.write_text("echo from-the-script\n")
    r = run_trainbpf(["-i", "0", "-o", str(script), "--", "sh", str(script)])
    assert r.returncode == 0, r.stderr
    assert "from-the-script" in r.stdout
    assert script.read_text().startswith("trainbpf ")


# Lost outputs: one line, exit status 1.

@pytest.mark.parametrize("option", ["-o", "--states-out"])
def test_output_to_full_device(option):
    r = run_trainbpf(["-i", "0", option, "/dev/full", "--", "true"])
    one_line(r, 1, "cannot write /dev/full: No space left on device")


def test_stdout_to_full_device():
    with open("/dev/full", "w") as full:
        r = subprocess.run([TRAINBPF, "-i", "0", "--", "true"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    one_line(r, 1, "cannot write stdout: No space left on device")


def test_output_on_full_filesystem(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], check=True)
    try:
        with open(small / "filler", "wb") as f:
            try:
                f.write(b"x" * (1 << 20))
            except OSError:
                pass
        r = run_trainbpf(["-i", "0", "-o", str(small / "r.txt"), "--", "true"])
    finally:
        subprocess.run(["umount", str(small)], check=True)
    one_line(r, 1, "No space left on device")


@pytest.mark.parametrize("argv", [["report", RECORDING], ["report", RECORDING, "--format", "csv"],
                                  ["trace", RECORDING], ["diff", RECORDING, RECORDING]])
def test_read_commands_to_full_device(argv):
    r = subprocess.run([TRAINBPF, *argv, "-o", "/dev/full"], capture_output=True, text=True,
                       timeout=60)
    one_line(r, 1, "cannot write /dev/full: No space left on device")
    if argv[0] != "trace":
        with open("/dev/full", "w") as full:
            r = subprocess.run([TRAINBPF, *argv], stdout=full, stderr=subprocess.PIPE,
                               text=True, timeout=60)
        one_line(r, 1, "cannot write stdout: No space left on device")


def test_record_through_planted_links(tmp_path, unprotected, shared_tmp):
    """record -o in /tmp: a planted link as the file, or as its -wal."""
    v = victim(tmp_path)
    link = shared_tmp("rec")
    plant_link(v, link)
    r = subprocess.run([TRAINBPF, "record", "-o", link, "--force", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    one_line(r, 1, "not followed")
    assert v.read_text() == "precious\n"
    db = shared_tmp("rec")
    for side in ("-wal", "-shm"):
        plant_link(v, db + side)
    r = subprocess.run([TRAINBPF, "record", "-o", db, "--", "true"],
                       capture_output=True, text=True, timeout=60)
    one_line(r, 1, "-wal exists")
    assert not os.path.exists(db)       # what the failed start made is gone
    r = subprocess.run([TRAINBPF, "record", "-o", db, "--force", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert v.read_text() == "precious\n"
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    for side in ("-wal", "-shm"):
        assert not os.path.lexists(db + side)


# Names the job chose reach the terminal escaped.

ODD_JOB = r"""
import ctypes, threading, time
libc = ctypes.CDLL(None)
def name(s):
    libc.prctl(15, ctypes.c_char_p(s), 0, 0, 0)
def worker():
    name(b"wk\x1b\tz\x7f")
    time.sleep(2.5)
t = threading.Thread(target=worker)
t.start()
name(b"t\x1b[1m\n\\y")
end = time.time() + 2.5
while time.time() < end:
    pass
t.join()
"""
PROC_ESCAPED = r"t\033[1m\n\\y"      # 13 columns: the table does not cut it
THREAD_ESCAPED = r"wk\033\tz\177"


def raw_controls(text):
    """Control characters other than the line ends the output is made of."""
    return sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7f})


def test_control_characters_in_names_are_escaped(tmp_path):
    r = run_trainbpf(["-i", "1", "--detail", "--", "/usr/bin/python3", "-c", ODD_JOB])
    assert r.returncode == 0, r.stderr
    assert raw_controls(r.stdout) == [], r.stdout
    table = r.stdout.split("Headline")[0]       # the live table, before the report
    assert PROC_ESCAPED in table
    assert PROC_ESCAPED in r.stdout and THREAD_ESCAPED in r.stdout
    db = tmp_path / "odd.db"
    r = subprocess.run([TRAINBPF, "record", "-o", str(db), "--", "/usr/bin/python3", "-c",
                        ODD_JOB], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for argv in (["report", str(db)], ["report", str(db), "--detail"],
                 ["diff", str(db), str(db)], ["report", str(db), "--epoch", "1", "--detail"]):
        r = subprocess.run([TRAINBPF, *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert raw_controls(r.stdout) == [], (argv, r.stdout)
    r = subprocess.run([TRAINBPF, "report", str(db), "--detail"], capture_output=True,
                       text=True, timeout=60)
    assert PROC_ESCAPED in r.stdout and THREAD_ESCAPED in r.stdout
    # CSV (RFC 4180): the name as is inside its quotes, but for the control
    # characters a field may not hold (all but CR and LF), which become '?'.
    r = subprocess.run([TRAINBPF, "report", str(db), "--format", "csv"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert '"t?[1m\n\\y"' in r.stdout and '"wk??z?"' in r.stdout
    assert raw_controls(r.stdout) == []
