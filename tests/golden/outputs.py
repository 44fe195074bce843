#!/usr/bin/env python3
"""What trainbpf prints, kept as expected files, so that a change meant to
move code (issue "one-way dependencies") can be shown to move no byte.

Four kinds of case:
- cli: --help of every command, bad options and bad files: the text,
  the one-line errors and the exit status, byte for byte.
- recording: `trainbpf report|trace|diff` on fixed recordings (the fuzz
  seeds, and real runs recorded once into tests/golden/recordings):
  compared byte for byte, stdout, stderr and exit status. All are schema
  1 (the reader's fallback) but gpujob.db, schema 2 (sub-second interval
  epochs, steps from calls, NCCL communicators, launches counted), whose
  report.json is gpujob.live.json, the report `record --report` wrote,
  and gpumetrics.db, schema 4: the CUDA stand-ins' stepjob on two GPUs of
  the stand-in NVML library (tests/workloads/fakenvml: a power cap from
  0.6 s, GPU 1 lost at 1.2 s, 90% of GPU 0's memory), docs/gpu-metrics.md.
  sections.db (schema 12, --functions: Python stacks, with a record_function block): torch 2.6's
  tests/workloads/torch_generator.py --epochs 1 --batches 24, the phase
  table's named sections and the verdict's "of which" (report text,
  JSON, CSV and HTML only: its trace would be 600 KB).
- render: tests/golden/render.c prints a fixed model through the live
  table, live epoch and step blocks, and the text, JSON and CSV reports:
  byte for byte but the wall-clock stamp of each live table.
- live: trainbpf tracing a deterministic workload (needs root): timings
  differ run to run, so every number is masked; names, keys, the order of
  lines and fields, and the shape of every line are compared.

    outputs.py capture   # write tests/golden/expected from the build
    outputs.py check     # compare; exit 1 and a unified diff if different

A case's expected file changes only with a change of behaviour, in the
commit that makes it, with the reason in its message.
"""
import difflib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRAINBPF = os.environ.get("TRAINBPF", os.path.join(ROOT, "build", "trainbpf"))
RENDER = os.path.join(ROOT, "build", "tests", "render")
EXPECTED = os.path.join(HERE, "expected")
WORKLOADS = os.path.join(ROOT, "tests", "workloads", "build")

CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
RECORDINGS = [os.path.join(CORPUS, n) for n in
              ("full.db", "two_flushes.db", "no_states.db", "crashed.db")] + \
             [os.path.join(HERE, "recordings", n) for n in
              ("stepjob.db", "epochs.db", "workers.db", "ddp.db", "gpujob.db",
               "gpumetrics.db")]
# Recordings with cases of their own only (cases()).
SECTIONS = os.path.join(HERE, "recordings", "sections.db")
DIFFS = [("full.db", "crashed.db"), ("epochs.db", "workers.db"), ("stepjob.db", "ddp.db"),
         ("ddp.db", "ddp.db"), ("gpujob.db", "stepjob.db"), ("stepjob.db", "gpumetrics.db"),
         ("gpumetrics.db", "gpumetrics.db")]


def stem(path):
    return os.path.basename(path)[:-3]


def first_epoch_and_trainer(path):
    """The first epoch's label of the source the reports use, and the first
    trainer's pid: the --epoch and --pid cases of this recording."""
    db = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    src = db.execute("SELECT value FROM meta WHERE key = 'epoch_source'").fetchone()
    src = src[0] if src else None
    row = db.execute("SELECT label FROM epochs WHERE source = ? ORDER BY start_ns LIMIT 1",
                     (src,)).fetchone() if src else None
    if not row:
        row = db.execute("SELECT label FROM epochs ORDER BY start_ns LIMIT 1").fetchone()
    pid = db.execute("SELECT pid FROM processes WHERE role = 'trainer' ORDER BY start_ns, pid "
                     "LIMIT 1").fetchone()
    db.close()
    return (row[0] if row else None), (pid[0] if pid else None)


# Arguments; "@TEXT" is a file in the case's directory that is not a recording.
CLI = [
    ("help", ["--help"]), ("usage", ["--usage"]), ("version", ["--version"]),
    ("record-help", ["record", "--help"]), ("report-help", ["report", "--help"]),
    ("trace-help", ["trace", "--help"]), ("diff-help", ["diff", "--help"]),
    ("no-target", []), ("both-targets", ["-p", "1", "--", "true"]),
    ("bad-format", ["--format", "xml", "-p", "1"]), ("bad-pid", ["-p", "abc"]),
    ("zero-duration", ["-d", "0", "-p", "1"]), ("bad-epochs", ["--epochs", "bogus", "-p", "1"]),
    ("bad-regex", ["--epoch-regex", "(", "-p", "1"]), ("bad-ring", ["--ringbuf-size", "3", "-p", "1"]),
    ("bad-step-blocks", ["--step-blocks", "0", "-p", "1"]), ("unknown-option", ["--nope"]),
    ("no-such-pid", ["-p", "999999999"]), ("kernel-thread", ["-p", "2"]),
    ("record-no-output", ["record", "-p", "1"]), ("report-no-file", ["report"]),
    ("report-missing", ["report", "missing.db"]), ("report-not-recording", ["report", "@TEXT"]),
    ("report-bad-format", ["report", "--format", "xml", "x.db"]),
    ("report-bad-epoch", ["report", "--epoch", "abc", "x.db"]),
    ("report-bad-pid", ["report", "--pid", "0", "x.db"]),
    ("report-merge-csv", ["report", "--format", "csv", "a.db", "b.db"]),
    ("trace-no-output", ["trace", "x.db"]), ("diff-one-file", ["diff", "a.db"]),
]


