"""Every call of tierkv.Client against a real manager, over UDS and TCP."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tierkv
from conftest import Manager


def test_transport(client):
    assert client.shared_memory == client.address.startswith("unix:")
    assert "open" in repr(client)


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy"])
def test_put_and_get_every_buffer_kind(client, kind):
    raw = bytes(range(256)) * 4096  # 1 MiB
    value = {"bytes": raw, "bytearray": bytearray(raw), "memoryview": memoryview(raw),
             "numpy": np.frombuffer(raw, dtype=np.uint8).copy()}[kind]
    client.put("k", value)
    assert client.get("k") == raw
    for target in (bytearray(len(raw)), np.zeros(len(raw), dtype=np.uint8)):
        assert client.get_into("k", target) == len(raw)
        assert bytes(target) == raw
    mv = memoryview(bytearray(len(raw) + 10))
    assert client.get_into("k", mv) == len(raw)
    assert bytes(mv[: len(raw)]) == raw


def test_raw_addresses(client):
    src = np.arange(100000, dtype=np.uint8)
    client.put_from("raw", src.ctypes.data, src.nbytes)
    dst = np.zeros(100000, dtype=np.uint8)
    assert client.get_into("raw", dst.ctypes.data, dst.nbytes) == src.nbytes
    assert np.array_equal(src, dst)
    with pytest.raises(ValueError):
        client.put_from("raw2", src.ctypes.data)  # an address needs a length
    buf = ctypes.create_string_buffer(b"abc", 3)
    client.put_from("ct", buf)
    assert client.get("ct") == b"abc"


def test_numpy_float_tensors_round_trip(client):
    block = np.random.default_rng(1).standard_normal((16, 128), dtype=np.float32)
    client.put("tensor", block)
    out = np.empty_like(block)
    assert client.get_into("tensor", out) == block.nbytes
    assert np.array_equal(out, block)
    with pytest.raises((ValueError, BufferError)):  # numpy refuses a contiguous view
        client.put("strided", block[:, ::2])


def test_misses_and_errors(client):
    assert client.get("missing") is None
    assert client.get_into("missing", bytearray(10)) is None
    assert client.exists("missing") is False
    with pytest.raises(tierkv.NotFound):
        client.query("missing")
    with pytest.raises(KeyError):  # NotFound is a KeyError
        client.remove("missing")
    client.put("k", b"v")
    with pytest.raises(tierkv.Duplicated) as e:
        client.put("k", b"w")
    assert e.value.code == 2 and e.value.name == "DUPLICATED"
    assert "already exists" in str(e.value)
    with pytest.raises(tierkv.InvalidArgument):
        client.put("", b"v")
    with pytest.raises(ValueError):  # InvalidArgument and TooLarge are ValueErrors
        client.put("x" * 5000, b"v")
    with pytest.raises(tierkv.TooLarge):
        client.get_into("k", bytearray(0))
    with pytest.raises(TypeError):
        client.put(123, b"v")
    with pytest.raises(BufferError):
        client.get_into("k", b"immutable")


def test_upsert_query_remove(client):
    client.put("k", b"one", group_id="g1")
    client.upsert("k", b"three")
    assert client.get("k") == b"three"
    info = client.query("k")
    assert info["size"] == 5
    assert info["media"] == ["dram"]
    assert info["active_leases"] == 0
    client.remove("k")
    assert not client.exists("k")


def test_binary_and_unicode_keys(client):
    client.put(b"\x00\xffbin", b"1")
    client.put("ключ/🔑", b"2")
    assert client.get(b"\x00\xffbin") == b"1"
    assert client.get("ключ/🔑".encode()) == b"2"
    assert sorted(client.list_keys(), key=str) == sorted([b"\x00\xffbin", "ключ/🔑"], key=str)


def test_batches_with_mixed_outcomes(client):
    client.put("exists", b"old")
    st = client.batch_put([("a", b"A"), ("exists", b"new"), ("", b"x"), ("b", b"B", "grp")])
    assert [s.ok for s in st] == [True, False, False, True]
    assert st[1].name == "DUPLICATED" and not st[1]
    assert st[2].code == tierkv.InvalidArgument.code
    assert client.batch_get(["a", "nope", "b", "exists"]) == [b"A", None, b"B", b"old"]
    assert client.batch_exists(["a", "nope"]) == [True, False]
    q = client.batch_query(["b", "nope"])
    assert q[0]["group_id"] == "grp" and q[1] is None
    targets = [bytearray(1), np.zeros(4, dtype=np.uint8), bytearray(1)]
    st = client.batch_get_into(["a", "exists", "nope"], targets)
    assert st[0].ok and st[0].size == 1 and targets[0] == b"A"
    assert st[1].ok and st[1].size == 3 and bytes(targets[1][:3]) == b"old"
    assert st[2].name == "NOT_FOUND"
    src = np.frombuffer(b"RAWDATA", dtype=np.uint8)
    st = client.batch_put_from([("r1", src.ctypes.data, src.nbytes), ("r2", b"buf")])
    assert all(st)
    assert client.batch_get(["r1", "r2"]) == [b"RAWDATA", b"buf"]
    st = client.batch_remove(["a", "nope"])
    assert st[0].ok and st[1].name == "NOT_FOUND"
    with pytest.raises(tierkv.InvalidArgument):
        client.batch_get(["ok-key", ""])  # a real error raises


def test_list_keys_and_remove_all(client):
    for k in ("p/1", "p/2", "q/1"):
        client.put(k, b"v")
    assert client.list_keys() == ["p/1", "p/2", "q/1"]
    assert client.list_keys("p/") == ["p/1", "p/2"]
    assert client.list_keys(limit=1) == ["p/1"]
    r = client.remove_all()
    assert r == {"removed": 3, "skipped": 0, "cleared": True}
    assert client.list_keys() == []


def test_tenants(client, manager):
    other = tierkv.Client(manager.uds, tenant=client.tenant + "-other")
    client.put("k", b"mine")
    assert other.get("k") is None
    assert other.get("k", tenant=client.tenant) == b"mine"
    other.put("k", b"theirs")
    assert client.get("k") == b"mine"
    other.remove_all()
    other.close()


def test_context_manager_and_close(manager):
    with tierkv.Client(manager.uds) as c:
        assert not c.closed
    assert c.closed
    with pytest.raises(tierkv.Unavailable):
        c.get("k")


def test_connect_failure_is_unavailable():
    with pytest.raises(tierkv.Unavailable):
        tierkv.Client("unix:/nonexistent/tierkv.sock")
    with pytest.raises(tierkv.InvalidArgument):
        tierkv.Client("not an address")


def test_every_error_class_maps_its_code():
    for code, cls in tierkv.BY_CODE.items():
        e = tierkv.errors.from_code(code, cls.name, "why")
        assert type(e) is cls and e.code == code and isinstance(e, tierkv.TierkvError)
        assert str(e) == f"{cls.name}: why"


def test_namespaces_derive_alike_in_both_clients_and_are_recorded(manager):
    import tierkv._tierkv as ext
    for inputs in ({}, {"model": "llama-3-8b", "dtype": "bf16"},
                   {"模型": "qwen", "quote": 'a"b\\c', "ctl": "\x01\n\t", "emoji": "\U0001F600"}):
        assert tierkv.derive_namespace(**inputs) == ext.derive_namespace(inputs)
    ns = tierkv.derive_namespace(model="m", tp="8")
    with tierkv.Client(manager.uds, "ns-test", namespace=ns) as c:
        c.put("k", b"v")
        assert c.query("k")["namespace"] == ns
    with tierkv.Client(manager.tcp, "ns-test") as c:
        assert c.query("k")["namespace"] == ns
        c.upsert("k", b"w")
        assert c.query("k")["namespace"] == ""
        c.remove_all(force=True)
    with pytest.raises(tierkv.InvalidArgument):
        tierkv.Client(manager.uds, namespace="tierkv:v1:nothex")
    with pytest.raises(TypeError):
        tierkv.derive_namespace(model=3)


def test_pipelined_commits_store_everything_and_flush_reports(manager):
    writer = tierkv.Client(manager.uds, "pipelined", pipeline_commits=True)
    reader = tierkv.Client(manager.uds, "pipelined")
    try:
        values = {f"k{i}": bytes([i % 251]) * (1 + 997 * i) for i in range(60)}
        for key, value in values.items():
            writer.put(key, value)
        assert writer.get("k7") == values["k7"]  # its own later calls see its puts
        with pytest.raises(tierkv.Duplicated):
            writer.put("k1", b"again")  # the alloc is still answered by the put
        writer.flush()
        for key, value in values.items():
            assert reader.get(key) == value
    finally:
        writer.remove_all(force=True)
        writer.close()
        reader.close()


def test_a_failed_pipelined_commit_is_raised_by_the_next_call():
    m = Manager("--inject-commit-failures", "3")  # every third commit is refused
    try:
        c = tierkv.Client(m.uds, pipeline_commits=True)
        c.put("small", b"v")
        c.put("x", b"1")
        c.put("third", b"3")
        with pytest.raises(tierkv.LeaseExpired, match="commit of 'third'"):
            c.remove("small")
        assert c.exists("small")  # the remove did not run
        c.put("y", b"4")
        c.put("z", b"5")
        c.put("sixth", b"6")
        with pytest.raises(tierkv.LeaseExpired, match="commit of 'sixth'"):
            c.flush()
        c.flush()  # reported once
        assert not c.exists("sixth")
        c.close()
    finally:
        m.close()


def test_gets_with_and_without_read_leases_return_the_same_values(manager):
    writer = tierkv.Client(manager.uds, "leasefree")
    readers = [tierkv.Client(manager.uds, "leasefree", lease_free_reads=flag)
               for flag in (True, False)]
    try:
        values = {f"v{i}": bytes([i % 251]) * (1 + 4093 * i) for i in range(20)}
        for key, value in values.items():
            writer.put(key, value)
        for reader in readers:
            for key, value in values.items():
                assert reader.get(key) == value
            got = reader.batch_get(list(values))
            assert [bytes(v) for v in got] == list(values.values())
            assert reader.query("v3")["active_leases"] == 0
    finally:
        writer.remove_all(force=True)
        writer.close()
        for reader in readers:
            reader.close()


def _minor_faults() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_get_values_are_their_own_copies(client):
    v1, v2 = bytes(range(256)) * 4096, b"\x07" * (1 << 20)
    client.put("own", v1)
    got = client.get("own")
    [batch] = client.batch_get(["own"])
    client.upsert("own", v2)
    client.remove("own")
    client.put("own", b"other")
    assert got == v1 and batch == v1  # a bytes object never changes
    assert isinstance(got, bytes) and isinstance(batch, bytes)
    assert client.batch_get(["own", "nope"]) == [b"other", None]
    assert client.get("nope") is None


def test_get_touches_each_page_of_a_value_at_most_once(manager):
    # 4 MiB: 1 024 pages of 4 KiB. Before, get() faulted twice per page (an
    # intermediate string, then the bytes object).
    with tierkv.Client(manager.uds, "faults") as c:
        c.put("v", np.random.default_rng(1).integers(0, 255, 4 << 20, dtype=np.uint8))
        c.get("v")
        rounds, pages = 20, (4 << 20) // 4096
        before = _minor_faults()
        for _ in range(rounds):
            assert len(c.get("v")) == 4 << 20
        per_get = (_minor_faults() - before) / rounds
        assert per_get <= pages + 16, per_get
        before = _minor_faults()
        for _ in range(rounds // 4):
            assert [len(v) for v in c.batch_get(["v"] * 4)] == [4 << 20] * 4
        assert (_minor_faults() - before) / rounds <= pages + 16
        c.remove_all(force=True)


def test_batch_get_reuses_freed_memory_instead_of_faulting_it_in_again(manager):
    # 16 x 1 MiB per call: 4 096 pages. glibc used to hand the freed values
    # back to the system each time, so every call faulted them all in again.
    assert tierkv._tierkv.keeps_freed_memory
    with tierkv.Client(manager.uds, "reuse") as c:
        keys = [f"k{i}" for i in range(16)]
        c.batch_put([(k, bytes([i]) * (1 << 20)) for i, k in enumerate(keys)])
        for _ in range(3):
            c.batch_get(keys)
        rounds = 20
        before = _minor_faults()
        for _ in range(rounds):
            values = c.batch_get(keys)
            assert [v[0] for v in values] == list(range(16))
            del values
        per_call = (_minor_faults() - before) / rounds
        assert per_call < 200, per_call  # of 4 096 pages
        c.remove_all(force=True)


def test_memory_does_not_grow_over_10000_gets_of_4_mib(manager):
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    with tierkv.Client(manager.uds, "growth") as c:
        value = np.full(4 << 20, 9, dtype=np.uint8)
        c.put("v", value)
        for _ in range(50):
            c.get("v")
        start = rss()
        for _ in range(10_000):
            got = c.get("v")
        assert got == value.tobytes()
        assert rss() - start < 32 << 20, (start, rss())
        c.remove_all(force=True)


def test_scatter_gather_objects(client):
    a, b = np.arange(4096, dtype=np.uint8), np.full(100, 7, dtype=np.uint8)
    st = client.batch_put_parts(["sg1", "sg2"], [[a[:1000], a[1000:]], [b, bytes(3)]])
    assert all(st)
    assert client.get("sg1") == a.tobytes() and client.get("sg2") == b.tobytes() + bytes(3)
    out = np.zeros(4096, dtype=np.uint8)
    half = np.zeros(2048, dtype=np.uint8)
    got = client.batch_get_regions(["sg1"], [out.ctypes.data, half.ctypes.data],
                                   [2048, 2048])
    assert got[0].ok and got[0].size == 4096
    assert out[:2048].tobytes() == a[:2048].tobytes() and half.tobytes() == a[2048:].tobytes()
    wrong = np.zeros(4095, dtype=np.uint8)
    [bad] = client.batch_get_parts(["sg1"], [[wrong]])
    assert bad.name == "INVALID_ARGUMENT" and not wrong.any()
    with pytest.raises(ValueError):
        client.batch_put_regions(["x", "y"], [1, 2, 3], [1, 1, 1])  # 3 regions for 2 keys
    client.put_parts("one", [b"ab", (a.ctypes.data, 2)])
    assert client.get("one") == b"ab" + a[:2].tobytes()
    with pytest.raises(tierkv.Duplicated):
        client.put_parts("one", [b"zz"])
    two = bytearray(4)
    assert client.get_parts("one", [two]) == 4 and bytes(two) == b"ab" + a[:2].tobytes()
    assert client.get_parts("none", [two]) is None
    with pytest.raises(tierkv.InvalidArgument):
        client.get_parts("one", [bytearray(3)])


def test_views_are_zero_copy_and_pinned_until_released():
    # A small pool, so that churn reuses every range not pinned.
    m = Manager("--dram-size", "8MiB", "--max-pinned-bytes", "2MiB")
    try:
        with tierkv.Client(m.uds, "views") as c:
            c.put("v", b"\x01" * (1 << 20))
            with c.get_view("v") as view:
                assert isinstance(view, memoryview) and view.readonly
                assert view.nbytes == 1 << 20
                array = np.frombuffer(view, dtype=np.uint8)
                c.upsert("v", b"\x02" * (1 << 20))
                c.remove("v")
                for i in range(24):  # cycles the 8 MiB pool three times
                    c.upsert(f"churn{i % 12}", bytes([i]) * (1 << 20))
                assert (array == 1).all()  # the pinned bytes never changed
                del array
            with pytest.raises(ValueError, match="released"):
                view[0]

            c.put("w", b"\x05" * 4096)
            v = c.get_view("w")
            assert len(v) == 4096 and v.valid and not v.released
            assert bytes(memoryview(v)[:3]) == b"\x05\x05\x05"
            v.release()
            assert v.released and not v.valid
            with pytest.raises(ValueError, match="released"):
                memoryview(v)
            v.release()  # idempotent
            with c.get_view("w") as ro:
                with pytest.raises(TypeError):
                    ro[0] = 1  # read-only
                with pytest.raises((BufferError, TypeError)):
                    ctypes.c_char.from_buffer(ro)  # asks for a writable buffer
            assert c.get_view("never-stored") is None
    finally:
        m.close()


def test_a_buffer_taken_from_a_view_keeps_the_pin_after_release():
    m = Manager("--dram-size", "8MiB", "--max-pinned-bytes", "2MiB")
    try:
        with tierkv.Client(m.uds, "views") as c:
            c.put("k", b"\x03" * (1 << 20))
            v = c.get_view("k")
            array = np.frombuffer(v, dtype=np.uint8)  # holds a buffer of v
            v.release()
            c.remove("k")
            for i in range(24):
                c.upsert(f"churn{i % 12}", bytes([i]) * (1 << 20))
            assert (array == 3).all()  # still the value's bytes: the pin was kept
            # The budget (2 MiB) is still charged for it; dropping the array
            # ends the pin, and two more 1 MiB views fit again.
            c.put("a", b"a" * (1 << 20))
            c.put("b", b"b" * (1 << 20))
            held = c.get_view("a")
            with pytest.raises(tierkv.NoSpace):
                c.get_view("b")
            del array
            again = c.get_view("b")
            assert bytes(memoryview(again)[:1]) == b"b"
            held.release()
            again.release()
    finally:
        m.close()


def test_views_end_with_the_connection_and_need_the_unix_socket(manager):
    c = tierkv.Client(manager.uds, "views-end")
    c.put("k", b"x" * 100)
    v = c.get_view("k")
    c.close()
    assert not v.valid
    with pytest.raises(ValueError, match="connection"):
        memoryview(v)
    v.release()
    with tierkv.Client(manager.tcp, "views-end") as t:
        with pytest.raises(tierkv.NotSupported):
            t.get_view("k")
        assert t.get("k") == b"x" * 100
        t.remove_all(force=True)


def test_gets_and_puts_take_cpu_torch_tensors(client):
    import torch
    src = torch.arange(4096, dtype=torch.float16).reshape(64, 64)
    client.put("t", src)
    out = torch.empty_like(src)
    assert client.get_into("t", out) == src.numel() * 2
    assert torch.equal(out, src)
    client.put_from("t2", src[1:3])  # a contiguous slice: its own bytes only
    rows = torch.zeros(2, 64, dtype=torch.float16)
    [st] = client.batch_get_into(["t2"], [rows], exact=True)
    assert st.ok and torch.equal(rows, src[1:3])
    with pytest.raises(ValueError, match="contiguous"):
        client.get_into("t", out.t())
    small = torch.empty(10, dtype=torch.float16)
    with pytest.raises(tierkv.TooLarge):
        client.get_into("t", small)
