"""--functions: Python stacks read from outside, against the interpreter's
own word (sys._current_frames) and the job's own timers.

Each CPython the machine has is run: pyenv's 3.8-3.13 (shared libpython),
Debian 12's stripped /usr/bin/python3.11 (the interpreter in a non-PIE
executable), a venv, and Debian 13's 3.13 in the torch root (another
mount namespace's files).
"""
import glob
import json
import os
import re
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import ROOT, TRAINBPF, run_trainbpf, workload

PY_FUNCS = os.path.join(ROOT, "tests", "workloads", "py_funcs.py")
PY_OFFSETS = os.path.join(ROOT, "tests", "workloads", "py_offsets.c")
LAYOUTS = os.path.join(ROOT, "user", "acquire", "pylayouts.c")
TORCH_ROOT = "/var/lib/trainbpf-tests/trixie-torch"
HZ = 997  # on-CPU samples a second: spin's 1.5-2 s give ~1500-2000


def pyenv(minor):
    hits = sorted(glob.glob(f"/root/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"))
    return hits[-1] if hits else None


def interpreters():
    out = [pytest.param([p], id=f"pyenv3.{m}") for m in range(8, 14) if (p := pyenv(m))]
    out.append(pytest.param(["/usr/bin/python3.11"], id="debian3.11-stripped"))
    out.append(pytest.param("venv", id="venv3.11"))
    if os.path.exists(os.path.join(TORCH_ROOT, "usr", "bin", "python3")):
        out.append(pytest.param([os.path.join(ROOT, "scripts", "torch-root.sh"), "run",
                                 "python3"], id="torch-root3.13"))
    return out


FRAME = re.compile(r"^(.*) \((.*):(\d+)\)$")


def folded(path):
    """[(pid, [(name, line, file)...] outermost first, cat, ns)] of --folded."""
    out = []
    for line in open(path):
        stack, ns = line.rstrip("\n").rsplit(" ", 1)
        parts = stack.split(";")
        pid = int(parts[0].split()[-1])
        cat = parts[-1].strip("[]")
        frames = []
        for p in parts[1:-1]:
            m = FRAME.match(p)
            frames.append((m[1], int(m[3]), m[2]) if m else (p, 0, ""))
        out.append((pid, frames, cat, int(ns)))
    return out


def fn_seconds(rows, pid, name):
    return sum(ns for p, fr, _, ns in rows if p == pid and any(f[0] == name for f in fr)) / 1e9


def python_cmd(param, tmp_path):
    if param != "venv":
        return param
    base = pyenv(11)
    if not base:
        pytest.skip("no pyenv 3.11 to make a venv of")
    venv = tmp_path / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    return [str(venv / "bin" / "python")]


@pytest.mark.parametrize("interp", interpreters())
def test_stacks_and_times_match_the_interpreter(interp, tmp_path):
    cmd = python_cmd(interp, tmp_path)
    out = tmp_path / "folded.txt"
    # The torch root sees the repository and the current directory at their
    # paths. The loop starts 1.5 s in: trainbpf looks for the interpreter
    # at each tick of the job's first second (it may not have mapped
    # libpython at the first), and publishes its threads at the same tick.
    r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "--folded", str(out), "-i", "0",
                      "--"] + cmd + [PY_FUNCS, "truth.json", "4", "--settle", "1.5"],
                     cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    truth = json.load(open(tmp_path / "truth.json"))
    pid = next(int(m[1]) for m in re.finditer(r"pid (\d+): Python 3\.(\d+)", r.stdout)
               if int(m[2]) == truth["version"][1])
    rows = folded(out)

    # The stacks BPF read are the interpreter's own: names, first lines, files.
    stacks = {tuple(fr) for p, fr, _, _ in rows if p == pid}
    for fn in ("nap", "side_task"):
        want = tuple((n, line, f) for n, line, f in truth["stacks"][fn])
        assert want in stacks, f"{fn}: the interpreter's stack {want} was not read"

    # Each function's time, within 3 points of the loop's wall time of its own timer.
    wall = truth["wall"]
    for fn, secs in truth["secs"].items():
        got = fn_seconds(rows, pid, fn)
        assert abs(got - secs) <= 0.03 * wall, \
            f"{fn}: {got:.3f} s read, {secs:.3f} s by its own timer (wall {wall:.2f} s)"
    # The thread started mid-run was read (it was published a tick after it began).
    assert fn_seconds(rows, pid, "side_task") > 0.5 * (wall - 1.0) - 0.4


@pytest.mark.parametrize("deep", [70, 600], ids=["middle-cut", "past-the-walk"])
def test_a_deep_stack_keeps_its_outermost_frames(deep, tmp_path):
    """A stack deeper than the reader keeps (nap called through `deep`
    frames of recursion): its innermost TB_PY_INNER (40) frames and its
    outermost 24, where the loop and its callee are, the count of those
    between said in their place; the time is still nap's, and its
    callers' (Loop.step, main). Past the walk's 512 frames the outermost
    are not reached: said at the root instead."""
    py = pyenv(12) or "/usr/bin/python3.11"
    out = tmp_path / "folded.txt"
    r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "--folded", str(out), "-i", "0",
                      "--", py, PY_FUNCS, "truth.json", "3", "--settle", "1.5",
                      "--deep", str(deep)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    truth = json.load(open(tmp_path / "truth.json"))
    want = [tuple(f) for f in truth["stacks"]["nap"]]
    assert len(want) > deep, len(want)
    naps = [fr for p, fr, _, _ in folded(out) if p == truth["pid"] and fr and fr[-1][0] == "nap"]
    assert naps, "no stack of nap was read"
    if deep < 512:
        kept = want[:24] + [(f"({len(want) - 64} frames not read)", 0, "")] + want[-40:]
    else:
        # The last 24 frames walked, not the outermost: the walk stopped 512 in.
        kept = [("(outer frames not read)", 0, "")] + want[-512:-488] + \
            [("(448 frames not read)", 0, "")] + want[-40:]
    assert kept in naps, f"read {naps[0][:26]}..., wanted {kept[:26]}..."
    rows = folded(out)
    wall = truth["wall"]
    got = fn_seconds(rows, truth["pid"], "nap")
    assert abs(got - truth["secs"]["nap"]) <= 0.03 * wall, (got, truth["secs"])
    if deep < 512:
        step = "Loop.step" if truth["version"][1] >= 11 else "step"
        assert fn_seconds(rows, truth["pid"], step) >= sum(truth["secs"].values()) - 0.03 * wall


