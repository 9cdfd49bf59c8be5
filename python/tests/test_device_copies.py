"""Puts from and gets into GPU memory from Python (``device_copies``,
docs/hbm.md), on the "host" stand-in devices, where a device address is a host
address: objects with ``__cuda_array_interface__`` (as CUDA torch tensors,
CuPy and Numba arrays have), ``(address, length)`` pairs and lists of them,
over the Unix socket and TCP, every byte compared; the refusals; and with an
HBM tier, values moving GPU to GPU between two processes."""
import ctypes
import os
import subprocess
import sys

import pytest
import requests

import tierkv
from conftest import Manager


class FakeCudaArray:
    """GPU memory as the stand-in devices see it: host memory that announces
    itself through ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, data: bytes, shape=None, typestr="|u1", strides=None, readonly=False):
        self.buf = ctypes.create_string_buffer(data, len(data))
        self.__cuda_array_interface__ = {
            "shape": shape or (len(data),), "typestr": typestr,
            "data": (ctypes.addressof(self.buf), readonly), "strides": strides, "version": 3}

    def bytes(self) -> bytes:
        return self.buf.raw


@pytest.fixture(params=["unix", "tcp"])
def device_client(request, manager):
    address = manager.uds if request.param == "unix" else manager.tcp
    c = tierkv.Client(address, f"device-{request.param}", device_copies="host")
    yield c
    c.close()


def test_single_and_scatter_gather_round_trip(device_client):
    c = device_client
    value = os.urandom(1 << 20)
    c.put_from_device("one", FakeCudaArray(value))
    assert c.get("one") == value  # what a device put stored, a host get reads
    target = FakeCudaArray(bytes(1 << 20))
    assert c.get_into_device("one", target) == 1 << 20
    assert target.bytes() == value
    # A 2-D float32 array counts its bytes by shape and item size.
    matrix = FakeCudaArray(os.urandom(4 * 64 * 16), shape=(64, 16), typestr="<f4")
    c.put_from_device("matrix", matrix)
    assert c.query("matrix")["size"] == 4 * 64 * 16
    # Scatter/gather: a page spread over layers, and raw (address, length) pairs.
    layers = [FakeCudaArray(os.urandom(n)) for n in (4096, 100, 65536)]
    c.put_from_device("page", layers, group_id="g")
    out = [FakeCudaArray(bytes(n)) for n in (4096, 100, 65536)]
    raw = [(ctypes.addressof(o.buf), len(o.buf.raw)) for o in out]
    assert c.get_into_device("page", raw) == 4096 + 100 + 65536
    assert [o.bytes() for o in out] == [layer.bytes() for layer in layers]
    assert c.get_into_device("absent", FakeCudaArray(b"x")) is None
    with pytest.raises(tierkv.InvalidArgument):
        c.get_into_device("one", FakeCudaArray(bytes(10)))  # not the value's size
    with pytest.raises(tierkv.Duplicated):
        c.put_from_device("one", FakeCudaArray(value))
    c.put_from_device("one", FakeCudaArray(b"new"), upsert=True)
    assert c.get("one") == b"new"


def test_batches_give_one_status_per_key(device_client):
    c = device_client
    values = [os.urandom(1000 + i) for i in range(5)]
    keys = [f"b/{i}" for i in range(5)]
    assert all(c.batch_put_from_device(keys, [FakeCudaArray(v) for v in values]))
    targets = [FakeCudaArray(bytes(len(v))) for v in values] + [FakeCudaArray(b"?")]
    st = c.batch_get_into_device(keys + ["b/missing"], targets)
    assert [s.name for s in st] == ["OK"] * 5 + ["NOT_FOUND"]
    assert [s.size for s in st[:5]] == [len(v) for v in values]
    assert [t.bytes() for t in targets[:5]] == values


def test_refusals(manager):
    plain = tierkv.Client(manager.uds)
    with pytest.raises(tierkv.NotSupported):
        plain.put_from_device("k", FakeCudaArray(b"abc"))
    plain.close()
    with pytest.raises(tierkv.InvalidArgument):
        tierkv.Client(manager.uds, device_copies="opencl")
    with pytest.raises(tierkv.TierkvError, match="/nonexistent/libcuda.so.1"):
        tierkv.Client(manager.uds, device_copies="cuda", cuda_library="/nonexistent/libcuda.so.1")
    c = tierkv.Client(manager.uds, device_copies="host")
    with pytest.raises(ValueError, match="C-contiguous"):
        c.put_from_device("k", FakeCudaArray(bytes(64), shape=(4, 4), typestr="<f4",
                                             strides=(4, 16)))
    with pytest.raises(ValueError, match="read-only"):
        c.get_into_device("k", FakeCudaArray(bytes(4), readonly=True))
    with pytest.raises(TypeError, match="not GPU memory"):
        c.put_from_device("k", b"host bytes")
    import torch  # a CPU tensor is host memory, not GPU memory
    with pytest.raises(ValueError, match="host memory"):
        c.put_from_device("k", torch.zeros(4))
    c.close()


WRITER = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[2])
import tierkv
data = bytes(range(256)) * 4096
buf = ctypes.create_string_buffer(data, len(data))
c = tierkv.Client(sys.argv[1], device_copies="host")
c.put_from_device("from-another-process", (ctypes.addressof(buf), len(data)))
c.close()
"""


def test_with_an_hbm_tier_values_go_gpu_to_gpu_between_processes():
    m = Manager("--hbm-backend", "host", "--hbm-devices", "0", "--hbm-size", "16MiB")
    try:
        # Another process puts from its "GPU"; this one reads into its own.
        subprocess.run([sys.executable, "-c", WRITER, m.uds, os.path.dirname(tierkv.__path__[0])],
                       check=True, timeout=60)
        body = requests.get(m.rest + "/query_key", params={"key": "from-another-process"},
                            timeout=5).json()
        assert [b["medium"] for b in body["blobs"]] == ["HBM"], body
        c = tierkv.Client(m.uds, device_copies="host")
        target = FakeCudaArray(bytes(1 << 20))
        assert c.get_into_device("from-another-process", target) == 1 << 20
        assert target.bytes() == bytes(range(256)) * 4096
        metrics = requests.get(m.rest + "/metrics", timeout=5).text
        assert "tierkv_hbm_device_puts_total 1" in metrics
        assert "tierkv_hbm_device_reads_total 1" in metrics
        c.close()
    finally:
        m.close()


def test_device_puts_go_to_dram_when_told_so():
    m = Manager("--hbm-backend", "host", "--hbm-devices", "0", "--hbm-size", "16MiB")
    try:
        c = tierkv.Client(m.uds, device_copies="host", device_puts_in_hbm=False)
        c.put_from_device("k", FakeCudaArray(b"to dram"))
        body = requests.get(m.rest + "/query_key", params={"key": "k"}, timeout=5).json()
        assert [b["medium"] for b in body["blobs"]] == ["DRAM"], body
        target = FakeCudaArray(bytes(7))
        assert c.get_into_device("k", target) == 7 and target.bytes() == b"to dram"
        c.close()
    finally:
        m.close()
