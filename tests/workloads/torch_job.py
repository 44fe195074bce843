#!/usr/bin/env python3
"""PyTorch job variants that time their own phases: ground truth for trainbpf.

    torch_job.py --variant NAME --truth FILE [--option ...]   (--list: the variants)

Each variant is a small real CPU training job (an MLP, a few seconds) shaped
like one kind of job seen in the field: ranks started by mp.spawn or by
`python3 -m torch.distributed.run` (gloo DDP), DataLoader workers started by
fork, spawn or forkserver, persistent or not, a num_workers=0 loop reading
files from a cold page cache, a thread-fed queue.Queue, torch.save + fsync
checkpoints, a validation loop, gradient accumulation with .item() every
step, short subprocesses (git --version, ip addr), torch.compile under
autocast, a gradient penalty by torch.autograd.grad, and the log lines of
plain loops, HF Trainer and Lightning. Options after --variant override the
variant's settings.

The truth. Each rank's main thread (with --loop-thread, the thread that runs
its loop) wraps every phase of its loop in
time.perf_counter() (CLOCK_MONOTONIC, the clock trainbpf's BPF side uses):
  setup       process group, model, optimizer, data files, DataLoader
  data        iter(loader) (starts the workers) and next(): waiting for a batch
  forward     model(x) and the loss (with --compile, compiling it in the
              first step; with --grad-penalty, the penalty's autograd.grad)
  backward    loss.backward() (under DDP: with the gradient allreduce, which
              overlaps it and is waited for at its end)
  optimizer   optimizer.step() + zero_grad()
  log         .item() and printing the log lines
  subprocess  subprocess.run of the helpers
  validation  the validation loop, its batches' fetch included, and its
              allreduce under DDP (a second interval, right after the loop's)
  checkpoint  torch.save + flush + fsync (rank 0), and the barrier the other
              ranks wait in meanwhile
  teardown    destroy_process_group and writing this rank's part
Every interval is kept (phase, start, duration), so the truth can be cut to
any window, e.g. the part of the run an attached trainbpf saw. `untimed` is
a rank's life minus its phases: interpreter start and `import torch` (from
the kernel's process start time, /proc/PID/stat, 10 ms ticks), and the few
statements between phases.

What it cannot see: time on other threads and processes. Worker processes'
__getitem__ time comes back with each sample (`worker_getitem_s`, summed per
rank) but collation, pickling and the queue transfer do not; gloo's own
threads, autograd's threads and the producer thread of the queue variant are
not timed; where a phase's wall time went (CPU, run queue, disk, futex) is
not split: the truth says "the main thread was in backward for 1.2 s", not
why. A phase of one rank can be wait for another rank (the barrier at a
checkpoint, the allreduce at the end of backward).

The truth JSON (written by the top process at the end; schema in
docs/torch-probes.md):
  {"variant", "torch", "python", "argv", "settings",
   "wall": {"start_unix", "start_mono", "end_unix", "end_mono", "seconds"},
   "roles": {"top": PID, "launcher": PID|null, "ranks": [{rank, pid, ppid}],
             "workers": [{pid, ppid, rank, id, start_unix}],
             "helpers": [{pid, ppid, what}], "threads": [{tid, pid, what}]},
   "phases": [NAME, ...],
   "ranks": [{"rank", "pid", "start_unix", "start_mono", "end_mono",
              "totals": {PHASE: s}, "untimed_s", "worker_getitem_s", "steps" (training
              steps: micro-batches), "optimizer_steps" (opt.step() calls),
              "epochs": [{"epoch", "start_mono", "end_mono", "steps", "optimizer_steps",
                          "totals": {PHASE: s}}],
              "intervals": [[PHASE_INDEX, start_mono, seconds], ...]}],
   "totals": {PHASE: s}, "shares": {PHASE: fraction of the ranks' lives}}
"""
import argparse
import contextlib
import functools
import json
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

PHASES = ["setup", "data", "forward", "backward", "optimizer", "log", "subprocess",
          "validation", "checkpoint", "teardown", "communication"]

NO_CONTEXT = contextlib.nullcontext()

