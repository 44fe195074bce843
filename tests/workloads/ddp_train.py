#!/usr/bin/env python3
"""Small but real DistributedDataParallel training job: trainbpf's demo/test workload.

It exercises what the profiler looks at in ML training:
  * a parent process that mp.spawn()s --world-size ranks (fork+exec'd python),
    which rendezvous over TCP on 127.0.0.1 and allreduce gradients (gloo/NCCL);
  * per rank, a DataLoader whose --workers processes are fork()ed (no exec)
    afresh each epoch and read one small file per sample (real file I/O,
    optionally slowed down with --slow-data to make the job input-bound);
  * a small MLP (compute-bound steps) or, with --model large, a ~33 M
    parameter model that is nearly all embedding table (little compute per
    step, a ~128 MB gradient allreduce: with a tiny batch, communication
    dominates).

Rank 0 prints "Epoch e/E" at each epoch start and a final line
  RESULT {"steps":..., "step_time_median_s":..., "step_time_mean_s":...,
          "epoch_times_s":[...], "world_size":...,
          "epoch_start_unix":[...],   (time.time() right before each "Epoch" line)
          "iter_start_unix":[[...] per rank]}  (right before iter(loader) forks workers)
With --print-pids the parent, rank 0 and every DataLoader worker print PIDS lines.
Runs unchanged on CPU (torch 1.13, gloo) and GPU (torch 2.x, --backend nccl).
"""
import argparse
import contextlib
import array
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

