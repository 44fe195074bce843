"""The HTML report (`trainbpf report X.db -o X.html`) as a browser sees it.

Each fixed recording (tests/golden/recordings) and the fixed model with
training phases (tests/golden/render.c) is written as HTML and loaded in
headless Chromium (Debian's chromium-headless-shell), driven over the
DevTools protocol on a pipe (--remote-debugging-pipe: no port to open, no
package beyond the standard library; --dump-dom alone could not tell a
console error or a request). The page must load with no console error and
no request but its own file; the size of every bar, read back from the
browser's layout (getBBox), must be the JSON report's share of the same
recording within the rounding of both; a screenshot must not be blank.
"""
import base64
import json
import os
import shutil
import sqlite3
import subprocess
import time
import zlib

import pytest

from browser import CHROMIUM, Browser, console_problems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINBPF = os.path.join(ROOT, "build", "trainbpf")
RENDER = os.path.join(ROOT, "build", "tests", "render")
RECORDINGS = os.path.join(ROOT, "tests", "golden", "recordings")
NAMES = sorted(n[:-3] for n in os.listdir(RECORDINGS) if n.endswith(".db"))
PX = 0.05  # coordinates are printed with 2 decimals; shares with 3-4

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="chromium-headless-shell not installed "
                                "(scripts/setup.sh installs it)")

# Every bar and the data-* of the groups and charts it is drawn in.
BARS_JS = """JSON.stringify([...document.querySelectorAll('svg[data-chart] rect')].map(r => {
  const b = r.getBBox(), d = {};
  for (let e = r.parentElement; e && e.tagName !== 'BODY'; e = e.parentElement)
    for (const k in e.dataset) if (!(k in d)) d[k] = e.dataset[k];
  return {key: r.dataset.key, w: b.width, h: b.height, ...d};
}))"""


def load(path):
    """The page's bars, its problems (console errors, requests) and a screenshot."""
    b = Browser()
    try:
        s = b.page()
        url = "file://" + path
        b.call("Page.navigate", session=s, url=url)
        # Loaded, as the page itself says (as test_speedscope.py waits):
        # once, in one CI run, Page.loadEventFired never came in 60 s.
        deadline = time.monotonic() + 60
        while b.evaluate(s, "document.readyState + ' ' + location.href") != f"complete {url}":
            assert time.monotonic() < deadline, f"{url} did not load in 60 s"
            time.sleep(0.1)
        bars = json.loads(b.call("Runtime.evaluate", session=s, expression=BARS_JS,
                                 returnByValue=True)["result"]["value"])
        text = b.call("Runtime.evaluate", session=s, expression="document.body.innerText",
                      returnByValue=True)["result"]["value"]
        shot = b.call("Page.captureScreenshot", session=s, format="png",
                      captureBeyondViewport=True)["data"]
    finally:
        b.close()
    errors = console_problems(b.events, ("error", "assert"))
    requests = [e["params"]["request"]["url"] for e in b.events
                if e.get("method") == "Network.requestWillBeSent"
                and e["params"]["request"]["url"] != url]
    return bars, text, errors, requests, base64.b64decode(shot)


