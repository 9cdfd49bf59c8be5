"""The vLLM connector (tierkv.integrations.vllm) against a real manager,
driven the way vLLM drives a connector (vllm_engine.py): a scheduler half
and a worker half, a two-layer attention model over paged KV in
FlashAttention's layout (MLA's too), and a second engine in a process of its
own whose logits after loading a shared prefix must equal computing
everything from scratch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests
import torch

from conftest import BUILD, Manager
from vllm_engine import BLOCK, Engine, scratch_logits

HERE = os.path.dirname(__file__)
PROMPT = list(range(3, 3 + 4 * BLOCK + 2))  # 4 full blocks and 2 tokens


@pytest.fixture()
def manager():
    m = Manager("--dram-size", "128MiB")
    yield m
    m.close()


def engine2(m: Manager, tokens: list[int], device: str = "cpu") -> dict:
    """Engine 2: a process of its own (vllm_engine.py's main)."""
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "vllm_engine.py"), m.uds,
                        json.dumps(tokens), device], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_second_engine_loads_the_shared_prefix_and_its_logits_equal_a_full_compute(manager):
    e1 = Engine(manager.uds)
    try:
        first = e1.run(PROMPT)
        assert first["loaded"] == 0
        assert torch.equal(first["logits"], scratch_logits(PROMPT))
    finally:
        e1.close()
    # The same prefix and another ending: every full block but the one that
    # holds the last prompt token comes from the store.
    other = PROMPT[:3 * BLOCK] + [60, 61, 62, 63, 1]
    got = engine2(manager, other)
    assert got == {"loaded": 3 * BLOCK, "errors": [], "equal": True}


def test_a_partial_prefix_loads_its_leading_run_and_never_the_last_block(manager):
    e1 = Engine(manager.uds)
    try:
        e1.run(PROMPT[:2 * BLOCK + 1])  # blocks 0 and 1 stored
        e2 = Engine(manager.uds, first_block=32)
        try:
            got = e2.run(PROMPT)
            assert got["loaded"] == 2 * BLOCK
            assert torch.equal(got["logits"], scratch_logits(PROMPT))
            # A prompt of exactly two blocks: the second holds its last token.
            exact = e2.run(PROMPT[:2 * BLOCK])
            assert exact["loaded"] == BLOCK
            assert torch.equal(exact["logits"], scratch_logits(PROMPT[:2 * BLOCK]))
        finally:
            e2.close()
    finally:
        e1.close()


def test_only_the_blocks_vllm_says_are_publishable_are_saved(manager):
    e1 = Engine(manager.uds)
    e2 = Engine(manager.uds, first_block=32)
    try:
        e1.run(PROMPT, publishable=2)
        assert e2.run(PROMPT)["loaded"] == 2 * BLOCK
    finally:
        e1.close()
        e2.close()


def test_two_models_in_one_tenant_never_read_each_other(manager):
    a = Engine(manager.uds, model="toy/model-a")
    b = Engine(manager.uds, model="toy/model-b", first_block=32)
    try:
        a.run(PROMPT)
        assert b.run(PROMPT)["loaded"] == 0
        assert Engine(manager.uds, model="toy/model-a", first_block=16).run(PROMPT)["loaded"] \
            == 4 * BLOCK
    finally:
        a.close()
        b.close()


def test_mla_blocks_round_trip(manager):
    e1 = Engine(manager.uds, mla=True)
    e2 = Engine(manager.uds, mla=True, first_block=32)
    try:
        e1.run(PROMPT)
        got = e2.run(PROMPT)
        assert got["loaded"] == 4 * BLOCK
        assert torch.equal(got["logits"], scratch_logits(PROMPT, mla=True))
    finally:
        e1.close()
        e2.close()


def registered_gets(m: Manager) -> int:
    """Values the manager wrote into clients' registered memory."""
    series = 'tierkv_registered_gets_total{where="local"} '
    for line in requests.get(m.rest + "/metrics", timeout=5).text.splitlines():
        if line.startswith(series):
            return int(line.split()[1])
    raise AssertionError("no " + series)


