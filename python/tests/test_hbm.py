"""The HBM tier's start-up and what the REST API shows of it, on a host
without a GPU: a manager asked for HBM it cannot have does not start and
names the cause; with the host-memory stand-in devices it starts and its
pools show in the segments, /metrics, the summary and the capacity usage
(docs/hbm.md); prefetch moves values up into HBM, where they outlive DRAM
eviction, host gets copy them down, eviction moves them down one tier at a
time, and routers see memory as one medium."""
import subprocess
import time

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


def media(m: Manager, key: str) -> list[str]:
    body = requests.get(m.rest + "/query_key", params={"key": key}, timeout=5).json()
    if "blobs" not in body:  # not found
        assert "not found" in body["error_message"], body
        return []
    return sorted(b["medium"] for b in body["blobs"])


def metric(m: Manager, name: str) -> int:
    for line in requests.get(m.rest + "/metrics", timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{name} not in /metrics")


def test_values_move_up_into_hbm_outlive_dram_eviction_and_are_announced_once():
    # Imported here: python/gpu_tests imports this module on hosts without zmq.
    from test_kv_events import Subscriber, join, start_manager
    m, endpoint = start_manager("--hbm-backend", "host", "--hbm-devices", "0",
                                "--hbm-size", "8MiB", "--dram-size", "16MiB")
    sub = Subscriber(endpoint)
    c = tierkv.Client(m.uds)
    try:
        join(c, sub)
        hot = bytes(range(256)) * (MiB // 256)
        c.put("hot", hot)
        body = requests.post(m.rest + "/memory/prefetch", json={"chunk_hashes": ["hot", "nope"]},
                             timeout=5).json()
        assert body["num_chunks"] == 1, body
        assert media(m, "hot") == ["DRAM", "HBM"]
        assert metric(m, "tierkv_hbm_promoted_total") == 1
        assert metric(m, "tierkv_hbm_objects") == 1
        assert metric(m, 'memcache_allocated_bytes{medium="hbm"}') >= MiB
        # DRAM fills up: its oldest replica goes, the value stays in HBM.
        for i in range(24):
            c.put(f"fill/{i}", b"f" * MiB)
        assert media(m, "hot") == ["HBM"]
        assert c.get("hot") == hot  # copied down for the host read
        assert media(m, "hot") == ["DRAM", "HBM"]
        assert metric(m, "tierkv_hbm_get_hits_total") == 1
        # One tier down from the top, twice: out of HBM (DRAM has it), then out of DRAM.
        for want in (["DRAM"], []):
            requests.post(m.rest + "/memory/evict", json={"chunk_hashes": ["hot"],
                                                          "locations": ["LocalCPUBackend"]},
                          timeout=5).raise_for_status()
            deadline = time.time() + 5
            while media(m, "hot") != want and time.time() < deadline:
                time.sleep(0.02)  # the eviction runs after the answer
            assert media(m, "hot") == want
        c.put("marker", b"m")
        events = []
        while not any(e.get("object_key") == "marker" for e in events):
            events.extend(sub.recv()[1])
        hot_events = [(e["event_type"], e["medium"]) for e in events
                      if e.get("object_key") == "hot"]
        # Memory is one medium: stored once, removed once (when DRAM, the last, let go).
        assert hot_events == [("stored", "cpu"), ("removed", "cpu")], hot_events
    finally:
        sub.close()
        c.close()
        m.close()