def png_colours(png):
    """Distinct pixel colours of an 8-bit RGB(A) PNG (stdlib: zlib, no filters undone
    beyond what counting needs: a blank page has one colour whatever the filter)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, channels = 8, b"", 0, 0
    while pos < len(png):
        n = int.from_bytes(png[pos:pos + 4], "big")
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, depth, ctype = int.from_bytes(data[:4], "big"), data[8], data[9]
            assert depth == 8
            channels = {2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += data
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    colours = set()
    prev = bytearray(width * channels)
    for y in range(0, len(raw) // stride):
        line = raw[y * stride:(y + 1) * stride]
        f, cur = line[0], bytearray(line[1:])
        for i in range(len(cur)):  # undo the filters (PNG spec 9.2)
            a = cur[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                cur[i] = (cur[i] + a) & 255
            elif f == 2:
                cur[i] = (cur[i] + b) & 255
            elif f == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 8 == 0:
            colours.update(bytes(cur[i:i + 3]) for i in range(0, len(cur), channels * 4))
        prev = cur
    return colours


def check_bars(bars, doc):
    """Every drawn size against the JSON report's numbers."""
    charts = {}
    for r in bars:
        charts.setdefault(r["chart"], []).append(r)

    # The trainers' critical path: 800 px split by category.
    hl = doc["headline"]["time_s"]
    total = sum(hl.values())
    for r in charts.get("headline", []):
        assert abs(r["w"] - 800 * hl[r["key"]] / total) < PX, r
    assert len(charts.get("headline", [])) == sum(1 for v in hl.values() if v > 0)

    # The phases: 800 px split by share (4 decimals: 0.04 px).
    shares = {p["phase"]: p["share"] for p in doc.get("phases", {}).get("list", [])}
    for r in charts.get("phases", []):
        assert abs(r["w"] - 800 * shares[r["key"]]) < 0.05 + PX, r
    if doc.get("phases", {}).get("steps"):
        assert charts.get("phases"), "phases in the JSON, no bar drawn"

    # Epochs: heights = duration * px/s, split by phase share or category percent.
    epochs = {str(e["epoch"]): e for e in doc.get("epochs", {}).get("list", [])}
    drawn = {r["epoch"] for r in charts.get("epochs", [])}
    assert drawn == {k for k, e in epochs.items() if e["duration_s"] > 0 and
                     (e["phases"] or any(v > 0 for v in e["percent"].values()))}
    if epochs:
        longest = max(e["duration_s"] for e in epochs.values())
        pps = float(charts["epochs"][0]["pxPerS"])
        assert abs(pps - 200 / longest) < 1e-3
    for r in charts.get("epochs", []):
        e = epochs[r["epoch"]]
        bar = e["duration_s"] * pps
        assert abs(float(r["durationS"]) - e["duration_s"]) < 1e-6
        if r["by"] == "phase":
            assert abs(r["h"] - bar * e["phases"]["share"][r["key"]]) < 0.0001 * bar + PX, r
        else:
            assert abs(r["h"] - bar * e["percent"][r["key"]] / 100) < 0.00001 * bar + PX, r

    # GPU utilization per epoch: 1.2 px per percent.
    for r in charts.get("gpu", []):
        assert abs(r["h"] - 1.2 * epochs[r["epoch"]]["gpu"]["utilization_avg_pct"]) < PX, r

    # Ranks: a row per trainer listed one by one.
    trainers = {str(p["pid"]) for p in doc["processes"]
                if p["role"] == "trainer" and "folded" not in p}
    assert {r["pid"] for r in charts.get("ranks", [])} == trainers


def steps_attrs(html):
    import re
    m = re.search(r'data-chart="steps" data-steps="(\d+)" data-ymax-ms="([\d.]+)"', html)
    return (int(m.group(1)), float(m.group(2))) if m else None


def check_page(html_path, doc):
    bars, text, errors, requests, shot = load(html_path)
    assert not errors, errors
    assert not requests, requests
    check_bars(bars, doc)
    # Complete: the last section rendered, the verdict first.
    assert text.index("Verdict") < text.index("Findings") < text.index("Threads")
    for f in doc.get("diagnosis", []):
        assert f["summary"] in text
    with open(html_path, "rb") as f:
        html = f.read().decode("utf-8")  # valid UTF-8, or this raises
    st = steps_attrs(html)
    if doc["steps"]["count"] > 1:
        n, ymax = st
        assert n == doc["steps"]["count"]
        assert abs(ymax - 1.15 * doc["steps"]["max_ms"]) < 0.001 * ymax + 0.0002
    assert len(png_colours(shot)) > 8, "the screenshot is blank"
    return text, shot


@pytest.mark.parametrize("name", NAMES)
def test_recording_page(name, tmp_path):
    db = tmp_path / f"{name}.db"
    shutil.copy(os.path.join(RECORDINGS, f"{name}.db"), db)
    out = tmp_path / f"{name}.html"
    subprocess.run([TRAINBPF, "report", str(db), "-o", str(out)], check=True)
    doc = json.loads(subprocess.run([TRAINBPF, "report", str(db), "--format", "json"],
                                    check=True, capture_output=True).stdout)
    check_page(str(out), doc)


