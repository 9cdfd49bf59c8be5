"""The SGLang HiCache backend (tierkv.integrations.sglang) against a real
manager, with a stand-in of SGLang's base class and host pool: two engine
processes sharing prefix pages, MHA and MLA layouts, partial prefixes, the copy
and v1 paths, a page-size mismatch, tenants, clear() and a manager restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import BUILD, Manager
from hicache_util import HostPool, make_backend

HERE = os.path.dirname(__file__)


@pytest.fixture()
def manager():
    m = Manager("--dram-size", "256MiB")
    yield m
    m.close()


def engine(role: str, m: Manager, layout: str, pages: int, page_bytes: int, first: int = 0):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "hicache_engine.py"), role, m.uds,
                        layout, str(pages), str(page_bytes), str(first)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("layout", ["mha", "mla"])
def test_two_engines_share_prefix_pages(manager, layout):
    wrote = engine("write", manager, layout, 24, 64 << 10)
    assert wrote["stored"] == 24
    read = engine("read", manager, layout, 24, 64 << 10, first=40)
    assert read == {"exists": 24, "loaded": 24, "same": True}


def test_object_keys_follow_the_layouts(manager):
    import tierkv
    mha = make_backend(manager.uds, tp_rank=1)
    mha.register_mem_pool_host(HostPool(4, 1024))
    pool = mha.mem_pool_host
    pool.fill(0, "abc")
    assert mha.batch_set_v1(["abc"], pool.indices(0, 1)) == [True]
    mla = make_backend(manager.uds, mla=True)
    mla.register_mem_pool_host(HostPool(4, 1024, mla=True))
    mla.mem_pool_host.fill(0, "def")
    assert mla.batch_set_v1(["def"], mla.mem_pool_host.indices(0, 1)) == [True]
    c = tierkv.Client(manager.uds, "sglang")
    assert c.list_keys() == ["abc_1_k", "abc_1_v", "def__k"]
    # The namespace is the deployment's identity: model, layout and geometry.
    assert c.query("abc_1_k")["namespace"] == mha.namespace
    assert mha.namespace != mla.namespace
    c.close()


def test_batch_exists_stops_at_the_first_missing_page(manager):
    b = make_backend(manager.uds)
    pool = HostPool(8, 4096)
    b.register_mem_pool_host(pool)
    keys = [f"p{i}" for i in range(8)]
    for i, k in enumerate(keys):
        pool.fill(i, k)
    stored = [0, 1, 2, 3, 4, 6]
    assert b.batch_set_v1([keys[i] for i in stored],
                          torch.cat([pool.indices(i, 1) for i in stored])) == [True] * 6
    assert b.batch_exists(keys) == 5
    assert b.exists("p6") and not b.exists("p5")
    # A set of pages already stored counts as success.
    assert b.batch_set_v1(keys[:2], pool.indices(0, 2)) == [True, True]
    assert b.get_stats()["set_existing"] == 4  # two pages, k and v each


def test_the_copy_path(manager):
    b = make_backend(manager.uds, v1=False)
    b.register_mem_pool_host(HostPool(2, 1024))
    a = torch.arange(1000, dtype=torch.float32)
    assert b.set("t1", a)
    assert b.batch_set(["t2", "t3"], [a * 2, a * 3])
    assert b.set("t1", a)  # already there: success
    out = b.get("t1")
    assert torch.equal(out.view(torch.float32), a)
    target = torch.empty(1000, dtype=torch.float32)
    assert b.get("t2", target) is target and torch.equal(target, a * 2)
    got = b.batch_get(["t3", "missing"], [torch.empty(1000, dtype=torch.float32), None])
    assert torch.equal(got[0], a * 3) and got[1] is None
    small = torch.zeros(10, dtype=torch.float32)
    assert b.get("t3", small) is None  # another size: a miss, nothing copied
    assert int(small.count_nonzero()) == 0
    assert b.batch_exists(["t1", "t2", "nope", "t3"]) == 2


def test_a_page_of_another_size_is_a_failed_page_and_nothing_is_copied(manager):
    w = make_backend(manager.uds)
    wpool = HostPool(2, 8192)
    w.register_mem_pool_host(wpool)
    wpool.fill(0, "page")
    assert w.batch_set_v1(["page"], wpool.indices(0, 1)) == [True]
    r = make_backend(manager.uds)
    rpool = HostPool(2, 4096)
    r.register_mem_pool_host(rpool)
    assert r.batch_get_v1(["page"], rpool.indices(1, 1)) == [False]
    assert rpool.blank(1)
    assert r.get_stats()["get_failed"] == 1


def test_tenants_are_isolated_and_clear_empties_one(manager):
    a = make_backend(manager.uds, tenant="team-a")
    b = make_backend(manager.uds, tenant="team-b")
    pool = HostPool(4, 2048)
    a.register_mem_pool_host(pool)
    b.register_mem_pool_host(pool)
    pool.fill(0, "shared-hash")
    assert a.batch_set_v1(["shared-hash"], pool.indices(0, 1)) == [True]
    assert b.batch_exists(["shared-hash"]) == 0
    assert b.batch_get_v1(["shared-hash"], pool.indices(1, 1)) == [False]
    assert b.batch_set_v1(["shared-hash"], pool.indices(0, 1)) == [True]
    a.clear()
    assert a.batch_exists(["shared-hash"]) == 0
    assert b.batch_exists(["shared-hash"]) == 1


def test_a_manager_restart_fails_calls_cleanly_then_recovers(manager):
    b = make_backend(manager.uds)
    pool = HostPool(4, 4096)
    b.register_mem_pool_host(pool)
    pool.fill(0, "before")
    assert b.batch_set_v1(["before"], pool.indices(0, 1)) == [True]
    assert manager.stop() == 0
    assert b.batch_exists(["before"]) == 0
    assert b.batch_get_v1(["before"], pool.indices(1, 1)) == [False]
    assert b.batch_set_v1(["before"], pool.indices(0, 1)) == [False]
    assert b.get_stats()["errors"] >= 3
    manager.start()  # same socket path; its DRAM starts empty
    assert b.batch_exists(["before"]) == 0
    assert b.batch_set_v1(["before"], pool.indices(0, 1)) == [True]
    assert b.batch_get_v1(["before"], pool.indices(2, 1)) == [True]
    assert pool.holds(2, "before")
