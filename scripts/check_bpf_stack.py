#!/usr/bin/env python3
"""Every BPF program's deepest call chain fits the verifier's 512 bytes.

The verifier adds up the stack frames of a program and of the functions
it calls, down every call chain (bpf_loop callbacks included), and
refuses the program past 512 bytes (check_max_stack_depth). Each frame
counts rounded up: to 32 bytes in kernels before 6.13 and for the
interpreter, to 16 under the JIT since. Kernels with private stacks
(6.13+, tracing programs) may not add frames up at all, so a chain too
deep passes there and fails elsewhere: it once failed only on a kernel
built without them, after passing on the one before it. This check holds
the object to the strictest rule, 32-byte frames, on any machine.

A frame's size is the deepest stack slot its code touches (r10 - N), as
the verifier measures it. Calls are read from the relocations: a named
function, or .text at (imm + 1) instructions; a callback is its address
loaded from .text (r2 = N ll).

usage: check_bpf_stack.py OBJECT [--limit BYTES] [--round BYTES] [--show N]
"""
import argparse
import re
import subprocess
import sys

FUNC = re.compile(r"^([0-9a-f]+) <([A-Za-z_][\w.]*)>:$")
SECTION = re.compile(r"^Disassembly of section (\S+):$")
SLOT = re.compile(r"\(r10 - (0x[0-9a-f]+|\d+)\)")
CALL = re.compile(r"\bcall (-?\d+)$")
LOAD64 = re.compile(r"\br\d = (-?\d+) ll$")
RELOC = re.compile(r"R_BPF_64_(32|64)\s+(\S+)")


def parse(obj):
    """Functions by name: (section, .text address, frame, callees)."""
    out = subprocess.run(["llvm-objdump", "-dr", "--no-show-raw-insn", obj],
                         check=True, capture_output=True, text=True).stdout
    funcs, sec, fn = {}, None, None
    lines = out.splitlines()
    for i, line in enumerate(lines):
        m = SECTION.match(line)
        if m:
            sec, fn = m.group(1), None
            continue
        m = FUNC.match(line)
        if m:
            if m.group(2).startswith("LBB"):	# a branch target, not a function
                continue
            fn = m.group(2)
            funcs[fn] = {"sec": sec, "addr": int(m.group(1), 16), "frame": 0,
                         "calls": set(), "text": set()}
            continue
        if fn is None:
            continue
        f = funcs[fn]
        for off in SLOT.findall(line):
            f["frame"] = max(f["frame"], int(off, 0))
        call, load = CALL.search(line), LOAD64.search(line)
        if not call and not load:
            continue
        imm = int((call or load).group(1))
        reloc = RELOC.search(lines[i + 1]) if i + 1 < len(lines) else None
        if call and reloc and reloc.group(2) != ".text":
            f["calls"].add(reloc.group(2))
        elif call and reloc:	# a static function, from another section
            f["text"].add((imm + 1) * 8)
        elif call and sec == ".text" and not line.rstrip().endswith("call -1"):
            idx = int(line.split(":")[0])	# within .text, resolved: relative
            f["text"].add((idx + imm + 1) * 8)
        elif load and reloc and reloc.group(2) == ".text":
            f["text"].add(imm)	# a callback's address (bpf_loop)
    by_addr = {f["addr"]: name for name, f in funcs.items() if f["sec"] == ".text"}
    for f in funcs.values():
        f["calls"] |= {by_addr[a] for a in f["text"] if a in by_addr}
    return funcs


def deepest(funcs, name, rnd, seen=()):
    """(bytes, chain) of the deepest call chain from name."""
    own = -(-max(funcs[name]["frame"], 1) // rnd) * rnd
    best = (own, [name])
    for callee in sorted(funcs[name]["calls"]):
        if callee in seen or callee not in funcs:
            continue	# recursion is the verifier's to refuse
        d, chain = deepest(funcs, callee, rnd, seen + (name,))
        if own + d > best[0]:
            best = (own + d, [name] + chain)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("object")
    ap.add_argument("--limit", type=int, default=512)
    ap.add_argument("--round", type=int, default=32)
    ap.add_argument("--show", type=int, default=3)
    a = ap.parse_args()
    funcs = parse(a.object)
    progs = sorted((deepest(funcs, n, a.round) + (n,)
                    for n, f in funcs.items() if f["sec"] not in (".text", None)),
                   key=lambda p: (-p[0], p[2]))
    if not progs:
        sys.exit(f"check_bpf_stack: no programs found in {a.object}")

    def say(d, chain):
        return f"{d} bytes: " + " -> ".join(f"{c} ({funcs[c]['frame']})" for c in chain)

    over = [p for p in progs if p[0] > a.limit]
    for d, chain, _ in over:
        print(f"check_bpf_stack: over {a.limit}: {say(d, chain)}", file=sys.stderr)
    print(f"check_bpf_stack: {len(progs)} programs, frames rounded to {a.round} bytes; deepest:")
    for d, chain, _ in progs[:a.show]:
        print("  " + say(d, chain))
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
