"""A training loop that does work PyTorch does not bracket, timing its own sections.

    torch_sections.py --truth FILE [--steps N] [--ema-tensors N] [--scopes]

The loop (train(), called from main()) has no DataLoader. Each step:
  get_batch()        the batch made and augmented on the training thread
                     (numpy, a few ms of CPU);
  the model          forward, loss.backward(), opt.step() (an MLP on the CPU);
  ema_update()       a shadow copy of the weights lerped under no_grad (torch
                     ops outside any bracket, as a diffusion trainer's EMA);
  sample_images()    every 4th step: waits 20 ms (as for a GPU sampler) and
                     runs the model under no_grad;
  compute_metrics()  pure Python over the logits;
  save_metrics()     every 10th step: np.save of the metrics, flushed and
                     fsync'd.
Each is timed with perf_counter on the loop thread, in the loop itself
(no timing wrapper's frame between the loop and the section).
--scopes: the loop brackets its work in record_function blocks of its own,
timed the same way instead of the calls: "augment" (get_batch), "ema"
(ema_update), "visuals" (sample_images, inside a "sampling" bracket of its
own nested in it), "metrics" (compute_metrics, decorated with
record_function) and "save" (save_metrics). The truth JSON:
  {"pid", "tid", "torch", "python", "steps", "loop_s",
   "sections": {NAME: seconds}}
"""
import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTH, BATCH, CLASSES = 256, 64, 100


def get_batch(rng):
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    for _ in range(6):                       # augmentation: noise, flips, a blur
        x = x + 0.01 * rng.standard_normal(x.shape).astype(np.float32)
        x = np.flip(x, axis=1).copy()
        x = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]).mean(axis=1, keepdims=True) + x
    y = rng.integers(0, CLASSES, BATCH)
    return torch.from_numpy(x), torch.from_numpy(y)


def ema_update(shadow, decay=0.999):
    with torch.no_grad():
        for s in shadow:
            s.mul_(decay).add_(torch.tanh(s), alpha=1 - decay)


def sample_images(model, x):
    time.sleep(0.02)
    with torch.no_grad():
        return model(x).argmax(dim=1)


def compute_metrics(logits, y):
    hits, entropy = 0, 0.0
    for row, label in zip(logits.tolist(), y.tolist()):
        top = max(row)
        exps = [math.exp(v - top) for v in row]
        total = sum(exps)
        entropy -= sum(e / total * math.log(e / total + 1e-12) for e in exps)
        hits += row.index(top) == label
    return hits / BATCH, entropy / BATCH


def save_metrics(d, step, metrics):
    path = os.path.join(d, f"metrics-{step}.npy")
    with open(path, "wb") as f:
        np.save(f, np.asarray(metrics * 2000, dtype=np.float64))
        f.flush()
        os.fsync(f.fileno())


def lap(totals, name, t):
    """Adds the time since t to name's (called after the section returns: no
    frame of the timer's above the section's)."""
    now = time.perf_counter()
    totals[name] = totals.get(name, 0.0) + now - t
    return now


def train_scoped(model, opt, shadow, steps, d):
    """train(), its work in the loop's own record_function brackets."""
    from torch.profiler import record_function
    metrics_of = record_function("metrics")(compute_metrics)
    rng = np.random.default_rng(1)
    totals, metrics = {}, []
    t0 = time.perf_counter()
    for step in range(steps):
        t = time.perf_counter()
        with record_function("augment"):
            x, y = get_batch(rng)
        lap(totals, "augment", t)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = time.perf_counter()
        with record_function("ema"):
            ema_update(shadow)
        t = lap(totals, "ema", t)
        if step % 4 == 0:
            with record_function("visuals"):
                with record_function("sampling"):
                    sample_images(model, x)
            t = lap(totals, "visuals", t)
        metrics.append(metrics_of(logits.detach(), y))
        t = lap(totals, "metrics", t)
        if step % 10 == 9:
            with record_function("save"):
                save_metrics(d, step, metrics[-10:])
            lap(totals, "save", t)
    return totals, time.perf_counter() - t0


def train(model, opt, shadow, steps, d):
    rng = np.random.default_rng(1)
    totals, metrics = {}, []
    t0 = time.perf_counter()
    for step in range(steps):
        t = time.perf_counter()
        x, y = get_batch(rng)
        lap(totals, "get_batch", t)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = time.perf_counter()
        ema_update(shadow)
        t = lap(totals, "ema_update", t)
        if step % 4 == 0:
            sample_images(model, x)
            t = lap(totals, "sample_images", t)
        metrics.append(compute_metrics(logits.detach(), y))
        t = lap(totals, "compute_metrics", t)
        if step % 10 == 9:
            save_metrics(d, step, metrics[-10:])
            lap(totals, "save_metrics", t)
    return totals, time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--truth", required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ema-tensors", type=int, default=8,
                   help="the EMA's shadow tensors (384 x 384 each): its cost")
    p.add_argument("--scopes", action="store_true",
                   help="the loop's work in record_function brackets of its own")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    shadow = [torch.rand(384, 384) for _ in range(args.ema_tensors)]
    with tempfile.TemporaryDirectory() as d:
        loop = train_scoped if args.scopes else train
        totals, loop_s = loop(model, opt, shadow, args.steps, d)
    truth = {"pid": os.getpid(), "tid": threading.get_native_id(), "torch": torch.__version__,
             "python": sys.version.split()[0], "steps": args.steps, "loop_s": loop_s,
             "sections": totals}
    with open(args.truth + ".tmp", "w") as f:
        json.dump(truth, f, indent=1)
    os.replace(args.truth + ".tmp", args.truth)


if __name__ == "__main__":
    main()
