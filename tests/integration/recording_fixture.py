"""Recordings with known contents, written per docs/recording.md.

The schema is read from the SQL block of docs/recording.md itself, so the
fixture and the contract cannot drift apart. make_recording() returns the
sums a reader must find: per thread and process, per epoch, the headline.
version=1 (the default) writes what schema 1 had, which a reader takes
the old way (epochs rebuilt from the flushes); version=2 adds what the
live tool kept (each epoch's deltas and steps, the GPU entries).
"""
import os
import re
import sqlite3

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATS = ["cpu", "gpu_wait", "comm", "data_wait", "io", "runqueue", "lock", "idle"]
APP_ID = 0x74627066
SEC = 1_000_000_000
T0 = 5_000 * SEC  # CLOCK_MONOTONIC at the start


def schema():
    with open(os.path.join(ROOT, "docs", "recording.md")) as f:
        text = f.read()
    return re.search(r"```sql\n(.*?)```", text, re.S).group(1)


def _mix(**kw):
    return [kw.get(c, 0) for c in CATS]


# Per flush (1 s), what each thread gains, in ms, in the first and the
# second half of the run: the trainer gets data-bound in the second half.
DEFAULT = {
    "flushes": 10,
    "procs": [  # pid, ppid, comm, role, flags, root
        (100, 1, "python3", "trainer", 0, 1),
        (101, 100, "pt_data_worker", "worker", 1, 0),
    ],
    "threads": [  # tid, pid, comm, first half, second half (ms per flush)
        (100, 100, "python3", _mix(cpu=600, data_wait=300, comm=100),
         _mix(cpu=400, data_wait=500, comm=100)),
        (102, 100, "pt_autograd_0", _mix(cpu=250, idle=750), _mix(cpu=250, idle=750)),
        (101, 101, "pt_data_worker", _mix(cpu=200, io=100, idle=700),
         _mix(cpu=300, io=200, idle=500)),
    ],
    "steps_per_s": 4,
    "diagnosis": [  # epoch, id, severity, summary
        (None, "data_loading", 0.6, "data loading 40.0% of the trainers' time (> 15%)"),
        (1, "data_loading", 0.3, "data loading 30.0% of the trainers' time (> 15%)"),
        (2, "data_loading", 0.9, "data loading 50.0% of the trainers' time (> 15%)"),
        (None, "cpu_contention", 0.2, "run-queue wait 5% (> 3%)"),
    ],
    "gpu_calls": [(100, "cudaStreamSynchronize", "sync", 40, 0, 0, 80_000_000)],
    "counters": {"events_lost": 3},
    "states": True,
    "complete": True,
}


def _flush_ms(spec, th, i):
    half = spec["flushes"] // 2
    return th[3] if i < half else th[4]


def _states(spec, th, i):
    """Intervals of one flush of a thread, back to back: cat by cat."""
    out, t = [], T0 + i * SEC
    for c, ms in enumerate(_flush_ms(spec, th, i)):
        if ms:
            out.append((th[0], th[1], t, t + ms * 1_000_000, c, c))
            t += ms * 1_000_000
    return out


def _epochs(db, spec, epochs, step_ns, exp):
    """Two marker epochs; schema 2 adds their steps and per-process deltas
    (here what the flushes inside sum to, with the main thread's path
    equal to its own states, as the threads' rows have it)."""
    v2 = spec.get("version", 1) >= 2
    for seq, (label, start, end) in enumerate(epochs):
        db.execute("INSERT INTO epochs (source, label, start_ns, end_ns, complete) "
                   "VALUES ('marker', ?, ?, ?, 1)", (label, start, end))
        if not v2:
            continue
        count = (end - start) // step_ns
        ms = step_ns / 1e6
        db.execute("UPDATE epochs SET seq = ?, step_count = ?, step_total_ms = ?, "
                   "step_min_ms = ?, step_max_ms = ?, step_sum_sq = ?, step_syncs = ?, "
                   "step_source = 'marker' WHERE label = ?",
                   (seq, count, count * ms, ms, ms, count * ms * ms, count, label))
        for pid, d in sorted(exp["epochs"][label].items()):
            # ppid, role, folded NULL: read from processes, as in older files
            db.execute("INSERT INTO epoch_procs VALUES (%s)" % ",".join("?" * 32),
                       ("marker", seq, pid, T0, None, *d["own"], *d["main"], *d["main"],
                        None, None, None))


