"""`trainbpf top` as a person sees it: in tmux, capture-pane reads the screen.

Two jobs of the node (torch 1.13 loops, jobs top-t and top-u), found by
--match as serve finds them:
- a line per job's rank, by job, with its phase shares (they sum to 100
  within the rounding of 8 columns) and what it mostly was;
- redrawn in place: the title stays on the first line, never scrolled away;
- down moves the choice (reverse video) to the next row; enter opens that
  job's live view (trainbpf -p its rank: the pane's process is that, its
  panel on the screen), and Ctrl-C there ends it with the final report.
What each share is made of is top_view.c's unit test (tests/unit/test_top_view.c),
and the series it reads are held to the jobs' own clocks in test_serve.py.
"""
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import SYSTEM_PYTHON, TORCH_JOB, TRAINBPF

pytestmark = pytest.mark.skipif(not shutil.which("tmux"),
                                reason="never: scripts/setup.sh installs tmux")
MARK = "tb-top-mark"
# What --match is given: the jobs' command lines match it (their truth files'
# names) and tmux's server does not, though it keeps the command line of the
# client that started it, which holds this text: "[k]" is not "k". A tmux
# server matched is a process of the node with no backward, judged by its
# activity (job.h), and counted as a job of its own when the host is busy.
MATCH = "tb-top-mar[k]"


def screen(name, escapes=False):
    return subprocess.run(["tmux", "capture-pane", "-p", *(["-e"] if escapes else []), "-t",
                           name], capture_output=True, text=True, check=True).stdout.splitlines()


def wait_screen(name, pred, timeout=60, escapes=False):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = screen(name, escapes)
        if pred(lines):
            return lines
        time.sleep(0.2)
    raise AssertionError("\n".join(screen(name)))


def row(lines, job):
    return next((l for l in lines if l.startswith(job + " ")), None)


def phased(line):
    """top-t's row once it has shares: the 8 phase columns are numbers."""
    cells = line.split()[4:12] if line else []
    return len(cells) == 8 and all(re.fullmatch(r"\d+\.\d", c) for c in cells)


def test_top_in_tmux(tmp_path):
    name = f"tbtop{os.getpid()}"
    jobs = []
    env = dict(os.environ, RANK="0", WORLD_SIZE="1")
    try:
        jobs.append(subprocess.Popen(
            [SYSTEM_PYTHON, TORCH_JOB, "--truth", str(tmp_path / f"{MARK}.json"), "--epochs", "1",
             "--steps", "100000", "--workers", "0"],
            env=dict(env, TORCHELASTIC_RUN_ID="top-t"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        jobs.append(subprocess.Popen(
            [SYSTEM_PYTHON, TORCH_JOB, "--truth", str(tmp_path / f"{MARK}.u.json"),
             "--epochs", "1", "--steps", "100000", "--workers", "0"],
            env=dict(env, TORCHELASTIC_RUN_ID="top-u"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "30", "env",
                        "TERM=xterm-256color", TRAINBPF, "top", "-i", "1", "--match", MATCH],
                       check=True)
        # The screen stays once trainbpf ends (the live view's final report).
        subprocess.run(["tmux", "set-option", "-w", "-t", name, "remain-on-exit", "on"],
                       check=True)
        lines = wait_screen(name, lambda l: phased(row(l, "top-t")) and phased(row(l, "top-u")),
                            90)
        assert lines[0].startswith("trainbpf top: 2 training jobs, 2 ranks"), lines[0]
        assert lines.index(row(lines, "top-t")) < lines.index(row(lines, "top-u"))
        for job in ("top-t", "top-u"):
            cells = row(lines, job).split()
            shares = [float(c) for c in cells[4:12]]
            assert abs(sum(shares) - 100) <= 0.05 * 8 + 0.01, (job, shares)
            assert float(cells[2]) > 0 and float(cells[3]) > 0, cells   # step ms, steps/s
        # In place: two tables later the title is still the first line.
        first = screen(name)
        time.sleep(2.5)
        again = screen(name)
        assert again[0].startswith("trainbpf top:") and len(again) == len(first)
        # Down: the second row (top-u) is chosen; enter: its live view.
        subprocess.run(["tmux", "send-keys", "-t", name, "Down"], check=True)
        wait_screen(name, lambda l: any("\x1b[7mtop-u" in x for x in l), 10, escapes=True)
        subprocess.run(["tmux", "send-keys", "-t", name, "Enter"], check=True)
        live = wait_screen(name, lambda l: any(re.match(r"trainbpf \S+ .* traced, 1 trainer", x)
                                               for x in l), 60)
        assert not any(x.startswith("trainbpf top:") for x in live), live
        # The pane's process is that live view now (top exec'ed it): -p the chosen job's rank.
        pane = subprocess.run(["tmux", "display-message", "-p", "-t", name, "#{pane_pid}"],
                              capture_output=True, text=True, check=True).stdout.strip()
        with open(f"/proc/{pane}/cmdline") as f:
            argv = f.read().split("\0")[:-1]
        assert argv == ["trainbpf", "-p", str(jobs[1].pid), "-i", "1"], argv
        subprocess.run(["tmux", "send-keys", "-t", name, "C-c"], check=True)
        # its final report's last lines (its first have scrolled past 30 rows)
        wait_screen(name, lambda l: any(x.startswith("Counters:") for x in l), 60)
        # A closed terminal (SIGHUP) ends top, as it ends the live tool.
        subprocess.run(["tmux", "respawn-pane", "-k", "-t", name, "env", TRAINBPF, "top",
                        "--match", MATCH], check=True)
        wait_screen(name, lambda l: any(x.startswith("trainbpf top:") for x in l), 60)
        pane = subprocess.run(["tmux", "display-message", "-p", "-t", name, "#{pane_pid}"],
                              capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run(["tmux", "kill-session", "-t", name], check=True)
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{pane}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pane}"), "top outlived its terminal"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        for p in jobs:
            p.kill()
            p.wait()
