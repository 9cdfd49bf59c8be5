#!/usr/bin/env python3
"""Cost of idle client connections: threads and RSS of a manager holding N
TCP sessions that said HELLO and then sit idle.

    /usr/bin/python3 bench/idle_bench.py [--connections 10000] [--server PATH]...

Each --server binary (default build/tierkv-server) is started with
--max-connections and --max-open-connections above N, measured idle, then with
N idle sessions, and a real request is timed through one of them at the end.
Prints one JSON line per server.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import struct
import subprocess
import tempfile
import time

HELLO_BODY = struct.pack("<I", 0) + struct.pack("<I", 4) + b"idle"


def frame(opcode: int, body: bytes, request_id: int = 1) -> bytes:
    return struct.pack("<HBBHHQII", 0x4B54, 1, 0, opcode, 0, request_id, len(body), 0) + body


def recv_frame(s: socket.socket) -> tuple[int, bytes]:
    hdr = b""
    while len(hdr) < 24:
        chunk = s.recv(24 - len(hdr))
        if not chunk:
            raise ConnectionError("closed")
        hdr += chunk
    _, _, _, _, status, _, n, _ = struct.unpack("<HBBHHQII", hdr)
    body = b""
    while len(body) < n:
        body += s.recv(n - len(body))
    return status, body


def status_field(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def measure(server: str, n: int) -> dict:
    d = tempfile.mkdtemp(prefix="tierkv-idle-")
    sock_path = os.path.join(d, "s.sock")
    args = [server, "--uds-path", sock_path, "--listen", "127.0.0.1:0", "--metrics-url",
            "http://127.0.0.1:0", "--dram-size", "64MiB", "--log-level", "error",
            "--max-connections", str(n + 100)]
    if "--max-open-connections" in subprocess.run([server, "--help"], capture_output=True,
                                                  text=True).stdout:
        args += ["--max-open-connections", str(n + 100)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    tcp = None
    while tcp is None:
        line = proc.stdout.readline()
        m = re.match(r"listening on tcp://(\S+):(\d+)", line)
        if m:
            tcp = (m.group(1), int(m.group(2)))
        if not line and proc.poll() is not None:
            raise RuntimeError("manager did not start")
    time.sleep(0.5)  # let its start-up threads settle before the baseline figure
    base_threads = status_field(proc.pid, "Threads:")
    base_rss = status_field(proc.pid, "VmRSS:")
    conns = []
    t0 = time.time()
    for i in range(n):
        s = socket.create_connection(tcp)
        s.sendall(frame(1, HELLO_BODY))
        conns.append(s)
    for s in conns:
        status, _ = recv_frame(s)
        assert status == 0
    opened_s = time.time() - t0
    time.sleep(6.0)  # idle: workers park their sessions, then end after 5 s without work
    threads = status_field(proc.pid, "Threads:")
    rss = status_field(proc.pid, "VmRSS:")
    # One of the idle sessions speaks again: EXIST of a missing key answers NOT_FOUND.
    key = struct.pack("<I", 7) + b"default" + struct.pack("<I", 1) + b"k"
    t1 = time.time()
    conns[n // 2].sendall(frame(9, key, 2))
    status, _ = recv_frame(conns[n // 2])
    wake_ms = (time.time() - t1) * 1000
    for s in conns:
        s.close()
    proc.kill()
    proc.wait()
    subprocess.run(["rm", "-rf", d])
    return {"server": server, "connections": n, "open_s": round(opened_s, 2),
            "threads_idle_manager": base_threads, "threads_with_connections": threads,
            "rss_kib_idle_manager": base_rss, "rss_kib_with_connections": rss,
            "rss_bytes_per_connection": round((rss - base_rss) * 1024 / n),
            "first_request_after_idle_ms": round(wake_ms, 3), "status": status}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--server", action="append")
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for server in a.server or ["build/tierkv-server"]:
        print(json.dumps(measure(server, a.connections)), flush=True)


if __name__ == "__main__":
    main()