def cases():
    """(name, kind, argv): argv names recordings by stem, run in a copy."""
    out = []
    for path in RECORDINGS:
        s = stem(path)
        # The full text report (--detail), byte for byte as it always was,
        # and the one-screen summary that is the default now.
        out += [(f"{s}.report.txt", "recording", ["report", s, "--detail"]),
                (f"{s}.summary.txt", "recording", ["report", s]),
                (f"{s}.report.json", "recording", ["report", s, "--format", "json"]),
                (f"{s}.report.csv", "recording", ["report", s, "--format", "csv"]),
                (f"{s}.trace.json", "recording", ["trace", s, "-o", "@OUT"])]
        epoch, pid = first_epoch_and_trainer(path)
        if epoch is not None:
            out += [(f"{s}.epoch.txt", "recording",
                     ["report", s, "--epoch", str(epoch), "--detail"]),
                    (f"{s}.epoch.json", "recording",
                     ["report", s, "--epoch", str(epoch), "--format", "json"])]
        if pid is not None:
            out += [(f"{s}.pid.txt", "recording", ["report", s, "--pid", str(pid), "--detail"])]
    for a, b in DIFFS:
        out.append((f"diff.{a[:-3]}.{b[:-3]}.txt", "recording", ["diff", a[:-3], b[:-3]]))
    out += [(f"cli.{name}.txt", "cli", argv) for name, argv in CLI]
    out += [("render.markers.txt", "render", ["markers"]),
            ("render.calls.txt", "render", ["calls"]),
            ("render.phases.txt", "render", ["phases"]),
            ("render.phases.summary.txt", "render", ["phases", "summary"]),
            # The HTML page (report_html.c): with training phases, and of a
            # recording with NVML's readings (tests/integration/test_html.py
            # checks how a browser draws them).
            ("render.phases.html", "render", ["phases", "html"])]
    out.append(("gpumetrics.report.html", "recording",
                ["report", "gpumetrics", "--format", "html"]))
    out += [("sections.summary.txt", "recording", ["report", "sections"]),
            ("sections.report.json", "recording", ["report", "sections", "--format", "json"]),
            ("sections.report.csv", "recording", ["report", "sections", "--format", "csv"]),
            ("sections.report.html", "recording", ["report", "sections", "--format", "html"])]
    gpujob = [os.path.join(WORKLOADS, "gpujob"), "--truth", "@TMP/truth.json", "--steps", "30",
              "--mode", "sleep", "--cpu-us", "1000", "--sync-us", "2000", "--nccl-us", "2000",
              "--launches", "0", "--threads", "2", "--wait-probes", "20000"]
    epochs = [os.path.join(WORKLOADS, "epochs"), "-e", "3", "-d", "0.3", "-s", "4",
              "-o", "@TMP/truth.json", "--mode", "both"]
    # The report to a file: the job writes to stdout too.
    out += [("live.gpujob.txt", "live", ["-i", "0", "--detail", "-o", "@OUT", "--", *gpujob]),
            ("live.gpujob.json", "live",
             ["-i", "0", "--format", "json", "-o", "@OUT", "--", *gpujob]),
            ("live.gpujob.states.tsv", "live",
             ["-i", "0", "--states-out", "@OUT", "-o", "/dev/null", "--", *gpujob]),
            ("live.epochs.txt", "live", ["-i", "0", "--detail", "-o", "@OUT", "--", *epochs]),
            ("live.epochs.json", "live",
             ["-i", "0", "--format", "json", "-o", "@OUT", "--", *epochs])]
    return out


def run(cmd, cwd, env=None):
    """cmd[0] runs as "trainbpf": argp prints it in errors and --help."""
    name = "trainbpf" if cmd[0] == TRAINBPF else cmd[0]
    r = subprocess.run([name] + cmd[1:], executable=cmd[0], cwd=cwd, capture_output=True,
                       timeout=300, env=env)
    return r.stdout, r.stderr, r.returncode


def run_recording(argv, tmp):
    """In a copy of the recordings (reading one leaves no file beside it:
    tests/integration/test_recording_sidefiles.py; a copy is safe anyway)."""
    for path in RECORDINGS + [SECTIONS]:
        shutil.copy(path, os.path.join(tmp, os.path.basename(path)))
    args = []
    for a in argv:
        if a == "@OUT":
            args.append(os.path.join(tmp, "out"))
        elif os.path.exists(os.path.join(tmp, a + ".db")):
            args.append(a + ".db")
        else:
            args.append(a)
    out, err, rc = run([TRAINBPF] + args, tmp)
    if "@OUT" in argv and os.path.exists(os.path.join(tmp, "out")):
        with open(os.path.join(tmp, "out"), "rb") as f:
            out = f.read()
    return frame(out, err, rc)


