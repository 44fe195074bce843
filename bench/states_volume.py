#!/usr/bin/python3
"""The state stream's volume, from a --states-out file.

  states_volume.py STATES.TSV

Prints (Markdown) the records and bytes per second of the whole job, the
busiest threads' rows per second, the interval length distribution, and
how many records a coalescing of adjacent same-category intervals (own and
critical-path category both equal) would save: the figures the recording's
writer sizes its `states` table with. Bytes: 40 per record in BPF
(struct tb_state_rec) plus the ring buffer's 8-byte header.
"""
import collections
import sys

REC_BYTES = 40
RING_BYTES = REC_BYTES + 8


def load(path):
    per = collections.defaultdict(list)
    trailer = ""
    with open(path) as f:
        next(f)
        for line in f:
            if line.startswith("#"):
                trailer = line.strip()
                continue
            tid, pid, a, b, cat, cp = line.rstrip("\n").split("\t")
            per[(int(pid), int(tid))].append((int(a), int(b), cat, cp))
    return per, trailer


def main():
    per, trailer = load(sys.argv[1])
    recs = [r for v in per.values() for r in v]
    t0 = min(r[0] for r in recs)
    t1 = max(r[1] for r in recs)
    span = (t1 - t0) / 1e9
    n = len(recs)
    print(f"- {trailer}")
    print(f"- {n} records over {span:.2f} s of tracing, {len(per)} threads:"
          f" {n / span:.0f} records/s, {n * REC_BYTES / span / 1024:.1f} KiB/s of records"
          f" ({n * RING_BYTES / span / 1024:.1f} KiB/s through the ring),"
          f" {n * REC_BYTES / span * 3600 / 2**20:.0f} MiB of records per hour")
    same = sum(1 for v in per.values() for x, y in zip(sorted(v), sorted(v)[1:])
               if x[2:] == y[2:])
    print(f"- adjacent records with the same (cat, cp_cat): {same} ({100 * same / n:.1f}%):"
          " what coalescing them would save")
    lens = sorted(r[1] - r[0] for r in recs)
    q = lambda p: lens[min(len(lens) - 1, int(p * len(lens)))]
    print(f"- interval length: median {q(0.5) / 1e3:.1f} us, p10 {q(0.1) / 1e3:.1f} us,"
          f" p90 {q(0.9) / 1e3:.1f} us; under 10 us: "
          f"{100 * sum(1 for x in lens if x < 10000) / n:.0f}% of records,"
          f" {100 * sum(x for x in lens if x < 10000) / sum(lens):.2f}% of the time")
    print()
    print("| pid | tid | records | rows/s over its life | own categories (records) |")
    print("|---:|---:|---:|---:|---|")
    top = sorted(per.items(), key=lambda kv: -len(kv[1]))[:10]
    for (pid, tid), v in top:
        life = (max(r[1] for r in v) - min(r[0] for r in v)) / 1e9
        cats = collections.Counter(r[2] for r in v).most_common(4)
        print(f"| {pid} | {tid} | {len(v)} | {len(v) / life if life else 0:.0f} | "
              + ", ".join(f"{c} {k}" for c, k in cats) + " |")


if __name__ == "__main__":
    main()
