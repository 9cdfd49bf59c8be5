"""One stand-in inference engine process for the HiCache tests.

    hicache_engine.py write|read SOCKET ATTENTION LAYOUT PAGES FIRST_PAGE [V1]

write: fills pages 0..PAGES-1 of its host pool with the prefix's contents and
stores them (batch_set_v1, or batch_set on the copy path when V1 is 0).
read: finds how much of the prefix is stored (batch_exists) and loads it into
pages FIRST_PAGE.. of its own pool, then compares every byte. Exit 0 when all
is as expected.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from hicache_util import fill, holds, indices, make_backend, make_pool  # noqa: E402


def main() -> int:
    role, socket, attention, layout = sys.argv[1:5]
    pages, first = int(sys.argv[5]), int(sys.argv[6])
    v1 = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    keys = [f"{i:064x}" for i in range(1000, 1000 + pages)]
    pool = make_pool(attention, layout, pages=first + pages)
    backend = make_backend(socket, pool, mla=attention == "mla", v1=v1)
    ps = pool.page_size
    if role == "write":
        for i, k in enumerate(keys):
            fill(pool, i, k)
        if v1:
            ok = backend.batch_set_v1(keys, indices(pool, 0, pages))
        else:
            ok = [backend.batch_set(keys, [pool.get_data_page(i * ps) for i in range(pages)])]
        print(json.dumps({"stored": sum(ok), "stats": backend.stats()}))
        return 0 if all(ok) else 1
    n = backend.batch_exists(keys)
    if v1:
        ok = backend.batch_get_v1(keys[:n], indices(pool, first, n))
    else:
        got = backend.batch_get(keys[:n], [pool.get_dummy_flat_data_page() for _ in range(n)])
        ok = [g is not None for g in got]
        for i, g in enumerate(got):
            if g is not None:
                pool.set_from_flat_data_page((first + i) * ps, g)
    same = all(holds(pool, first + i, k) for i, k in enumerate(keys[:n]))
    print(json.dumps({"exists": n, "loaded": sum(ok), "same": same}))
    return 0 if n == pages and all(ok) and same else 1


if __name__ == "__main__":
    sys.exit(main())
