"""The live view in place on a terminal (user/report/live_screen.c), as a
person sees it: trainbpf runs in tmux, capture-pane reads the screen.

- The panel holds the top of the screen and is redrawn there every -i
  seconds (its clock moves between two looks; it is on the screen once:
  nothing scrolled it away or printed it twice).
- The job's own output scrolls below the panel's rule, never through it.
- A resized terminal gets the panel laid out again within its columns.
- At the end the whole screen scrolls again and the final report follows.
Off a terminal (a pipe, a file) the tables come one after another as
before: every other live test reads them so.
"""
import os
import shutil
import subprocess
import time

import pytest

from conftest import TRAINBPF

RULE = "\u2500" * 10
JOB = "for i in $(seq 1 30); do echo job line $i; sleep 0.3; done"

pytestmark = pytest.mark.skipif(not shutil.which("tmux"),
                                reason="never: scripts/setup.sh installs tmux")


def screen(name):
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True,
                          text=True, check=True).stdout.splitlines()


def panel_of(lines):
    """The panel's lines: from the top to its rule."""
    rule = next(i for i, l in enumerate(lines) if l.startswith(RULE))
    return lines[:rule], rule


@pytest.fixture
def tmux(tmp_path):
    name = f"tb{os.getpid()}"
    done = tmp_path / "done"
    cmd = f"{TRAINBPF} -i 1 -- sh -c '{JOB}'; echo EXIT=$? > {done}; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30",
                    "env", "TERM=xterm-256color", "sh", "-c", cmd], check=True)
    try:
        yield name, done
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def wait_screen(name, pred, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = screen(name)
        if pred(lines):
            return lines
        time.sleep(0.2)
    raise AssertionError("\n".join(screen(name)))


def test_panel_in_place_and_the_job_below(tmux):
    name, done = tmux
    first = wait_screen(name, lambda l: any(x.startswith(RULE) for x in l) and
                        any("job line 5" in x for x in l))
    panel, rule = panel_of(first)
    assert panel[0].startswith("trainbpf ") and "s traced" in panel[0], first
    assert any(l.startswith("headline: computation") for l in panel), first
    # the job's lines are all below the rule
    assert all("job line" not in l for l in first[:rule + 1]), first
    t0 = panel[0].split("  ")[2]
    later = wait_screen(name, lambda l: l and l[0].startswith("trainbpf ") and
                        l[0].split("  ")[2] != t0)
    assert sum(l.startswith("trainbpf ") for l in later) == 1, later
    panel, rule = panel_of(later)
    assert all("job line" not in l for l in later[:rule + 1]), later
    lines = [int(l.split()[-1]) for l in later if l.startswith("job line")]
    assert lines == sorted(lines) and len(lines) >= 2, later
    # the end: the report under it all, the job's status ours
    wait_screen(name, lambda l: done.exists(), 60)
    assert done.read_text().strip() == "EXIT=0"
    end = screen(name)
    assert any(l.startswith("Counters: storage read") for l in end), end


def test_resized_terminal_laid_out_again(tmux):
    name, _ = tmux
    wait_screen(name, lambda l: any(x.startswith(RULE) for x in l))
    subprocess.run(["tmux", "resize-window", "-t", name, "-x", "60", "-y", "24"], check=True)
    time.sleep(1.5)     # a draw after the resize (at once, then every second)
    lines = wait_screen(name, lambda l: l and l[0].startswith("trainbpf ") and
                        any(x.startswith(RULE) for x in l))
    panel, rule = panel_of(lines)
    assert len(lines) == 24
    assert all(len(l) <= 59 for l in panel), panel
    assert sum(l.startswith("trainbpf ") for l in lines) == 1, lines
    assert all("job line" not in l for l in lines[:rule + 1]), lines