FEATURES = 1024          # 4 KiB of float32 per sample
CLASSES = 10
HEADER = struct.Struct("<i")  # int32 label, then FEATURES float32


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--data-dir", help="where to write the samples (default: a fresh "
                   "directory under /var/tmp, removed at exit; a given one is kept)")
    p.add_argument("--slow-data", type=float, default=0.0, metavar="SEC",
                   help="sleep SEC in each Dataset.__getitem__")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--pin-memory", action="store_true")
    p.add_argument("--model", choices=["small", "large"], default="small")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DDP gradient bucket size (PyTorch's default: 25)")
    p.add_argument("--max-steps-per-epoch", type=int, default=0, help="0 = whole epoch")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    p.add_argument("--timeout", type=float, default=900.0, help="kill the ranks after this many seconds")
    p.add_argument("--print-pids", action="store_true")
    p.add_argument("--torch-profiler", action="store_true",
                   help="train under torch.profiler (CPU+CUDA activities), to compare overheads")
    args = p.parse_args(argv)
    if args.backend == "nccl":
        args.device = "cuda"
    return args


# ---------------------------------------------------------------- data
def write_dataset(data_dir, n):
    """One file per sample: int32 label + FEATURES float32. The label is a
    fixed linear function of the features, so the model can actually learn."""
    g = torch.Generator().manual_seed(0)
    proj = torch.randn(FEATURES, CLASSES, generator=g)
    for start in range(0, n, 256):
        x = torch.randn(min(256, n - start), FEATURES, generator=g)
        labels = (x @ proj).argmax(dim=1).tolist()
        raw = array.array("f", x.reshape(-1).tolist()).tobytes()  # no numpy needed
        size = FEATURES * 4
        for j, label in enumerate(labels):
            with open(os.path.join(data_dir, "sample_%06d.bin" % (start + j)), "wb") as f:
                f.write(HEADER.pack(label))
                f.write(raw[j * size:(j + 1) * size])


class FileDataset(Dataset):
    def __init__(self, data_dir, n, slow):
        self.data_dir, self.n, self.slow = data_dir, n, slow

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow > 0:
            time.sleep(self.slow)
        with open(os.path.join(self.data_dir, "sample_%06d.bin" % i), "rb") as f:
            raw = f.read()
        (label,) = HEADER.unpack_from(raw)
        x = torch.frombuffer(bytearray(raw[HEADER.size:]), dtype=torch.float32)
        return x, label


class PrintWorkerPid:
    """worker_init_fn for --print-pids (a class, so it pickles under any start method)."""
    def __init__(self, rank):
        self.rank = rank

    def __call__(self, worker_id):
        print("PIDS worker rank=%d id=%d pid=%d ppid=%d"
              % (self.rank, worker_id, os.getpid(), os.getppid()), flush=True)


# ---------------------------------------------------------------- model
class TableModel(nn.Module):
    """~33 M parameters, nearly all in an embedding table, as in
    recommendation models: a step looks up a few rows per sample (cheap),
    but DDP allreduces the table's whole dense gradient (~128 MB)."""
    ROWS, DIM, LOOKUPS = 131072, 256, 16

    def __init__(self):
        super().__init__()
        self.table = nn.EmbeddingBag(self.ROWS, self.DIM, mode="mean")
        self.head = nn.Linear(self.DIM, CLASSES)

    def forward(self, x):
        idx = (x[:, :self.LOOKUPS].abs() * 1e4).long() % self.ROWS
        return self.head(self.table(idx))


def build_model(kind):
    if kind == "large":  # communication-bound: a big table, little compute
        return TableModel()
    # small: ~2.4 M parameters, compute-bound at batch 32
    dims = [FEATURES, 1024, 1024, 256]
    layers = [m for a, b in zip(dims, dims[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
    return nn.Sequential(*layers, nn.Linear(dims[-1], CLASSES))


# ---------------------------------------------------------------- ranks
def run_rank(rank, args, port, data_dir, parent_pid):
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    dev = torch.device("cpu")
    if args.device == "cuda":  # checked here, not in the parent, to keep CUDA out of it
        ngpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if ngpu == 0 or (args.backend == "nccl" and ngpu < args.world_size):
            raise RuntimeError("need %s GPU(s) for --device cuda --backend %s, found %d"
                               % (args.world_size if args.backend == "nccl" else 1, args.backend, ngpu))
        dev = torch.device("cuda", rank % ngpu)
        torch.cuda.set_device(dev)
    dist.init_process_group(args.backend, init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=300))
    try:
        train(rank, args, data_dir, parent_pid, dev)
    finally:
        dist.destroy_process_group()


def train(rank, args, data_dir, parent_pid, dev):
    world = args.world_size
    if args.print_pids:
        pids = [None] * world
        dist.all_gather_object(pids, os.getpid())
        if rank == 0:
            print("PIDS parent=%d " % parent_pid
                  + " ".join("rank%d=%d" % (r, p) for r, p in enumerate(pids)), flush=True)

    dataset = FileDataset(data_dir, args.samples, args.slow_data)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader_kw = {}
    if args.workers > 0:
        # Explicit fork: workers are fork()ed without exec on every Python
        # version (3.14 changed the default start method to forkserver).
        loader_kw["multiprocessing_context"] = "fork"
        if args.print_pids:
            loader_kw["worker_init_fn"] = PrintWorkerPid(rank)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                        num_workers=args.workers, persistent_workers=False,
                        pin_memory=args.pin_memory, drop_last=True, **loader_kw)

    model = build_model(args.model).to(dev)
    ddp = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None,
              bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=True)
    # Plain SGD (no momentum) keeps the optimizer cheap next to the allreduce.
    opt = torch.optim.SGD(ddp.parameters(), lr=0.2)
    loss_fn = nn.CrossEntropyLoss()

    def sync():  # CUDA work is asynchronous: wait for it before reading the clock
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    step_times, epoch_times, epoch_start_unix, iter_start_unix = [], [], [], []
    prof = contextlib.nullcontext()
    if args.torch_profiler:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if dev.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
    with prof:
        run_epochs(rank, args, ddp, opt, loss_fn, loader, sampler, sync,
                   step_times, epoch_times, epoch_start_unix, iter_start_unix)
    iter_starts = [None] * world
    dist.all_gather_object(iter_starts, iter_start_unix)

    if rank == 0:
        st = step_times or [0.0]
        result = {"steps": len(step_times), "step_time_median_s": statistics.median(st),
                  "step_time_mean_s": statistics.mean(st),
                  "epoch_times_s": [round(t, 4) for t in epoch_times], "world_size": world,
                  "epoch_start_unix": epoch_start_unix, "iter_start_unix": iter_starts}
        print("RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    dist.barrier(device_ids=[dev.index] if args.backend == "nccl" else None)


def run_epochs(rank, args, ddp, opt, loss_fn, loader, sampler, sync,
               step_times, epoch_times, epoch_start_unix, iter_start_unix):
    dev = next(ddp.parameters()).device
    for epoch in range(1, args.epochs + 1):
        if rank == 0:
            epoch_start_unix.append(time.time())  # right before the line's write(2)
            print("Epoch %d/%d" % (epoch, args.epochs), flush=True)
        sampler.set_epoch(epoch)
        steps = len(loader)
        if args.max_steps_per_epoch > 0:
            steps = min(steps, args.max_steps_per_epoch)
        sync()
        e0 = time.perf_counter()
        iter_start_unix.append(time.time())
        it = iter(loader)            # forks the DataLoader workers
        loss = None
        for _ in range(steps):
            t0 = time.perf_counter()
            x, y = next(it)
            x = x.to(dev, non_blocking=args.pin_memory)
            y = y.to(dev, non_blocking=args.pin_memory)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()          # DDP allreduces gradients here
            opt.step()
            sync()
            step_times.append(time.perf_counter() - t0)
        del it                       # shuts the workers down
        epoch_times.append(time.perf_counter() - e0)
        if rank == 0 and loss is not None:
            print("  loss %.4f" % loss.item(), flush=True)  # of the last step


# ---------------------------------------------------------------- parent
def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)  # no big intra-op thread pool in the parent either
    # SIGTERM -> SystemExit, so the finally blocks below still stop the ranks and clean up.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    # torch >= 2.4 asks TCPStore for libuv by default, and Debian 13's 2.6
    # is built without it; the spawned ranks inherit this. 1.13 ignores it.
    os.environ.setdefault("USE_LIBUV", "0")
    own_dir = args.data_dir is None
    data_dir = tempfile.mkdtemp(prefix="trainbpf-data-", dir="/var/tmp") if own_dir else args.data_dir
    try:
        os.makedirs(data_dir, exist_ok=True)
        write_dataset(data_dir, args.samples)
        if args.print_pids:
            print("PIDS parent=%d" % os.getpid(), flush=True)
        ctx = mp.spawn(run_rank, args=(args, free_port(), data_dir, os.getpid()),
                       nprocs=args.world_size, join=False, start_method="spawn")
        deadline = time.monotonic() + args.timeout
        try:
            # join() raises if a rank failed (and then terminates the others).
            while not ctx.join(timeout=1.0):
                if time.monotonic() > deadline:
                    raise TimeoutError("ranks still running after %.0f s" % args.timeout)
        finally:
            # Poll is_alive() (waitpid) rather than join(): forked DataLoader
            # workers inherit the rank's sentinel pipe and keep join() waiting.
            alive = [p for p in ctx.processes if p.is_alive()]
            for p in alive:
                p.terminate()
            end = time.monotonic() + 5
            while any(p.is_alive() for p in alive) and time.monotonic() < end:
                time.sleep(0.1)
            for p in alive:
                if p.is_alive():
                    p.kill()
    finally:
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
