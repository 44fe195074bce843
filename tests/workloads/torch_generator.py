"""A loop fed by a Python generator, in a threading.Thread, timing itself.

    torch_generator.py --truth FILE [--epochs N] [--batches N]

No DataLoader: `for x, y in batches(...)` resumes a generator that makes
each batch with numpy on the training thread. The loop runs in a
threading.Thread (the main thread joins it), its forward in a
record_function("my_forward") of its own, its backward through a wrapper
(as accelerate's accelerator.backward), four micro-batches per optimizer
step, a report() that sleeps 5 ms every 8 micro-batches, and a
torch.save at each epoch's end. The truth JSON: {"loop_s", and the
seconds of make_batch, forward, backward, optim, report, ckpt}.
Recorded with --functions into tests/golden/recordings/sections.db.
"""
import argparse
import json
import os
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import record_function

T = {"make_batch": 0.0, "forward": 0.0, "backward": 0.0, "optim": 0.0, "ckpt": 0.0,
     "report": 0.0}


def batches(n, rng):
    for _ in range(n):
        a = time.perf_counter()
        x = rng.standard_normal((64, 256)).astype(np.float32)
        for _ in range(8):
            x = np.tanh(x @ np.eye(256, dtype=np.float32) * 0.5)
        T["make_batch"] += time.perf_counter() - a
        yield torch.from_numpy(x), torch.from_numpy(rng.integers(0, 10, 64))


class Accelerator:
    def backward(self, loss):
        loss.backward()


def report(losses):
    time.sleep(0.005)
    return sum(losses) / len(losses)


def train(args):
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    acc, rng, losses = Accelerator(), np.random.default_rng(0), []
    ckpt = tempfile.mkdtemp()
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        for i, (x, y) in enumerate(batches(args.batches, rng)):
            a = time.perf_counter()
            with record_function("my_forward"):
                loss = F.cross_entropy(model(x), y)
            b = time.perf_counter()
            acc.backward(loss / 4)
            c = time.perf_counter()
            T["forward"] += b - a
            T["backward"] += c - b
            if i % 4 == 3:
                opt.step()
                opt.zero_grad()
                T["optim"] += time.perf_counter() - c
            losses.append(loss.item())
            if i % 8 == 7:
                a = time.perf_counter()
                report(losses)
                T["report"] += time.perf_counter() - a
        a = time.perf_counter()
        torch.save(model.state_dict(), os.path.join(ckpt, "model.pt"))
        T["ckpt"] += time.perf_counter() - a
    T["loop_s"] = time.perf_counter() - t0
    os.unlink(os.path.join(ckpt, "model.pt"))
    os.rmdir(ckpt)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--truth", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batches", type=int, default=48, help="micro-batches per epoch")
    args = p.parse_args()
    loop = threading.Thread(target=train, args=(args,), name="train")
    loop.start()
    loop.join()
    with open(args.truth, "w") as f:
        json.dump(T, f)


if __name__ == "__main__":
    main()
