#!/usr/bin/python3
"""Median / min / max tables (Markdown) from the benchmarks' raw data.

Raw data is a TSV of "REP<TAB>METRIC<TAB>VALUE" lines (no header); "nan"
values are skipped.

  stats.py table FILE [--target METRIC OP VALUE]...
      one row per metric, in order of first appearance:
      metric | n | median | min | max | target | verdict (on the median)
      OP is one of <= >= < >.

  stats.py progs FILE
      one row per BPF program from the metrics bpf_ns_per_call:NAME,
      bpf_calls_per_s:NAME and bpf_cpu_pct:NAME (table skips all NAME:X rows).

  stats.py wide FILE METRIC...
      one row per REP, one column per METRIC (the raw values).

  stats.py ratios FILE BASE [--max-pct P] METRIC...
      ratios METRIC/BASE taken within each REP (round or pair), so that
      slow phases of a noisy machine cancel out: median and min-max of the
      per-rep ratios, the slowdown % of the median ratio, and a noise line
      comparing the effect with the run-to-run spread of BASE itself. For
      context also the ratio of the medians and the ratio of the minima
      (the best run of each: the least disturbed by other load).
"""
import math
import operator
import statistics
import sys
from collections import OrderedDict

OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


def load(path):
    data = OrderedDict()   # metric -> {rep: value}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            rep, metric, value = parts
            try:
                v = float(value)
            except ValueError:
                continue
            data.setdefault(metric, OrderedDict())
            if not math.isnan(v):
                data[metric][rep] = v
    return data


def fmt(v, metric=""):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if "ratio" in metric:
        return "%.4f" % v
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1:
        return "%.3f" % v
    return "%.4f" % v


def spread(vals):
    return (max(vals) - min(vals)) / statistics.median(vals) if vals else float("nan")


def table(data, targets):
    print("| metric | n | median | min | max | target | verdict |")
    print("|---|---:|---:|---:|---:|---|---|")
    for metric, reps in data.items():
        if ":" in metric:   # per-program rows: see progs()
            continue
        vals = list(reps.values())
        tgt = targets.get(metric)
        tstr, verdict = "", ""
        if tgt:
            op, limit = tgt
            tstr = "%s %s" % (op, fmt(limit))
            if vals:
                verdict = "ok" if OPS[op](statistics.median(vals), limit) else "MISSED"
        if not vals:
            print("| %s | 0 | - | - | - | %s | no data |" % (metric, tstr))
            continue
        print("| %s | %d | %s | %s | %s | %s | %s |" % (
            metric, len(vals), fmt(statistics.median(vals), metric),
            fmt(min(vals), metric), fmt(max(vals), metric), tstr, verdict))