def in_window(calls, name, start, end):
    """Seconds of name's calls that fell inside [start, end] (Unix seconds)."""
    return sum(max(0.0, min(e, end) - max(s, start)) for n, s, e in calls if n == name)


def test_attached_mid_function(tmp_path):
    """-p on a job already in its loop: its stacks read from the attach on."""
    py = pyenv(12) or "/usr/bin/python3.11"
    truth, ready = tmp_path / "truth.json", tmp_path / "ready"
    job = subprocess.Popen([py, PY_FUNCS, str(truth), "8", "--thread-at", "0.5",
                            "--ready", str(ready)])
    try:
        deadline = time.time() + 10
        while not ready.exists():
            assert time.time() < deadline
            time.sleep(0.05)
        time.sleep(1.5)
        out, report = tmp_path / "folded.txt", tmp_path / "out.json"
        r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "--folded", str(out), "-i",
                          "0", "-d", "3", "--format", "json", "-o", str(report),
                          "-p", str(job.pid)])
        assert r.returncode == 0, r.stderr
    finally:
        job.wait(timeout=30)
    t = json.load(open(truth))
    rows = folded(out)
    stacks = {tuple(fr) for p, fr, _, _ in rows if p == job.pid}
    assert tuple(tuple(f) for f in t["stacks"]["nap"]) in stacks
    # Each function's share of the loop's time read over the traced
    # window is its share by its own timer over the same seconds: the
    # job's steps are alike only on an idle machine (a pipe's waker is
    # late under load, and trainbpf's own start is load), so the whole
    # run's shares would be another premise.
    win = json.load(open(report))["window"]
    start, end = win["start_unix_s"], win["start_unix_s"] + win["duration_s"]
    steps = in_window(t["calls"], "step", start, end)
    loop = fn_seconds(rows, job.pid, "Loop.step" if t["version"][1] >= 11 else "step")
    assert loop > 2.0 and steps > 2.0, (loop, steps)
    for fn in t["secs"]:
        got, want = fn_seconds(rows, job.pid, fn) / loop, in_window(t["calls"], fn, start, end) / steps
        assert abs(got - want) <= 0.03, \
            f"{fn}: {got:.3f} of the loop read, {want:.3f} by its own timer in the window"


def test_no_interpreter_is_said(tmp_path):
    """A job that is no Python: said per process, the run goes on and reports."""
    r = run_trainbpf(["--functions", "-i", "0", "--", workload("pingpong"), "-d", "1",
                      "-o", str(tmp_path / "out.json")])
    assert r.returncode == 0, r.stderr
    assert re.search(r"pids? [\d, .]+(?: \(\d+\))?: no Python interpreter \(no _PyRuntime "
                     r"exported", r.stdout), \
        r.stdout


def test_options_go_with_functions():
    r = run_trainbpf(["--folded", "/tmp/x", "--", "true"])
    assert r.returncode != 0
    assert "--folded and --stack-hz go with --functions" in r.stderr


def header_offsets(minor, include):
    """What tests/workloads/py_offsets.c prints, built against these headers."""
    exe = f"/tmp/py_offsets_3{minor}_{os.getpid()}"
    arch = include.replace("/usr/include/", "/usr/include/x86_64-linux-gnu/")
    subprocess.run(["gcc", "-w", "-I", include, "-I", arch, PY_OFFSETS, "-o", exe], check=True)
    try:
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(exe)
    return {k: int(v) for k, v in re.findall(r"(\w+) = (-?\d+)", out)}


def table_rows():
    """user/acquire/pylayouts.c's table, as {minor: {field: value}}."""
    src = open(LAYOUTS).read()
    body = src[src.index("static const struct py_offsets table[]"):]
    body = body[:body.index("};")]
    rows = {}
    for m in re.finditer(r"\{([^{}]*)\}", body):
        fields = {k: int(v) for k, v in re.findall(r"\.(\w+) = (-?\d+)", m[1])}
        rows[fields["minor"]] = fields
    return rows


def header_sets():
    out = []
    for m in range(8, 13):
        if pyenv(m):
            base = os.path.dirname(os.path.dirname(pyenv(m)))
            out.append(pytest.param(m, f"{base}/include/python3.{m}", id=f"pyenv3.{m}"))
    if os.path.exists("/usr/include/python3.11/internal/pycore_frame.h"):
        out.append(pytest.param(11, "/usr/include/python3.11", id="debian3.11"))
    return out


@pytest.mark.parametrize("minor,include", header_sets())
def test_offsets_table_is_what_the_headers_say(minor, include):
    want = header_offsets(minor, include)
    got = table_rows()[minor]
    assert {k: got[k] for k in want} == want


