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


def engine2(m: Manager, tokens: list[int]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "vllm_engine.py"), m.uds,
                        json.dumps(tokens)], capture_output=True, text=True, timeout=120, env=env)
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


def test_a_head_major_cache_goes_through_staging_with_the_same_objects(manager):
    e1 = Engine(manager.uds)  # blocks contiguous: read and written in place
    e2 = Engine(manager.uds, hnd=True, first_block=32)  # not: staged with torch copies
    try:
        e1.run(PROMPT)
        got = e2.run(PROMPT)
        assert got["loaded"] == 4 * BLOCK
        assert torch.equal(got["logits"], scratch_logits(PROMPT))
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
