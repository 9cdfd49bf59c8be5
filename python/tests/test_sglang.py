"""The SGLang HiCache backend (tierkv.integrations.sglang) against a real
manager, driven as SGLang drives it: built by a stand-in of SGLang's factory
(with its issubclass check), host pools of real torch tensors in every layout
SGLang ships, the controller's three threads at once. Every page is compared
byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import BUILD, Manager
from hicache_util import (Controller, MambaPoolHost, blank, config, content, fill, holds,
                          indices, make_backend, make_pool)

HERE = os.path.dirname(__file__)
LAYOUTS = [("mha", "layer_first"), ("mha", "page_first"), ("mha", "page_first_direct"),
           ("mha", "page_head"), ("mla", "layer_first"), ("mla", "page_first"),
           ("mla", "page_first_direct")]


@pytest.fixture()
def manager():
    m = Manager("--dram-size", "256MiB")
    yield m
    m.close()


def engine(role: str, m: Manager, attention: str, layout: str, pages: int, first: int = 0,
           v1: int = 1):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "hicache_engine.py"), role, m.uds,
                        attention, layout, str(pages), str(first), str(v1)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("attention,layout", LAYOUTS)
def test_two_engines_share_prefix_pages_in_every_layout(manager, attention, layout):
    assert engine("write", manager, attention, layout, 12)["stored"] == 12
    assert engine("read", manager, attention, layout, 12, first=20) == \
        {"exists": 12, "loaded": 12, "same": True}


@pytest.mark.parametrize("attention,layout", [("mha", "layer_first"), ("mla", "page_first")])
def test_the_copy_path_reads_what_the_zero_copy_path_stored(manager, attention, layout):
    # One object per page in flat page order, whichever path moved it.
    assert engine("write", manager, attention, layout, 6, v1=1)["stored"] == 6
    assert engine("read", manager, attention, layout, 6, first=8, v1=0)["same"]


def test_a_layer_first_page_is_one_object_of_its_flat_bytes(manager):
    import tierkv
    pool = make_pool("mha", "layer_first", layers=32)
    b = make_backend(manager.uds, pool)
    fill(pool, 0, "page0")
    assert b.batch_set_v1(["page0"], indices(pool, 0, 1)) == [True]
    c = tierkv.Client(manager.uds, "sglang")
    keys = c.list_keys()
    assert len(keys) == 1 and keys[0].endswith("/page0")
    assert c.get(keys[0]) == bytes(content("page0", pool.page_elems() * 2).numpy())
    assert c.query(keys[0])["namespace"] == b.namespace


def test_two_models_in_one_tenant_never_read_each_others_pages(manager):
    pa, pb = make_pool(), make_pool()
    a = make_backend(manager.uds, pa, model="org/model-a")
    b = make_backend(manager.uds, pb, model="org/model-b")
    fill(pa, 0, "a-bytes")
    assert a.batch_set_v1(["h0"], indices(pa, 0, 1)) == [True]
    assert b.batch_exists(["h0"]) == 0
    assert b.batch_get_v1(["h0"], indices(pb, 1, 1)) == [False] and blank(pb, 1)
    fill(pb, 0, "b-bytes")
    assert b.batch_set_v1(["h0"], indices(pb, 0, 1)) == [True]  # stored, not "already there"
    assert a.batch_get_v1(["h0"], indices(pa, 2, 1)) == [True] and holds(pa, 2, "a-bytes")
    assert b.batch_get_v1(["h0"], indices(pb, 2, 1)) == [True] and holds(pb, 2, "b-bytes")
    # An operator's tag separates deployments of one model name too.
    t = make_backend(manager.uds, make_pool(), model="org/model-a", extra_backend_tag="canary")
    assert t.batch_exists(["h0"]) == 0


@pytest.mark.parametrize("mla,ranks,shared", [
    (False, {"tp_rank": 1, "tp_size": 2}, False),
    (True, {"tp_rank": 1, "tp_size": 2}, True),   # MLA's latent cache is the same on every tp rank
    (False, {"pp_rank": 1, "pp_size": 2}, False),
    (True, {"pp_rank": 1, "pp_size": 2}, False),
    (False, {"cp_rank": 1, "cp_size": 2}, False),
    (True, {"cp_rank": 1, "cp_size": 2}, False),
])
def test_ranks_that_slice_a_page_are_in_its_identity(manager, mla, ranks, shared):
    attention = "mla" if mla else "mha"
    p0, p1 = make_pool(attention), make_pool(attention)
    base = {k: 0 if k.endswith("rank") else v for k, v in ranks.items()}
    r0 = make_backend(manager.uds, p0, mla=mla, **base)
    r1 = make_backend(manager.uds, p1, mla=mla, **ranks)
    fill(p0, 0, "rank0")
    assert r0.batch_set_v1(["h"], indices(p0, 0, 1)) == [True]
    assert r1.batch_exists(["h"]) == (1 if shared else 0)
    assert r1.batch_get_v1(["h"], indices(p1, 1, 1)) == [shared]
    assert holds(p1, 1, "rank0") if shared else blank(p1, 1)


def test_a_page_size_mismatch_is_a_miss_and_nothing_is_copied(manager):
    w, r = make_pool(page_size=4), make_pool(page_size=8)
    a = make_backend(manager.uds, w)
    b = make_backend(manager.uds, r)
    fill(w, 0, "p")
    assert a.batch_set_v1(["p"], indices(w, 0, 1)) == [True]
    assert b.batch_exists(["p"]) == 0
    assert b.batch_get_v1(["p"], indices(r, 1, 1)) == [False] and blank(r, 1)


def test_split_heads_share_pages_with_the_larger_tp(manager):
    # tp 2 with tp_lcm_size 4 stores each page as the objects of tp ranks 0..3
    # of a tp-4 deployment; a tp-4 rank reads its heads from them.
    heads2 = 4
    w = make_pool("mha", "page_head", heads=heads2)
    writer = make_backend(manager.uds, w, tp_rank=1, tp_size=2, tp_lcm_size=4, split=True)
    fill(w, 0, "wide")
    assert writer.batch_set_v1(["h"], indices(w, 0, 1)) == [True]
    for sub in range(2):
        r = make_pool("mha", "page_head", heads=heads2 // 2)
        reader = make_backend(manager.uds, r, tp_rank=2 + sub, tp_size=4)
        assert reader.batch_get_v1(["h"], indices(r, 1, 1)) == [True]
        for kv in range(2):
            mine = r.kv_buffer[kv, 1].contiguous().view(torch.uint8)  # bytes: NaN != NaN
            theirs = w.kv_buffer[kv, 0, sub * 2:(sub + 1) * 2].contiguous().view(torch.uint8)
            assert torch.equal(mine, theirs)
    other = make_backend(manager.uds, make_pool("mha", "page_head", heads=2), tp_rank=0,
                         tp_size=4)
    assert other.batch_exists(["h"]) == 0  # tp rank 0's heads were never stored


def test_hybrid_pools_v2(manager):
    from sglang.srt.mem_cache.hicache_storage import (PoolHitPolicy, PoolName, PoolTransfer,
                                                      PoolTransferResult)
    kv, mamba = make_pool(pages=8), MambaPoolHost(8)
    b = make_backend(manager.uds, kv)
    b.register_mem_host_pool_v2(kv, PoolName.KV)
    b.register_mem_host_pool_v2(mamba, PoolName.MAMBA)
    keys = [f"k{i}" for i in range(4)]
    for i, k in enumerate(keys):
        fill(kv, i, k)
        mamba.set_from_flat_data_page(i, content("m" + k, mamba.page_elems()))
    assert b.batch_set_v1(keys, indices(kv, 0, 4)) == [True] * 4
    # States of pages 0 and 3 only (SGLang keeps the states of the last pages).
    res = b.batch_set_v2([PoolTransfer(PoolName.MAMBA, torch.tensor([0, 3]),
                                       keys=[keys[0], keys[3]])])
    assert res == {"mamba": [True, True]}
    all_pages = PoolTransfer(PoolName.MAMBA, keys=keys, hit_policy=PoolHitPolicy.ALL_PAGES)
    got = b.batch_exists_v2(keys, [all_pages])
    assert isinstance(got, PoolTransferResult)
    assert (got.kv_hit_pages, got.extra_pool_hit_pages) == (1, {"kv": 4, "mamba": 1})
    trailing = PoolTransfer(PoolName.MAMBA, keys=[keys[3]],
                            hit_policy=PoolHitPolicy.TRAILING_PAGES)
    got = b.batch_exists_v2(keys, [trailing])
    assert (got.kv_hit_pages, got.extra_pool_hit_pages) == (4, {"kv": 4, "mamba": 4})
    m2 = MambaPoolHost(8)
    b2 = make_backend(manager.uds, make_pool(pages=8))
    b2.register_mem_host_pool_v2(m2, "mamba")
    out = b2.batch_get_v2([PoolTransfer(PoolName.MAMBA, torch.tensor([5, 6]),
                                        keys=[keys[3], keys[1]])])
    assert out == {"mamba": [True, False]}
    assert torch.equal(m2.flat_page(5), content("m" + keys[3], m2.page_elems()))
    assert int(m2.flat_page(6).count_nonzero()) == 0
    # An unregistered pool is a failed transfer, not an exception.
    assert b2.batch_get_v2([PoolTransfer(PoolName.SWA, torch.tensor([1]), keys=["x"])]) == \
        {"swa": [False]}


def test_get_stats_gives_sglangs_storage_metrics_drained_per_call(manager):
    from sglang.srt.observability.metrics_collector import StorageMetrics
    pool = make_pool()
    b = make_backend(manager.uds, pool, metrics=True)
    keys = ["s0", "s1", "s2"]
    assert b.batch_set_v1(keys, indices(pool, 0, 3)) == [True] * 3
    assert b.batch_get_v1(keys[:2], indices(pool, 4, 2)) == [True, True]
    m = b.get_stats()
    assert isinstance(m, StorageMetrics)
    assert m.backup_pgs == [3] and m.prefetch_pgs == [2]
    assert len(m.backup_bandwidth) == 1 and m.backup_bandwidth[0] > 0
    again = b.get_stats()
    assert again.backup_pgs == [] and again.prefetch_pgs == []
    assert b.stats()["set_pages"] == 3 and b.stats()["get_pages"] == 2


def test_the_three_controller_threads_each_use_their_own_connection(manager):
    pool = make_pool(pages=64)
    b = make_backend(manager.uds, pool)
    stored = [f"s{i}" for i in range(8)]
    for i, k in enumerate(stored):
        fill(pool, i, k)
    assert b.batch_set_v1(stored, indices(pool, 0, 8)) == [True] * 8
    backups = iter(range(10_000))

    def backup():
        n = next(backups)
        keys = [f"b{n}-{i}" for i in range(16)]
        assert all(b.batch_set_v1(keys, indices(pool, 16, 16)))

    ctl = Controller(b, 30, stored + ["missing"],
                     lambda: all(b.batch_get_v1(stored, indices(pool, 40, 8))), backup)
    ctl.run()
    assert ctl.died == []
    assert ctl.lookups == [8] * 30
    assert all(holds(pool, 40 + i, k) for i, k in enumerate(stored))
    assert b.stats()["connect_failures"] == 0
    # One per calling thread (this one and the three): a backup never blocks a lookup.
    assert len(b._conns._all) == 4


def test_manager_down_at_start_then_up(scratch, monkeypatch):
    from tierkv.integrations import _hicache
    monkeypatch.setattr(_hicache, "RECONNECT_INTERVAL_S", 0.0)
    sock = str(scratch / "later.sock")
    pool = make_pool()
    b = make_backend("unix:" + sock, pool)  # SGLang starts: nothing listens yet
    fill(pool, 0, "late")
    assert b.batch_exists(["late"]) == 0
    assert b.batch_set_v1(["late"], indices(pool, 0, 1)) == [False]
    assert b.batch_get_v1(["late"], indices(pool, 1, 1)) == [False]
    assert b.stats()["connect_failures"] >= 3
    m = Manager(socket_path=sock)
    try:
        assert b.batch_set_v1(["late"], indices(pool, 0, 1)) == [True]
        assert b.batch_get_v1(["late"], indices(pool, 1, 1)) == [True]
        assert holds(pool, 1, "late")
    finally:
        m.close()


def test_a_manager_restart_fails_calls_cleanly_then_recovers(manager, monkeypatch):
    from tierkv.integrations import _hicache
    monkeypatch.setattr(_hicache, "RECONNECT_INTERVAL_S", 0.0)
    pool = make_pool()
    b = make_backend(manager.uds, pool)
    fill(pool, 0, "before")
    assert b.batch_set_v1(["before"], indices(pool, 0, 1)) == [True]
    assert manager.stop() == 0
    assert b.batch_exists(["before"]) == 0
    assert b.batch_get_v1(["before"], indices(pool, 1, 1)) == [False] and blank(pool, 1)
    assert b.batch_set_v1(["before"], indices(pool, 0, 1)) == [False]
    manager.start()  # same socket path; its DRAM starts empty
    assert b.batch_exists(["before"]) == 0
    assert b.batch_set_v1(["before"], indices(pool, 0, 1)) == [True]
    assert b.batch_get_v1(["before"], indices(pool, 2, 1)) == [True] and holds(pool, 2, "before")


def test_bad_calls_answer_failure_values_and_never_raise(manager):
    pool = make_pool()
    b = make_backend(manager.uds, pool)
    assert b.batch_set_v1(["a"], indices(pool, 0, 1)) == [True]
    assert b.batch_get_v1(["a", "b"], indices(pool, 0, 1)) == [False, False]  # too few indices
    assert b.batch_set_v1(["a"], "not a tensor") == [False]
    assert b.batch_exists_v2(["a"], [object()]).kv_hit_pages == 0
    assert b.batch_get(["a"], [torch.zeros(3)]) == [None]
    assert b.batch_set(["a"], [None]) is False
    assert b.stats()["errors"] >= 4


def test_interface_v1_is_read_as_sglang_reads_it(manager):
    for value, expected in [(1, True), (0, False), ("true", True), ("0", True), (True, True),
                            (None, False)]:
        assert make_backend(manager.uds, v1=value).interface_v1 is expected


def test_a_layout_without_a_page_table_is_refused_at_registration(manager):
    class KOnlyLayerFirst:  # as SGLang's index-K pool in layer_first: no page table
        layout, page_size, dtype = "layer_first", 4, torch.bfloat16

        def get_page_buffer_meta(self, indices):
            raise ValueError(f"Unsupported layout: {self.layout}")

    from sglang.srt.mem_cache.storage import StorageBackendFactory
    b = StorageBackendFactory.create_backend("dynamic", config(manager.uds), KOnlyLayerFirst())
    with pytest.raises(ValueError, match="layer_first"):
        b.register_mem_pool_host(KOnlyLayerFirst())


def test_a_logical_kv_anchor_moves_no_kv_bytes(manager):
    class Anchor:  # a hybrid model whose KV pool holds no bytes of its own
        kv_buffer, layout, page_size, dtype = None, "page_first", 4, torch.bfloat16

    b = make_backend(manager.uds, Anchor())
    assert b.batch_set_v1(["x", "y"], torch.arange(8)) == [True, True]
    assert b.batch_exists(["x", "y"]) == 2


def test_clear_removes_this_deployments_pages_only(manager):
    pa, pb = make_pool(), make_pool()
    a = make_backend(manager.uds, pa, model="m-a")
    b = make_backend(manager.uds, pb, model="m-b")
    assert a.batch_set_v1(["h"], indices(pa, 0, 1)) == [True]
    assert b.batch_set_v1(["h"], indices(pb, 0, 1)) == [True]
    a.clear()
    assert a.batch_exists(["h"]) == 0 and b.batch_exists(["h"]) == 1


def test_the_factory_accepts_the_class_whatever_the_import_order(scratch):
    # tierkv imported first, SGLang made importable only afterwards.
    script = scratch / "order.py"
    script.write_text(
        "import sys\n"
        "import tierkv.integrations.sglang as mod\n"
        "assert 'sglang' not in sys.modules\n"
        f"sys.path.insert(0, {os.path.join(HERE, 'sglang_standin')!r})\n"
        "from sglang.srt.mem_cache.hicache_storage import HiCacheStorage\n"
        "assert issubclass(mod.TierkvHiCacheStorage, HiCacheStorage)\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
