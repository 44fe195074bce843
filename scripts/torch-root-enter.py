#!/usr/bin/python3 -IS
"""torch-root-enter.py ROOT CMD...: run CMD inside ROOT (scripts/torch-root.sh).

One process from here to CMD, no child: a private mount namespace, the
mounts made with mount(2) directly, chroot, chdir, exec. A tracer that
launched us (trainbpf -- ...) sees one pid that becomes CMD, not a crowd
of short mount(8) processes; the caller's pid is CMD's pid. The mounts
(/proc, /dev, a fresh /dev/shm, /tmp, /etc/hosts read-only, the current
directory and this repository at their own paths) live in the namespace only: they vanish with
the last process in it, never show on the machine, and leave nothing
mounted in ROOT.
"""
import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18

libc = ctypes.CDLL(None, use_errno=True)


def mount(src, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None
    if libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        sys.exit(f"torch-root: mount {src} on {target}: {os.strerror(err)}")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: torch-root-enter.py ROOT CMD...")
    root, cmd = os.path.realpath(sys.argv[1]), sys.argv[2:]
    here = os.getcwd()
    if libc.unshare(CLONE_NEWNS) != 0:
        sys.exit(f"torch-root: unshare: {os.strerror(ctypes.get_errno())}")
    mount(None, "/", None, MS_REC | MS_PRIVATE)   # nothing propagates back out
    mount("proc", root + "/proc", "proc", 0)
    mount("/dev", root + "/dev", None, MS_BIND | MS_REC)
    mount("tmpfs", root + "/dev/shm", "tmpfs", 0, "mode=1777")
    mount("/tmp", root + "/tmp", None, MS_BIND | MS_REC)
    # the machine's name resolves as outside (torchrun's rendezvous uses it)
    mount("/etc/hosts", root + "/etc/hosts", None, MS_BIND)
    mount(None, root + "/etc/hosts", None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    # the repository too: a test names its workloads by absolute path
    repo = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    done = []
    for d in sorted({here, repo}):
        # "/" would hide the root itself: from there, the job sees the root's /
        if d == "/" or any(d == m or d.startswith(m + "/") for m in done):
            continue
        os.makedirs(root + d, exist_ok=True)
        mount(d, root + d, None, MS_BIND | MS_REC)
        done.append(d)
    os.chroot(root)
    os.chdir(here)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    # by hand: after chroot the host's Python cannot import anything more
    # (os.execvpe would), and sys.exit's message needs nothing new either
    path = cmd[0]
    if "/" not in path:
        for d in env["PATH"].split(":"):
            if os.access(d + "/" + path, os.X_OK):
                path = d + "/" + path
                break
    try:
        os.execve(path, cmd, env)
    except OSError as e:
        sys.exit(f"torch-root: {cmd[0]}: {e.strerror}")


if __name__ == "__main__":
    main()