def progs(data):
    names = OrderedDict()
    for metric in data:
        if ":" in metric:
            names[metric.split(":", 1)[1]] = True
    cols = [("bpf_ns_per_call", "ns per call"), ("bpf_calls_per_s", "calls/s"),
            ("bpf_cpu_pct", "CPU % of one core")]
    print("| program | " + " | ".join("%s median (min-max)" % c[1] for c in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for n in names:
        cells = []
        for prefix, _ in cols:
            vals = list(data.get(prefix + ":" + n, {}).values())
            if vals:
                cells.append("%s (%s-%s)" % (fmt(statistics.median(vals)),
                                             fmt(min(vals)), fmt(max(vals))))
            else:
                cells.append("-")
        print("| %s | %s |" % (n, " | ".join(cells)))


def wide(data, metrics):
    reps = OrderedDict()
    for m in metrics:
        for r in data.get(m, {}):
            reps[r] = True
    print("| rep | " + " | ".join(metrics) + " |")
    print("|---|" + "---:|" * len(metrics))
    for r in reps:
        print("| %s | %s |" % (r, " | ".join(fmt(data.get(m, {}).get(r), m) for m in metrics)))


def median_ci(vals, level=0.95):
    """A distribution-free interval for the median: the order statistics
    k and n-k+1 with k the largest rank such that a Binomial(n, 1/2) falls
    below it with probability <= (1-level)/2. None below 6 values."""
    v, n = sorted(vals), len(vals)
    k, tail = 0, 0.0
    while True:
        nxt = tail + math.comb(n, k) / 2 ** n
        if nxt > (1 - level) / 2:
            break
        tail, k = nxt, k + 1
    return (v[k - 1], v[n - k]) if k >= 1 else None


def ratios(data, base, metrics, max_pct):
    b = data.get(base)
    if not b:
        sys.exit("stats.py: no data for base metric %s" % base)
    print("| ratio (per rep) | n | median | 95% CI of the median | min | max | slowdown (median) "
          "| target | verdict | ratio of medians | ratio of minima |")
    print("|---|---:|---:|---|---:|---:|---:|---|---|---:|---:|")
    notes = []
    bspread = spread(list(b.values()))
    for m in metrics:
        reps = data.get(m, {})
        r = [reps[k] / b[k] for k in reps if k in b and b[k] > 0]
        name = "%s / %s" % (m, base)
        if not r:
            print("| %s | 0 | - | - | - | - | - | | no data | | |" % name)
            continue
        ci = median_ci(r)
        cistr = "%.4f-%.4f" % ci if ci else "-"
        med = statistics.median(r)
        eff = 100.0 * (med - 1.0)
        tstr = "<= +%g%%" % max_pct if max_pct is not None else ""
        noisy = len(r) < 3 or min(r) <= 1.0 <= max(r) or abs(eff) < 100.0 * bspread
        verdict = ""
        if max_pct is not None:
            verdict = "ok" if eff <= max_pct else "MISSED"
            if ci:   # the interval decides where it can: wholly below or above the target
                limit = 1.0 + max_pct / 100.0
                verdict = "ok" if ci[1] <= limit else "MISSED" if ci[0] > limit else \
                    "unresolved (CI spans the target)"
            elif noisy:
                verdict += " (within noise)"
        mv, bv = list(reps.values()), list(b.values())
        print("| %s | %d | %s | %s | %s | %s | %+.2f%% | %s | %s | %.4f | %.4f |" % (
            name, len(r), "%.4f" % med, cistr, "%.4f" % min(r), "%.4f" % max(r),
            eff, tstr, verdict, statistics.median(mv) / statistics.median(bv),
            min(mv) / min(bv)))
        rspread = 100.0 * (max(r) - min(r))
        above = "%d of %d per-rep ratios are above 1" % (sum(x > 1 for x in r), len(r))
        if len(r) < 3:
            notes.append("- %s: only %d rep(s): too few to tell effect from noise."
                         % (name, len(r)))
        elif noisy:
            notes.append("- %s: the effect (%+.2f%%) is smaller than the noise "
                         "(per-rep ratios span %.4f-%.4f, i.e. %.1f points; %s alone "
                         "varies by %.1f%% run to run; %s): this run does not resolve "
                         "it, it only bounds it." % (name, eff, min(r), max(r), rspread,
                                                     base, 100.0 * bspread, above))
        else:
            notes.append("- %s: %+.2f%% is outside the noise (every per-rep ratio "
                         "is %s 1; %s varies by %.1f%% run to run)."
                         % (name, eff, "above" if min(r) > 1 else "below",
                            base, 100.0 * bspread))
    print()
    print("\n".join(notes))


def main():
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "table":
        targets, i = {}, 2
        while i < len(args):
            if args[i] == "--target" and i + 3 < len(args) and args[i + 2] in OPS:
                targets[args[i + 1]] = (args[i + 2], float(args[i + 3]))
                i += 4
            else:
                sys.exit("stats.py: bad argument %r\n%s" % (args[i], __doc__))
        table(load(args[1]), targets)
    elif len(args) >= 3 and args[0] == "wide":
        wide(load(args[1]), args[2:])
    elif len(args) == 2 and args[0] == "progs":
        progs(load(args[1]))
    elif len(args) >= 4 and args[0] == "ratios":
        rest, max_pct = args[3:], None
        if rest[:1] == ["--max-pct"]:
            max_pct, rest = float(rest[1]), rest[2:]
        ratios(load(args[1]), args[2], rest, max_pct)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
