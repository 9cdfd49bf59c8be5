"""The HBM tier's start-up and what the REST API shows of it, on a host
without a GPU: a manager asked for HBM it cannot have does not start and
names the cause; with the host-memory stand-in devices it starts and its
pools show in the segments, /metrics, the summary and the capacity usage
(docs/hbm.md)."""
import subprocess

import requests

import tierkv
from conftest import SERVER_BIN, Manager

MiB = 1 << 20


def start_fails(*args: str) -> str:
    out = subprocess.run([SERVER_BIN, "--listen", "127.0.0.1:0", "--dram-size", "64MiB", *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, (args, out.returncode, out.stderr)
    return out.stderr


def test_hbm_without_a_driver_stops_the_manager_naming_the_cause():
    err = start_fails("--hbm-devices", "0", "--hbm-size", "64MiB",
                      "--hbm-cuda-library", "/nonexistent/libcuda.so.1")
    assert "--hbm-devices needs a GPU and its driver" in err, err
    assert "/nonexistent/libcuda.so.1" in err, err


def test_invalid_hbm_options_are_refused_naming_the_option():
    for args, fragment in (
            (["--hbm-devices", "0"], "--hbm-size"),
            (["--hbm-size", "64MiB"], "--hbm-devices"),
            (["--hbm-devices", "0,x", "--hbm-size", "64MiB"], "--hbm-devices"),
            (["--hbm-devices", "1,1", "--hbm-size", "64MiB"], "twice"),
            (["--hbm-devices", "0", "--hbm-size", "lots"], "--hbm-size"),
            (["--hbm-devices", "0", "--hbm-size", "64MiB", "--hbm-backend", "opencl"],
             "--hbm-backend")):
        assert fragment in start_fails(*args), args


def test_stand_in_devices_show_as_the_hbm_segment_and_medium():
    m = Manager("--hbm-backend", "host", "--hbm-devices", "0,1", "--hbm-size", "16MiB")
    try:
        segments = requests.get(m.rest + "/get_all_segments", timeout=5).text.split()
        assert segments[0] == "rank-0-hbm" and "rank-0-dram" in segments, segments
        metrics = requests.get(m.rest + "/metrics", timeout=5).text
        assert f'memcache_total_capacity_bytes{{medium="hbm"}} {32 * MiB}' in metrics
        assert 'memcache_allocated_bytes{medium="hbm"} 0' in metrics
        assert f'memcache_segment_capacity_bytes{{segment="rank-0-hbm"}} {32 * MiB}' in metrics
        for d in (0, 1):
            assert f'tierkv_hbm_capacity_bytes{{device="{d}"}} {16 * MiB}' in metrics
            assert (f'tierkv_hbm_info{{device="{d}",name="host memory device {d}",'
                    f'backend="host"}} 1') in metrics
        summary = requests.get(m.rest + "/metrics/summary", timeout=5).text
        assert f"hbm_used=0/{32 * MiB}" in summary.split(), summary
        usage = requests.get(m.rest + "/api/v1/capacity/usage", timeout=5).json()
        assert usage["npu"]["total_bytes"] == 32 * MiB and usage["npu"]["used_bytes"] == 0
        # Objects still live in DRAM.
        c = tierkv.Client(m.uds)
        c.put("k", b"v" * 1000)
        assert c.get("k") == b"v" * 1000
    finally:
        m.close()


def test_without_hbm_the_medium_is_empty(manager):
    summary = requests.get(manager.rest + "/metrics/summary", timeout=5).text
    assert "hbm_used=0/0" in summary.split(), summary
    segments = requests.get(manager.rest + "/get_all_segments", timeout=5).text.split()
    assert not any(s.endswith("-hbm") for s in segments), segments