def frame(out, err, rc):
    return (out + b"\n--- stderr\n" + err + b"--- exit status %d\n" % rc)


STAMP = re.compile(rb"^\d\d:\d\d:\d\d  ", re.M)


def run_render(argv, tmp):
    out, err, rc = run([RENDER] + argv, tmp)
    return frame(STAMP.sub(b"HH:MM:SS  ", out), err, rc)


NUMBER = re.compile(rb"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")
HEX = re.compile(rb"0x[0-9a-fA-F]+|\b[0-9a-f]{16,32}\b")
SPACES = re.compile(rb"[ \t]+")
# What the diagnosis finds in a live run depends on the machine's load.
DIAGNOSIS = re.compile(rb"^Diagnosis.*?\n\n", re.M | re.S)
SLOWEST = re.compile(rb"^( *slowest: ).*$", re.M)


def mask_text(b):
    """Numbers to '#', runs of blanks to one: columns widen with digits."""
    b = DIAGNOSIS.sub(b"Diagnosis: (masked)\n\n", b)
    b = SLOWEST.sub(rb"\1(masked)", b)
    return SPACES.sub(b" ", NUMBER.sub(b"#", HEX.sub(b"#", b)))


def mask_json(value):
    if isinstance(value, dict):
        return {k: "(masked)" if k in ("diagnosis", "slowest") else mask_json(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return 0
    return NUMBER.sub(b"#", HEX.sub(b"#", value.encode())).decode()


CATS = {b"cpu", b"gpu_wait", b"comm", b"data_wait", b"io", b"runqueue", b"lock", b"idle"}


def tsv_shape(b):
    """--states-out: the header, every row's form, the trailer. Which
    categories occur, and how often, and which threads the kernel dates
    differently (the kernel_skew_ns lines), depends on timing."""
    lines = b.splitlines()
    rows = [l.split(b"\t") for l in lines[1:-1] if not l.startswith(b"#")]
    skews = [l for l in lines[1:-1] if l.startswith(b"#")]
    good = all(len(r) == 6 and all(x.isdigit() for x in r[:4]) and r[4] in CATS
               and r[5] in CATS for r in rows) and \
        all(re.fullmatch(rb"# tid=\d+ kernel_skew_ns=-?\d+", l) for l in skews)
    return b"\n".join([lines[0], b"rows: %s" % (b"well-formed" if good and rows else b"BAD"),
                       mask_text(lines[-1])]) + b"\n"


def run_live(argv, tmp, name):
    args = [a.replace("@TMP", tmp).replace("@OUT", os.path.join(tmp, "out")) for a in argv]
    job_out, err, rc = run([TRAINBPF] + args, tmp)
    with open(os.path.join(tmp, "out"), "rb") as f:
        out = f.read()
    out = out.replace(ROOT.encode(), b"@ROOT")
    if name.endswith(".tsv"):
        out = tsv_shape(out)
    elif name.endswith(".json"):
        out = json.dumps(mask_json(json.loads(out)), indent=1).encode() + b"\n"
    else:
        out = mask_text(out)
    # warnings and the job's own output: shapes only
    return frame(out + b"--- the job's stdout\n" + mask_text(job_out), mask_text(err), rc)


def run_cli(argv, tmp):
    with open(os.path.join(tmp, "text"), "w") as f:
        f.write("not a recording\n")
    args = ["text" if a == "@TEXT" else a for a in argv]
    out, err, rc = run([TRAINBPF] + args, tmp)
    return frame(out, err, rc)


def produce(case, tmp):
    name, kind, argv = case
    if kind == "cli":
        return run_cli(argv, tmp)
    if kind == "recording":
        return run_recording(argv, tmp)
    if kind == "render":
        return run_render(argv, tmp)
    return run_live(argv, tmp, name)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    only = sys.argv[2:]
    live = os.geteuid() == 0
    bad = 0
    os.makedirs(EXPECTED, exist_ok=True)
    for case in cases():
        name, kind, _ = case
        if only and name not in only:
            continue
        if kind == "live" and not live:
            print(f"skip {name}: needs root")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            got = produce(case, tmp)
        path = os.path.join(EXPECTED, name)
        if mode == "capture":
            with open(path, "wb") as f:
                f.write(got)
            print(f"wrote {name} ({len(got)} bytes)")
            continue
        with open(path, "rb") as f:
            want = f.read()
        if got == want:
            print(f"same {name}")
            continue
        bad += 1
        print(f"DIFFERENT {name}")
        diff = difflib.unified_diff(want.decode(errors="replace").splitlines(),
                                    got.decode(errors="replace").splitlines(),
                                    f"expected/{name}", "now", lineterm="", n=2)
        for i, line in enumerate(diff):
            if i == 60:
                print("  ...")
                break
            print("  " + line[:200])
    if bad:
        print(f"{bad} outputs differ from tests/golden/expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
