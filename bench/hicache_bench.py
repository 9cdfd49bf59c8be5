#!/usr/bin/env python3
"""The SGLang HiCache backend against the plain client, same manager, same run.

batch_set_v1 / batch_get_v1 of 64 pages of 256 KiB (an MLA layout: one object
per page) through tierkv.integrations.sglang, against the plain client's
batch_put_from / batch_get_into of the same bytes at the same addresses. Each
round writes fresh keys (so every set stores) and reads them back; the best
of --rounds is kept for both sides. Target: at least 0.9 x.

    /usr/bin/python3 bench/hicache_bench.py [--build build] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import harness

ROOT = harness.ROOT
PAGES, PAGE_BYTES = 64, 256 << 10


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    harness.setup(Path(args.build))
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import tierkv
    from conftest import Manager
    from hicache_util import HostPool, make_backend

    m = Manager("--dram-size", "4GiB")
    try:
        pool = HostPool(2 * PAGES, PAGE_BYTES, mla=True)
        for p in range(PAGES):
            pool.fill(p, f"seed{p}")
        backend = make_backend(m.uds, mla=True)
        backend.register_mem_pool_host(pool)
        plain = tierkv.Client(m.uds, "plain")
        ptrs, sizes = pool.get_page_buffer_meta(pool.indices(0, PAGES))
        rptrs, _ = pool.get_page_buffer_meta(pool.indices(PAGES, PAGES))
        nbytes = PAGES * PAGE_BYTES
        best = {"set": 0.0, "get": 0.0, "put": 0.0, "into": 0.0}
        for r in range(args.rounds):
            keys = [f"r{r}p{p}" for p in range(PAGES)]
            t = time.perf_counter()
            assert all(backend.batch_set_v1(keys, pool.indices(0, PAGES)))
            best["set"] = max(best["set"], nbytes / (time.perf_counter() - t) / 1e9)
            t = time.perf_counter()
            assert all(backend.batch_get_v1(keys, pool.indices(PAGES, PAGES)))
            best["get"] = max(best["get"], nbytes / (time.perf_counter() - t) / 1e9)
            t = time.perf_counter()
            assert all(plain.batch_put_from(list(zip(keys, ptrs, sizes))))
            best["put"] = max(best["put"], nbytes / (time.perf_counter() - t) / 1e9)
            t = time.perf_counter()
            assert all(plain.batch_get_into(keys, list(zip(rptrs, sizes))))
            best["into"] = max(best["into"], nbytes / (time.perf_counter() - t) / 1e9)
            backend.clear()
            plain.remove_all(force=True)
        set_ratio, get_ratio = best["set"] / best["put"], best["get"] / best["into"]
        print(f"{'64 x 256 KiB':24s} {'hicache GB/s':>13s} {'plain GB/s':>11s} {'ratio':>7s}"
              " (target 0.90)")
        print(f"{'set_v1 / batch_put_from':24s} {best['set']:13.2f} {best['put']:11.2f}"
              f" {set_ratio:7.2f}")
        print(f"{'get_v1 / batch_get_into':24s} {best['get']:13.2f} {best['into']:11.2f}"
              f" {get_ratio:7.2f}")
        print(json.dumps({**best, "set_ratio": set_ratio, "get_ratio": get_ratio}))
        return 0
    finally:
        m.close()


if __name__ == "__main__":
    sys.exit(main())
