#!/usr/bin/env python3
"""Python client vs C++ client, same manager, same run.

Starts a manager, measures 1-thread put_from / get_into GB/s of 1 MiB objects
from Python (numpy buffers rotating over 256 MiB, as the C++ driver does), then
runs `tierkv_bench --client-only` against the same manager for the C++ figure,
and prints the ratio (target >= 0.9).

Then the plain API against the buffer API, same manager, same run: get (a new
bytes object per call) against get_into (a caller's buffer) at 64 KiB, 1 MiB
and 4 MiB, and batch_get of 64 x 1 MiB against batch_get_into; median call
time of 200 calls (20 batches), GB/s, ratio (target >= 0.5) and minor page
faults per call. Then get_view (pin, read, release: the bytes used in place)
against get_into at the same sizes (target >= 0.9; its "GB/s" is the value's
size over the call time).

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


def plain_against_buffer(c, np) -> list[dict]:
    """get / batch_get (new bytes) against get_into / batch_get_into."""
    import resource
    import statistics

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def timed(call, n: int) -> tuple[float, float]:
        call()  # warm
        times, f0 = [], faults()
        for _ in range(n):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
        return statistics.median(times), (faults() - f0) / n

    rows = []
    for size in (64 << 10, 1 << 20, 4 << 20):
        c.put(f"plain/{size}", np.ones(size, dtype=np.uint8))
        buf = np.empty(size, dtype=np.uint8)
        g, gf = timed(lambda: c.get(f"plain/{size}"), 200)
        i, if_ = timed(lambda: c.get_into(f"plain/{size}", buf), 200)
        rows.append({"call": f"get {size >> 10} KiB", "bytes": size, "plain_s": g,
                     "buffer_s": i, "plain_faults": gf, "buffer_faults": if_})
    keys = [f"batch/{i}" for i in range(64)]
    c.batch_put([(k, np.ones(1 << 20, dtype=np.uint8)) for k in keys])
    bufs = [np.empty(1 << 20, dtype=np.uint8) for _ in keys]
    g, gf = timed(lambda: c.batch_get(keys), 20)
    i, if_ = timed(lambda: c.batch_get_into(keys, bufs), 20)
    rows.append({"call": "batch_get 64 x 1 MiB", "bytes": 64 << 20, "plain_s": g,
                 "buffer_s": i, "plain_faults": gf, "buffer_faults": if_})
    for r in rows:
        r["ratio"] = r["buffer_s"] / r["plain_s"]
    # The zero-copy view (pin, then release) against get_into.
    for size in (64 << 10, 1 << 20, 4 << 20):
        buf = np.empty(size, dtype=np.uint8)

        def view(key=f"plain/{size}") -> None:
            with c.get_view(key) as v:
                v[0]  # the bytes are there to read
        g, gf = timed(view, 200)
        i, if_ = timed(lambda: c.get_into(f"plain/{size}", buf), 200)
        rows.append({"call": f"view {size >> 10} KiB", "bytes": size, "plain_s": g,
                     "buffer_s": i, "plain_faults": gf, "buffer_faults": if_,
                     "ratio": i / g})
    return rows


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
        with tierkv.Client(m.uds, "plain") as c:
            plain = plain_against_buffer(c, np)
            c.remove_all(force=True)
    finally:
        m.close()
    put_ratio = best["put"] / best["cpp_put"]
    get_ratio = best["get"] / best["cpp_get"]
    print(f"{'':20s} {'python GB/s':>12s} {'C++ GB/s':>10s} {'ratio':>7s} (target 0.90)")
    print(f"{'put_from 1 MiB':20s} {best['put']:12.2f} {best['cpp_put']:10.2f} {put_ratio:7.2f}")
    print(f"{'get_into 1 MiB':20s} {best['get']:12.2f} {best['cpp_get']:10.2f} {get_ratio:7.2f}")
    print(f"{'':22s} {'plain GB/s':>11s} {'buffer GB/s':>12s} {'ratio':>6s} (target 0.50,"
          " views 0.90)"
          f" {'faults/call plain, buffer':>27s}")
    for r in plain:
        print(f"{r['call']:22s} {r['bytes'] / r['plain_s'] / 1e9:11.2f}"
              f" {r['bytes'] / r['buffer_s'] / 1e9:12.2f} {r['ratio']:6.2f}"
              f" {r['plain_faults']:19.1f}, {r['buffer_faults']:.1f}")
    print(json.dumps({"python_put_gbps": best["put"], "python_get_gbps": best["get"],
                      "cpp_put_gbps": best["cpp_put"], "cpp_get_gbps": best["cpp_get"],
                      "put_ratio": put_ratio, "get_ratio": get_ratio, "plain": plain}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
