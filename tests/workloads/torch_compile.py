"""A torch.compile'd model's training loop, timing its compilation by Dynamo's own clock.

    torch_compile.py --truth FILE [--loader] [--steps N] [--backend NAME]

The model (an MLP on the CPU) is compiled with torch.compile(backend=...,
aot_eager by default: Dynamo and AOTAutograd, no C compiler needed). With
--loader its batches come from a DataLoader (no workers), so the first
step's forward (where Dynamo compiles) is a training step's; without, they
are made on the loop thread and the first step is the loop's setup. The
truth JSON: {"pid", "torch", "steps", "loop_s", "compile_s"}, compile_s
Dynamo's own total for _compile.compile_inner (torch._dynamo.utils.
compile_times), "first_step_s" the first step's wall time.
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def compile_seconds():
    """Dynamo's clock of its frame compilations, in seconds."""
    from torch._dynamo.utils import compile_times
    for line in compile_times(repr="str").splitlines():
        name, _, secs = line.partition(",")
        if name.strip() == "_compile.compile_inner":
            return sum(float(s) for s in secs.split(",") if s.strip())
    raise SystemExit("torch._dynamo kept no _compile.compile_inner time")


def batches(loader, steps):
    if loader:
        data = TensorDataset(torch.randn(64 * steps, 256), torch.randint(0, 10, (64 * steps,)))
        yield from DataLoader(data, batch_size=64)
        return
    for _ in range(steps):
        yield torch.randn(64, 256), torch.randint(0, 10, (64,))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", required=True)
    ap.add_argument("--loader", action="store_true")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--backend", default="aot_eager")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(),
                          nn.Linear(1024, 10))
    compiled = torch.compile(model, backend=a.backend)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    steps, first = 0, 0.0
    t0 = time.perf_counter()
    for x, y in batches(a.loader, a.steps):
        t = time.perf_counter()
        loss = F.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first or time.perf_counter() - t
        steps += 1
    loop = time.perf_counter() - t0
    with open(a.truth, "w") as f:
        json.dump({"pid": os.getpid(), "torch": torch.__version__, "steps": steps,
                   "loop_s": loop, "compile_s": compile_seconds(), "first_step_s": first}, f)


if __name__ == "__main__":
    main()