def by_phase(text):
    """{phase: seconds} of the functions section's "by phase" block."""
    block = text[text.index("  by phase ("):]
    block = block[:block.index("\n\n")]
    return {m[1]: float(m[2]) for m in re.finditer(r"^    (\w[\w ]*?) +([\d.]+) s +[\d.]+%$",
                                                     block, re.M)}


def by_phase_json(path):
    """{phase: seconds} and the forward phase's functions, of the JSON report."""
    rep = json.load(open(path))
    loop = next(g for g in rep["functions"]["groups"] if g["threads"] == "training_loops")
    phases = {p["phase"]: p for p in loop["phases"]}
    return {k: p["read_s"] for k, p in phases.items()}, phases["forward"]["functions"]


@pytest.mark.parametrize("variant,torch26,fmt", [
    pytest.param("dl-fork", False, "text", id="dl-fork-torch1.13-text"),
    pytest.param("validation", True, "json", id="validation-torch2.6-json"),
])
def test_phases_of_the_functions_are_the_jobs(variant, torch26, fmt, tmp_path):
    """The loop's functions by phase: each phase's time within 3 points of
    the rank's life of what the job timed itself (test_phases.py's truth)."""
    from conftest import SYSTEM_PYTHON, TORCH26_PYTHON, TORCH_JOB
    from test_phases import COMPARED, restarts, truth_phases

    job = TORCH26_PYTHON if torch26 else [SYSTEM_PYTHON]
    # The on-CPU part sampled often enough that its spread is small beside
    # the bound: at most a sample (1 ms) off per run on a CPU, some 70 runs a phase.
    out = ["--format", "json", "-o", str(tmp_path / "report.json")] if fmt == "json" else []
    r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "-i", "0", *out, "--", *job,
                      TORCH_JOB, "--variant", variant, "--truth", "truth.json"], timeout=600,
                     cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    truth = json.loads((tmp_path / "truth.json").read_text())
    rank = truth["ranks"][0]
    life = rank["end_mono"] - rank["start_mono"]
    want = truth_phases(rank, True, restarts(truth))
    if fmt == "json":
        got, fwd_fns = by_phase_json(tmp_path / "report.json")
    else:
        got = by_phase(r.stdout)
    for ph in COMPARED:
        assert abs(got.get(ph, 0.0) - want[ph]) <= 0.03 * life, \
            f"{ph}: {got.get(ph, 0.0):.3f} s in the functions, {want[ph]:.3f} s by the job " \
            f"(life {life:.2f} s); all: {got} vs {want}"
    # Forward is the model's: most of it in its layers' forward (an MLP on a CPU).
    if fmt == "json":
        lin = [f for f in fwd_fns if f["name"] == "Linear.forward"]
        assert lin and lin[0]["total_s"] > 0.5 * got["forward"], fwd_fns
        assert lin[0]["file"].endswith("linear.py")
        return
    fwd = re.search(r"^    forward .*\n((?:      .*\n)+)", r.stdout, re.M)
    assert fwd, r.stdout
    share = re.search(r"^      Linear\.forward \(linear\.py:\d+\) +[\d.]+ s +([\d.]+)%",
                      fwd[1], re.M)
    assert share and float(share[1]) > 50, fwd[1]


def test_html_section(tmp_path):
    """The HTML report's section: the same functions, escaped, in a page that parses."""
    from html.parser import HTMLParser

    out = tmp_path / "report.html"
    r = run_trainbpf(["--functions", "-i", "0", "-o", str(out), "--", "/usr/bin/python3.11",
                      PY_FUNCS, str(tmp_path / "truth.json"), "2", "--settle", "0.5"])
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    section = page[page.index('<section id="functions">'):]
    section = section[:section.index("</section>")]
    for fn in ("spin (py_funcs.py:", "nap (py_funcs.py:", "wait_pipe (py_funcs.py:"):
        assert fn in section, fn

    class Check(HTMLParser):
        def __init__(self):
            super().__init__()
            self.open = []

        def handle_starttag(self, tag, attrs):
            if tag in ("section", "table", "tr", "td", "th", "h3"):
                self.open.append(tag)

        def handle_endtag(self, tag):
            if tag in ("section", "table", "tr", "td", "th", "h3"):
                assert self.open and self.open.pop() == tag, (tag, self.open)

    c = Check()
    c.feed(section + "</section>")
    assert not c.open


TORCH_SECTIONS = os.path.join(ROOT, "tests", "workloads", "torch_sections.py")
SECTIONS = ("get_batch", "ema_update", "sample_images", "compute_metrics", "save_metrics")


def sections_text(text, where=r"torch_sections\.py:\d+"):
    """{callee: seconds} of the phase table's named rows ("in NAME (WHERE): ...",
    WHERE a regex: file:line by default), summed over the phases they are
    under: ms per step times the steps."""
    steps = int(re.search(r"(\d+) training steps", text)[1])
    got = {}
    for m in re.finditer(r"^ {16} *[\d.]+% +([\d.]+) +in (\S+) \(" + where + r"\): ", text,
                         re.M):
        got[m[2]] = got.get(m[2], 0.0) + float(m[1]) * steps / 1e3
    return got


def sections_html(page):
    """{callee: seconds} of the HTML phase table's section rows, as sections_text."""
    steps = int(re.search(r"(\d+) training steps", page)[1])
    got = {}
    for m in re.finditer(r'<tr class="section"><td class="l"[^>]*>in (\S+) '
                         r'\(torch_sections\.py:\d+\)</td><td>[\d.]+</td><td>([\d.]+)</td>',
                         page):
        got[m[1]] = got.get(m[1], 0.0) + float(m[2]) * steps / 1e3
    return got


