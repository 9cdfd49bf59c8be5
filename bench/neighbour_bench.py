#!/usr/bin/env python3
"""Put and get rates of one client next to CPU-bound neighbours.

    /usr/bin/python3 bench/neighbour_bench.py [--build DIR]... [--hogs 2]
        [--rounds 3] [--size 4096] [--count 100000] [--threads 1]

For each --build directory (default build; pass two to compare builds, for
example one made from an older commit), a standalone manager from that build
is started and its tierkv_bench --client-only measures put and get with no
neighbour and with --hogs processes at nice 19 that spin on the CPU. Rounds
alternate the builds and the two cases; per build and case the median round is
printed, with the ratio of the neighbours' case to the quiet one measured in
the same run. Prints one JSON line per build.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

import harness


def start_hogs(n: int) -> list[subprocess.Popen]:
    spin = "while True: pass"
    return [
        subprocess.Popen(["nice", "-n", "19", "/usr/bin/python3", "-c", spin]) for _ in range(n)
    ]


def measure(build: str, args: argparse.Namespace) -> dict:
    from conftest import Manager
    m = Manager("--dram-size", "2GiB", server=str(Path(build) / "tierkv-server"))
    try:
        return harness.cpp_client_rate(Path(build), m.uds, args.size, args.count, args.threads)
    finally:
        m.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append")
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    builds = args.build or ["build"]
    harness.setup(Path(builds[0]))  # the manager harness of python/tests
    rounds: dict[tuple[str, bool], list[dict]] = {}
    for r in range(args.rounds):
        for hogged in ([False, True] if r % 2 == 0 else [True, False]):
            hogs = start_hogs(args.hogs) if hogged else []
            try:
                for build in (builds if r % 2 == 0 else builds[::-1]):
                    rounds.setdefault((build, hogged), []).append(measure(build, args))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    for build in builds:
        line = {"build": build, "hogs": args.hogs, "cores": os.cpu_count(),
                "size": args.size, "threads": args.threads}
        for hogged in (False, True):
            case = "hogs" if hogged else "quiet"
            for field in ("put_gbps", "get_gbps", "put_p99_us", "get_p99_us"):
                line[f"{case}_{field}"] = statistics.median(
                    x[field] for x in rounds[(build, hogged)])
        for op in ("put", "get"):
            line[f"{op}_hogs_over_quiet"] = line[f"hogs_{op}_gbps"] / line[f"quiet_{op}_gbps"]
        print(json.dumps(line))


if __name__ == "__main__":
    main()
