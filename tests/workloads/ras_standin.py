"""A stand-in for one process of an NCCL job and its RAS service (NCCL >= 2.24).

It maps a stand-in libnccl.so.2 (tests/workloads/fakecuda, whose banner
names the version trainbpf reads) and, as NCCL's RAS thread does, listens
on localhost:28028 (or $NCCL_RAS_ADDR) and answers NCCL's client protocol.
Everything it writes is shaped as NCCL's source prints it, NVIDIA/nccl at
5067397 (2.30.7), src/ras/client_support.cc:
- rasClientEventLoop: "CLIENT PROTOCOL n" -> "SERVER PROTOCOL 2" (ras_internal.h
  NCCL_RAS_CLIENT_PROTOCOL, 2 since 2.24.3); "TIMEOUT n" -> "OK";
  "SET FORMAT json|text" -> "OK" (only from 2.28.7; before, "ERROR: Unknown
  command ..."); "STATUS" -> the report, then the server closes;
- rasClientRunInit: the version lines and the job summary (the consistent form);
- rasClientRunComms: "Communicators... (%.3fs)", the table row format
  "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s", the Errors and Warnings lines;
- rasDumpCommsToJSON and its json* helpers: the JSON document.
The scenario (what the job looks like) is fixed below; the test knows it.

Usage: ras_standin.py --nccl LIB [--silent] [--no-listen] [--squat] MARK
--silent: accept and never answer. --no-listen: no RAS socket (another
process holds the port). --squat: only listen and answer (a process that
is not the job, started in its namespace): maps no NCCL.
"""
import ctypes
import os
import socket
import sys
import threading

SERVER_PROTOCOL = 2
# 2 nodes x 4 processes x 1 GPU; process 4242 on 10.0.0.2 does not answer.
SUMMARY = dict(nodes=2, per_node=4, gpus_per_proc=1, procs=8, gpus=8)
# (comms in group, nodes per comm, ranks per node, ranks per comm, ranks in group, status, errors)
GROUPS = [(1, 2, "3-4", 8, 7, "RUNNING", "INCOMPLETE"), (2, 1, "4", 4, 8, "RUNNING", "OK")]


def text_reply(version):
    out = [f"NCCL version {version} compiled with CUDA 12.8\n",
           "CUDA runtime version 12080, driver version 12080\n\n",
           "Job summary\n===========\n\n",
           "  Nodes  Processes         GPUs  Processes     GPUs\n"
           "(total)   per node  per process    (total)  (total)\n"
           "%7d  %9d  %11d  %9d  %7d\n" % (SUMMARY["nodes"], SUMMARY["per_node"],
                                           SUMMARY["gpus_per_proc"], SUMMARY["procs"],
                                           SUMMARY["gpus"]),
           "\nCommunicators...", " (%.3fs)\n=============\n\n" % 0.012,
           "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
           "    #  in group  per comm  per node  per comm  in group\n"]
    for i, g in enumerate(GROUPS):
        out.append("%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n" % ((i,) + g))
    out += ["\nErrors\n======\n\n",
            "INCOMPLETE\n  Missing communicator data from %d job process%s\n" % (1, ""),
            "  Process %d on node %s managing GPU%s %s\n" % (4242, "10.0.0.2", "", "3"), "\n",
            "#%d-%d (%016x) INCOMPLETE\n  Missing communicator data from %d rank%s\n"
            % (0, 0, 0x27a079b828ff1a75, 1, ""),
            "  Rank %d -- GPU %s managed by process %d on node %s\n" % (7, "3", 4242, "10.0.0.2"),
            "\n", "Warnings\n========\n\n",
            "TIMEOUT\n  Encountered %d communication timeout%s while gathering communicator data\n\n"
            % (1, "")]
    return "".join(out)


