"""One stand-in inference engine process for the HiCache tests.

    hicache_engine.py write|read SOCKET LAYOUT PAGES PAGE_BYTES FIRST_PAGE

write: fills pages 0..PAGES-1 of its pool with the prefix's contents and stores
them (batch_set_v1). read: finds how much of the prefix is stored
(batch_exists) and loads it into pages FIRST_PAGE.. of its own pool
(batch_get_v1), then compares every byte. Exit 0 when all is as expected.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from hicache_util import HostPool, make_backend  # noqa: E402


def main() -> int:
    role, socket, layout = sys.argv[1], sys.argv[2], sys.argv[3]
    pages, page_bytes, first = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    mla = layout == "mla"
    keys = [f"{i:064x}" for i in range(1000, 1000 + pages)]
    pool = HostPool(first + pages, page_bytes, mla=mla)
    backend = make_backend(socket, mla=mla)
    backend.register_mem_pool_host(pool)
    if role == "write":
        for i, k in enumerate(keys):
            pool.fill(i, k)
        ok = backend.batch_set_v1(keys, pool.indices(0, pages))
        print(json.dumps({"stored": sum(ok), "stats": backend.get_stats()}))
        return 0 if all(ok) else 1
    n = backend.batch_exists(keys)
    ok = backend.batch_get_v1(keys[:n], pool.indices(first, n))
    same = all(pool.holds(first + i, k) for i, k in enumerate(keys[:n]))
    print(json.dumps({"exists": n, "loaded": sum(ok), "same": same}))
    return 0 if n == pages and all(ok) and same else 1


if __name__ == "__main__":
    sys.exit(main())