def test_a_head_major_cache_goes_through_staging_with_the_same_objects(manager):
    e1 = Engine(manager.uds)  # blocks contiguous: read and written in place
    e2 = Engine(manager.uds, hnd=True, first_block=32)  # not: staged with torch copies
    try:
        e1.run(PROMPT)
        assert registered_gets(manager) == 0
        got = e2.run(PROMPT)
        assert got["loaded"] == 4 * BLOCK
        assert torch.equal(got["logits"], scratch_logits(PROMPT))
        # Its loads were staged in registered memory: the manager wrote the
        # 4 blocks there.
        assert registered_gets(manager) == 4
        other = PROMPT[:2 * BLOCK] + [9] * (2 * BLOCK + 1)
        e2.run(other)  # saves its blocks 2 and 3 through staging
        e3 = Engine(manager.uds, first_block=16)
        try:
            again = e3.run(other)
            assert again["loaded"] == 4 * BLOCK
            assert torch.equal(again["logits"], scratch_logits(other))
        finally:
            e3.close()
    finally:
        e1.close()
        e2.close()


def test_a_block_that_cannot_be_read_is_reported_and_recomputed(manager):
    from tierkv import Client
    e1 = Engine(manager.uds)
    e2 = Engine(manager.uds, first_block=32)
    try:
        e1.run(PROMPT)

        def drop_third_block(req, matched):  # between the lookup and the load
            assert matched == 4 * BLOCK
            c = Client(manager.uds, "vllm")
            key = next(k for k in c.list_keys() if k.endswith(req.block_hashes[2].hex()))
            c.remove(key)

        got = e2.run(PROMPT, after_lookup=drop_third_block)
        assert got["loaded"] == 2 * BLOCK
        assert got["errors"] == {32 + 2, 32 + 3}  # the failed block and every one after it
        assert torch.equal(got["logits"], scratch_logits(PROMPT))
    finally:
        e1.close()
        e2.close()


def test_a_manager_restarted_mid_run_means_recompute_never_wrong_bytes(manager):
    e1 = Engine(manager.uds)
    try:
        e1.run(PROMPT)
        manager.stop()
        # Down: nothing found, nothing raised into the engine.
        down = e1.run(PROMPT)
        assert down["loaded"] == 0
        assert torch.equal(down["logits"], scratch_logits(PROMPT))
        manager.start()  # empty now, on the same socket
        again = Engine(manager.uds, first_block=32)
        try:
            assert again.run(PROMPT)["loaded"] == 0
            assert again.run(PROMPT)["loaded"] == 4 * BLOCK
        finally:
            again.close()
    finally:
        e1.close()


def test_two_tenants_never_read_each_other(manager):
    e1 = Engine(manager.uds, tenant="team-a")
    e2 = Engine(manager.uds, tenant="team-b", first_block=32)
    try:
        e1.run(PROMPT)
        assert e2.run(PROMPT)["loaded"] == 0
    finally:
        e1.close()
        e2.close()


BLOCK_OBJECT_BYTES = 2 * 2 * BLOCK * 2 * 8 * 4  # layers x (K, V) x tokens x heads x dim x fp32


def test_counters_reach_vllm_logging_and_prometheus(manager):
    e1 = Engine(manager.uds)
    e2 = Engine(manager.uds, first_block=32)
    try:
        e1.run(PROMPT)
        first = e1.logging.log()
        assert first["Lookups"] == 1 and first["Hit blocks"] == 0
        assert first["Saved objects"] == 4 and first["Failed saves"] == 0
        assert e1.counter("save_bytes") == 4 * BLOCK_OBJECT_BYTES
        assert e1.counter("lookup_blocks") == 4

        e2.run(PROMPT)
        second = e2.logging.log()
        assert second["Hit blocks"] == 4 and second["Hit rate (%)"] == 100.0
        assert second["Loaded objects"] == 4 and second["Failed loads"] == 0
        assert second["Saved objects"] == 0  # loaded blocks are not written back
        assert e2.counter("load_bytes") == 4 * BLOCK_OBJECT_BYTES
        assert e2.counter("hit_blocks") == 4
        assert e2.counter("load_seconds") > 0
        assert e1.counter("hit_blocks") == 0  # per engine
        assert e2.logging.log() is None  # an interval with nothing to say

        manager.stop()
        e2.run(PROMPT)
        down = e2.logging.log()
        assert down["Lookup failures"] == 1 and down["Hit blocks"] == 0
        assert e2.counter("lookup_failures") == 1
    finally:
        e1.close()
        e2.close()


