"""The HBM tier on a real GPU: run on the GPU host by scripts/gpu-check.sh,
never in `make test` (it needs CUDA and fails without it). The CPU suite
(python/tests/test_hbm.py, src/media/hbm_tier_test.cc) covers the same on
stand-in devices of host memory."""

from __future__ import annotations

import os
import sys

import requests
import torch

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
sys.path.insert(0, TESTS)

from conftest import Manager  # noqa: E402
from test_hbm import start_fails  # noqa: E402

MiB = 1 << 20


def test_the_pool_is_taken_from_the_gpu_and_shows_as_the_hbm_medium():
    assert torch.cuda.is_available(), "this test needs a CUDA device"
    free_before, _ = torch.cuda.mem_get_info(0)
    m = Manager("--hbm-devices", "0", "--hbm-size", "512MiB", "--dram-size", "64MiB")
    try:
        free_after, _ = torch.cuda.mem_get_info(0)
        assert free_before - free_after >= 512 * MiB, (free_before, free_after)
        metrics = requests.get(m.rest + "/metrics", timeout=5).text
        assert f'memcache_total_capacity_bytes{{medium="hbm"}} {512 * MiB}' in metrics
        assert f'tierkv_hbm_capacity_bytes{{device="0"}} {512 * MiB}' in metrics
        name = torch.cuda.get_device_name(0)
        assert f'tierkv_hbm_info{{device="0",name="{name}",backend="cuda"}} 1' in metrics, metrics
        summary = requests.get(m.rest + "/metrics/summary", timeout=5).text
        assert f"hbm_used=0/{512 * MiB}" in summary.split(), summary
    finally:
        m.close()
    # The driver gives the memory back when the manager exits.
    assert torch.cuda.mem_get_info(0)[0] >= free_after + 512 * MiB - 64 * MiB


def test_more_than_the_gpu_has_or_a_gpu_it_lacks_is_refused_naming_it():
    total = torch.cuda.get_device_properties(0).total_memory
    err = start_fails("--hbm-devices", "0", "--hbm-size", str(total + (1 << 30)))
    assert "--hbm-size" in err and "GPU 0" in err, err
    count = torch.cuda.device_count()
    err = start_fails("--hbm-devices", str(count), "--hbm-size", "64MiB")
    assert "--hbm-devices" in err and f"no GPU {count}" in err, err


WRITER = r"""
import sys
sys.path.insert(0, sys.argv[2])
import torch, tierkv
torch.manual_seed(7)
src = torch.randint(0, 255, (3, 1 << 20), dtype=torch.uint8, device="cuda")
c = tierkv.Client(sys.argv[1], device_copies="cuda")
c.put_from_device("gpu/page", [src[0], src[1], src[2]])
torch.cuda.synchronize()
c.close()
"""


def test_a_process_puts_from_its_gpu_and_another_reads_into_its_own():
    import subprocess
    import tierkv
    m = Manager("--hbm-devices", "0", "--hbm-size", "256MiB", "--dram-size", "64MiB")
    try:
        subprocess.run([sys.executable, "-c", WRITER, m.uds,
                        os.path.dirname(tierkv.__path__[0])], check=True, timeout=120)
        body = requests.get(m.rest + "/query_key", params={"key": "gpu/page"}, timeout=5).json()
        assert [b["medium"] for b in body["blobs"]] == ["HBM"], body
        torch.manual_seed(7)
        want = torch.randint(0, 255, (3, 1 << 20), dtype=torch.uint8, device="cuda")
        got = torch.zeros_like(want)
        c = tierkv.Client(m.uds, device_copies="cuda")
        assert c.get_into_device("gpu/page", [got[0], got[1], got[2]]) == 3 << 20
        assert torch.equal(got, want)  # every byte
        # A host get copies it down; a client without HBM placement puts to DRAM.
        assert c.get("gpu/page") == want.cpu().numpy().tobytes()
        metrics = requests.get(m.rest + "/metrics", timeout=5).text
        assert "tierkv_hbm_device_puts_total 1" in metrics
        assert "tierkv_hbm_device_reads_total 1" in metrics
        c.close()
    finally:
        m.close()
