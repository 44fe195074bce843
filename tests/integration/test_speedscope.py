"""The trace (`trainbpf trace X.db -o t.json`) loaded in speedscope itself.

test_recording_read.py replays speedscope's trace-event importer in Python
(flat_in_speedscope); this loads each fixed recording's trace in the real
viewer, speedscope 1.25.0 from npm (tests/viewers, pinned by its lock file,
installed by scripts/setup.sh), the way its command line opens a file
(index.html#localProfilePath=JS, the JS calling
speedscope.loadFileFromBase64), in headless Chromium. Then it asks
speedscope for its own model back: its export (Ctrl+S, a download of the
profiles as speedscope's file format, every call an open and a close event
in time order). For every track (a pid and tid) with a slice:

- speedscope made one profile of it, named by its process and thread;
- it is flat: every open is followed by the close of the same frame,
  nothing nests (a mis-paired end is the staircase an older export drew);
- it holds one call per slice of the trace, in order, with its name and
  arguments, opening and closing at the slice's start and end (speedscope
  rebases each track on its first slice; doubles, so within 1e-6 us per
  us): no slice merged into the one before it, none lost.

speedscope drops a slice of zero duration (nothing to draw): so do we here.
The page must log no warning (the importer's "Tried to end frame", "was
still open") and no error.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from browser import CHROMIUM, Browser, console_problems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINBPF = os.path.join(ROOT, "build", "trainbpf")
RECORDINGS = os.path.join(ROOT, "tests", "golden", "recordings")
NAMES = sorted(n[:-3] for n in os.listdir(RECORDINGS) if n.endswith(".db"))
SPEEDSCOPE = os.path.join(ROOT, "tests", "viewers", "node_modules", "speedscope", "dist",
                          "release", "index.html")
LOAD_S = 60     # a 2-core machine under a test suite's load

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="chromium-headless-shell not installed "
                                "(scripts/setup.sh installs it)")


def export(trace, tmp_path):
    """speedscope's own export of trace, and the page's warnings and errors."""
    name = os.path.basename(trace)
    js = tmp_path / "load.js"
    with open(trace, "rb") as f:
        js.write_text(f"speedscope.loadFileFromBase64({json.dumps(name)}, "
                      f"{json.dumps(base64.b64encode(f.read()).decode())})")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    b = Browser()
    try:
        s = b.page()
        b.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads),
               eventsEnabled=True)
        b.call("Page.navigate", session=s, url=f"file://{SPEEDSCOPE}#localProfilePath={js}")
        deadline = time.monotonic() + LOAD_S
        while b.evaluate(s, "document.title") != f"{name} - speedscope":
            assert time.monotonic() < deadline, f"speedscope did not load {name}"
            time.sleep(0.1)
        b.evaluate(s, "window.dispatchEvent(new KeyboardEvent('keydown', "
                      "{key: 's', ctrlKey: true}))")
        b.wait("Browser.downloadProgress", lambda p: p["state"] in ("completed", "canceled"),
               LOAD_S)
    finally:
        b.close()
    done = [e for e in b.events if e.get("method") == "Browser.downloadProgress"
            and e["params"]["state"] == "completed"]
    assert done, "speedscope's export was canceled"
    files = os.listdir(downloads)
    assert files == [name.split(".")[0] + ".speedscope.json"], files
    with open(downloads / files[0]) as f:
        return json.load(f), console_problems(b.events, ("error", "warning", "assert"))


def track_of(profile_name):
    """(pid, tid) of a profile named as speedscope names a trace's track."""
    pid = re.findall(r"pid (\d+)", profile_name)
    tid = re.findall(r"tid (\d+)", profile_name)
    assert pid and tid, profile_name
    return int(pid[-1]), int(tid[-1])


def calls(profile, frames):
    """(frame name, open at, close at) of a flat profile's calls."""
    out, ev = [], profile["events"]
    assert len(ev) % 2 == 0, profile["name"]
    for o, c in zip(ev[::2], ev[1::2]):
        assert o["type"] == "O" and c["type"] == "C" and o["frame"] == c["frame"], \
            ("nested", profile["name"], o, c)
        out.append((frames[o["frame"]]["name"], o["at"], c["at"]))
    return out


def same_slice(call, x, t0):
    name, at_open, at_close = call
    assert name == x["name"] or name.startswith(x["name"] + " "), (call, x)
    args = json.loads(name[len(x["name"]) + 1:]) if name != x["name"] else None
    assert args == x.get("args"), (call, x)
    for got, want in ((at_open, x["ts"] - t0), (at_close, x["ts"] + x["dur"] - t0)):
        assert abs(got - want) <= 1e-6 * max(1.0, abs(x["ts"])), (call, x)


@pytest.mark.skipif(not os.path.exists(SPEEDSCOPE),
                    reason="never: scripts/setup.sh installs speedscope")
@pytest.mark.parametrize("name", NAMES)
def test_trace_loads_flat_in_speedscope(name, tmp_path):
    db, trace = tmp_path / f"{name}.db", tmp_path / "trace.json"
    shutil.copy(os.path.join(RECORDINGS, f"{name}.db"), db)
    subprocess.run([TRAINBPF, "trace", str(db), "-o", str(trace)], check=True)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    tracks, first = {}, {}
    for e in events:
        if e["ph"] != "X":
            continue
        key = (e["pid"], e["tid"])
        first[key] = min(first.get(key, e["ts"]), e["ts"])  # speedscope's rebase
        if e["dur"] > 0:
            tracks.setdefault(key, []).append(e)
    assert tracks, "a trace with no slice proves nothing"

    got, problems = export(str(trace), tmp_path)
    assert not problems, problems[:5]
    profiles = {track_of(p["name"]): p for p in got["profiles"]}
    assert len(profiles) == len(got["profiles"]), "two profiles of one track"
    assert sorted(profiles) == sorted(tracks)
    for key, xs in tracks.items():
        xs.sort(key=lambda x: (x["ts"], -x["dur"]))
        cs = calls(profiles[key], got["shared"]["frames"])
        assert len(cs) == len(xs), (key, len(cs), len(xs))
        for c, x in zip(cs, xs):
            same_slice(c, x, first[key])


def test_speedscope_shows_what_the_checks_catch(tmp_path):
    """The checks above, on a trace made wrong on purpose: speedscope nests
    a slice inside one that outlasts it (the export's open, open, close,
    close), and makes one call of two equal slices that touch."""
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 1, "args": {"name": "p"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "a"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "b"}}]
    nested = [{"ph": "X", "name": "cpu", "pid": 1, "tid": 1, "ts": 10.0, "dur": 50.0},
              {"ph": "X", "name": "io", "pid": 1, "tid": 1, "ts": 20.0, "dur": 5.0}]
    touching = [{"ph": "X", "name": "cpu", "pid": 1, "tid": 2, "ts": 10.0, "dur": 5.0},
                {"ph": "X", "name": "cpu", "pid": 1, "tid": 2, "ts": 15.0, "dur": 5.0}]
    trace = tmp_path / "bad.json"
    trace.write_text(json.dumps({"traceEvents": meta + nested + touching}))
    got, problems = export(str(trace), tmp_path)
    assert not problems, problems[:5]
    profiles = {track_of(p["name"]): p for p in got["profiles"]}
    assert sorted(profiles) == [(1, 1), (1, 2)]
    with pytest.raises(AssertionError, match="nested"):
        calls(profiles[(1, 1)], got["shared"]["frames"])
    assert len(calls(profiles[(1, 2)], got["shared"]["frames"])) == 1
