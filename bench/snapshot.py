#!/usr/bin/python3
"""Snapshots of one process's CPU time, memory and BPF program run-time stats.

  snapshot.py snap PID > s.json
      CPU ticks (utime+stime from /proc/PID/stat), CPU ns (sum of the
      threads' /proc/PID/task/TID/schedstat run time), VmHWM/VmRSS from
      /proc/PID/status, the IDs of the BPF programs PID holds (from
      /proc/PID/fdinfo: prog fds carry prog_id), and for those programs
      run_time_ns / run_cnt from `bpftool -j prog show` (counted only while
      kernel.bpf_stats_enabled=1), with a CLOCK_MONOTONIC timestamp.

  snapshot.py diff BEFORE AFTER REP [--tag T] [--ops N]
      TSV rows "REP<TAB>metric<TAB>value" for the interval between the two:
      trainbpf user+sys CPU % of one core (from the ticks and, finer,
      from schedstat), VmHWM (MB), and per BPF program
      ns/invocation, invocations/s and CPU % of one core, plus the total.
      BPF rows are "nan" when bpf_stats_enabled was 0 at either end.
      --tag T prefixes the metrics with "T_" and the program names with
      "T/"; --ops N adds T_bpf_ns_per_op = BPF run time / N operations.
"""
import json
import os
import subprocess
import sys
import time


def read_fdinfo_prog_ids(pid):
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                kv = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        # Program fds have prog_type; link fds also name a prog_id but no type.
        if "prog_type" in kv and "prog_id" in kv:
            ids.add(int(kv["prog_id"]))
    return ids


def read_proc(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15.
    ticks = int(fields[11]) + int(fields[12])
    mem = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                mem[k] = int(v.split()[0])  # kB
    # Precise CPU time: first field of each thread's schedstat, in ns.
    run_ns = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                run_ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return ticks, run_ns, mem


def snap(pid):
    t = time.monotonic()
    ticks, run_ns, mem = read_proc(pid)
    ids = read_fdinfo_prog_ids(pid)
    out = subprocess.run(["bpftool", "-j", "prog", "show"], check=True,
                         capture_output=True, text=True).stdout
    progs = {}
    for p in json.loads(out):
        if p["id"] in ids:
            progs[str(p["id"])] = {"name": p.get("name", "?"),
                                   "run_time_ns": p.get("run_time_ns", 0),
                                   "run_cnt": p.get("run_cnt", 0)}
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_on = int(f.read())
    return {"pid": pid, "t": t, "ticks": ticks, "run_ns": run_ns, "clk_tck": os.sysconf("SC_CLK_TCK"),
            "vmhwm_kb": mem.get("VmHWM", 0), "vmrss_kb": mem.get("VmRSS", 0),
            "bpf_stats_enabled": stats_on, "progs": progs}


def diff(a, b, rep, tag="", ops=0):
    dt = b["t"] - a["t"]
    rows = [("trainbpf_cpu_pct", 100.0 * (b["ticks"] - a["ticks"]) / b["clk_tck"] / dt),
            ("trainbpf_cpu_pct_schedstat", 100.0 * (b["run_ns"] - a["run_ns"]) / (dt * 1e9)),
            ("trainbpf_vmhwm_mb", b["vmhwm_kb"] / 1024.0)]
    valid = a["bpf_stats_enabled"] and b["bpf_stats_enabled"]
    if not valid:
        print("snapshot: kernel.bpf_stats_enabled was 0 at one end of the interval: "
              "BPF figures of rep %s are invalid" % rep, file=sys.stderr)
    total_ns = 0
    per = []
    for pid_s, pb in sorted(b["progs"].items(), key=lambda kv: kv[1]["name"]):
        pa = a["progs"].get(pid_s, {"run_time_ns": 0, "run_cnt": 0})
        ns = pb["run_time_ns"] - pa["run_time_ns"]
        cnt = pb["run_cnt"] - pa["run_cnt"]
        total_ns += ns
        name = (tag + "/" if tag else "") + pb["name"]
        if not valid:
            per += [("bpf_ns_per_call:" + name, float("nan")),
                    ("bpf_calls_per_s:" + name, float("nan")),
                    ("bpf_cpu_pct:" + name, float("nan"))]
            continue
        per += [("bpf_ns_per_call:" + name, ns / cnt if cnt else float("nan")),
                ("bpf_calls_per_s:" + name, cnt / dt),
                ("bpf_cpu_pct:" + name, 100.0 * ns / (dt * 1e9))]
    bpf_total = 100.0 * total_ns / (dt * 1e9) if valid else float("nan")
    rows.append(("bpf_cpu_pct_total", bpf_total))
    rows.append(("total_cpu_pct (user+sys+bpf)", rows[0][1] + bpf_total))
    if ops:
        rows.append(("bpf_ns_per_op", total_ns / ops if valid else float("nan")))
    rows.append(("interval_s", dt))
    if tag:
        rows = [(tag + "_" + k, v) for k, v in rows]
    for k, v in rows + per:
        print("%s\t%s\t%r" % (rep, k, v))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "snap":
        json.dump(snap(int(sys.argv[2])), sys.stdout)
        print()
    elif len(sys.argv) in (5, 7, 9) and sys.argv[1] == "diff":
        with open(sys.argv[2]) as f:
            a = json.load(f)
        with open(sys.argv[3]) as f:
            b = json.load(f)
        opts = dict(zip(sys.argv[5::2], sys.argv[6::2]))
        if set(opts) - {"--tag", "--ops"}:
            sys.exit(__doc__)
        diff(a, b, sys.argv[4], opts.get("--tag", ""), int(opts.get("--ops", 0)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
