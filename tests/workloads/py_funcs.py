"""A plain Python job that times its own functions, for --functions.

    python py_funcs.py TRUTH SECONDS [--thread-at S] [--ready FILE] [--settle S] [--deep N]

Its loop calls Loop.step(), which spends its time in three functions of
its own: spin (on a CPU), nap (asleep) and wait_pipe (blocked reading a
pipe another thread writes after a delay). Each is timed in-process with
perf_counter, after --settle seconds asleep in settle() (a tracer that
launched it has found its interpreter by then). From --thread-at seconds on (mid-run: the reader must find
a thread born after it looked), a second thread runs side_task, asleep.
With --deep N, step() calls nap N frames deeper (descend): a stack deeper
than the reader keeps.

TRUTH (JSON, written at the end): the seconds each function took on the
loop's thread, the loop thread's wall time, each call of a function and of
Loop.step as [name, start, end] in Unix seconds (a tracer's window is
given in those: a test can sum what fell inside it), and the stacks the
interpreter itself gave (sys._current_frames) while the loop thread
slept in nap and the side thread in side_task: each a list of
[name, first line, file], outermost first, the name as CPython names a
code object (co_qualname from 3.11, co_name before).
"""
import json
import os
import sys
import threading
import time

NAME = "co_qualname" if sys.version_info >= (3, 11) else "co_name"
# perf_counter (CLOCK_MONOTONIC) plus this is Unix time, within a clock read.
UNIX = time.time() - time.perf_counter()


def frames_of(frame):
    """[name, firstlineno, file] outermost first, from a thread's frame."""
    out = []
    while frame is not None:
        code = frame.f_code
        out.append([getattr(code, NAME), code.co_firstlineno, code.co_filename])
        frame = frame.f_back
    return out[::-1]


def timed(truth, name, t):
    """Count a call of name that began at perf_counter() t and ends now."""
    end = time.perf_counter()
    truth.calls.append([name, t + UNIX, end + UNIX])
    if name in truth.secs:
        truth.secs[name] += end - t


class Truth:
    def __init__(self):
        self.secs = {"spin": 0.0, "nap": 0.0, "wait_pipe": 0.0}
        self.stacks = {}
        self.calls = []
        self.lock = threading.Lock()


def spin(truth, sec):
    t = time.perf_counter()
    x = 0
    while time.perf_counter() - t < sec:
        x += 1
    timed(truth, "spin", t)
    return x


def nap(truth, sec):
    t = time.perf_counter()
    time.sleep(sec)
    timed(truth, "nap", t)


def wait_pipe(truth, sec):
    r, w = os.pipe()
    t = time.perf_counter()
    threading.Timer(sec, os.write, (w, b"x")).start()
    os.read(r, 1)
    timed(truth, "wait_pipe", t)
    os.close(r)
    os.close(w)


def descend(n, fn, *args):
    """n frames deeper, then fn(*args)."""
    if n <= 0:
        return fn(*args)
    return descend(n - 1, fn, *args)


def settle(sec):
    time.sleep(sec)


def side_task(truth, stop):
    while not stop.is_set():
        time.sleep(0.02)


class Loop:
    def __init__(self, truth, deep):
        self.truth = truth
        self.deep = deep

    def step(self):
        t = time.perf_counter()
        spin(self.truth, 0.03)
        if self.deep:
            descend(self.deep, nap, self.truth, 0.03)
        else:
            nap(self.truth, 0.03)
        wait_pipe(self.truth, 0.02)
        timed(self.truth, "step", t)


def snapshot(truth, loop_tid, side):
    """The interpreter's own stacks of the two threads, taken while each waits."""
    time.sleep(0.5)
    for _ in range(200):
        frames = sys._current_frames()
        main = frames_of(frames.get(loop_tid))
        if main and main[-1][0] == "nap" and "nap" not in truth.stacks:
            truth.stacks["nap"] = main
        if side.ident in frames and "side_task" not in truth.stacks:
            st = frames_of(frames[side.ident])
            if st and st[-1][0] == "side_task":
                truth.stacks["side_task"] = st
        if len(truth.stacks) == 2:
            return
        time.sleep(0.013)


def main():
    path, seconds = sys.argv[1], float(sys.argv[2])
    thread_at = float(sys.argv[sys.argv.index("--thread-at") + 1]) \
        if "--thread-at" in sys.argv else 1.0
    if "--ready" in sys.argv:
        with open(sys.argv[sys.argv.index("--ready") + 1], "w") as f:
            f.write(str(os.getpid()))
    if "--settle" in sys.argv:
        settle(float(sys.argv[sys.argv.index("--settle") + 1]))
    deep = int(sys.argv[sys.argv.index("--deep") + 1]) if "--deep" in sys.argv else 0
    truth = Truth()
    loop = Loop(truth, deep)
    stop = threading.Event()
    side = threading.Thread(target=side_task, args=(truth, stop), name="side")
    t0 = time.perf_counter()
    started = False
    while time.perf_counter() - t0 < seconds:
        if not started and time.perf_counter() - t0 >= thread_at:
            side.start()
            threading.Thread(target=snapshot, args=(truth, threading.get_ident(), side),
                             daemon=True).start()
            started = True
        loop.step()
    wall = time.perf_counter() - t0
    stop.set()
    side.join()
    with open(path, "w") as f:
        json.dump({"secs": truth.secs, "wall": wall, "stacks": truth.stacks,
                   "calls": truth.calls,
                   "pid": os.getpid(), "version": list(sys.version_info[:2])}, f)


if __name__ == "__main__":
    main()