def test_stats_rebuilt_from_their_data_add_up_across_workers():
    from tierkv.integrations.vllm import TierkvConnector
    a = TierkvConnector.build_kv_connector_stats({"load_blocks": 3, "load_bytes": 300})
    b = TierkvConnector.build_kv_connector_stats({"load_blocks": 2, "load_failed_blocks": 1})
    total = a.aggregate(b)
    assert total.data["load_blocks"] == 5 and total.data["load_failed_blocks"] == 1
    assert not total.is_empty()
    assert TierkvConnector.build_kv_connector_stats(None).is_empty()
    assert TierkvConnector.build_kv_connector_stats({"unknown": 1}).is_empty()
    total.reset()
    assert total.is_empty()


def _tp_engine(socket: str, ranks: int, seed: int):
    """A scheduler half and one worker half per tp rank, each worker with
    its own KV shard (random bytes, distinct per rank and engine)."""
    import types
    from vllm.distributed import parallel_state
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from tierkv.integrations.vllm import TierkvConnector
    from vllm_engine import kv_cache_config, vllm_config
    cfg, kcc = vllm_config(socket, tp=ranks), kv_cache_config(16)
    scheduler = TierkvConnector(cfg, KVConnectorRole.SCHEDULER, kcc)
    workers, shards = [], []
    g = torch.Generator().manual_seed(seed)
    for rank in range(ranks):
        parallel_state.TP_RANK = rank
        try:
            w = TierkvConnector(cfg, KVConnectorRole.WORKER, kcc)
        finally:
            parallel_state.TP_RANK = 0
        kv = {f"layers.{i}.attn": torch.randn(2, 16, BLOCK, 1, 8, generator=g) for i in range(2)}
        w.register_kv_caches(kv)
        workers.append(w)
        shards.append(kv)
    return types.SimpleNamespace(scheduler=scheduler, workers=workers, shards=shards)


def _tp_step(engine, meta) -> None:
    for w in engine.workers:  # every rank runs the same step's metadata
        w.bind_connector_metadata(meta)
        w.start_load_kv(None)
        w.wait_for_save()
        w.clear_connector_metadata()
    for w in engine.workers:
        w._worker.drain()


def test_tensor_parallel_ranks_store_their_own_shards_and_a_block_needs_every_rank(manager):
    from tierkv import Client
    from vllm_engine import KVCacheBlocks, Request, scheduler_output
    a, b = _tp_engine(manager.uds, 2, seed=1), _tp_engine(manager.uds, 2, seed=2)
    try:
        req = Request("tp-a", PROMPT)
        assert a.scheduler.get_num_new_matched_tokens(req, 0) == (0, False)
        table = [0, 1, 2, 3, 4]
        _tp_step(a, a.scheduler.build_connector_meta(
            scheduler_output([(req.request_id, table, 0, len(PROMPT))])))

        req_b = Request("tp-b", PROMPT)
        assert b.scheduler.get_num_new_matched_tokens(req_b, 0) == (4 * BLOCK, True)
        b.scheduler.update_state_after_alloc(req_b, KVCacheBlocks([8, 9, 10, 11, 12]), 4 * BLOCK)
        _tp_step(b, b.scheduler.build_connector_meta(scheduler_output()))
        for rank in range(2):  # each rank got its own shard back, not the other's
            assert not b.workers[rank].get_block_ids_with_load_errors()
            for name, kv in a.shards[rank].items():
                assert torch.equal(b.shards[rank][name][:, 8:12], kv[:, 0:4])
        assert not torch.equal(a.shards[0]["layers.0.attn"][:, 0:4],
                               a.shards[1]["layers.0.attn"][:, 0:4])

        # Rank 1's object of block 2 goes: the block no longer counts.
        c = Client(manager.uds, "vllm")
        suffix = req.block_hashes[2].hex()
        keys = [k for k in c.list_keys() if k.endswith(suffix)]
        assert len(keys) == 2  # one per rank
        rank1 = b.workers[1]._worker._prefix
        c.remove(next(k for k in keys if k.startswith(rank1)))
        again = Request("tp-c", PROMPT)
        assert b.scheduler.get_num_new_matched_tokens(again, 0) == (2 * BLOCK, True)
    finally:
        for e in (a, b):
            e.scheduler.shutdown()
            for w in e.workers:
                w.shutdown()
