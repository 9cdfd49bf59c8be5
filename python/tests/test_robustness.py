"""Concurrency, restarts, and buffer lifetime of the Python client."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import threading
import tracemalloc

import numpy as np
import pytest

import tierkv
from conftest import Manager


def test_threads_share_one_client_and_use_their_own(manager):
    shared = tierkv.Client(manager.uds, "threads")
    errors = []

    def work(t: int, c: tierkv.Client) -> None:
        try:
            for i in range(200):
                key = f"{t}/{i}"
                value = os.urandom(1000 + i)
                c.put(key, value)
                if c.get(key) != value:
                    errors.append(key)
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(repr(e))

    own = [tierkv.Client(manager.uds, "threads") for _ in range(3)]
    threads = [threading.Thread(target=work, args=(t, shared)) for t in range(3)]
    threads += [threading.Thread(target=work, args=(10 + t, own[t])) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(shared.list_keys()) == 6 * 200
    shared.remove_all()


def _child(address: str, worker: int, n: int) -> None:
    with tierkv.Client(address, "procs") as c:
        for i in range(n):
            c.put(f"{worker}/{i}", np.full(4096, worker, dtype=np.uint8))


def test_processes_write_concurrently(manager):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_child, args=(manager.uds, w, 100)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with tierkv.Client(manager.uds, "procs") as c:
        assert len(c.list_keys()) == 400
        assert c.get("3/99") == bytes([3]) * 4096
        c.remove_all()


def test_manager_restart_gives_a_clear_error_then_reconnects():
    m = Manager()
    try:
        c = tierkv.Client(m.uds)
        c.put("k", b"v")
        assert m.stop() == 0
        with pytest.raises(tierkv.Unavailable):
            c.get("k")
        m.start()  # same socket path
        assert c.get("k") is None  # DRAM does not survive a restart
        c.put("k", b"v2")
        assert c.get("k") == b"v2"
        c.close()
    finally:
        m.close()


def test_no_leak_over_100k_calls(manager):
    c = tierkv.Client(manager.uds, "leak")
    value = np.arange(1024, dtype=np.uint8)
    target = bytearray(1024)
    c.put("k", value)

    def loop(n: int) -> None:
        for i in range(n):
            c.get_into("k", target)
            c.get("k")
            c.exists("k")
            if i % 100 == 0:
                c.upsert("k", value)

    loop(2000)  # warm up caches and interned objects
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    loop(100_000 // 3)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert growth < 64 * 1024, f"Python heap grew by {growth} bytes"
    # Buffers passed in are not retained.
    import sys
    rc = sys.getrefcount(target)
    c.get_into("k", target)
    assert sys.getrefcount(target) == rc
    c.remove_all()
    c.close()


def test_no_space_and_too_large_from_a_real_manager():
    m = Manager("--dram-size", "2MiB", "--max-object-bytes", "4MiB")
    try:
        with tierkv.Client(m.uds) as c:
            with pytest.raises(tierkv.NoSpace) as e:
                c.put("big", b"x" * (3 << 20))  # allowed size, larger than the pool
            assert e.value.code == 3 and "larger than the DRAM pool" in str(e.value)
            with pytest.raises(tierkv.TooLarge):
                c.put("huge", b"x" * (5 << 20))  # over --max-object-bytes
            c.put("fits", b"y" * 1000)
            assert c.get("fits") == b"y" * 1000
    finally:
        m.close()