def sections_json(path):
    """{callee: seconds} of the JSON phase rows' sections, and the rows."""
    rows = json.load(open(path))["phases"]["list"]
    got = {}
    for row in rows:
        for s in row.get("sections", []):
            if s["kind"] == "call":
                got[s["name"]] = got.get(s["name"], 0.0) + s["wall_s"]
    return got, rows


def table_sections(text):
    """{phase: [(label, share %)]} of the text phase table's named rows, in order."""
    out, phase = {}, None
    for line in text[text.index("  PHASE          SHARE"):].split("\n\n")[0].splitlines()[1:]:
        m = re.match(r"^  (\w+) +[\d.]+%", line)
        if m:
            phase = m[1]
            continue
        m = re.match(r"^ {16} *([\d.]+)% +[\d.-]+ +in (.+?): ", line)
        if m and phase:
            out.setdefault(phase, []).append((m[2], float(m[1])))
    return out


def check_verdict_names_the_sections(text):
    """The verdict's "of which in" is the table's first two named rows under
    its phase (not a folded "N more calls"), with the same shares; none
    where the table names none under it."""
    phase = re.search(r"^Verdict: (\w+) is ", text, re.M)[1]
    rows = [r for r in table_sections(text).get(phase, []) if not r[0].endswith(("more call",
                                                                              "more calls"))]
    m = re.search(r"^Verdict: .*\n  of which in (.+)$", text, re.M)
    got = [(x.rsplit(" ", 1)[0], float(x.rsplit(" ", 1)[1][:-1]))
           for x in m[1].split(", ")] if m else []
    assert got == rows[:2], (got, rows)
    return phase, got


@pytest.mark.parametrize("torch26,fmt", [
    pytest.param(False, "text", id="torch1.13-text"),
    pytest.param(True, "json", id="torch2.6-json"),
    pytest.param(False, "html", id="torch1.13-html"),
])
def test_named_sections_are_the_jobs(torch26, fmt, tmp_path):
    """A loop with no DataLoader whose work PyTorch does not bracket
    (tests/workloads/torch_sections.py: the batch made on the training
    thread, an EMA, sampling, metrics, their np.save): the phase table names
    each by the loop's callee, under the phases it fell in, and each
    callee's time over them is within 3 points of the loop's time of what
    the job timed itself. On-CPU time is sampled at HZ: some 10,000 samples
    over the loop, a section of 15% is 0.4 points off at one sigma."""
    from conftest import SYSTEM_PYTHON, TORCH26_PYTHON

    job = TORCH26_PYTHON if torch26 else [SYSTEM_PYTHON]
    out = {"text": [], "json": ["--format", "json", "-o", str(tmp_path / "report.json")],
           "html": ["-o", str(tmp_path / "report.html")]}[fmt]
    r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "-i", "0", *out, "--", *job,
                      TORCH_SECTIONS, "--truth", "truth.json"], timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    truth = json.loads((tmp_path / "truth.json").read_text())
    if fmt == "json":
        got, rows = sections_json(tmp_path / "report.json")
        # Without --functions there is no "sections" key; with it, every row has one.
        assert all("sections" in row for row in rows)
    elif fmt == "html":
        got = sections_html((tmp_path / "report.html").read_text())
    else:
        got = sections_text(r.stdout)
        assert "(in NAME: the loop's own call" in r.stdout
        # The largest phase (forward: the model, the EMA, the batch) comes
        # with its own calls in the verdict.
        phase, named = check_verdict_names_the_sections(r.stdout)
        assert named, (phase, r.stdout[:400])
    want = truth["sections"]
    bound = 0.03 * truth["loop_s"]
    print("named:", {k: round(v, 3) for k, v in got.items()}, "the job:",
          {k: round(v, 3) for k, v in want.items()}, f"loop {truth['loop_s']:.2f} s")
    for name in SECTIONS:
        assert abs(got.get(name, 0.0) - want[name]) <= bound, \
            f"{name}: {got.get(name, 0.0):.3f} s named, {want[name]:.3f} s by the job " \
            f"(bound {bound:.3f} s); all: {got} vs {want}"


SCOPES = ("augment", "ema", "visuals", "metrics", "save")


