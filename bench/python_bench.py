#!/usr/bin/env python3
"""Python client vs C++ client, same manager, same run.

Starts a manager, measures 1-thread put_from / get_into GB/s of 1 MiB objects
from Python (numpy buffers rotating over 256 MiB, as the C++ driver does), then
runs `tierkv_bench --client-only` against the same manager for the C++ figure,
and prints the ratio (target >= 0.9).

    /usr/bin/python3 bench/python_bench.py [--build build] [--count 512]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import harness

ROOT = harness.ROOT


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    build = Path(args.build)
    harness.setup(build)
    import numpy as np

    import tierkv
    from conftest import Manager

    m = Manager("--dram-size", "2GiB", "--max-object-bytes", "16MiB")
    try:
        slab = 256 << 20
        slots = slab // args.size
        src = np.ones(slab, dtype=np.uint8)
        dst = np.full(slab, 2, dtype=np.uint8)  # touched, like the C++ slabs
        best = {"put": 0.0, "get": 0.0, "cpp_put": 0.0, "cpp_get": 0.0}
        for _ in range(args.rounds):
            with tierkv.Client(m.uds) as c:
                t0 = time.perf_counter()
                for i in range(args.count):
                    off = (i % slots) * args.size
                    c.put_from(f"py/{i}", src[off:off + args.size])
                t1 = time.perf_counter()
                for i in range(args.count):
                    off = ((i * 7 + 3) % slots) * args.size
                    c.get_into(f"py/{i}", dst[off:off + args.size])
                t2 = time.perf_counter()
                c.remove_all(force=True)
            total = args.count * args.size / 1e9
            best["put"] = max(best["put"], total / (t1 - t0))
            best["get"] = max(best["get"], total / (t2 - t1))
            cpp = harness.cpp_client_rate(build, m.uds, args.size, args.count)
            best["cpp_put"] = max(best["cpp_put"], cpp["put_gbps"])
            best["cpp_get"] = max(best["cpp_get"], cpp["get_gbps"])
    finally:
        m.close()
    put_ratio = best["put"] / best["cpp_put"]
    get_ratio = best["get"] / best["cpp_get"]
    print(f"{'':20s} {'python GB/s':>12s} {'C++ GB/s':>10s} {'ratio':>7s} (target 0.90)")
    print(f"{'put_from 1 MiB':20s} {best['put']:12.2f} {best['cpp_put']:10.2f} {put_ratio:7.2f}")
    print(f"{'get_into 1 MiB':20s} {best['get']:12.2f} {best['cpp_get']:10.2f} {get_ratio:7.2f}")
    print(json.dumps({"python_put_gbps": best["put"], "python_get_gbps": best["get"],
                      "cpp_put_gbps": best["cpp_put"], "cpp_get_gbps": best["cpp_get"],
                      "put_ratio": put_ratio, "get_ratio": get_ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
