#!/usr/bin/env python3
"""The SGLang HiCache backend against the plain client, same manager, same run.

1. Transfer: batch_set_v1 / batch_get_v1 of 64 pages of a 32-layer MHA model
   (page of 16 tokens, 8 KV heads of 128, bf16: 2 MiB a page) through
   tierkv.integrations.sglang, in layer_first (64 regions a page) and in
   page_first (K and V), against the plain client's batch_put_from /
   batch_get_into of the same bytes from one contiguous buffer per page. Each
   round writes fresh keys and reads them back, both sides in turn, the first
   side alternating; the ratio is the median of the rounds' own ratios.
   Target: at least 0.9 x in both layouts.
2. Lookups during a backup: batch_exists of 128 keys alone, and while another
   thread runs 128-page batch_set_v1 backups (as SGLang's prefetch and backup
   threads do): p50 / p99 latency both ways.

    /usr/bin/python3 bench/hicache_bench.py [--build build] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import harness

ROOT = harness.ROOT
PAGES, LAYERS, PAGE_TOKENS, HEADS, HEAD_DIM = 64, 32, 16, 8, 128


def transfer(m, layout: str, rounds: int) -> dict:
    import tierkv
    import torch
    from hicache_util import fill, indices, make_backend, make_pool
    pool = make_pool("mha", layout, pages=2 * PAGES, page_size=PAGE_TOKENS, layers=LAYERS,
                     heads=HEADS, head_dim=HEAD_DIM)
    for p in range(PAGES):
        fill(pool, p, f"seed{p}")
    backend = make_backend(m.uds, pool)
    plain = tierkv.Client(m.uds, "plain")
    page_bytes = pool.page_elems() * 2
    flat = [pool.flat_page(p * PAGE_TOKENS).clone() for p in range(PAGES)]  # contiguous pages
    back = [torch.empty(page_bytes, dtype=torch.uint8) for _ in range(PAGES)]
    srcs = [(t.data_ptr(), page_bytes) for t in flat]
    dsts = [(t.data_ptr(), page_bytes) for t in back]
    set_idx, get_idx = indices(pool, 0, PAGES), indices(pool, PAGES, PAGES)
    nbytes = PAGES * page_bytes
    rates: dict[str, list[float]] = {"set": [], "get": [], "put": [], "into": []}

    def timed(kind: str, call) -> None:
        t = time.perf_counter()
        assert all(call())
        rates[kind].append(nbytes / (time.perf_counter() - t) / 1e9)

    for r in range(rounds):
        keys = [f"r{r}p{p}" for p in range(PAGES)]
        writes = [("set", lambda: backend.batch_set_v1(keys, set_idx)),
                  ("put", lambda: plain.batch_put_from([(k,) + s for k, s in zip(keys, srcs)]))]
        reads = [("get", lambda: backend.batch_get_v1(keys, get_idx)),
                 ("into", lambda: plain.batch_get_into(keys, dsts, exact=True))]
        if r % 2:
            writes.reverse()
            reads.reverse()
        for kind, call in writes + reads:
            timed(kind, call)
        backend.clear()
        plain.remove_all(force=True)
    assert all(torch.equal(back[p], flat[p]) for p in range(PAGES))
    med = {k: statistics.median(v) for k, v in rates.items()}
    med["set_ratio"] = statistics.median(a / b for a, b in zip(rates["set"], rates["put"]))
    med["get_ratio"] = statistics.median(a / b for a, b in zip(rates["get"], rates["into"]))
    plain.close()
    backend.close()
    return med


def lookups_during_backup(m, calls: int) -> dict:
    import tierkv
    from hicache_util import indices, make_backend, make_pool
    pool = make_pool("mha", "page_first", pages=256, page_size=PAGE_TOKENS, layers=LAYERS,
                     heads=HEADS, head_dim=HEAD_DIM)
    backend = make_backend(m.uds, pool)
    keys = [f"look{i}" for i in range(128)]
    assert all(backend.batch_set_v1(keys, indices(pool, 0, 128)))

    stop = threading.Event()
    backups = [0]

    def lookups(until_backups: int = 0) -> list[float]:
        out: list[float] = []
        while len(out) < calls or backups[0] < until_backups:
            t = time.perf_counter()
            assert backend.batch_exists(keys) == 128
            out.append((time.perf_counter() - t) * 1e6)
        return sorted(out)

    lookups()  # warm-up: connections, first faults
    alone = lookups()
    cleaner = tierkv.Client(m.uds, "sglang")

    def backup() -> None:
        while not stop.is_set():
            fresh = [f"b{backups[0]}-{i}" for i in range(128)]
            assert all(backend.batch_set_v1(fresh, indices(pool, 128, 128)))
            cleaner.batch_remove(backend._bindings["kv"].keys(fresh))  # keep the pool from filling
            backups[0] += 1

    t = threading.Thread(target=backup)
    t.start()
    try:
        during = lookups(until_backups=5)
    finally:
        stop.set()
        t.join()
    backend.close()
    cleaner.close()

    def pct(v: list[float], p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]

    return {"alone_p50_us": pct(alone, 0.5), "alone_p99_us": pct(alone, 0.99),
            "during_p50_us": pct(during, 0.5), "during_p99_us": pct(during, 0.99),
            "backups_during": backups[0]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--lookups", type=int, default=300)
    args = ap.parse_args()
    harness.setup(Path(args.build))
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    from conftest import Manager

    m = Manager("--dram-size", "2GiB")
    try:
        result = {layout: transfer(m, layout, args.rounds)
                  for layout in ("layer_first", "page_first")}
        result["lookups"] = lookups_during_backup(m, args.lookups)
    finally:
        m.close()
    print(f"{'64 pages x 2 MiB':28s} {'hicache GB/s':>13s} {'plain GB/s':>11s} {'ratio':>7s}"
          " (target 0.90)")
    for layout in ("layer_first", "page_first"):
        r = result[layout]
        print(f"{layout + ' set_v1 / put_from':28s} {r['set']:13.2f} {r['put']:11.2f}"
              f" {r['set_ratio']:7.2f}")
        print(f"{layout + ' get_v1 / get_into':28s} {r['get']:13.2f} {r['into']:11.2f}"
              f" {r['get_ratio']:7.2f}")
    lk = result["lookups"]
    print(f"batch_exists(128) alone: p50 {lk['alone_p50_us']:.0f} us, p99 "
          f"{lk['alone_p99_us']:.0f} us; during 128-page backups: p50 "
          f"{lk['during_p50_us']:.0f} us, p99 {lk['during_p99_us']:.0f} us "
          f"({lk['backups_during']} backups)")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
