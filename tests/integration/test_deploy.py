"""deploy/ lines up with the build: the systemd unit runs the binary where
`make install` puts it, and systemd accepts the unit with that binary in
place. Reads the Makefile through `make -n`, so a change of PREFIX or of
the install rule is seen. Needs build/trainbpf (make all), no BPF."""
import os
import re
import shlex
import shutil
import subprocess

from conftest import ROOT

UNIT = os.path.join(ROOT, "deploy", "systemd", "trainbpf.service")


def make_dry(*args):
    """What `make ARGS` would run, with the Makefile's own defaults (none
    of PREFIX, DESTDIR, OUTPUT from the caller's environment) and without
    rebuilding `all`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFIX", "DESTDIR", "OUTPUT", "MAKEFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-s", "-n", "-o", "all", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [shlex.split(line) for line in r.stdout.splitlines() if line.strip()]


def install_paths():
    """(the file the build makes, where `make install` puts it)."""
    (cmd,) = make_dry("install")
    assert cmd[0] == "install", cmd
    return cmd[-2], cmd[-1]


BUILT, INSTALLED = install_paths()


def test_install_rule():
    # A root daemon's binary: sbin, under the default PREFIX.
    assert (BUILT, INSTALLED) == ("build/trainbpf", "/usr/local/sbin/trainbpf")


def unit_exec_start():
    with open(UNIT) as f:
        for line in f:
            if line.startswith("ExecStart="):
                return shlex.split(line.partition("=")[2])
    raise AssertionError("no ExecStart")


def test_unit_runs_the_installed_binary():
    argv = unit_exec_start()
    assert argv[0] == INSTALLED and argv[1] == "serve", argv
    # The comments' install steps and drop-in example name the same path.
    with open(UNIT) as f:
        paths = set(re.findall(r"(?<![\w.-])(/[\w./-]*/trainbpf)(?![\w.-])", f.read()))
    assert paths == {INSTALLED}, paths


def test_unit_verifies_after_make_install(tmp_path):
    """`make install DESTDIR=...` then systemd-analyze verify on the unit,
    its paths moved under the same DESTDIR: the binary is there and
    executable (the unit ran /usr/local/bin/trainbpf while make install
    wrote sbin: "is not executable")."""
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        return      # a container without systemd: the path checks above hold
    dest = tmp_path / "root"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFIX", "OUTPUT", "MAKEFLAGS")}
    r = subprocess.run(["make", "-s", "-o", "all", "install", f"DESTDIR={dest}"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert os.access(f"{dest}{INSTALLED}", os.X_OK)
    unit = tmp_path / "trainbpf.service"
    with open(UNIT) as f:
        unit.write_text(f.read().replace(INSTALLED, f"{dest}{INSTALLED}"))
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