@pytest.mark.parametrize("torch26", [
    pytest.param(False, id="torch1.13-text"),
    pytest.param(True, id="torch2.6-json"),
])
def test_record_function_blocks_are_rows(torch26, tmp_path):
    """The loop's own record_function("name") blocks (torch_sections.py
    --scopes: four blocks in the loop, one nested in another, one a
    decorated function) are rows of their own under the phases they ran
    in, each within 3 points of the loop's time of the job's timer, as the
    named calls (test_named_sections_are_the_jobs). torch 1.13 opens them
    through the legacy op, 2.6 through record_function_enter_new. The
    nested block is a frame inside its parent's on the folded stacks, the
    decorated function's inside contextlib's wrapper, which is inside the
    block."""
    from conftest import SYSTEM_PYTHON, TORCH26_PYTHON

    job = TORCH26_PYTHON if torch26 else [SYSTEM_PYTHON]
    out = ["--format", "json", "-o", str(tmp_path / "report.json")] if torch26 else []
    r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "-i", "0", "--folded",
                      str(tmp_path / "stacks.folded"), *out, "--", *job, TORCH_SECTIONS,
                      "--truth", "truth.json", "--scopes"], timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    truth = json.loads((tmp_path / "truth.json").read_text())
    if torch26:
        rows = json.load(open(tmp_path / "report.json"))["phases"]["list"]
        got = {}
        for row in rows:
            for s in row["sections"]:
                if s["kind"] == "record_function":
                    got[s["name"]] = got.get(s["name"], 0.0) + s["wall_s"]
                    assert "file" not in s, s
    else:
        got = sections_text(r.stdout, "record_function")
    want = truth["sections"]
    bound = 0.03 * truth["loop_s"]
    print("rows:", {k: round(v, 3) for k, v in got.items()}, "the job:",
          {k: round(v, 3) for k, v in want.items()}, f"loop {truth['loop_s']:.2f} s")
    for name in SCOPES:
        assert abs(got.get(name, 0.0) - want[name]) <= bound, \
            f"{name}: {got.get(name, 0.0):.3f} s, {want[name]:.3f} s by the job " \
            f"(bound {bound:.3f} s); all: {got} vs {want}"
    # Nesting: every stack in "sampling" is inside "visuals", right under the loop.
    rf = " (record_function)"
    stacks = [([f[0] for f in frames], ns) for _, frames, _, ns in
              folded(tmp_path / "stacks.folded")]
    nested = [n for n, _ in stacks if "sampling" + rf in n]
    assert nested and all(n[n.index("sampling" + rf) - 1] == "visuals" + rf and
                          n[n.index("visuals" + rf) - 1] == "train_scoped" for n in nested), \
        nested[:3]
    # The decorated function: the block outside contextlib's wrapper, for
    # its time but a stack or two read torn (a sample as the interpreter
    # links a frame: the walk's outer frames are not the loop's, and such a
    # stack is left as read and counted, "stacks read in one not shown in
    # it", once in 6,000 samples in one CI run).
    deco = [(n, ns) for n, ns in stacks if "compute_metrics" in n]
    placed = sum(ns for n, ns in deco if n[n.index("compute_metrics") - 2] == "metrics" + rf)
    assert deco and placed >= 0.98 * sum(ns for _, ns in deco), deco[:3]


