#!/usr/bin/env python3
"""Facts about PyTorch's own probe points, on torch 1.13 (this machine) and
torch 2.6 (the trixie root, scripts/torch-root.sh): which functions
libtorch_cpu exports (nm -D | c++filt), and how often each fires per
training step (bpftrace uprobes on the library file, a small loop of
tests/workloads/torch_job.py). As root; prints Markdown (docs/torch-probes.md).

    scripts/torch-probes.py [--versions 1.13,2.6] [--json FILE]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
JOB = os.path.join(REPO, "tests", "workloads", "torch_job.py")
ROOT_SH = os.path.join(HERE, "torch-root.sh")
TORCH_LIB = "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so"

# key: (demangled pattern, what it is)
SYMBOLS = [
    ("enter_new", r"torch::autograd::profiler::record_function_enter_new\(",
     "record_function.__enter__ in torch >= 2 (its name: 1st argument)"),
    ("enter_legacy", r"torch::autograd::profiler::record_function_enter\(|"
     r"_record_function_enter\(", "record_function.__enter__ in 1.13 (legacy op)"),
    ("exit", r"record_function_exit", "record_function.__exit__"),
    ("rf_scope", r"^at::RecordFunction::RecordFunction\(at::RecordScope\)",
     "RecordFunction(RecordScope): every bracket's start"),
    ("rf_callbacks", r"^at::RecordFunction::RecordFunction\(at::StepCallbacks&&\)",
     "RecordFunction(StepCallbacks&&): ops, when callbacks are on"),
    ("rf_before_str", r"^at::RecordFunction::before\(std::__cxx11::basic_string",
     "RecordFunction::before(std::string): the name, when active"),
    ("rf_end", r"^at::RecordFunction::end\(\)", "RecordFunction::end(): every bracket's end"),
    ("engine_execute", r"^torch::autograd::Engine::execute\(", "backward"),
    ("write_record", r"^caffe2::serialize::PyTorchStreamWriter::writeRecord\(",
     "torch.save, one call per record"),
]

# What each probe reads. libstdc++'s std::string (new ABI, 32 bytes):
# {char *ptr; size_t len; union {char buf[16]; size_t cap;}}: ptr at +0,
# len at +8. record_function_enter_new returns a c10::intrusive_ptr, which
# is not trivially copyable: it is returned through a hidden pointer in
# rdi, so its name is the 2nd register argument (rsi), not the 1st.
# writeRecord is a member: this in rdi, the name in rsi, the size in rcx.
# RecordFunction(RecordScope): this in rdi, the scope (a uint8_t enum) in
# esi. end(): this in rdi, no name (without callbacks nothing is stored).
# A user-scope bracket is paired by `this`: its constructor and the first
# end() on the same object; a name seen by enter_new on the same thread
# just before is its name (torch 2.x).
STR = "str(*(uint64 *){a}, *(uint64 *)({a} + 8))"
PROGRAM = """
uprobe:{lib}:{enter_new} {{
  @enter_new[pid, tid == pid] = count();
  @pending[tid] = """ + STR.format(a="arg1") + """;
}}
uprobe:{lib}:{rf_scope} {{
  @rf_scope[pid, tid == pid, arg1 & 0xff] = count();
  if ((arg1 & 0xff) == 7) {{
    @open[arg0] = nsecs; @oname[arg0] = @pending[tid]; delete(@pending[tid]);
  }}
}}
uprobe:{lib}:{rf_callbacks} {{ @rf_callbacks[pid, tid == pid] = count(); }}
uprobe:{lib}:{rf_before_str} {{ @rf_before_str[pid] = count(); }}
uprobe:{lib}:{rf_end} {{
  @rf_end[pid, tid == pid] = count();
  if (@open[arg0]) {{
    @bracket_n[pid, @oname[arg0]] = count();
    @bracket_ns[pid, @oname[arg0]] = sum(nsecs - @open[arg0]);
    delete(@open[arg0]); delete(@oname[arg0]);
  }}
}}
uprobe:{lib}:{engine_execute} {{
  @engine_execute[pid, tid == pid] = count(); @exec_t[tid] = nsecs;
}}
uretprobe:{lib}:{engine_execute} /@exec_t[tid]/ {{
  @engine_execute_ns[pid] = sum(nsecs - @exec_t[tid]); delete(@exec_t[tid]);
}}
uprobe:{lib}:{write_record} {{
  @write_record[pid] = count(); @write_bytes[pid] = sum(arg3); @write_t[tid] = nsecs;
  @write_names[pid, """ + STR.format(a="arg1") + """] = count();
}}
uretprobe:{lib}:{write_record} /@write_t[tid]/ {{
  @write_record_ns[pid] = sum(nsecs - @write_t[tid]); delete(@write_t[tid]);
}}
END {{ clear(@pending); clear(@open); clear(@oname); clear(@exec_t); clear(@write_t); }}
"""

LOOPS = {
    "single": ["--workers", "1", "--mp-context", "fork", "--epochs", "2", "--steps", "8",
               "--checkpoint", "--log", "plain", "--getitem-ms", "0"],
    "ddp": ["--launch", "spawn", "--world-size", "2", "--workers", "1", "--epochs", "2",
            "--steps", "8", "--log", "plain", "--getitem-ms", "0"],
}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def root_path():
    r = subprocess.run([ROOT_SH, "path"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def library(version):
    if version == "1.13":
        return os.path.realpath(TORCH_LIB), None
    root = root_path()
    if not root:
        sys.exit("torch-probes: no trixie root: run scripts/torch-root.sh first")
    # the link inside the root is relative: realpath stays in the root
    return os.path.realpath(root + TORCH_LIB), root


def symbols(lib):
    """key -> [(mangled, demangled, type)] from the dynamic symbol table."""
    nm = sh(["nm", "-D", "--defined-only", lib]).splitlines()
    mangled = [l.split()[2] for l in nm if len(l.split()) == 3]
    kinds = [l.split()[1] for l in nm if len(l.split()) == 3]
    dem = sh(["c++filt"], input="\n".join(mangled) + "\n").splitlines()
    found = {k: [] for k, _, _ in SYMBOLS}
    for m, d, t in zip(mangled, dem, kinds):
        for k, pat, _ in SYMBOLS:
            if re.search(pat, d):
                found[k].append((m, d, t))
    return found


def bpftrace_program(lib, found):
    # C1 and C2 constructors share an address: one probe is enough
    names = {k: v[0][0] for k, v in found.items() if v}
    missing = [k for k in ("enter_new", "rf_scope", "rf_callbacks", "rf_before_str", "rf_end",
                           "engine_execute", "write_record") if k not in names]
    if missing:
        sys.exit(f"torch-probes: {lib} does not export {', '.join(missing)}")
    return PROGRAM.format(lib=lib, **names)


def parse_maps(out):
    maps = {}
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "map":
            for name, val in ev["data"].items():
                maps[name.lstrip("@")] = val
    return maps


def measure(version, loop, lib, root, found, tmp):
    truth = os.path.join(tmp, f"truth-{version}-{loop}.json")
    cmd = [sys.executable if version == "1.13" else "python3", JOB, *LOOPS[loop],
           "--truth", truth]
    if version == "1.13":
        cmd[0] = "/usr/bin/python3"
    else:
        cmd = ["/bin/bash", ROOT_SH, "run", *cmd]  # bpftrace -c runs ELF files only
    prog = os.path.join(tmp, f"probes-{version}.bt")
    with open(prog, "w") as f:
        f.write(bpftrace_program(lib, found))
    env = dict(os.environ, BPFTRACE_STRLEN="64")
    r = subprocess.run(["bpftrace", "-f", "json", prog, "-c", " ".join(cmd)],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    if r.returncode != 0 or not os.path.exists(truth):
        sys.exit(f"torch-probes: {version} {loop}: bpftrace or the loop failed:\n"
                 + r.stderr[-2000:])
    with open(truth) as f:
        t = json.load(f)
    return t, parse_maps(r.stdout)


def role_of(t):
    roles = {r["pid"]: "rank" for r in t["roles"]["ranks"]}
    roles.update({w["pid"]: "worker" for w in t["roles"]["workers"]})
    if t["roles"]["launcher"]:
        roles[t["roles"]["launcher"]] = "launcher"
    return roles


def tally(t, maps):
    """Counts per role and per main/other thread, only the job's pids."""
    roles = role_of(t)
    out = {}
    for name, val in maps.items():
        if not isinstance(val, dict):
            continue
        for key, n in val.items():
            parts = key.split(",", 2)
            pid = int(parts[0])
            if pid not in roles:
                continue   # another process on the machine using the same library
            rest = parts[1:]
            if name in ("write_names", "bracket_n", "bracket_ns"):
                sub = rest[0] or "(unnamed)"
            elif name == "rf_scope":
                sub = ("main" if rest[0] == "1" else "other") + " scope " + rest[1]
            elif name in ("write_bytes", "write_record", "rf_before_str",
                          "engine_execute_ns", "write_record_ns"):
                sub = ""
            else:
                sub = "main" if rest[0] == "1" else "other"
            k = (name, roles[pid], sub)
            out[k] = out.get(k, 0) + (n / 1e9 if name.endswith("_ns") else n)
    return out


