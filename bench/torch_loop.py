#!/usr/bin/env python3
"""A torch training loop of a chosen step time, for bench/phase_cost.sh.

    torch_loop.py [--layers N] [--width W] [--steps S] [--epochs E]

An MLP of N Linear+ReLU layers of width W, SGD, a DataLoader over
in-memory tensors (num_workers=0: the fetch is on the main thread, as the
phase probes see it), E epochs of S steps. Each step is the PyTorch phases
trainbpf brackets: a fetch (one named bracket), forward, backward (one
THPEngine_run_backward), optimizer.step and zero_grad (two named
brackets). At the end it prints `RESULT {"step_time_median_s": ..., "steps": ...}`.
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)	# one CPU: the step time does not depend on the machine's load
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(a.steps * 32, a.width))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    times = []
    for _ in range(a.epochs):
        t = time.perf_counter()
        for (x,) in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            now = time.perf_counter()
            times.append(now - t)
            t = now
    print("RESULT " + json.dumps({"step_time_median_s": statistics.median(times),
                                  "steps": len(times)}), flush=True)


if __name__ == "__main__":
    main()
