"""Cluster mode from Python: two managers and a real etcd; lookups find what
the other manager holds, say who owns it, and local_only keeps the local
answer."""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time

import pytest
import requests

import tierkv
from conftest import Manager, free_port

ETCD_BIN = "/usr/bin/etcd"


@contextlib.contextmanager
def etcd_process():
    """A single-node etcd on loopback; yields (endpoint, process)."""
    assert os.access(ETCD_BIN, os.X_OK), "etcd is missing: run scripts/deps.sh (etcd-server)"
    d = tempfile.mkdtemp(prefix="tierkv-py-etcd-")
    client, peer = free_port(), free_port()
    proc = subprocess.Popen(
        [ETCD_BIN, "--name", "e0", "--data-dir", os.path.join(d, "data"), "--unsafe-no-fsync",
         "--listen-client-urls", f"http://127.0.0.1:{client}",
         "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"e0=http://127.0.0.1:{peer}", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{client}/health", timeout=1).ok:
                break
        except requests.RequestException:
            pass
        assert time.time() < deadline, "etcd did not start"
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{client}", proc
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def etcd():
    with etcd_process() as (endpoint, _):
        yield endpoint


def start(etcd: str, node: str) -> Manager:
    return Manager("--etcd-endpoints", etcd, "--cluster-name", f"py{os.getpid()}",
                   "--node-id", node, "--addr", f"127.0.0.1:{free_port()}",
                   "--membership-ttl-secs", "5")


def await_fence(a: Manager, b: Manager) -> None:
    """a's inventory fence, awaited on b: b's view of a then holds a's puts."""
    fence = requests.post(a.rest + "/cache/sync", timeout=5).json()
    done = requests.post(b.rest + "/cache/metadata/await", timeout=15,
                         json={"inventory_fence": fence["inventory_fence"],
                               "scope_digest": fence["scope_digest"],
                               "timeout_ms": 10000}).json()
    assert done["success"], done


def test_lookups_find_the_other_managers_objects(etcd):
    a, b = start(etcd, "a"), start(etcd, "b")
    try:
        ca, cb = tierkv.Client(a.uds), tierkv.Client(b.uds)
        ca.put("held-by-a", b"value")
        cb.put("held-by-b", b"x")
        # a's fence, awaited on b: b's view of a then holds the put.
        await_fence(a, b)
        assert cb.exists("held-by-a")
        info = cb.query("held-by-a")
        assert info["owner"] == "a"
        assert info["size"] == 5
        assert info["media"] == ["dram"]
        assert cb.query("held-by-b")["owner"] is None
        assert cb.exists("held-by-a", local_only=True) is False
        with pytest.raises(tierkv.NotFound):
            cb.query("held-by-a", local_only=True)
        rows = cb.batch_query(["held-by-b", "held-by-a", "nowhere"])
        assert rows[0]["owner"] is None and rows[1]["owner"] == "a" and rows[2] is None
        assert cb.batch_exists(["held-by-a", "nowhere"]) == [True, False]
        cov = requests.get(b.rest + "/cache/metadata", timeout=5).json()
        assert cov["coverage"] == "complete" and cov["owner_views"]["expected"] == 1
        ca.close()
        cb.close()
    finally:
        a.close()
        b.close()



def test_process_gate_reads_from_the_other_manager_then_outlives_etcd():
    """Real etcd and two manager processes: b restores a's objects over the
    data channel (copying and zero-copy gets, single and batched); with etcd
    stopped, what b fetched stays readable from its own store."""
    import numpy as np
    with etcd_process() as (endpoint, etcd_proc):
        a, b = start(endpoint, "a"), start(endpoint, "b")
        try:
            ca, cb = tierkv.Client(a.uds), tierkv.Client(b.uds)
            values = {f"page-{i}": os.urandom(1 + (i * 37_001) % (3 << 20)) for i in range(24)}
            for k, v in values.items():
                ca.put(k, v)
            await_fence(a, b)
            keys = sorted(values)
            assert cb.get(keys[0]) == values[keys[0]]
            target = np.zeros(len(values[keys[1]]), dtype=np.uint8)
            assert cb.get_into(keys[1], target) == len(values[keys[1]])
            assert target.tobytes() == values[keys[1]]
            assert cb.batch_get(keys[2:] + ["nowhere"]) == [values[k] for k in keys[2:]] + [None]
            assert all(cb.exists(k, local_only=True) for k in keys)
            metrics = requests.get(b.rest + "/metrics", timeout=5).text
            assert "tierkv_remote_fetched_objects_total 24" in metrics
            etcd_proc.kill()
            etcd_proc.wait()
            # etcd is gone: local reads go on, fetched objects included.
            for k in keys:
                assert cb.get(k) == values[k]
            cb.put("after-etcd", b"still")
            assert cb.get("after-etcd") == b"still"
            ca.close()
            cb.close()
        finally:
            a.close()
            b.close()
