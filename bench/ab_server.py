#!/usr/bin/env python3
"""Same-run A/B of two tierkv-server binaries (a refactor's before and
after): the C++ client's 1 MiB get and batch-16 get against each, in
alternating rounds, and tierkv_remote_bench's remote get with each as the
managers. Prints each figure's median per binary and the B/A ratio of the
medians, beside the spread of A's own rounds (the run-to-run scatter).

    /usr/bin/python3 bench/ab_server.py OLD_SERVER NEW_SERVER [--build build] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start(server: str, sock: str) -> subprocess.Popen:
    p = subprocess.Popen([server, "--uds-path", sock, "--listen", "127.0.0.1:0", "--metrics-url",
                          "http://127.0.0.1:0", "--dram-size", "1GiB", "--log-level", "warn"],
                         stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        line = p.stdout.readline()
        if line.startswith("listening on unix:"):
            return p
    p.kill()
    raise RuntimeError(f"{server} did not start")


def client(build: Path, sock: str, *args: str) -> dict:
    out = subprocess.run([str(build / "tierkv_bench"), "--client-only", "unix:" + sock, *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def remote_get(build: Path, server: str) -> float:
    env = dict(os.environ, TIERKV_SERVER_BIN=server)
    out = subprocess.run([str(build / "tierkv_remote_bench")], check=True, capture_output=True,
                         text=True, env=env).stdout
    m = re.search(r"^tierkv remote get\s+1MiB\s+1\s+\d+\s+\d+\s+([\d.]+)", out, re.M)
    return float(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--remote-rounds", type=int, default=2)
    args = ap.parse_args()
    build = Path(args.build)
    figures: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
    with tempfile.TemporaryDirectory() as tmp:
        procs = {side: start(getattr(args, side), os.path.join(tmp, side + ".sock"))
                 for side in ("a", "b")}
        try:
            for r in range(args.rounds):
                for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
                    sock = os.path.join(tmp, side + ".sock")
                    one = client(build, sock, "--size", str(1 << 20), "--count", "512")
                    batch = client(build, sock, "--size", str(1 << 20), "--count", "512",
                                   "--batch", "16")
                    f = figures[side]
                    f.setdefault("get 1MiB GB/s", []).append(one["get_gbps"])
                    f.setdefault("batch16 get 1MiB ops/s", []).append(batch["get_ops"])
        finally:
            for p in procs.values():
                p.kill()
                p.wait()
    for r in range(args.remote_rounds):
        for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
            figures[side].setdefault("remote get 1MiB x1 GB/s", []).append(
                remote_get(build, getattr(args, side)))
    print(f"{'figure':28s} {'A median':>9s} {'B median':>9s} {'B/A':>6s} {'A spread':>9s}")
    for name in figures["a"]:
        a, b = figures["a"][name], figures["b"][name]
        spread = (max(a) - min(a)) / statistics.median(a)
        print(f"{name:28s} {statistics.median(a):9.2f} {statistics.median(b):9.2f} "
              f"{statistics.median(b) / statistics.median(a):6.2f} {spread:8.0%}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
