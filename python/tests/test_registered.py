"""Registered memory (Client.register_buffer): gets into it are written by the
manager, through every Python get that takes a target (buffers, slices,
numpy and torch views, address pairs, scatter/gather parts), every byte
compared; after unregister_buffer the same memory takes the plain path; the
memory outlives the client."""

from __future__ import annotations

import os

import numpy
import pytest
import requests
import torch

import tierkv


def local_gets(manager) -> int:
    series = 'tierkv_registered_gets_total{where="local"} '
    for line in requests.get(manager.rest + "/metrics", timeout=5).text.splitlines():
        if line.startswith(series):
            return int(line.split()[1])
    raise AssertionError("no " + series)


def test_gets_into_registered_memory_land_there_from_every_kind_of_target(manager):
    c = tierkv.Client(manager.uds, "registered")
    values = {f"k{i}": os.urandom(size) for i, size in enumerate([1, 4096, 70000, 1 << 20])}
    for key, value in values.items():
        c.put(key, value)
    buf = c.register_buffer(4 << 20)
    assert isinstance(buf, tierkv.RegisteredBuffer)
    assert buf.size == len(buf) == 4 << 20 and buf.id > 0 and buf.address != 0
    view = memoryview(buf)
    assert not view.readonly and view.nbytes == 4 << 20
    before = local_gets(manager)

    # get_into a memoryview slice, at an odd offset.
    assert c.get_into("k2", view[7:7 + 70000]) == 70000
    assert bytes(view[7:7 + 70000]) == values["k2"]
    # A numpy array and a torch tensor over the same memory.
    array = numpy.frombuffer(buf, dtype=numpy.uint8)
    assert c.get_into("k1", array[4096:8192]) == 4096
    assert array[4096:8192].tobytes() == values["k1"]
    tensor = torch.frombuffer(buf, dtype=torch.uint8)
    assert c.get_into("k3", tensor[1 << 20:2 << 20]) == 1 << 20
    assert bytes(tensor[1 << 20:2 << 20].numpy()) == values["k3"]
    # An address pair.
    assert c.get_into("k0", buf.address + 100, 1) == 1
    assert view[100] == values["k0"][0]
    assert local_gets(manager) == before + 4

    # A batch, and scatter/gather over two pieces of the buffer.
    keys = list(values)
    targets = [view[(i + 2) << 20:((i + 2) << 20) + len(values[k])] for i, k in enumerate(keys[:2])]
    statuses = c.batch_get_into(keys[:2] + ["missing"], targets + [view[:10]], exact=True)
    assert [s.ok for s in statuses] == [True, True, False]
    assert statuses[2].name == "NOT_FOUND"
    assert [bytes(t) for t in targets] == [values[k] for k in keys[:2]]
    parts = [view[3 << 20:(3 << 20) + 30000], view[5000:5000 + 40000]]
    statuses = c.batch_get_parts(["k2"], [parts])
    assert statuses[0].ok and statuses[0].size == 70000
    assert bytes(parts[0]) + bytes(parts[1]) == values["k2"]
    assert local_gets(manager) == before + 7
    # Too small a target: nothing written, TooLarge.
    view[0:3] = b"xyz"
    with pytest.raises(tierkv.TooLarge):
        c.get_into("k3", view[0:3])
    assert bytes(view[0:3]) == b"xyz"

    # Unregistered, the same memory is filled by the plain path.
    c.unregister_buffer(buf)
    view[0:4096] = bytes(4096)
    assert c.get_into("k1", view[0:4096]) == 4096
    assert bytes(view[0:4096]) == values["k1"]
    assert local_gets(manager) == before + 7
    with pytest.raises(tierkv.NotFound):
        c.unregister_buffer(buf.id)
    # The memory outlives the client.
    c.close()
    assert bytes(view[0:4096]) == values["k1"]
    view.release()


def test_a_buffer_is_its_own_clients_only(manager):
    a = tierkv.Client(manager.uds, "registered-a")
    b = tierkv.Client(manager.uds, "registered-b")
    buf = a.register_buffer(4096)
    with pytest.raises(tierkv.NotFound):
        b.unregister_buffer(buf)  # not b's: nothing of b's is touched
    a.put("x", b"0123456789")
    assert a.get_into("x", memoryview(buf)[:10]) == 10
    assert bytes(memoryview(buf)[:10]) == b"0123456789"
    a.unregister_buffer(buf)
    a.close()
    b.close()


def test_registration_needs_a_unix_socket(manager):
    c = tierkv.Client(manager.tcp, "registered-tcp")
    with pytest.raises(tierkv.NotSupported):
        c.register_buffer(4096)
    c.close()