# name: (what it is, its options). Sizes keep each run to a few seconds on a
# 2-core machine (torch 1.13 and 2.6), spawn-started workers included.
VARIANTS = {
    "dl-fork": ("DataLoader, 2 workers by fork, re-forked every epoch; Lightning-style "
                "progress lines", "--workers 2 --mp-context fork --log lightning"),
    "dl-fork-persist": ("DataLoader, 2 fork workers, persistent_workers=True",
                        "--workers 2 --mp-context fork --persistent --log plain"),
    "dl-spawn": ("DataLoader, 2 workers by spawn (fork+exec python), every epoch",
                 "--workers 2 --mp-context spawn --epochs 2 --log plain"),
    "dl-spawn-persist": ("DataLoader, 2 spawn workers, persistent",
                         "--workers 2 --mp-context spawn --persistent --log plain"),
    "dl-forkserver": ("DataLoader, 2 workers forked by the forkserver, every epoch",
                      "--workers 2 --mp-context forkserver --log plain"),
    "dl-forkserver-persist": ("DataLoader, 2 forkserver workers, persistent",
                              "--workers 2 --mp-context forkserver --persistent --log plain"),
    "cold-files": ("num_workers=0, one file per sample, page cache dropped for them "
                   "(fadvise DONTNEED) before every epoch; step and summary lines",
                   "--workers 0 --data cold-files --log steps"),
    "queue": ("batches from a queue.Queue fed by a producer thread (20 ms a batch)",
              "--workers 0 --data queue --produce-ms 20 --log plain"),
    "queue-decode": ("batches from a queue.Queue fed by a producer thread that decodes "
                     "each one with numpy for 100 ms of CPU, holding the GIL most of that time",
                     "--workers 0 --data queue --produce decode --produce-ms 100 --log plain"),
    "checkpoint": ("torch.save of model + Adam state, flush + fsync, every epoch; HF lines",
                   "--workers 2 --checkpoint --optimizer adam --log hf"),
    "ckpt-fsync": ("torch.save of model + Adam state to an open file, flush + os.fsync, "
                   "close, every 3 steps (a checkpoint is the whole act)",
                   "--workers 2 --checkpoint --ckpt-every 3 --optimizer adam --log plain"),
    "ckpt-replace": ("torch.save of model + Adam state to a temporary name, then os.replace "
                     "onto the checkpoint's name, every 3 steps",
                     "--workers 2 --checkpoint --ckpt-every 3 --ckpt-style replace "
                     "--optimizer adam --log plain"),
    "validation": ("a validation loop every epoch; HF lines with eval lines",
                   "--workers 2 --validate --log hf"),
    "zip": ("each step a batch of two DataLoaders (zip; the second longer), 2 fork "
            "workers each, re-forked every epoch; plain lines",
            "--workers 2 --mp-context fork --loaders zip --steps 16 --log plain"),
    "zip-inline": ("zip of two DataLoaders, num_workers=0; plain lines",
                   "--workers 0 --loaders zip --steps 16 --log plain"),
    "alternate": ("steps take two DataLoaders' batches in turn, the second (2/3 as long) "
                  "started over when it runs out; 2 fork workers each, every pass; plain lines",
                  "--workers 2 --mp-context fork --loaders alternate --steps 12 --log plain"),
    "val-every": ("a validation pass every 6 steps and at each epoch's end, its loader's "
                  "fork worker started each pass; plain lines",
                  "--workers 1 --mp-context fork --validate --val-every 6 --steps 12 --width 128 "
                  "--log plain"),
    "accum": ("gradient accumulation over 4 steps, .item() every step; step lines",
              "--workers 2 --accum 4 --item-every-step --log steps"),
    "subprocs": ("git --version and ip addr every 5 steps",
                 "--workers 2 --subprocs 5 --log plain"),
    "spawn": ("2 gloo DDP ranks by mp.spawn, 1 worker each (spawn context, inherited), "
              "validation, rank-0 checkpoints; step and summary lines",
              "--launch spawn --workers 1 --epochs 2 --validate --checkpoint --log steps"),
    "spawn-table": ("2 gloo DDP ranks by mp.spawn, 2 spawn workers each, not persistent, and "
                    "an 8 MB in-memory table in the dataset (pickled to every worker: "
                    "iter(loader) waits while each worker imports torch and reads it)",
                    "--launch spawn --workers 2 --epochs 3 --table-mb 8 --log steps"),
    "dl-forkserver-table": ("DataLoader, 2 forkserver workers, not persistent, an 8 MB "
                            "in-memory table in the dataset",
                            "--workers 2 --mp-context forkserver --table-mb 8 --log plain"),
    "allreduce-manual": ("2 gloo ranks by mp.spawn, no DDP wrapper: every parameter's "
                         "gradient all_reduced by hand after backward, and a barrier "
                         "every 4 steps (communication outside any bracket)",
                         "--launch spawn --workers 0 --epochs 2 --steps 16 --allreduce-manual "
                         "--barrier-every 4 --log plain"),
    "nccl-manual": ("one process, no DataLoader workers: after backward, a stand-in "
                    "ncclAllReduce (give --fake-nccl LIB) per parameter, 3 ms each",
                    "--workers 0 --epochs 2 --steps 16 --nccl-ms 3 --log plain"),
    "compile": ("torch.compile(backend=\"aot_eager\") under bf16 autocast (AOTAutograd "
                "calls torch.autograd.grad while it compiles, in the first forward), "
                "2 fork workers",
                "--workers 2 --compile aot_eager --autocast bf16 --epochs 2 --log plain"),
    "grad-penalty": ("a gradient-penalty term in the loss (torch.autograd.grad, "
                     "create_graph=True, inside the forward), then "
                     "loss.backward(inputs=parameters), as a WGAN-GP critic; 2 fork workers",
                     "--workers 2 --grad-penalty --backward-inputs --grad-in-hook --epochs 2 "
                     "--log plain"),
    "loop-thread": ("the training loop in a threading.Thread (as Ray Train runs train_func), "
                    "the main thread joining it and sleeping; 2 fork workers, every epoch",
                    "--workers 2 --mp-context fork --loop-thread --epochs 2 --log plain"),
    "torchrun": ("2 gloo DDP ranks by python3 -m torch.distributed.run, 1 fork worker "
                 "each, validation; HF lines",
                 "--launch torchrun --workers 1 --mp-context fork --validate --log hf"),
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", choices=sorted(VARIANTS))
    p.add_argument("--list", action="store_true", help="print the variants and exit")
    p.add_argument("--truth", help="write the truth JSON here")
    p.add_argument("--launch", choices=["single", "spawn", "torchrun", "node"], default="single",
                   help="node: this process is one rank (--rank) of --world-size, started "
                   "on its own as on a node of its own; rendezvous on 127.0.0.1:--port")
    p.add_argument("--rank", type=int, default=0, help="--launch node: which rank")
    p.add_argument("--port", type=int, default=0, help="--launch node: the rendezvous port")
    p.add_argument("--slow-rank", type=int, default=-1,
                   help="this rank computes --slow-ms more in each forward (a straggler)")
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--slow-from-step", type=int, default=0,
                   help="the straggler is slow from this step of the run on")
    p.add_argument("--setup-s", type=float, default=0.0,
                   help="more setup before the first epoch (loading a dataset, a model)")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=24, help="steps per epoch (per rank)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--width", type=int, default=512, help="MLP hidden width")
    p.add_argument("--frozen-mb", type=float, default=0,
                   help="a frozen tensor of this size in the model's state (a pretrained "
                   "table, an EMA copy): in every checkpoint, in no step's compute")
    p.add_argument("--table-mb", type=float, default=0,
                   help="an in-memory table of this size in the dataset (a lookup table, "
                   "preloaded samples): pickled to every spawn or forkserver worker")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--mp-context", choices=["default", "fork", "spawn", "forkserver"],
                   default="default")
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--data", choices=["memory", "files", "cold-files", "queue"],
                   default="memory")
    p.add_argument("--sample-kb", type=int, default=64, help="file size per sample")
    p.add_argument("--getitem-ms", type=float, default=0.3,
                   help="CPU work per sample in __getitem__ (decoding, augmentation)")
    p.add_argument("--produce-ms", type=float, default=20.0,
                   help="queue variant: the producer's sleep (or decoding) per batch")
    p.add_argument("--produce", choices=["sleep", "decode"], default="sleep",
                   help="queue variant: the producer sleeps, or decodes with numpy (small "
                   "array operations in a Python loop: it holds the GIL most of the time)")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--no-sync", action="store_true",
                   help="DDP: the micro-batches before each optimizer step under "
                        "net.no_sync() (their gradients reduced with the last one's)")
    p.add_argument("--item-every-step", action="store_true")
    p.add_argument("--validate", action="store_true")
    p.add_argument("--val-every", type=int, default=0, metavar="N",
                   help="also a validation pass every N steps, mid-epoch (implies --validate)")
    p.add_argument("--loaders", choices=["one", "zip", "alternate"], default="one",
                   help="zip: each step a batch of the training loader and of a second, "
                   "longer one (zip(a, b), ends with a's StopIteration); alternate: steps "
                   "take the training loader's and a shorter second one's batches in turn, "
                   "the second started over (iter()) when it runs out; the training "
                   "loader's pass is the epoch")
    p.add_argument("--checkpoint", action="store_true")
    p.add_argument("--ckpt-every", type=int, default=0, metavar="N",
                   help="checkpoint every N steps (after the optimizer) instead of every "
                   "epoch")
    p.add_argument("--ckpt-style", choices=["fsync", "replace"], default="fsync",
                   help="fsync: torch.save to an open file, flush, os.fsync, close; replace: "
                   "torch.save to NAME.tmp (a path), os.replace onto NAME")
    p.add_argument("--ckpt-dir", help="write checkpoints here and keep them (a real job "
                   "does not delete its checkpoints at exit; default: a temporary "
                   "directory, removed in the teardown)")
    p.add_argument("--subprocs", type=int, default=0, metavar="N",
                   help="run git --version and ip addr every N steps")
    p.add_argument("--log", choices=["plain", "steps", "summary", "hf", "lightning"],
                   default="plain")
    p.add_argument("--log-every", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--allreduce-manual", action="store_true",
                   help="DDP ranks without DDP's wrapper: after backward, all_reduce each "
                   "parameter's gradient and divide it by the world size (communication)")
    p.add_argument("--fake-nccl", metavar="LIB",
                   help="after backward, call ncclAllReduce of this stand-in libnccl.so.2 "
                   "(tests/workloads/fakecuda) once per parameter, sleeping --nccl-ms in "
                   "each (communication, as a probed NCCL call between brackets)")
    p.add_argument("--nccl-ms", type=float, default=2.0)
    p.add_argument("--barrier-every", type=int, default=0, metavar="N",
                   help="dist.barrier() after every N-th optimizer step (communication)")
    p.add_argument("--compile", metavar="BACKEND",
                   help="torch.compile the model with this backend (torch >= 2.0): "
                        "compiled in the first forward, which the job times as forward")
    p.add_argument("--autocast", choices=["bf16"], help="the forward under CPU autocast")
    p.add_argument("--grad-penalty", action="store_true",
                   help="add a gradient penalty to the loss: torch.autograd.grad of the "
                        "output w.r.t. the input, create_graph=True, timed as forward")
    p.add_argument("--backward-inputs", action="store_true",
                   help="loss.backward(inputs=the model's parameters): still the step's "
                        "backward (it accumulates into .grad)")
    p.add_argument("--grad-in-hook", action="store_true",
                   help="a hook on the model's output that calls torch.autograd.grad on a "
                        "small graph of its own: inside the backward (and the penalty's grad)")
    p.add_argument("--hang-after", type=int, default=0, metavar="N",
                   help="DataLoader worker 0 of --hang-rank sleeps forever in its Nth batch "
                   "(a hung job: roles.jsonl notes it, kind hang, and the hung rank's every "
                   "fetch, kind fetch)")
    p.add_argument("--hang-rank", type=int, default=0)
    p.add_argument("--pause", action="append", default=[], metavar="STEP:SEC:HOW",
                   help="--pause-rank stops before the forward of its global step STEP for SEC "
                   "seconds, HOW: sleep (time.sleep in its loop) or read=PATH (one read of "
                   "PATH, a file whose reads take that long: tests/workloads/slowfs), then "
                   "goes on; its peers wait in the step's allreduce. roles.jsonl notes each "
                   "(kind pause, then resume), and 1 s in, the loop thread's own view of "
                   "itself (kind frames: sys._current_frames, its wchan)")
    p.add_argument("--pause-rank", type=int, default=1)
    p.add_argument("--hold-file", metavar="PATH",
                   help="before epoch 2, wait until PATH exists (untimed, as between epochs): "
                   "a test attaches during epoch 1 and lets the rest run once it is traced")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--quick-exit", action="store_true",
                   help="--launch single: os._exit right after writing the truth, so "
                   "that its wall.end_mono is the process's end (the interpreter's own "
                   "shutdown, which no clock of the job sees, is skipped)")
    p.add_argument("--loop-thread", action="store_true",
                   help="run each rank's loop in a threading.Thread while the main thread "
                        "waits for it, waking every 100 ms (Ray Train's shape; not torchrun)")
    argv = list(argv)
    if "--variant" in argv:
        i = argv.index("--variant")
        if i + 1 < len(argv) and argv[i + 1] in VARIANTS:
            argv = VARIANTS[argv[i + 1]][1].split() + argv  # later options win
    args = p.parse_args(argv)
    if args.list:
        for name, (what, opts) in VARIANTS.items():
            print(f"{name:22} {what}\n{'':22} {opts}")
        sys.exit(0)
    if not args.truth:
        p.error("--truth FILE is needed")
    return args