def report(results):
    print("| torch | loop | probe | role | thread / key | calls | per step |")
    print("|---|---|---|---|---|---|---|")
    for (version, loop), (t, counts) in results.items():
        steps = sum(r["steps"] for r in t["ranks"])
        for (name, role, sub), n in sorted(counts.items()):
            if name.endswith("_ns"):
                print(f"| {version} | {loop} ({steps} steps) | {name[:-3]} | {role} | {sub} "
                      f"| {n:.3f} s | |")
                continue
            per = f"{n / steps:.2f}" if role == "rank" and steps else ""
            print(f"| {version} | {loop} ({steps} steps) | {name} | {role} | {sub} | {n} | {per} |")
        tot = {ph: sum(r["totals"][ph] for r in t["ranks"]) for ph in ("data", "backward",
                                                                   "optimizer", "checkpoint")}
        print(f"| {version} | {loop} | truth (perf_counter) | rank | | " +
              ", ".join(f"{k} {v:.3f} s" for k, v in tot.items()) + " | |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="1.13,2.6")
    ap.add_argument("--json", help="also write the raw results here")
    a = ap.parse_args()
    results, facts = {}, {}
    with tempfile.TemporaryDirectory(prefix="torch-probes.") as tmp:
        for version in a.versions.split(","):
            lib, root = library(version)
            found = symbols(lib)
            facts[version] = {"lib": lib, "symbols": found}
            print(f"\n### torch {version}: {lib}\n")
            for k, _, what in SYMBOLS:
                if not found[k]:
                    print(f"- {k} ({what}): **not exported**")
                for m, d, typ in found[k]:
                    print(f"- {k} ({what}): `{typ}` `{d}`\n  `{m}`")
            for loop in LOOPS:
                results[(version, loop)] = measure(version, loop, lib, root, found, tmp)
                t, maps = results[(version, loop)]
                results[(version, loop)] = (t, tally(t, maps))
    print()
    report(results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"facts": facts,
                       "counts": {f"{v} {l}": {"|".join(k): n for k, n in c.items()}
                                  for (v, l), (t, c) in results.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
