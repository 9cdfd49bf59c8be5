"""The vLLM connector with its KV cache in GPU memory: run on the GPU host
by scripts/gpu-check.sh, never in `make test` (it needs CUDA and fails
without it).

The CPU suite (python/tests/test_vllm.py) covers every path of the
connector but the CUDA one: blocks in device memory go through a pinned
staging buffer with copies on the worker's own CUDA stream."""

from __future__ import annotations

import os
import sys

import pytest
import torch

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
sys.path.insert(0, TESTS)

from conftest import Manager  # noqa: E402
from test_vllm import PROMPT, engine2  # noqa: E402
from vllm_engine import BLOCK, Engine, scratch_logits  # noqa: E402


@pytest.fixture()
def manager():
    assert torch.cuda.is_available(), "these tests need a CUDA device"
    m = Manager("--dram-size", "256MiB")
    yield m
    m.close()


def test_a_second_engine_on_the_gpu_loads_the_prefix_and_its_logits_equal_a_full_compute(
        manager):
    e1 = Engine(manager.uds, device="cuda")
    try:
        first = e1.run(PROMPT)
        assert torch.equal(first["logits"], scratch_logits(PROMPT, device="cuda"))
        assert first["logits"].is_cuda
    finally:
        e1.close()
    other = PROMPT[:3 * BLOCK] + [60, 61, 62, 63, 1]
    assert engine2(manager, other, "cuda") == {"loaded": 3 * BLOCK, "errors": [], "equal": True}


def test_gpu_and_cpu_engines_share_blocks_byte_for_byte(manager):
    gpu = Engine(manager.uds, device="cuda")
    cpu = Engine(manager.uds, first_block=32)
    hnd = Engine(manager.uds, device="cuda", hnd=True, first_block=16)
    try:
        gpu.run(PROMPT)
        got = cpu.run(PROMPT)  # written from device memory, read in place on the host
        assert got["loaded"] == 4 * BLOCK
        for name, kv in gpu.model.kv.items():
            assert torch.equal(cpu.model.kv[name][:, 32:36].cpu(), kv[:, 0:4].cpu())
        back = hnd.run(PROMPT)  # into a head-major cache on the device
        assert back["loaded"] == 4 * BLOCK
        assert torch.equal(back["logits"].cpu(), scratch_logits(PROMPT, device="cuda").cpu())
        for name, kv in gpu.model.kv.items():
            assert torch.equal(hnd.model.kv[name][:, 16:20].cpu(), kv[:, 0:4].cpu())
    finally:
        gpu.close()
        cpu.close()
        hnd.close()


def test_a_failed_load_into_device_memory_is_reported_and_recomputed(manager):
    from tierkv import Client
    e1 = Engine(manager.uds, device="cuda")
    e2 = Engine(manager.uds, device="cuda", first_block=32)
    try:
        e1.run(PROMPT)

        def drop_second_block(req, matched):
            c = Client(manager.uds, "vllm")
            c.remove(next(k for k in c.list_keys() if k.endswith(req.block_hashes[1].hex())))

        got = e2.run(PROMPT, after_lookup=drop_second_block)
        assert got["loaded"] == BLOCK and got["errors"] == {33, 34, 35}
        assert torch.equal(got["logits"], scratch_logits(PROMPT, device="cuda"))
    finally:
        e1.close()
        e2.close()
