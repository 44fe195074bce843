#!/usr/bin/env python3
"""Who uses whom in user/, from the built objects: file A uses file B when
A's object refers to a function or variable B's object defines (nm). The
include paths of the Makefile stop a wrong #include; this stops the rest
(a prototype written by hand, an extern).

Fails (exit 1) on:
- a cycle: files that use each other, directly or through others;
- a use that points up the layers (docs/architecture.md):
      util <- model <- acquire, record <- report <- app
  acquire and record sit side by side and do not use each other.

    check_layers.py BUILD/user            # the check, and a summary
    check_layers.py --graph BUILD/user    # every file and what it uses
An object directly in BUILD/user (the flat layout before the layers) has
no layer: only cycles are checked, which measures an old build too.
"""
import collections
import os
import subprocess
import sys

RANK = {"util": 0, "model": 1, "acquire": 2, "record": 2, "report": 3, "app": 4}


def objects(root):
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if f.endswith(".o")]
    return sorted(out)


def name_of(root, path):
    return os.path.relpath(path, root)[:-2]


def layer_of(name):
    return name.split("/")[0] if "/" in name else None


def symbols(path):
    """(defined, used) global symbols of one object."""
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDRBC":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def graph(root):
    owner, uses = {}, {}
    for o in objects(root):
        n = name_of(root, o)
        defined, used = symbols(o)
        for s in defined:
            owner[s] = n
        uses[n] = used
    return {n: sorted({owner[s] for s in used if s in owner and owner[s] != n})
            for n, used in uses.items()}


def cycles(g):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def upward(g):
    bad = []
    for a, targets in g.items():
        la = layer_of(a)
        for b in targets:
            lb = layer_of(b)
            if la is None or lb is None or la == lb:
                continue
            if RANK[la] <= RANK[lb]:
                bad.append((a, b))
    return bad


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    g = graph(args[0])
    if "--graph" in sys.argv:
        for a in sorted(g):
            print(f"{a}: {' '.join(g[a])}")
    pairs = collections.Counter((layer_of(a), layer_of(b)) for a in g for b in g[a]
                                if layer_of(a) != layer_of(b))
    cyc, up = cycles(g), upward(g)
    print(f"{len(g)} files, {sum(len(v) for v in g.values())} uses; "
          f"largest cycle: {len(cyc[0]) if cyc else 0} files")
    for (la, lb), n in sorted(pairs.items(), key=lambda x: (RANK.get(x[0][0], 9), x[0])):
        print(f"  {la} -> {lb}: {n}")
    for c in cyc:
        print(f"cycle of {len(c)}: {' '.join(c)}")
    for a, b in up:
        print(f"points up: {a} uses {b}")
    return 1 if cyc or up else 0


if __name__ == "__main__":
    sys.exit(main())