def test_phases_page(tmp_path):
    """The fixed model with training phases: the phase bars and rows."""
    out = tmp_path / "phases.html"
    with open(out, "wb") as f:
        subprocess.run([RENDER, "phases", "html"], check=True, stdout=f)
    doc = json.loads(subprocess.run([RENDER, "phases", "json"], check=True,
                                    capture_output=True).stdout)
    assert doc["phases"]["steps"] > 0
    text, _ = check_page(str(out), doc)
    assert "Largest phase: forward" in text


def test_names_escaped(tmp_path):
    """A process named like markup, with a byte that is no UTF-8: text, never markup."""
    db = tmp_path / "odd.db"
    shutil.copy(os.path.join(RECORDINGS, "stepjob.db"), db)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE processes SET comm = CAST(? AS TEXT)",
                  (b"<b>tr\xc3\xa9ne\xff</b>&",))
        c.execute("UPDATE threads SET comm = CAST(? AS TEXT)", (b"<img src=x>",))
    out = tmp_path / "odd.html"
    subprocess.run([TRAINBPF, "report", str(db), "-o", str(out)], check=True)
    html = out.read_bytes().decode("utf-8")
    assert "<b>tr" not in html and "<img" not in html
    assert "&lt;b&gt;tré" in html
    _, text, errors, requests, _ = load(str(out))
    assert not errors and not requests
    assert "<b>tréne\ufffd</b>&" in text and "<img src=x>" in text


def test_format_flag_and_extension(tmp_path):
    """--format html to stdout; -o x.html picks HTML; --format text wins over the name."""
    db = tmp_path / "s.db"
    shutil.copy(os.path.join(RECORDINGS, "stepjob.db"), db)
    r = subprocess.run([TRAINBPF, "report", str(db), "--format", "html"], check=True,
                       capture_output=True)
    assert r.stdout.startswith(b"<!DOCTYPE html>")
    out = tmp_path / "t.html"
    subprocess.run([TRAINBPF, "report", str(db), "--format", "text", "-o", str(out)],
                   check=True)
    assert out.read_bytes().startswith(b"trainbpf ")


def test_diff_page(tmp_path):
    """`trainbpf diff A B -o x.html`: loads offline with no error and no
    request; each run's bar 800 px split as its JSON report's headline;
    the text diff's verdict and both recordings named on the page."""
    dbs = []
    for name in ("stepjob", "epochs"):
        dbs.append(tmp_path / f"{name}.db")
        shutil.copy(os.path.join(RECORDINGS, f"{name}.db"), dbs[-1])
    out = tmp_path / "diff.html"
    subprocess.run([TRAINBPF, "diff", *map(str, dbs), "-o", str(out)], check=True)
    docs = {run: json.loads(subprocess.run([TRAINBPF, "report", str(db), "--format", "json"],
                                           check=True, capture_output=True).stdout)
            for run, db in zip("AB", dbs)}
    text_diff = subprocess.run([TRAINBPF, "diff", *map(str, dbs)], check=True,
                               capture_output=True, text=True).stdout
    bars, text, errors, requests, shot = load(str(out))
    assert not errors, errors
    assert not requests, requests
    drawn = [r for r in bars if r["chart"] == "diff-headline"]
    for run, doc in docs.items():
        hl = doc["headline"]["time_s"]
        mine = [r for r in drawn if r["run"] == run]
        assert len(mine) == sum(1 for v in hl.values() if v > 0)
        for r in mine:
            assert abs(r["w"] - 800 * hl[r["key"]] / sum(hl.values())) < PX, (run, r)
    verdict = text_diff.splitlines()[1]
    assert verdict.startswith("Verdict: ") and verdict[len("Verdict: "):] in text
    assert str(dbs[0]) in text and str(dbs[1]) in text
    assert text.index("Verdict") < text.index("The runs") < text.index("Findings, A to B")
    assert len(png_colours(shot)) > 8, "the screenshot is blank"
    # --format says it too; the formats a diff has not are refused.
    r = subprocess.run([TRAINBPF, "diff", *map(str, dbs), "--format", "html"], check=True,
                       capture_output=True, text=True)
    assert r.stdout == out.read_text()
    r = subprocess.run([TRAINBPF, "diff", *map(str, dbs), "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "text or html" in r.stderr
