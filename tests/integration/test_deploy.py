"""deploy/ lines up with the build: the systemd unit, the container image
and the DaemonSet run the binary where `make install` puts it; systemd
accepts the unit with that binary in place; the image (Debian 12) installs
a package for every library build/trainbpf links, checked with dpkg on
this Debian 12 machine, and the DaemonSet names the image `make image`
tags. Reads the Makefile through `make -n`, so a change of PREFIX, IMAGE
or of a rule is seen. No docker, no network, no BPF: needs build/trainbpf
(make all), ldd, readelf and dpkg."""
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import ROOT, TRAINBPF

UNIT = os.path.join(ROOT, "deploy", "systemd", "trainbpf.service")
DOCKERFILE = os.path.join(ROOT, "deploy", "container", "Dockerfile")
DOCKERIGNORE = DOCKERFILE + ".dockerignore"
DAEMONSET = os.path.join(ROOT, "deploy", "kubernetes", "trainbpf-daemonset.yaml")
# In every Debian image: the C library, libm and the dynamic loader.
BASE_PACKAGES = {"libc6"}


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


def dockerfile():
    """[(INSTRUCTION, arguments)] with continuations joined, comments out."""
    out, cur = [], ""
    with open(DOCKERFILE) as f:
        for line in f:
            line = line.rstrip("\n")
            if not cur and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def instructions(name):
    return [a for i, a in dockerfile() if i == name]


def apt_packages():
    pkgs = []
    for run in instructions("RUN"):
        for cmd in re.split(r"&&|;", run):
            words = shlex.split(cmd)
            if words[:2] == ["apt-get", "install"]:
                pkgs += [w for w in words[2:] if not w.startswith("-")]
    return pkgs


def test_dockerfile_image():
    (base,) = instructions("FROM")
    assert base == "debian:bookworm-slim"
    pkgs = apt_packages()
    assert pkgs and len(pkgs) == len(set(pkgs)), pkgs
    (copy,) = instructions("COPY")
    assert shlex.split(copy) == [BUILT, INSTALLED], copy
    (entry,) = instructions("ENTRYPOINT")
    assert json.loads(entry) == [INSTALLED]
    (cmd,) = instructions("CMD")
    assert json.loads(cmd)[0] == "serve"


def test_dockerignore_sends_the_binary():
    """The last pattern that matches a path decides; `!` lets it through."""
    patterns = [l.strip() for l in open(DOCKERIGNORE) if l.strip() and not l.startswith("#")]

    def sent(path):
        keep = True
        for p in patterns:
            if fnmatch.fnmatch(path, p.lstrip("!")):
                keep = p.startswith("!")
        return keep

    assert sent(BUILT)
    assert not sent("tests/workloads/build/mixed") and not sent("user/app/serve.c")


def owners(paths):
    """{path: the Debian package that ships it}, in one dpkg query (usrmerge:
    a library is registered under /lib or /usr/lib, by either name)."""
    cands = {}
    for path in paths:
        real = os.path.realpath(path)
        for p in (path, real):
            for c in (p, p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p):
                cands.setdefault(c, path)
    r = subprocess.run(["dpkg-query", "-S", *cands], capture_output=True, text=True,
                       timeout=60)
    out = {}
    for line in r.stdout.splitlines():
        pkg, _, file = line.partition(": ")
        if file in cands:
            out.setdefault(cands[file], set()).add(pkg.split(":")[0])
    for path in paths:
        assert len(out.get(path, ())) == 1, (path, out.get(path), r.stderr)
    return {path: out[path].pop() for path in paths}


def dpkg_status():
    """{installed package: the installed packages it depends on (the first
    installed choice of each alternative)}, from dpkg's own database."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${db:Status-Status}\t"
                        "${Depends}, ${Pre-Depends}\n"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    have = {name for name, status, _ in rows if status == "installed"}
    deps = {}
    for name, status, raw in rows:
        if name not in have:
            continue
        deps[name] = set()
        for alt in raw.split(","):
            for choice in alt.split("|"):
                dep = re.sub(r"\(.*?\)", "", choice).strip().split(":")[0]
                if dep in have:
                    deps[name].add(dep)
                    break
    return deps


def closure(deps, pkgs):
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += deps[p]
    return seen


def libraries():
    """{soname or path: resolved path} of everything ldd loads, and the
    sonames the binary itself needs (NEEDED)."""
    r = subprocess.run(["ldd", TRAINBPF], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "not found" not in r.stdout, r.stdout + r.stderr
    libs = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line) or re.match(r"\s*((/\S+))\s+\(", line)
        if m:
            libs[m.group(1)] = m.group(2)
    r = subprocess.run(["readelf", "-d", TRAINBPF], capture_output=True, text=True, timeout=30)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout)
    assert needed and set(needed) <= set(libs), (needed, libs)
    return libs, needed


def test_image_packages_provide_every_library():
    """Each library the binary needs is in a package the Dockerfile installs
    (or libc6); each one ldd loads (theirs too: GnuTLS's nettle, gmp...) is
    in those packages' dependencies; each package installed ships one of
    them (zlib1g: libz, which libbpf and libelf load). The
    packages are Debian 12's: this machine's, which built the binary."""
    with open("/etc/os-release") as f:
        release = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
    if (release.get("ID"), release.get("VERSION_ID", "").strip('"')) != ("debian", "12"):
        pytest.fail("the image is Debian 12's: build and check build/trainbpf on Debian 12")
    pkgs = set(apt_packages())
    deps = dpkg_status()
    assert pkgs <= set(deps), f"not Debian 12 packages installed here: {pkgs - set(deps)}"
    libs, needed = libraries()
    by_path = owners(list(libs.values()))
    owner = {name: by_path[path] for name, path in libs.items()}
    direct = {owner[n] for n in needed}
    assert direct - BASE_PACKAGES <= pkgs, f"not installed in the image: {direct - pkgs}"
    assert pkgs <= set(owner.values()), f"installed for no library: {pkgs - set(owner.values())}"
    reach = closure(deps, pkgs | BASE_PACKAGES)
    missing = {n: o for n, o in owner.items() if o not in reach}
    assert not missing, missing


def test_daemonset_runs_the_image():
    import yaml
    docs = [d for d in yaml.safe_load_all(open(DAEMONSET)) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    (build,) = make_dry("image")
    assert build[:4] == ["docker", "build", "-f", "deploy/container/Dockerfile"], build
    image = build[build.index("-t") + 1]
    # A registry in front of the name is the user's; the name and tag are make's.
    assert c["image"].rsplit("/", 1)[-1] == image.rsplit("/", 1)[-1], (c["image"], image)
    assert c["command"] == [INSTALLED]
    assert c["args"][0] == "serve"