# ---------------------------------------------------------------- truth

class Clock:
    """The phases of one rank's main thread."""

    def __init__(self):
        self.intervals = []   # [phase index, start mono, seconds]
        self.epoch = None

    def add(self, phase, t0):
        t1 = time.perf_counter()
        self.intervals.append([PHASES.index(phase), t0, t1 - t0])
        return t1

    def totals(self, lo=float("-inf"), hi=float("inf")):
        tot = {ph: 0.0 for ph in PHASES}
        for i, s, d in self.intervals:
            a, b = max(s, lo), min(s + d, hi)
            if b > a:
                tot[PHASES[i]] += b - a
        return tot


def proc_start(pid):
    """The kernel's start time of PID, as (unix, monotonic) seconds."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    since_boot = ticks / os.sysconf("SC_CLK_TCK")   # CLOCK_BOOTTIME, 10 ms ticks
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot
    return time.time() - age, time.monotonic() - age


def append_line(path, obj):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(obj) + "\n").encode())
    finally:
        os.close(fd)


def note_role(parts, kind, **what):
    append_line(os.path.join(parts, "roles.jsonl"), dict(kind=kind, **what))


def own_view(parts, tid, ident, delay):
    """After delay, what the loop thread says of itself: its Python frames
    (innermost first) and its kernel wait channel."""
    time.sleep(delay)
    f, names = sys._current_frames().get(ident), []
    while f is not None:
        names.append(f.f_code.co_name)
        f = f.f_back
    with open(f"/proc/self/task/{tid}/wchan") as w:
        wchan = w.read().strip()
    note_role(parts, "frames", pid=os.getpid(), tid=tid, names=names, wchan=wchan,
              mono=time.monotonic())


def pause_here(parts, rank, spec, fetched_mono):
    """--pause: this rank stops here (see its help). fetched_mono: when the
    batch before it began (the rank's last progress a stall is timed from)."""
    sec, how = spec
    tid = threading.get_native_id()
    watch = threading.Thread(target=own_view, args=(parts, tid, threading.get_ident(), 1.0))
    note_role(parts, "pause", rank=rank, pid=os.getpid(), tid=tid, how=how, sec=sec,
              start_mono=time.monotonic(), fetched_mono=fetched_mono)
    watch.start()
    if how == "sleep":
        time.sleep(sec)
    else:
        with open(how[len("read="):], "rb", buffering=0) as f:
            f.read(4096)
    note_role(parts, "resume", rank=rank, pid=os.getpid(), mono=time.monotonic())
    watch.join()


def note_mp_helpers(parts):
    """multiprocessing's own processes: the resource tracker, the forkserver."""
    from multiprocessing import resource_tracker, forkserver
    rt = getattr(getattr(resource_tracker, "_resource_tracker", None), "_pid", None)
    fs = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    for pid, what in ((rt, "resource_tracker"), (fs, "forkserver")):
        if pid:
            note_role(parts, "helper", pid=pid, ppid=os.getpid(), what=what)


def worker_init(parts, rank, worker_id):
    note_role(parts, "worker", pid=os.getpid(), ppid=os.getppid(), rank=rank,
              id=worker_id, start_unix=time.time(), start_mono=time.monotonic())


# ---------------------------------------------------------------- data

FEATURES = 1024
CLASSES = 10


def busy(ms):
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


class Samples(Dataset):
    """Synthetic samples, from memory or one file each; __getitem__ does
    --getitem-ms of CPU work and returns the seconds it took."""

    def __init__(self, n, files, getitem_ms, seed, table_mb=0, hang=None):
        self.n, self.files, self.getitem_ms, self.seed = n, files, getitem_ms, seed
        self.table = torch.rand(int(table_mb * 2**18)) if table_mb else None
        self.hang, self.served = hang, 0   # hang: (items, parts, rank) for --hang-after

    def hang_here(self):
        """--hang-after: DataLoader worker 0 blocks forever in the first item
        of its Nth batch (a dead NFS mount, a deadlock in a decoder), after
        saying when."""
        info = torch.utils.data.get_worker_info()
        if not self.hang or not info or info.id != 0:
            return
        self.served += 1
        if self.served <= self.hang[0]:
            return
        note_role(self.hang[1], "hang", pid=os.getpid(), rank=self.hang[2],
                  start_mono=time.monotonic(), start_unix=time.time())
        while True:
            time.sleep(3600)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t0 = time.perf_counter()
        self.hang_here()
        if self.files:
            with open(self.files[i], "rb") as f:
                raw = f.read()
            x = torch.frombuffer(bytearray(raw[:FEATURES * 4]), dtype=torch.float32)
            y = raw[-1] % CLASSES
        else:
            g = torch.Generator().manual_seed(self.seed * 1000003 + i)
            x = torch.randn(FEATURES, generator=g)
            y = i % CLASSES
        if self.table is not None:
            x = x + self.table[i % (len(self.table) - FEATURES):][:FEATURES]
        busy(self.getitem_ms)
        return x, y, time.perf_counter() - t0


def write_files(d, n, kb, seed):
    """One file per sample (kb KiB: the features, padding, the label byte),
    written and fsynced so that DONTNEED can drop them."""
    paths = []
    g = torch.Generator().manual_seed(seed)
    pad = bytes(max(0, kb * 1024 - FEATURES * 4 - 1))
    for i in range(n):
        p = os.path.join(d, f"s{i:05d}.bin")
        with open(p, "wb") as f:
            f.write(torch.randn(FEATURES, generator=g).numpy().tobytes() + pad + bytes([i % 256]))
            f.flush()
            os.fsync(f.fileno())
        paths.append(p)
    return paths


def drop_cache(paths):
    """Drop these files' pages (only theirs) from the page cache."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def decode(seconds, rng):
    """A batch's decoding: samples unpacked and normalised with small numpy
    operations in a Python loop, for about this many seconds of CPU. Each
    operation holds the GIL (too small for numpy to release it)."""
    raw = rng.integers(0, 256, 64 * FEATURES, dtype=np.uint8).tobytes()
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        for i in range(64):
            row = np.frombuffer(raw, np.uint8, FEATURES, i * FEATURES).astype(np.float32)
            row = (row - row.mean()) / (row.std() + 1e-6)
            row.clip(-3, 3, out=row)


class QueueFeed:
    """A producer thread puts ready batches on a queue.Queue (a stand-in for
    a feed from a reader service); the loop takes them with get()."""

    def __init__(self, args, steps, parts):
        self.q = queue.Queue(maxsize=4)
        self.args, self.steps, self.parts = args, steps, parts
        self.t = threading.Thread(target=self.run, name="feeder", daemon=True)
        self.t.start()

    def run(self):
        note_role(self.parts, "thread", tid=threading.get_native_id(), pid=os.getpid(),
                  what="queue producer")
        g = torch.Generator().manual_seed(7)
        rng = np.random.default_rng(7)
        for e in range(self.args.epochs):
            for i in range(self.steps):
                if self.args.produce == "decode":
                    decode(self.args.produce_ms / 1000.0, rng)
                else:
                    time.sleep(self.args.produce_ms / 1000.0)
                x = torch.randn(self.args.batch_size, FEATURES, generator=g)
                y = torch.randint(0, CLASSES, (self.args.batch_size,), generator=g)
                self.q.put((x, y, torch.zeros(self.args.batch_size)))
            self.q.put(None)

    def epoch(self):
        while True:
            b = self.q.get(timeout=60)  # a dead producer fails the job, not hangs it
            if b is None:
                return
            yield b


# ---------------------------------------------------------------- model

def build_model(width):
    return nn.Sequential(nn.Linear(FEATURES, width), nn.ReLU(), nn.Linear(width, width),
                         nn.ReLU(), nn.Linear(width, CLASSES))


# ---------------------------------------------------------------- logging

class Log:
    """The log lines of one style, written by rank 0 only."""

    def __init__(self, args, steps, on):
        self.a, self.steps, self.on = args, steps, on
        self.t_epoch = 0.0

    def epoch_start(self, e):
        self.t_epoch = time.perf_counter()
        if self.on and self.a.log == "plain":
            print(f"Epoch {e}/{self.a.epochs}", flush=True)

    def step(self, e, i, loss):
        if not self.on:
            return
        a, n = self.a, i + 1
        if a.log == "lightning":
            # tqdm to stderr, \r between updates, epochs counted from 0
            pct = 100 * n // self.steps
            bar = "█" * (pct // 10) + " " * (10 - pct // 10)
            el = time.perf_counter() - self.t_epoch
            sys.stderr.write(f"\rEpoch {e - 1}: {pct:3d}%|{bar}| {n}/{self.steps} "
                             f"[00:{el:02.0f}<00:00, {n / max(el, 1e-9):.2f}it/s, "
                             f"loss={loss:.3f}, v_num=0]")
            sys.stderr.flush()
            return
        if n % a.log_every:
            return
        if a.log == "steps":
            print(f"Epoch [{e}/{a.epochs}], Step [{n}/{self.steps}], Loss: {loss:.4f}",
                  flush=True)
        elif a.log == "hf":
            frac = (e - 1) + n / self.steps
            print({"loss": round(loss, 4), "grad_norm": 1.0, "learning_rate": 0.01,
                   "epoch": round(frac, 2)}, flush=True)

    def epoch_end(self, e, loss, val):
        if not self.on:
            return
        a, el = self.a, time.perf_counter() - self.t_epoch
        if a.log == "lightning":
            sys.stderr.write("\n")
            sys.stderr.flush()
        elif a.log == "summary":
            print(f"Epoch {e} done, loss {loss:.4f}, {el:.2f} s", flush=True)
        elif a.log == "steps":
            v = f", val loss {val:.4f}" if val is not None else ""
            print(f"Epoch [{e}/{a.epochs}] finished: train loss {loss:.4f}{v}, {el:.2f} s",
                  flush=True)
        elif a.log == "hf" and val is not None:
            print({"eval_loss": round(val, 4), "eval_runtime": 0.1, "epoch": float(e)},
                  flush=True)


# ---------------------------------------------------------------- a rank

def make_loader(args, ds, sampler, parts, rank, shuffle):
    kw = dict(batch_size=args.batch_size, num_workers=args.workers, drop_last=True,
              sampler=sampler, shuffle=shuffle and sampler is None)
    if args.workers:
        kw.update(persistent_workers=args.persistent,
                  worker_init_fn=functools.partial(worker_init, parts, rank))
        if args.mp_context != "default":
            kw["multiprocessing_context"] = args.mp_context
    return DataLoader(ds, **kw)


def grad_in_hook(g):
    """A gradient of a small graph of its own, in a hook: reentrant, nested
    in the backward that runs the hook."""
    with torch.enable_grad():       # a backward runs hooks with grad mode off
        w = torch.ones(64, requires_grad=True)
        torch.autograd.grad((w * w).sum(), w)
    return g


def step_loss(net, x, y, args, extra=None):
    """The step's forward and loss; with --grad-penalty, plus the squared
    norm of the output's gradient w.r.t. the input (a WGAN-GP-style term:
    torch.autograd.grad inside the forward, its graph kept for the
    backward). With --compile, the first one compiles (and so may a later
    one, a recompile): forward too."""
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if args.autocast else NO_CONTEXT
    with ctx:
        if args.grad_penalty:
            x = x.requires_grad_()
        out = net(x)
        if args.grad_in_hook:
            out.register_hook(grad_in_hook)
        loss = F.cross_entropy(out, y)
        if args.grad_penalty:
            g, = torch.autograd.grad(out.float().sum(), x, create_graph=True)
            loss = loss + 1e-3 * g.pow(2).sum(1).mean()
        if extra is not None:   # --loaders zip: the second loader's batch too
            xb, yb, _ = extra
            loss = loss + F.cross_entropy(net(xb), yb)
    return loss / args.accum


# A DDP rank's module, kept to the process's end (leave_rank).
KEEP = []


def leave_rank():
    """A DDP rank leaves without tearing the interpreter down. On torch
    1.13, freeing the DDP module (its Reducer holds the gloo process group
    last) joins a gloo thread that waits for the GIL the freeing thread
    holds: seen deadlocked after the rank wrote its part, now and then,
    spinning a core (gdb: ~Reducer > ~ProcessGroupGloo > thread::join, the
    gloo thread in PyEval_AcquireThread)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class FakeNccl:
    """The stand-in NCCL (tests/workloads/fakecuda/nccl.c) by ctypes: each
    ncclAllReduce sleeps ms, as a collective the host blocks in."""

    def __init__(self, lib, ms):
        import ctypes
        self.c = ctypes
        self.lib = ctypes.CDLL(lib)
        self.lib.fakenccl_set_block(1, ctypes.c_longlong(int(ms * 1e6)))   # FAKE_SLEEP
        self.comm = ctypes.c_void_p()
        dev = (ctypes.c_int * 1)(0)
        assert self.lib.ncclCommInitAll(ctypes.byref(self.comm), 1, dev) == 0

    def allreduce(self, t):
        c = self.c
        assert self.lib.ncclAllReduce(c.c_void_p(t.data_ptr()), c.c_void_p(t.data_ptr()),
                                      c.c_size_t(t.numel()), 7, 0, self.comm, None) == 0


