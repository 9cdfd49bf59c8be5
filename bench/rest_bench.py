#!/usr/bin/env python3
"""REST admin API under load, same run, same manager.

  1. wrk against /metrics and /query_key (target: >= 10k req/s for /metrics,
     no errors);
  2. client put/get throughput (tierkv_bench --client-only, 64 KiB objects)
     without and with /metrics scraped every 100 ms, alternated, best of 3
     (target: with >= 0.95 x without).

    /usr/bin/python3 bench/rest_bench.py [--build build] [--seconds 5]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
from pathlib import Path

import harness

ROOT = harness.ROOT


def wrk(url: str, seconds: int, threads: int = 2, connections: int = 32) -> dict:
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
                          "--latency", url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errors += int(m.group(1))
    p99 = re.search(r"99%\s+(\S+)", out)
    return {"rps": rps, "errors": errors, "p99": p99.group(1) if p99 else "?"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    build = Path(args.build)
    harness.setup(build)
    import requests

    import tierkv
    from conftest import Manager

    m = Manager("--dram-size", "1GiB")
    try:
        with tierkv.Client(m.uds) as c:
            c.batch_put([(f"warm/{i}", b"x" * 4096) for i in range(1000)])
        metrics = wrk(f"{m.rest}/metrics", args.seconds)
        query = wrk(f"{m.rest}/query_key?key=warm/7", args.seconds)

        stop = threading.Event()
        scrapes = [0]

        def scraper() -> None:
            s = requests.Session()
            while not stop.wait(0.1):
                s.get(f"{m.rest}/metrics", timeout=5)
                scrapes[0] += 1

        best = {"off_put": 0.0, "off_get": 0.0, "on_put": 0.0, "on_get": 0.0}
        for _ in range(3):
            r = harness.cpp_client_rate(build, m.uds, 65536, 4000)
            best["off_put"] = max(best["off_put"], r["put_gbps"])
            best["off_get"] = max(best["off_get"], r["get_gbps"])
            stop.clear()
            t = threading.Thread(target=scraper)
            t.start()
            r = harness.cpp_client_rate(build, m.uds, 65536, 4000)
            stop.set()
            t.join()
            best["on_put"] = max(best["on_put"], r["put_gbps"])
            best["on_get"] = max(best["on_get"], r["get_gbps"])
    finally:
        m.close()
    put_ratio = best["on_put"] / best["off_put"]
    get_ratio = best["on_get"] / best["off_get"]
    print(f"{'figure (same run)':52s} {'value':>10s} {'target':>8s} met")
    print(f"{'wrk /metrics req/s (2 threads, 32 conns)':52s} {metrics['rps']:10.0f} {'10000':>8s} "
          f"{'yes' if metrics['rps'] >= 10000 and metrics['errors'] == 0 else 'NO'}")
    print(f"{'  errors, p99 latency':52s} {metrics['errors']:10d} {metrics['p99']:>8s}")
    print(f"{'wrk /query_key req/s':52s} {query['rps']:10.0f} {'-':>8s}")
    print(f"{'64 KiB put GB/s without / with scraping every 100 ms':52s} "
          f"{best['off_put']:5.2f}/{best['on_put']:4.2f}")
    print(f"{'64 KiB get GB/s without / with scraping every 100 ms':52s} "
          f"{best['off_get']:5.2f}/{best['on_get']:4.2f}")
    print(f"{'put ratio with/without scraping':52s} {put_ratio:10.3f} {'0.95':>8s} "
          f"{'yes' if put_ratio >= 0.95 else 'NO'}")
    print(f"{'get ratio with/without scraping':52s} {get_ratio:10.3f} {'0.95':>8s} "
          f"{'yes' if get_ratio >= 0.95 else 'NO'}")
    print(f"({scrapes[0]} scrapes in the last round)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