def test_record_function_blocks_in_the_trace(tmp_path):
    """A recording keeps the loop's record_function blocks of no phase
    (schema 13, with or without --functions); `trainbpf trace` draws them
    on a track per thread and depth: torch_sections.py --scopes, 40 steps
    (torch 1.13, the legacy op). Each block is one slice (augment, ema and
    metrics each step, visuals and its nested sampling every 4th, save
    every 10th); sampling lies within visuals; and each block's time is
    the job's own timer's less the Python around the two ops (the
    record_function object made, __enter__ up to its op, __exit__ after
    its op: 50-90 us a block on this machine; bound 1 ms a block, a
    preemption's worth, and never more than the timer)."""
    from conftest import SYSTEM_PYTHON

    db, trace = tmp_path / "run.db", tmp_path / "trace.json"
    r = subprocess.run([TRAINBPF, "record", "-o", str(db), "--", SYSTEM_PYTHON, TORCH_SECTIONS,
                        "--truth", str(tmp_path / "truth.json"), "--scopes", "--steps", "40"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    t = subprocess.run([TRAINBPF, "trace", str(db), "-o", str(trace)],
                       capture_output=True, text=True, timeout=120)
    assert t.returncode == 0, t.stderr
    doc = json.loads(trace.read_text())
    truth = json.loads((tmp_path / "truth.json").read_text())
    blocks = [e for e in doc["traceEvents"] if e.get("cat") == "record_function"]
    by = {}
    for e in blocks:
        by.setdefault(e["name"], []).append(e)
    assert {k: len(v) for k, v in by.items()} == \
        {"augment": 40, "ema": 40, "metrics": 40, "visuals": 10, "sampling": 10, "save": 4}
    assert doc["otherData"]["record_function_slices"] == 144
    assert doc["otherData"]["scopes_dropped"] == 0
    # One thread; visuals at depth 0, sampling on the next track, inside it.
    tracks = {e["name"]: {x["tid"] for x in v} for e in blocks for v in [by[e["name"]]]}
    assert len(tracks["visuals"]) == 1 and tracks["visuals"] != tracks["sampling"]
    for outer, inner in zip(sorted(by["visuals"], key=lambda e: e["ts"]),
                            sorted(by["sampling"], key=lambda e: e["ts"])):
        assert outer["ts"] <= inner["ts"] and \
            inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"], (outer, inner)
    for name in ("augment", "ema", "visuals", "metrics", "save"):
        got = sum(e["dur"] for e in by[name]) / 1e6
        want = truth["sections"][name]
        assert want - 1e-3 * len(by[name]) <= got <= want + 1e-4, (name, got, want)


TORCH_COMPILE = os.path.join(ROOT, "tests", "workloads", "torch_compile.py")


@pytest.mark.parametrize("loader", [False, True], ids=["no-loader", "loader"])
def test_torch_compile_is_named(loader, tmp_path):
    """A torch.compile'd model (torch 2.6, aot_eager: Dynamo and AOTAutograd)
    compiles in its first forward: that is the loop's setup without a
    DataLoader (the first step's data and forward come before any bracket),
    the first training step's forward with one. Either way the phase table
    names it, "torch.compile compiling" (JSON kind compile), within 3
    points of the loop's time of Dynamo's own clock (compile_inner); and
    nowhere else: the import of Dynamo's modules in torch.compile(model)
    is no compiling."""
    from conftest import TORCH26_PYTHON

    out = tmp_path / "report.json"
    r = run_trainbpf(["--functions", "--stack-hz", str(HZ), "-i", "0", "--format", "json",
                      "-o", str(out), "--", *TORCH26_PYTHON, TORCH_COMPILE, "--truth",
                      "truth.json", *(["--loader"] if loader else [])], timeout=600,
                     cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    truth = json.loads((tmp_path / "truth.json").read_text())
    rows = json.loads(out.read_text())["phases"]["list"]
    named = {row["phase"]: s for row in rows for s in row["sections"] if s["kind"] == "compile"}
    want = "forward" if loader else "setup"
    assert list(named) == [want], {p: s["wall_s"] for p, s in named.items()}
    got, bound = named[want]["wall_s"], 0.03 * truth["loop_s"]
    print(f"compile named {got:.3f} s, Dynamo's {truth['compile_s']:.3f} s, "
          f"first step {truth['first_step_s']:.3f} s, loop {truth['loop_s']:.2f} s")
    assert abs(got - truth["compile_s"]) <= bound, (got, truth["compile_s"], bound)
    assert named[want]["ms_per_step"] is None if not loader else named[want]["ms_per_step"] > 0
    if not loader:
        # The interpreter's exit (its thread joins and closes each a "fed"
        # event, BPF's feed_wait) is the teardown, not other: before, 0.74 s
        # of other, "no Python frame", on this job.
        wall = {row["phase"]: row["wall_s"] for row in rows}
        assert wall["other"] <= bound and wall["teardown"] > 0, wall
        assert not any(s["kind"] == "no_frame" for row in rows for s in row["sections"]), rows


def test_recorded_stacks_report_as_live(tmp_path):
    """record --functions keeps the stacks (schema 12): `trainbpf report` of
    the file prints the live report's bytes, its functions section and named
    sections included, and report --folded writes the stacks, their weights
    adding up to the time read. Without them, --folded is a one-line error."""
    from conftest import SYSTEM_PYTHON

    db, live = tmp_path / "run.db", tmp_path / "live.txt"
    r = subprocess.run([TRAINBPF, "record", "--functions", "--stack-hz", str(HZ), "-o", str(db),
                        "--report", str(live), "--", SYSTEM_PYTHON, TORCH_SECTIONS,
                        "--truth", str(tmp_path / "truth.json"), "--steps", "60"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    stacks = tmp_path / "stacks.folded"
    rep = subprocess.run([TRAINBPF, "report", str(db), "--folded", str(stacks)],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout == live.read_text()
    assert "in ema_update (torch_sections.py:" in rep.stdout
    read = float(re.search(r"the training loops' threads: [\d.]+ s traced, ([\d.]+) s",
                           rep.stdout)[1])
    total = 0
    for line in stacks.read_text().splitlines():
        frames, weight = line.rsplit(" ", 1)
        assert frames.startswith("trainer "), line
        total += int(weight)
    assert abs(total / 1e9 - read) <= 0.05 + 0.01 * read, (total, read)
    # The CSV's section rows: the same callees and times, against the job's timers.
    csv = subprocess.run([TRAINBPF, "report", str(db), "--format", "csv"],
                         capture_output=True, text=True, timeout=120)
    assert csv.returncode == 0, csv.stderr
    got = {}
    for row in __import__("csv").DictReader(csv.stdout.splitlines()):
        if row["kind"] == "section" and "(torch_sections.py:" in row["comm"]:
            name = row["comm"].split(" (")[0]
            got[name] = got.get(name, 0.0) + float(row["time_s"])
    truth = json.loads((tmp_path / "truth.json").read_text())
    for name in SECTIONS:
        assert abs(got.get(name, 0.0) - truth["sections"][name]) <= 0.03 * truth["loop_s"], \
            (name, got, truth["sections"])
    # A report of one epoch is not the run's stacks; a file without them has none.
    bad = subprocess.run([TRAINBPF, "report", str(db), "--epoch", "1", "--folded",
                          str(tmp_path / "x")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    plain = tmp_path / "plain.db"
    r = subprocess.run([TRAINBPF, "record", "-o", str(plain), "--", "/bin/true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    bad = subprocess.run([TRAINBPF, "report", str(plain), "--folded", str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "has no Python stacks" in bad.stderr, bad.stderr
    assert bad.stderr.count("\n") == 1


def test_diff_names_the_function_that_got_slower(tmp_path):
    """Two recordings with --functions, B's EMA three times as large:
    `trainbpf diff` lists ema_update first, its ms per step in A and B each
    within 3 points of the loop's step time of the job's own timer."""
    from conftest import SYSTEM_PYTHON

    runs = {}
    for name, tensors in (("a", 8), ("b", 24)):
        db = tmp_path / f"{name}.db"
        r = subprocess.run([TRAINBPF, "record", "--functions", "--stack-hz", str(HZ), "-o",
                            str(db), "--", SYSTEM_PYTHON, TORCH_SECTIONS, "--truth",
                            str(tmp_path / f"{name}.json"), "--steps", "60", "--ema-tensors",
                            str(tensors)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        runs[name] = (db, json.loads((tmp_path / f"{name}.json").read_text()))
    d = subprocess.run([TRAINBPF, "diff", str(runs["a"][0]), str(runs["b"][0])],
                       capture_output=True, text=True, timeout=120)
    assert d.returncode == 0, d.stderr
    block = d.stdout[d.stdout.index("Python functions ("):]
    block = block[:block.index("\n\n")]
    rows = re.findall(r"^  (\S+) \(torch_sections\.py:\d+\) +([\d.]+) +([\d.]+) +([+-][\d.]+)$",
                      block, re.M)
    assert rows and rows[0][0] == "ema_update", block
    _, a, b, _ = rows[0]
    for key, got in (("a", float(a)), ("b", float(b))):
        truth = runs[key][1]
        want = truth["sections"]["ema_update"] * 1e3 / truth["steps"]
        bound = 0.03 * truth["loop_s"] * 1e3 / truth["steps"]
        assert abs(got - want) <= bound, (key, got, want, bound, block)
    # The page has the same rows, first ema_update with the same figures.
    page = tmp_path / "diff.html"
    h = subprocess.run([TRAINBPF, "diff", str(runs["a"][0]), str(runs["b"][0]), "-o", str(page)],
                       capture_output=True, text=True, timeout=120)
    assert h.returncode == 0, h.stderr
    section = page.read_text().split('<section id="functions">')[1].split("</section>")[0]
    first = re.search(r"<tr><td class=\"l\">(\S+) \(torch_sections\.py:\d+\)</td>"
                      r"<td>([\d.]+)</td><td>([\d.]+)</td>", section)
    assert first and first.groups() == (rows[0][0], a, b), section


def nested_slices(events, pid, tid):
    """(name, start, end, depth) of a track of B/E events, which must nest
    in time order: an E closes the frame on top, nothing is left open."""
    stack, out, last = [], [], None
    for e in events:
        if (e.get("pid"), e.get("tid")) != (pid, tid) or e["ph"] not in ("B", "E"):
            continue
        assert last is None or e["ts"] >= last, ("back in time", e)
        last = e["ts"]
        if e["ph"] == "B":
            stack.append((e["name"], e["ts"]))
            continue
        assert stack and stack[-1][0] == e["name"], ("mis-paired", e, stack[-1:])
        name, start = stack.pop()
        out.append((name, start, e["ts"], len(stack)))
    assert not stack, ("left open", stack)
    return out


def test_python_stacks_are_slices_of_the_trace(tmp_path):
    """record --functions, then trace: the loop thread's frames are slices
    on a track beside it, nested as its stack was, each call of spin, nap
    and wait_pipe one slice where the job's own timer has it. What a slice
    knows: at its end the function still ran (a sample's time, or a wake
    off a CPU); at its start too, or within what a sample charged after it
    (the time before it: a period, or more after skipped ones). So each
    call starts after the slice before it at its depth ended and at most
    that after its own began, and ends after its own ended and at most that
    after the next began. nap and wait_pipe end off a CPU (a wake, then
    their last lines): there the end is exact, unless the next sample's
    charge reached back to the wake over those lines (the first sample of
    a run charges a period before it)."""
    py = pyenv(12) or "/usr/bin/python3.11"
    db, trace = tmp_path / "run.db", tmp_path / "trace.json"
    r = run_trainbpf(["record", "-o", str(db), "--functions", "--stack-hz", str(HZ), "-i", "0",
                      "--", py, PY_FUNCS, "truth.json", "2", "--settle", "1.5"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_trainbpf(["trace", str(db), "-o", str(trace)])
    assert r.returncode == 0, r.stderr
    t = json.load(open(tmp_path / "truth.json"))
    tr = json.load(open(trace))
    assert tr["otherData"]["python_stack_spans"] > 0, tr["otherData"]
    with sqlite3.connect(db) as c:
        start_unix = float(c.execute("SELECT value FROM meta WHERE key = 'start_unix_s'")
                           .fetchone()[0])
        period = int(c.execute("SELECT value FROM meta WHERE key = 'py_period_ns'")
                     .fetchone()[0]) / 1e9
        # What a sample charges, and so how far back its slice reaches: a
        # period, or more when the sampler skipped periods (a late timer
        # interrupt): the most of this thread's samples.
        reach = max(period, (c.execute("SELECT max(ns) FROM py_samples WHERE tid = ?",
                                       (t["pid"],)).fetchone()[0] or 0) / 1e9)
    slices = nested_slices(tr["traceEvents"], t["pid"], t["pid"] | 0x10000000)
    unix = sorted((start_unix + s / 1e6, start_unix + e / 1e6, d, n) for n, s, e, d in slices)
    # The clocks: the job's perf_counter to Unix offset, the recording's start in both.
    eps = 0.0005
    steps = [(s, e, d) for s, e, d, n in unix if n.startswith("Loop.step (py_funcs.py:")]
    assert steps, [n for *_, n in unix][:20]
    for fn in ("spin", "nap", "wait_pipe"):
        calls = [(s, e) for n, s, e in t["calls"] if n == fn]
        got = [i for i, (_, _, _, n) in enumerate(unix) if n.startswith(f"{fn} (py_funcs.py:")]
        assert len(got) == len(calls), f"{fn}: {len(got)} slices, {len(calls)} calls"
        for (cs, ce), i in zip(calls, got):
            s, e, d, _ = unix[i]
            prev = max((x[1] for x in unix[:i] if x[2] == d), default=cs)
            nxt = min((x[0] for x in unix[i + 1:] if x[2] == d), default=ce)
            where = f"{fn}: slice {s - start_unix:.4f}-{e - start_unix:.4f} s, call " \
                f"{cs - start_unix:.4f}-{ce - start_unix:.4f} s, neighbours " \
                f"{prev - start_unix:.4f} {nxt - start_unix:.4f}"
            where += f", a sample's reach {reach * 1e3:.2f} ms"
            assert prev - eps <= cs <= s + reach + eps, where
            assert e - eps <= ce <= nxt + reach + eps, where
            if fn != "spin":
                # Its end is its wake, exact, unless the next sample's
                # charge reached back to it over the call's last lines.
                assert abs(s - cs) <= reach + eps, where
                assert abs(e - ce) <= eps or (nxt == e and ce <= e + reach + eps), where
            assert any(ss <= s and e <= se and sd == d - 1 for ss, se, sd in steps), \
                f"{fn} at {s - start_unix:.4f} s is in no Loop.step"


def test_python_stacks_of_a_torch_job_in_the_trace(tmp_path):
    """record --functions on a torch 1.13 job (torch_job.py dl-fork-persist:
    two fork workers alive the whole run), then trace. The rank's track and
    each worker's nest (nested_slices). The rank's loop (run_rank) holds its
    forward (step_loss), and each step_loss slice lies in a forward of the
    job's own timer: from a sample's reach before its start (a slice may
    begin up to a sample's charge before the call did) to its end. Each
    worker's track holds its loop (_worker_loop) and the dataset's
    __getitem__ inside it."""
    from conftest import SYSTEM_PYTHON, TORCH_JOB

    db, trace = tmp_path / "run.db", tmp_path / "trace.json"
    r = run_trainbpf(["record", "-o", str(db), "--functions", "--stack-hz", str(HZ), "-i", "0",
                      "--", SYSTEM_PYTHON, TORCH_JOB, "--variant", "dl-fork-persist",
                      "--epochs", "2", "--truth", "truth.json"], timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_trainbpf(["trace", str(db), "-o", str(trace)])
    assert r.returncode == 0, r.stderr
    truth = json.loads((tmp_path / "truth.json").read_text())
    events = json.load(open(trace))["traceEvents"]
    with sqlite3.connect(db) as c:
        t0 = int(c.execute("SELECT value FROM meta WHERE key = 'start_mono_ns'")
                 .fetchone()[0]) / 1e9
        period = int(c.execute("SELECT value FROM meta WHERE key = 'py_period_ns'")
                     .fetchone()[0]) / 1e9
        reach = max(period, (c.execute("SELECT max(ns) FROM py_samples").fetchone()[0] or 0) / 1e9)
    rank = truth["ranks"][0]
    main = nested_slices(events, rank["pid"], rank["pid"] | 0x10000000)
    loops = [(s, e, d) for n, s, e, d in main if n.startswith("run_rank (torch_job.py:")]
    fwd = [(n, t0 + s / 1e6, t0 + e / 1e6, d) for n, s, e, d in main
           if n.startswith("step_loss (torch_job.py:")]
    assert loops and len(fwd) >= rank["steps"] // 2, (len(fwd), rank["steps"], main[:10])
    forwards = [(st, st + sec) for i, st, sec in rank["intervals"]
                if truth["phases"][i] == "forward"]
    eps = 0.0005
    for n, s, e, d in fwd:
        assert any(fs - reach - eps <= s and e <= fe + eps for fs, fe in forwards), \
            f"step_loss slice {s - t0:.4f}-{e - t0:.4f} s is in no forward of the job's timer"
        assert any(ls <= (s - t0) * 1e6 and (e - t0) * 1e6 <= le and ld < d
                   for ls, le, ld in loops), "step_loss outside run_rank"
    workers = [w["pid"] for w in truth["roles"]["workers"]]
    assert len(workers) == 2, truth["roles"]["workers"]
    for pid in workers:
        got = nested_slices(events, pid, pid | 0x10000000)
        loop = [(s, e, d) for n, s, e, d in got if n.startswith("_worker_loop (")]
        items = [(s, e, d) for n, s, e, d in got if n.startswith("Samples.__getitem__ (") or
                 n.startswith("__getitem__ (torch_job.py:")]
        assert loop and items, (pid, sorted({n for n, *_ in got})[:20])
        assert all(any(ls <= s and e <= le and ld < d for ls, le, ld in loop)
                   for s, e, d in items), f"worker {pid}: __getitem__ outside _worker_loop"


def test_python_stacks_load_flat_in_speedscope(tmp_path):
    """The Python track of a trace in speedscope itself (test_speedscope.py):
    one profile, every frame opened and closed where the trace has it, and
    no warning ("Tried to end frame", "was still open")."""
    from test_speedscope import CHROMIUM, SPEEDSCOPE, export, track_of
    if not CHROMIUM or not os.path.exists(SPEEDSCOPE):
        pytest.skip("never: scripts/setup.sh installs chromium and speedscope")
    py = pyenv(12) or "/usr/bin/python3.11"
    db, trace = tmp_path / "run.db", tmp_path / "trace.json"
    r = run_trainbpf(["record", "-o", str(db), "--functions", "--stack-hz", str(HZ), "-i", "0",
                      "--", py, PY_FUNCS, "truth.json", "2", "--settle", "1.5"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert run_trainbpf(["trace", str(db), "-o", str(trace)]).returncode == 0
    pid = json.load(open(tmp_path / "truth.json"))["pid"]
    want = nested_slices(json.load(open(trace))["traceEvents"], pid, pid | 0x10000000)
    assert len(want) > 50, len(want)
    got, problems = export(str(trace), tmp_path)
    assert not problems, problems[:5]
    prof = [p for p in got["profiles"] if track_of(p["name"]) == (pid, pid | 0x10000000)]
    assert len(prof) == 1, [p["name"] for p in got["profiles"]]
    frames, stack, calls = got["shared"]["frames"], [], []
    for ev in prof[0]["events"]:
        if ev["type"] == "O":
            stack.append((ev["frame"], ev["at"]))
            continue
        f, at = stack.pop()
        assert f == ev["frame"], ("mis-paired", ev)
        calls.append((frames[f]["name"], at, ev["at"], len(stack)))
    t0 = min(s for _, s, _, _ in want)
    key = lambda c: (c[1], -c[3])  # noqa: E731
    for (n, s, e, d), (gn, gs, ge, gd) in zip(sorted(want, key=key), sorted(calls, key=key),
                                              strict=True):
        assert (gn, gd) == (n, d) and abs(gs - (s - t0)) < 1e-3 and abs(ge - (e - t0)) < 1e-3, \
            ((gn, gs, ge, gd), (n, s - t0, e - t0, d))