def run_rank(rank, args, parts):
    clock = Clock()
    t = time.perf_counter()
    start = proc_start(os.getpid())
    ddp = args.launch != "single"
    world = args.world_size if ddp else 1
    note_role(parts, "rank", rank=rank, pid=os.getpid(), ppid=os.getppid())
    if threading.current_thread() is not threading.main_thread():
        note_role(parts, "thread", tid=threading.get_native_id(), pid=os.getpid(),
                  what=f"rank {rank} loop thread", start_mono=time.monotonic())
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if ddp:
        if args.launch in ("spawn", "node"):
            dist.init_process_group("gloo", rank=rank, world_size=world,
                                    init_method=f"tcp://127.0.0.1:{args.port}")
        else:
            dist.init_process_group("gloo")
    model = build_model(args.width)
    if args.frozen_mb:
        model.register_buffer("frozen", torch.rand(int(args.frozen_mb * 2**18)))
    manual = ddp and args.allreduce_manual
    nccl = FakeNccl(args.fake_nccl, args.nccl_ms) if args.fake_nccl else None
    net = torch.nn.parallel.DistributedDataParallel(model) if ddp and not manual else model
    if args.compile:
        net = torch.compile(net, backend=args.compile)
    opt = (torch.optim.Adam(model.parameters(), lr=1e-3) if args.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    steps = args.steps
    n = steps * args.batch_size * world
    files, tmp = None, None
    if args.data in ("files", "cold-files"):
        tmp = tempfile.mkdtemp(prefix="torch_job.", dir="/var/tmp")
        files = write_files(tmp, n, args.sample_kb, rank)
    feed = QueueFeed(args, steps, parts) if args.data == "queue" else None
    hang = ((args.hang_after - 1) * args.batch_size, parts, rank) \
        if args.hang_after and rank == args.hang_rank else None
    ds = Samples(n, files, args.getitem_ms, rank, args.table_mb, hang)
    sampler = DistributedSampler(ds, world, rank, shuffle=True) if ddp else None
    loader = None if feed else make_loader(args, ds, sampler, parts, rank, True)
    aux = None
    if args.loaders != "one":
        an = (steps + 4 if args.loaders == "zip" else max(2, 2 * steps // 3)) * \
            args.batch_size * world
        ads = Samples(an, None, args.getitem_ms, 2000 + rank)
        asp = DistributedSampler(ads, world, rank, shuffle=True) if ddp else None
        aux = make_loader(args, ads, asp, parts, rank, True)
    batches = Batches(args.loaders, aux)
    val_loader = None
    if args.validate or args.val_every:
        vn = max(1, steps // 3) * args.batch_size * world
        vds = Samples(vn, None, args.getitem_ms, 1000 + rank)
        vs = DistributedSampler(vds, world, rank, shuffle=False) if ddp else None
        val_loader = make_loader(args, vds, vs, parts, rank, False)
    ckpt_dir = None
    if args.checkpoint:
        ckpt_dir = args.ckpt_dir or tempfile.mkdtemp(prefix="torch_job.ckpt.", dir="/var/tmp")
        os.makedirs(ckpt_dir, exist_ok=True)
    log = Log(args, steps, rank == 0)
    time.sleep(args.setup_s)
    t = clock.add("setup", t)

    epochs, total_steps, total_opt, getitem_s, helpers_noted = [], 0, 0, 0.0, False
    slow_start = None   # (unix, mono) of the straggler's first slow step
    pauses = {int(st): (float(sec), how) for st, sec, how in
              (p.split(":", 2) for p in args.pause)}
    for e in range(1, args.epochs + 1):
        if e == 2 and args.hold_file:
            while not os.path.exists(args.hold_file):
                time.sleep(0.02)
            t = time.perf_counter()     # untimed, as drop_cache below
        e0 = t
        before = len(clock.intervals)
        if sampler is not None:
            sampler.set_epoch(e)
        if args.data == "cold-files":
            drop_cache(files)   # not timed as a phase: between epochs, it is "untimed"
            t = time.perf_counter()
        log.epoch_start(e)
        t = clock.add("log", t)
        it = feed.epoch() if feed else batches.epoch(loader)
        t = clock.add("data", t)
        if not helpers_noted and args.workers:
            note_mp_helpers(parts)
            helpers_noted = True
        i, loss_sum, nlog, nsteps, nopt = 0, 0.0, 0, 0, 0
        while True:
            if hang:    # where the loop stands when the worker hangs: the stall's start
                note_role(parts, "fetch", pid=os.getpid(), mono=time.monotonic())
            fetched_mono = t     # perf_counter: CLOCK_MONOTONIC, as time.monotonic()
            try:
                x, y, gt = batches.next(it, i)
            except StopIteration:
                t = clock.add("data", t)
                break
            t = clock.add("data", t)
            getitem_s += float(gt.sum())
            # The micro-batches before an optimizer step skip DDP's allreduce:
            # their forward and backward under no_sync(), left after the backward.
            unsynced = net.no_sync() if args.no_sync and ddp and not manual and \
                (i + 1) % args.accum else contextlib.nullcontext()
            unsynced.__enter__()
            if rank == args.pause_rank and total_steps + nsteps in pauses:
                pause_here(parts, rank, pauses[total_steps + nsteps], fetched_mono)
            loss = step_loss(net, x, y, args, batches.extra)
            if rank == args.slow_rank and total_steps + nsteps >= args.slow_from_step:
                if slow_start is None:
                    slow_start = (time.time(), time.perf_counter())
                busy(args.slow_ms)
            t = clock.add("forward", t)
            loss.backward(inputs=list(model.parameters()) if args.backward_inputs else None)
            unsynced.__exit__(None, None, None)
            t = clock.add("backward", t)
            if nccl:
                for prm in model.parameters():
                    nccl.allreduce(prm.grad)
                    prm.grad /= 1
                t = clock.add("communication", t)
            if manual:
                for prm in model.parameters():
                    dist.all_reduce(prm.grad)
                    prm.grad /= world
                t = clock.add("communication", t)
            if (i + 1) % args.accum == 0:
                opt.step()
                opt.zero_grad(set_to_none=True)
                t = clock.add("optimizer", t)
                nopt += 1
            if ddp and args.barrier_every and (i + 1) % args.barrier_every == 0:
                dist.barrier()
                t = clock.add("communication", t)
            if args.item_every_step or args.log == "lightning" or (i + 1) % args.log_every == 0:
                lv = loss.item() * args.accum
                loss_sum += lv
                nlog += 1
                log.step(e, i, lv)
                t = clock.add("log", t)
            if ckpt_dir and args.ckpt_every and (i + 1) % args.ckpt_every == 0:
                if rank == 0:
                    save_checkpoint(ckpt_dir, e, model, opt, args.ckpt_style)
                if ddp:
                    dist.barrier()
                t = clock.add("checkpoint", t)
            if args.subprocs and (i + 1) % args.subprocs == 0:
                for cmd in (["git", "--version"], ["ip", "addr"]):
                    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
                    note_role(parts, "helper", pid=p.pid, ppid=os.getpid(), what=" ".join(cmd))
                    p.wait()
                t = clock.add("subprocess", t)
            i += 1
            nsteps += 1
            if args.val_every and i % args.val_every == 0:
                _, t = validate(net, val_loader, ddp, clock, t)
        val = None
        if val_loader is not None and args.validate:
            val, t = validate(net, val_loader, ddp, clock, t)
        if ckpt_dir and not args.ckpt_every:
            if rank == 0:
                save_checkpoint(ckpt_dir, e, model, opt, args.ckpt_style)
            if ddp:
                dist.barrier()
            t = clock.add("checkpoint", t)
        log.epoch_end(e, loss_sum / max(1, nlog), val)
        t = clock.add("log", t)
        total_steps += nsteps
        total_opt += nopt
        ep = Clock()
        ep.intervals = clock.intervals[before:]
        epochs.append({"epoch": e, "start_mono": e0, "end_mono": t, "steps": nsteps,
                       "optimizer_steps": nopt, "totals": ep.totals()})

    t = time.perf_counter()
    del loader, val_loader
    if ddp:
        dist.destroy_process_group()
    for d in (tmp, None if args.ckpt_dir else ckpt_dir):
        if d:
            shutil.rmtree(d, ignore_errors=True)
    t = clock.add("teardown", t)
    end = time.perf_counter()
    totals = clock.totals()
    part = {"rank": rank, "pid": os.getpid(), "ppid": os.getppid(),
            "start_unix": start[0], "start_mono": start[1], "end_mono": end,
            "totals": totals, "untimed_s": (end - start[1]) - sum(totals.values()),
            "worker_getitem_s": getitem_s, "steps": total_steps,
            "optimizer_steps": total_opt,
            "mp_start_method": multiprocessing.get_start_method(allow_none=True),
            "slow_start": slow_start,
            "epochs": epochs, "intervals": [[i, round(s, 6), round(d, 6)]
                                            for i, s, d in clock.intervals]}
    # Whole or not there: rank 0 reads it as soon as the name exists (a
    # torchrun -p run read it empty under load).
    path = os.path.join(parts, f"rank-{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(part, f)
    os.replace(path + ".tmp", path)
    if ddp:
        KEEP.append(net)
    if args.launch in ("spawn", "node"):
        leave_rank()


def run_in_thread(rank, args, parts):
    """--loop-thread: the rank's loop in a threading.Thread (Ray Train's
    train_func), the main thread supervising: it waits, waking every 100 ms."""
    loop = threading.Thread(target=run_rank, args=(rank, args, parts), name="train_func")
    loop.start()
    while loop.is_alive():
        loop.join(0.1)
class Batches:
    """A step's batch from the epoch's iterator: the training loader's
    (one); a batch of it and of the second loader, both in the forward (zip); or
    the training loader's on even steps and the second's on odd ones,
    iter() on the second again when it runs out (alternate). The training
    loader's StopIteration ends the epoch."""

    def __init__(self, how, aux):
        self.how, self.aux, self.aux_it = how, aux, None
        self.extra = None   # zip: the second loader's batch, for the forward

    def epoch(self, loader):
        if self.how == "zip":
            return zip(loader, self.aux)
        return iter(loader)

    def next(self, it, i):
        if self.how == "zip":
            (xa, ya, ga), self.extra = next(it)
            return xa, ya, ga
        if self.how == "one" or i % 2 == 0:
            return next(it)
        try:
            return next(self.aux_it)
        except (StopIteration, TypeError):  # TypeError: none yet
            self.aux_it = iter(self.aux)
            return next(self.aux_it)


def validate(net, loader, ddp, clock, t):
    """The loop, then (DDP) its allreduce as a second validation interval:
    the wait for the slowest rank, after the pass's last fetch."""
    net.eval()
    tot = torch.zeros(2)
    with torch.no_grad():
        for x, y, _ in loader:
            tot[0] += F.cross_entropy(net(x), y, reduction="sum")
            tot[1] += len(y)
    if ddp:
        t = clock.add("validation", t)
        dist.all_reduce(tot)
    net.train()
    return float(tot[0] / max(tot[1], 1)), clock.add("validation", t)


def save_checkpoint(d, e, model, opt, style="fsync"):
    """The whole act, as the caller times it: fsync, an open file object
    made durable (flush, fsync, close); replace, a path written by
    torch.save itself, renamed over the last one (ext4 starts writing the
    new file back at such a rename: 1-11 ms here)."""
    path = os.path.join(d, f"ckpt-{e}.pt")
    state = {"epoch": e, "model": model.state_dict(), "opt": opt.state_dict()}
    if style == "replace":
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        return
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())


# ---------------------------------------------------------------- the top

def assemble(args, parts, top, launcher, wall_start):
    ranks = []
    for r in range(args.world_size if args.launch != "single" else 1):
        with open(os.path.join(parts, f"rank-{r}.json")) as f:
            ranks.append(json.load(f))
    roles = {"top": top, "launcher": launcher, "ranks": [], "workers": [], "helpers": [],
             "threads": [], "events": []}   # events: hang, pause, resume, frames
    path = os.path.join(parts, "roles.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                kind = r.pop("kind")
                key = {"rank": "ranks", "worker": "workers", "helper": "helpers",
                       "thread": "threads"}.get(kind)
                roles[key].append(r) if key else roles["events"].append(dict(kind=kind, **r))
    roles["ranks"].sort(key=lambda r: r["rank"])
    for r in ranks:
        roles["threads"].append({"tid": r["pid"], "pid": r["pid"],
                                 "what": f"rank {r['rank']} main thread"})
    totals = {ph: sum(r["totals"][ph] for r in ranks) for ph in PHASES}
    totals["untimed"] = sum(r["untimed_s"] for r in ranks)
    life = sum(r["end_mono"] - r["start_mono"] for r in ranks)
    end_mono, end_unix = time.monotonic(), time.time()
    truth = {"variant": args.variant, "torch": torch.__version__,
             "python": sys.version.split()[0], "argv": sys.argv[1:],
             "settings": {k: v for k, v in vars(args).items() if k not in ("list", "truth")},
             "wall": {"start_unix": wall_start[0], "start_mono": wall_start[1],
                      "end_unix": end_unix, "end_mono": end_mono,
                      "seconds": end_mono - wall_start[1]},
             "roles": roles, "phases": PHASES, "ranks": ranks, "totals": totals,
             "shares": {ph: v / life for ph, v in totals.items()} if life else {}}
    tmp = args.truth + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f, indent=1)
    os.replace(tmp, args.truth)
    shutil.rmtree(parts, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_argv(args, argv):
    # Debian 13's torch 2.6 is built without libuv, and torchrun's TCP
    # rendezvous stores ask for libuv whatever USE_LIBUV says (the static
    # and the c10d ones alike): the c10d rendezvous on a FileStore instead,
    # and the ranks make their own TCPStore (USE_LIBUV=0 reaches that one).
    rdzv = args.truth + ".rdzv"
    if os.path.exists(rdzv):
        os.unlink(rdzv)
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    tr = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
          f"--nproc_per_node={args.world_size}", "--rdzv_backend=c10d",
          f"--rdzv_endpoint={rdzv}", "--rdzv_conf=store_type=file",
          f"--rdzv_id=torch_job{os.getpid()}"]
    if torch.__version__.startswith("1."):
        # torch 1.13 on Python 3.11: the default redirect/tee path fails there
        tr += ["--redirects", "2", "--tee", "2"]
    return tr + [os.path.abspath(__file__), *argv]


def main(argv):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    # torch >= 2.4 asks TCPStore for libuv by default; Debian 13's torch 2.6
    # is built without it ("use_libuv was requested but PyTorch was build
    # without libuv support"). 1.13 ignores the variable.
    os.environ.setdefault("USE_LIBUV", "0")
    parts = args.truth + ".parts"
    if args.launch == "node":
        # Each rank on its own (the test starts them): its part is its truth.
        os.makedirs(parts, exist_ok=True)
        run_rank(args.rank, args, parts)
    if args.launch == "torchrun" and "LOCAL_RANK" in os.environ:
        rank = int(os.environ["RANK"])
        run_rank(rank, args, parts)
        if rank == 0:
            # every rank wrote its part before destroy_process_group's end;
            # wait for the files rather than for a torn-down group.
            want = [os.path.join(parts, f"rank-{r}.json") for r in range(args.world_size)]
            deadline = time.monotonic() + 60
            while not all(os.path.exists(p) for p in want) and time.monotonic() < deadline:
                time.sleep(0.01)
            launcher = os.getppid()
            assemble(args, parts, launcher, launcher, proc_start(launcher))
        leave_rank()
    shutil.rmtree(parts, ignore_errors=True)
    os.makedirs(parts)
    if args.launch == "torchrun":
        os.execv(sys.executable, torchrun_argv(args, argv))
    wall_start = proc_start(os.getpid())
    if args.launch == "single":
        (run_in_thread if args.loop_thread else run_rank)(0, args, parts)
        assemble(args, parts, os.getpid(), None, wall_start)
        if args.quick_exit:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return 0
    args.port = free_port()
    ctx = mp.spawn(run_in_thread if args.loop_thread else run_rank, args=(args, parts),
                   nprocs=args.world_size, join=False)
    deadline = time.monotonic() + args.timeout
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            print("torch_job: timeout", file=sys.stderr)
            return 124
    note_mp_helpers(parts)
    assemble(args, parts, os.getpid(), os.getpid(), wall_start)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