def json_rank(rank, host, pid, dev, first):
    counts = ",\n".join('            "%s": %d' % (op, 5) for op in
                        ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"))
    return ((",\n" if not first else "") + "        {\n"
            f'          "rank": {rank},\n          "host": "{host}",\n          "pid": {pid},\n'
            f'          "cuda_dev": {dev},\n          "nvml_dev": {dev},\n'
            '          "status": {\n            "init_state": 0,\n            "async_error": 0,\n'
            '            "finalize_called": false,\n            "destroy_flag": false,\n'
            '            "abort_flag": false\n          },\n'
            '          "collective_counts": {\n' + counts + "\n          }\n        }")


def json_reply(version):
    """One 2-rank communicator: rank 0 answered, rank 1 (another process) is unresponsive
    (the sample in NCCL's docs/userguide troubleshooting/ras.rst, "JSON Output")."""
    return ("{\n" f'  "nccl_version": "{version}",\n  "cuda_runtime_version": 12080,\n'
            '  "cuda_driver_version": 12080,\n  "timestamp": "2026-01-01 00:00:00",\n'
            '  "communicators_count": 1,\n  "communicators": [\n'
            '    {\n      "hash": "0xae94423cfbb2ef4a",\n'
            '      "secondary_hash": "0xb7e7187447156001:0xb8242ed28a71381e",\n'
            '      "size": 2,\n      "ranks_count": 1,\n      "missing_ranks_count": 1,\n'
            '      "ranks": [\n' + json_rank(0, "10.0.0.1", os.getpid(), 0, True) +
            '\n      ],\n      "missing_ranks": [\n        {\n          "rank": 1,\n'
            '          "host": "10.0.0.1",\n          "pid": 4243,\n          "cuda_dev": 1,\n'
            '          "nvml_dev": 1,\n          "status": {\n            "unresponsive": true,\n'
            '            "considered_dead": false\n          }\n        }\n      ]\n    }'
            '\n  ],\n  "ras": {\n    "collection_time_sec": 0.004,\n    "timeouts_count": 0\n'
            "  }\n}\n")


def version_of(lib):
    with open(lib, "rb") as f:
        data = f.read()
    at = data.index(b"NCCL version ") + len(b"NCCL version ")
    return data[at:data.index(b"+", at)].decode()


def serve_client(conn, version, silent):
    json_ok = tuple(map(int, version.split("."))) >= (2, 28, 7)
    fmt, buf = "text", b""
    with conn:
        while not silent:
            data = conn.recv(4096)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                cmd = line.decode().rstrip("\r").lower()
                if cmd.startswith("client protocol "):
                    conn.sendall(b"SERVER PROTOCOL %d\n" % SERVER_PROTOCOL)
                elif cmd.startswith("timeout "):
                    conn.sendall(b"OK\n")
                elif cmd.startswith("set format ") and json_ok and cmd[11:] in ("json", "text"):
                    fmt = cmd[11:]
                    conn.sendall(b"OK\n")
                elif cmd == "status":
                    reply = json_reply(version) if fmt == "json" else text_reply(version)
                    conn.sendall(reply.encode())
                    return      # NCCL closes once the reply is sent
                else:
                    conn.sendall(f"ERROR: Unknown command {line.decode()}\n".encode())
        threading.Event().wait()    # --silent: holds the connection, never answers


def listen():
    addr = os.environ.get("NCCL_RAS_ADDR", "localhost:28028")
    host, port = addr.rsplit(":", 1)
    fam = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host.strip("[]") if host != "localhost" else "127.0.0.1", int(port)))
    s.listen(16)
    return s


def main():
    args = sys.argv[1:]
    lib = args[args.index("--nccl") + 1] if "--nccl" in args else None
    version = version_of(lib) if lib else "2.27.3"
    if lib:
        ctypes.CDLL(lib)    # mapped: trainbpf reads its version from the file
    s = None if "--no-listen" in args else listen()
    print("ready", flush=True)
    if not s:
        threading.Event().wait()
    while True:
        conn, _ = s.accept()
        if "--squat" in args:
            print("connected", flush=True)     # the test: never, to a squatter
        threading.Thread(target=serve_client, args=(conn, version, "--silent" in args),
                         daemon=True).start()


if __name__ == "__main__":
    main()