def make_recording(path, spec=None, **over):
    """Writes the recording; returns the expected sums (ns)."""
    spec = dict(DEFAULT if spec is None else spec, **over)
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    # Small pages make small files: the fuzzer's seeds.
    db.execute("PRAGMA page_size = %d" % spec.get("page_size", 4096))
    db.executescript(schema())
    db.execute("PRAGMA application_id = %d" % spec.get("app_id", APP_ID))
    db.execute("PRAGMA user_version = %d" % spec.get("version", 1))
    n, half = spec["flushes"], spec["flushes"] // 2
    end = T0 + n * SEC
    meta = {"format": "trainbpf-recording", "trainbpf_version": "0.1.0", "hostname": "fixture",
            "kernel": "6.18", "ncpus": "2", "mem_total_kb": "4000000",
            "command": "python3 train.py", "start_mono_ns": str(T0),
            "start_unix_s": "1700000000.0", "flush_ns": str(SEC), "epochs_wanted": "auto"}
    if spec["complete"]:
        meta.update(end_mono_ns=str(end), complete="1")
    db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    for pid, ppid, comm, role, flags, root in spec["procs"]:
        db.execute("INSERT INTO processes (pid, ppid, comm, exe, role, flags, root, rank, "
                   "start_ns, end_ns, exit_code) VALUES (?,?,?,?,?,?,?,NULL,?,?,0)",
                   (pid, ppid, comm, "/usr/bin/" + comm, role, flags, root, T0, end))
    exp = {"threads": {}, "procs": {}, "epochs": {1: {}, 2: {}}, "duration_s": n}
    rows, states = [], []
    for th in spec["threads"]:
        tid, pid, comm = th[0], th[1], th[2]
        db.execute("INSERT INTO threads VALUES (?,?,?,?,?)", (tid, pid, comm, T0, end))
        tot = [0] * 8
        for i in range(n):
            ms = _flush_ms(spec, th, i)
            ns = [m * 1_000_000 for m in ms]
            cp = ns if tid == pid else [0] * 8
            ts = T0 + (i + 1) * SEC
            rows.append((ts, tid, pid, *ns, *cp, 4096 * (i + 1), 0, 10))
            ep = exp["epochs"][1 if i < half else 2].setdefault(pid, {"own": [0] * 8,
                                                                    "main": [0] * 8})
            for c in range(8):
                tot[c] += ns[c]
                ep["own"][c] += ns[c]
                if tid == pid:
                    ep["main"][c] += ns[c]
            if spec["states"]:
                states += _states(spec, th, i)
        exp["threads"][tid] = tot
        p = exp["procs"].setdefault(pid, [0] * 8)
        for c in range(8):
            p[c] += tot[c]
    db.executemany("INSERT INTO samples VALUES (%s)" % ",".join("?" * 22), rows)
    db.executemany("INSERT INTO states (tid, pid, start_ns, end_ns, cat, cp_cat) "
                   "VALUES (?,?,?,?,?,?)", states)
    step_ns = SEC // spec["steps_per_s"]
    _epochs(db, spec, [(1, T0, T0 + half * SEC), (2, T0 + half * SEC, end)], step_ns, exp)
    steps = [("marker", 100, T0 + k * step_ns) for k in range(n * spec["steps_per_s"])]
    db.executemany("INSERT INTO steps (source, pid, ts_ns) VALUES (?,?,?)", steps)
    for ep, ident, sev, summary in spec["diagnosis"]:
        db.execute("INSERT INTO diagnosis (epoch, id, severity, value, threshold, pid, "
                   "summary, evidence, advice) VALUES (?,?,?,?,?,?,?,?,?)",
                   (ep, ident, sev, sev * 50, 15.0, 100, summary, "why " + ident,
                    "fix " + ident))
    db.executemany("INSERT INTO gpu_calls (pid, api, kind, calls, nested, bytes, ns) "
                   "VALUES (?,?,?,?,?,?,?)", spec["gpu_calls"])
    if spec.get("version", 1) >= 2:  # one entry per process, in pid order
        pids = sorted({c[0] for c in spec["gpu_calls"]})
        db.executemany("INSERT INTO gpu_procs VALUES (?,?,0)", list(enumerate(pids)))
        db.execute("UPDATE gpu_calls SET seq = (SELECT seq FROM gpu_procs g "
                   "WHERE g.pid = gpu_calls.pid)")
        db.execute("INSERT INTO meta VALUES ('launches', '0')")
        # cudart found in one file, cudaMemcpy missing from it; one communicator.
        db.execute("INSERT INTO gpu_libraries VALUES (100, 'cudart', "
                   "'/opt/lib/libcudart.so.13', '13.0.96', 0, 0, 7, 3, 'cudaMemcpy')")
        db.execute("INSERT INTO nccl_comms (seq, pid, comm, parent, rank, nranks, id, api, "
                   "destroyed) VALUES (0, 100, 4096, 0, 1, 8, "
                   "'deadbeef0102030405060708090a0b0c', 'ncclCommInitRank', 1)")
    db.executemany("INSERT INTO counters VALUES (?,?)", spec["counters"].items())
    if spec.get("syncs", True):  # one cudaStreamSynchronize per step
        db.executemany("INSERT INTO syncs VALUES (?,?)",
                       [(100, ts + step_ns // 2) for _, _, ts in steps])
    db.execute("INSERT INTO worker_gens VALUES (100, ?, 1, 2, 0.5, 0.01)",
               (T0 + half * SEC,))
    db.commit()
    db.close()
    exp["headline"] = exp["threads"].get(100)
    exp["steps"] = len(steps)
    exp["nstates"] = len(states)
    return exp


def big_spec(threads=100, hours=1.0):
    """A 1-hour, 100-thread recording (flushes once a second) for timing."""
    th = [(1000 + k, 1000, "python3" if k == 0 else "worker%d" % k,
           _mix(cpu=500, data_wait=300, idle=200), _mix(cpu=450, io=50, idle=500))
          for k in range(threads)]
    return dict(DEFAULT, flushes=int(hours * 3600),
                procs=[(1000, 1, "python3", "trainer", 0, 1)], threads=th, states=False)


def make_many_procs(path, nprocs=200_000, hours=24.0, pid_range=30_000):
    """A long recording of a job that forks many short-lived workers: one
    trainer (pid 100, one sample row per 60 s interval epoch) and nprocs
    workers, forked without exec at an even pace over the run, each with
    one thread living 0.2 s (cpu 0.1 s, idle 0.1 s) and one sample row at
    the flush after its end. Pids cycle through pid_range values, so they
    are reused, as on a real machine. Returns the expected sums (ns)."""
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.executescript(schema())
    db.execute("PRAGMA application_id = %d" % APP_ID)
    db.execute("PRAGMA user_version = 1")
    span = int(hours * 3600) * SEC
    end = T0 + span
    meta = {"format": "trainbpf-recording", "trainbpf_version": "0.1.0", "hostname": "fixture",
            "kernel": "6.18", "ncpus": "2", "mem_total_kb": "4000000",
            "command": "python3 train.py", "start_mono_ns": str(T0),
            "start_unix_s": "1700000000.0", "flush_ns": str(SEC), "epochs_wanted": "auto",
            "epoch_source": "interval", "end_mono_ns": str(end), "complete": "1"}
    db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    procs, threads, rows = [(100, 1, "python3", "/usr/bin/python3", "trainer", 0, 1, None,
                             T0, end, 0)], [(100, 100, "python3", T0, end)], []
    nep = span // (60 * SEC)
    exp = {"epochs": [[0] * 8 for _ in range(nep)], "workers": nprocs, "nep": nep}
    # The trainer: 60 s of cpu 30 s, data_wait 20 s, idle 10 s per epoch.
    tr = _mix(cpu=30 * SEC, data_wait=20 * SEC, idle=10 * SEC)
    for e in range(nep):
        rows.append((T0 + (e + 1) * 60 * SEC, 100, 100, *tr, *tr, 0, 0, 100))
        for c in range(8):
            exp["epochs"][e][c] += tr[c]
    wk = _mix(cpu=SEC // 10, idle=SEC // 10)
    gap = span // nprocs
    for i in range(nprocs):
        pid = 1000 + i % pid_range
        start = T0 + i * gap + 1
        stop = start + SEC // 5
        flush = T0 + ((stop - T0) // SEC + 1) * SEC
        procs.append((pid, 100, "python3", "/usr/bin/python3", "worker", 1, 0, None, start,
                      stop, 0))
        threads.append((pid, pid, "python3", start, stop))
        rows.append((flush, pid, pid, *wk, *wk, 0, 0, 2))
        e = min((flush - T0 - 1) // (60 * SEC), nep - 1)
        for c in range(8):
            exp["epochs"][e][c] += wk[c]
    db.executemany("INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?)", procs)
    db.executemany("INSERT INTO threads VALUES (?,?,?,?,?)", threads)
    db.executemany("INSERT INTO samples VALUES (%s)" % ",".join("?" * 22), rows)
    db.executemany("INSERT INTO epochs (source, label, start_ns, end_ns, complete) "
                   "VALUES ('interval', ?, ?, ?, 1)",
                   [(e + 1, T0 + e * 60 * SEC, T0 + (e + 1) * 60 * SEC) for e in range(nep)])
    db.execute("INSERT INTO diagnosis (epoch, id, severity, value, threshold, pid, summary, "
               "evidence, advice) VALUES (NULL, 'data_loading', 0.5, 33.3, 15.0, 100, "
               "'data loading 33.3% of the trainers'' time (> 15%)', 'why', 'fix')")
    db.commit()
    db.close()
    exp["trainer"] = [x * nep for x in tr]
    exp["total"] = [exp["trainer"][c] + nprocs * wk[c] for c in range(8)]
    return exp
