#!/usr/bin/env python3
"""Several worker processes sharing one tierkv manager.

Each worker opens its own Client (clients are not shared across fork), stores
blocks under shared keys and reads what the others stored. Concurrent puts of
the same key resolve to one winner; the others see DUPLICATED (also while the
winner is still writing) and use the stored value once it is committed, as
engines sharing a prefix cache do.

    /usr/bin/python3 examples/multi_worker.py [unix:/tmp/tierkv.sock] [workers]
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time

import numpy as np

import tierkv

BLOCKS, BLOCK_BYTES = 50, 256 * 1024


def worker(address: str, wid: int, results: mp.Queue) -> None:
    stored = dup = verified = 0
    with tierkv.Client(address, tenant="multi-worker-demo", rank=wid) as c:
        for b in range(BLOCKS):
            block = np.full(BLOCK_BYTES, b % 251, dtype=np.uint8)  # same content for a key
            try:
                c.put(f"block/{b}", block)
                stored += 1
            except tierkv.Duplicated:
                dup += 1
        out = np.empty(BLOCK_BYTES, dtype=np.uint8)
        for b in range(BLOCKS):
            # DUPLICATED also answers a put racing one still in flight: the
            # winner's value becomes readable when its writer commits.
            for _ in range(500):
                n = c.get_into(f"block/{b}", out)
                if n is not None:
                    break
                time.sleep(0.01)
            if n == BLOCK_BYTES and out[0] == b % 251:
                verified += 1
    results.put((wid, stored, dup, verified))


def main(address: str, workers: int) -> None:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(address, w, results)) for w in range(workers)]
    for p in procs:
        p.start()
    rows = sorted(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join()
    for wid, stored, dup, verified in rows:
        print(f"worker {wid}: stored {stored}, already there {dup}, verified {verified}/{BLOCKS}")
    assert sum(r[1] for r in rows) == BLOCKS, "each block is stored exactly once"
    with tierkv.Client(address, tenant="multi-worker-demo") as c:
        c.remove_all(force=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "unix:/tmp/tierkv.sock",
         int(sys.argv[2]) if len(sys.argv) > 2 else 4)
