"""The KV event stream against a real manager, with a real ZMQ subscriber."""

from __future__ import annotations

import signal
import struct
import subprocess
import time

import msgpack
import pytest
import zmq

import tierkv
from conftest import BUILD, Manager, free_port

ENVELOPE = ["event_id", "timestamp", "event_type", "model_name", "block_size",
            "additional_salt", "lora_name", "tenant_id", "backend_id", "medium", "dp_rank"]


class Subscriber:
    def __init__(self, endpoint: str):
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.setsockopt(zmq.RCVTIMEO, 5000)
        self.sock.setsockopt(zmq.RECONNECT_IVL, 20)
        self.sock.connect(endpoint)
        self.messages: list[tuple[int, list]] = []

    def recv(self) -> tuple[int, list]:
        frames = self.sock.recv_multipart()
        assert len(frames) == 3 and frames[0] == b"" and len(frames[1]) == 8
        seq = struct.unpack(">Q", frames[1])[0]
        ts, events, dp_rank = msgpack.unpackb(frames[2], raw=False)
        assert isinstance(ts, int) and ts > 1_600_000_000_000
        assert len(events) <= 64
        self.messages.append((seq, events))
        return seq, events

    def events(self, n: int) -> list[dict]:
        out: list[dict] = []
        while len(out) < n:
            out.extend(self.recv()[1])
        return out

    def close(self):
        self.sock.close()


def start_manager(*extra: str) -> tuple[Manager, str]:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    m = Manager("--kv-events-endpoint", endpoint, "--node-id", "node-a",
                "--kv-events-model-name", "demo", *extra)
    return m, endpoint


def join(client: tierkv.Client, sub: Subscriber) -> None:
    """PUB/SUB joins are asynchronous: write probes until one is seen, then drain."""
    sub.sock.setsockopt(zmq.RCVTIMEO, 50)
    for i in range(200):
        client.upsert("__probe__", b"x", tenant="__probe__")
        try:
            sub.recv()
            break
        except zmq.Again:
            continue
    else:
        raise AssertionError("subscriber never joined")
    client.remove_all("__probe__", force=True)
    while True:
        try:
            sub.recv()
        except zmq.Again:
            break
    sub.sock.setsockopt(zmq.RCVTIMEO, 5000)
    sub.messages.clear()


@pytest.fixture
def stream():
    m, endpoint = start_manager()
    sub = Subscriber(endpoint)
    c = tierkv.Client(m.uds)
    join(c, sub)
    yield m, c, sub
    sub.close()
    c.close()
    m.close()


def test_stored_event_has_the_full_envelope(stream):
    _m, c, sub = stream
    c.put("prefix/abc", b"x" * 100, group_id="layer-3")
    (e,) = sub.events(1)
    assert list(e)[:11] == ENVELOPE
    assert e["event_type"] == "stored" and e["type"] == "BlockStored"
    assert e["tenant_id"] == "default" and e["backend_id"] == "node-a"
    assert e["model_name"] == "demo" and e["block_size"] is None
    assert e["additional_salt"] is None and e["lora_name"] is None
    assert e["medium"] == "cpu" and e["dp_rank"] == 0
    assert e["object_key"] == "prefix/abc" and e["group_id"] == "layer-3"
    assert e["seq_hashes"] == [] and e["block_hashes"] == []
    assert e["base_block_idx"] is None
    assert e["parent_hash"] is None and e["token_ids"] is None and e["parent_block_hash"] is None
    assert abs(e["timestamp"] - time.time() * 1000) < 60_000


def test_upsert_remove_and_event_ids(stream):
    _m, c, sub = stream
    c.put("k", b"1")
    c.upsert("k", b"22")
    c.remove("k")
    ev = sub.events(4)
    assert [e["event_type"] for e in ev] == ["stored", "removed", "stored", "removed"]
    assert all(e["object_key"] == "k" for e in ev)
    ids = [e["event_id"] for e in ev]
    assert ids == sorted(ids) and len(set(ids)) == 4
    removed = ev[1]
    assert "parent_hash" not in removed and "token_ids" not in removed
    assert removed["type"] == "BlockRemoved"


def test_remove_all_publishes_removed_then_cleared_only_when_emptied(stream):
    _m, c, sub = stream
    c.remove_all("empty-tenant")  # nothing there: no event at all
    c.batch_put([("a", b"1"), ("b", b"2")], tenant="t1")
    assert len(sub.events(2)) == 2
    r = c.remove_all("t1")
    assert r["cleared"]
    ev = sub.events(3)
    assert sorted(e["event_type"] for e in ev[:2]) == ["removed", "removed"]
    cleared = ev[2]
    assert cleared["event_type"] == "cleared" and cleared["type"] == "AllBlocksCleared"
    assert cleared["tenant_id"] == "t1" and cleared["medium"] is None
    for absent in ("object_key", "group_id", "seq_hashes", "block_hashes", "base_block_idx"):
        assert absent not in cleared
    # Nothing else was published (the empty tenant produced nothing).
    sub.sock.setsockopt(zmq.RCVTIMEO, 300)
    with pytest.raises(zmq.Again):
        sub.recv()


def test_sequence_is_gap_free_and_messages_hold_at_most_64(stream):
    _m, c, sub = stream
    n = 1000
    for i in range(0, n, 100):
        c.batch_put([(f"k{j}", b"v") for j in range(i, i + 100)])
    got = sub.events(n)
    assert len(got) == n
    seqs = [s for s, _ in sub.messages]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert all(len(evs) <= 64 for _, evs in sub.messages)


def replay_from(replay_ep: str, first: int, want: int) -> list[tuple[int, list]]:
    """REPLAY from `first` until the messages that came back hold `want` events
    (the publisher thread may still be sending what was just announced, and it
    may have put several events in one message)."""
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.RCVTIMEO, 5000)
    dealer.connect(replay_ep)
    try:
        for _ in range(500):
            dealer.send_multipart([b"REPLAY", struct.pack(">Q", first)])
            frames, got = dealer.recv_multipart(), []
            while frames[0] == b"MSG":
                got.append((struct.unpack(">Q", frames[1])[0],
                            msgpack.unpackb(frames[2], raw=False)[1]))
                frames = dealer.recv_multipart()
            assert frames[0] == b"END"
            if sum(len(evs) for _, evs in got) >= want:
                return got
        raise AssertionError(f"fewer than {want} events to replay")
    finally:
        dealer.close()


def test_first_message_has_sequence_one_and_restart_resets_it():
    replay_ep = f"tcp://127.0.0.1:{free_port()}"
    m, endpoint = start_manager("--kv-events-replay-endpoint", replay_ep)
    sub = None
    try:
        # What the publisher sent, in order, from its first message on.
        c = tierkv.Client(m.uds)
        c.put("first", b"v")
        c.put("second", b"v")
        got = replay_from(replay_ep, 1, 2)
        # The first message is number 1 and the numbers run on without a gap,
        # whether the two stores went out in one message or in two.
        assert [seq for seq, _ in got] == list(range(1, len(got) + 1))
        keys = [ev["object_key"] for _, evs in got for ev in evs]
        assert keys[:2] == ["first", "second"]
        assert m.stop() == 0
        m.start()
        sub = Subscriber(endpoint)
        # ZMQ drops what is
        # published before its subscription arrives, so write until something
        # arrives. The new process counts from 1 again: the sequence moves backwards.
        sub.sock.setsockopt(zmq.RCVTIMEO, 100)
        for attempt in range(1, 100):
            c.upsert("after-restart", b"v")
            try:
                seq, ev = sub.recv()
                break
            except zmq.Again:
                continue
        assert seq <= attempt < 100
        assert ev[0]["object_key"] == "after-restart"
        c.close()
    finally:
        if sub is not None:
            sub.close()
        m.close()


def test_without_legacy_compat_and_without_object_keys():
    m, endpoint = start_manager("--kv-events-emit-legacy-compat", "false",
                                "--kv_events_emit_object_key", "false")
    sub = Subscriber(endpoint)
    c = tierkv.Client(m.uds)
    try:
        # Put and clear until the subscription has arrived: whatever message comes
        # first holds only cleared events (stored and removed ones never flow).
        sub.sock.setsockopt(zmq.RCVTIMEO, 100)
        for _ in range(100):
            c.put("a", b"1")
            c.remove_all()
            try:
                seq, ev = sub.recv()
                break
            except zmq.Again:
                continue
        else:
            raise AssertionError("no event arrived")
        assert ev and all(e["event_type"] == "cleared" for e in ev)
        assert "type" not in ev[0]
    finally:
        c.close()
        sub.close()
        m.close()


def test_overflow_of_a_small_queue_leaves_a_visible_gap():
    m, endpoint = start_manager("--kv-events-queue-capacity", "16")
    sub = Subscriber(endpoint)
    c = tierkv.Client(m.uds)
    try:
        join(c, sub)
        import requests
        before = requests.get(f"{m.rest}/kv_events/status", timeout=10).json()
        for i in range(0, 20000, 1000):
            c.batch_put([(f"k{j}", b"v") for j in range(i, i + 1000)])
        received = 0
        sub.sock.setsockopt(zmq.RCVTIMEO, 1000)
        while True:
            try:
                received += len(sub.recv()[1])
            except zmq.Again:
                break
        seqs = [s for s, _ in sub.messages]
        gaps = sum(1 for a, b in zip(seqs, seqs[1:]) if b != a + 1)
        assert received < 20000, "the queue should have overflowed"
        assert gaps >= 1, "drops must leave a sequence gap"
        assert seqs == sorted(seqs)
        # The counters account for every event: published + dropped = announced.
        status = requests.get(f"{m.rest}/kv_events/status", timeout=10).json()
        assert status["enabled"] and status["publisher_active"]
        assert status["queue_capacity"] == 16
        assert status["dropped_events"] > 0
        assert status["dropped_events"] == status["dropped_stored_events"]
        assert status["dropped_high_priority_events"] == 0
        published = status["published_events"] - before["published_events"]
        assert published == received
        assert published + status["dropped_events"] - before["dropped_events"] == 20000
        assert status["last_sequence"] == seqs[-1]
        metrics = requests.get(f"{m.rest}/metrics", timeout=10).text
        assert f"memcache_kv_events_dropped_total {status['dropped_events']}" in metrics
    finally:
        c.close()
        sub.close()
        m.close()


def test_replay_and_snapshot():
    replay_ep = f"tcp://127.0.0.1:{free_port()}"
    m, endpoint = start_manager("--kv-events-replay-endpoint", replay_ep,
                                "--kv-events-snapshot-on-join", "true")
    c = tierkv.Client(m.uds)
    ctx = zmq.Context.instance()
    try:
        for i in range(5):
            c.put(f"k{i}", b"v")
        c.remove("k0")
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.RCVTIMEO, 5000)
        dealer.connect(replay_ep)
        deadline = time.time() + 5
        while True:  # the publisher thread may still be sending
            dealer.send_multipart([b"REPLAY", struct.pack(">Q", 1)])
            frames, events = dealer.recv_multipart(), []
            while frames[0] == b"MSG":
                events += msgpack.unpackb(frames[2], raw=False)[1]
                frames = dealer.recv_multipart()
            if len(events) >= 6 or time.time() > deadline:
                break
        assert frames[0] == b"END"
        first_kept, last_seq, _watermark = struct.unpack(">QQQ", b"".join(frames[1:4]))
        assert first_kept == 1 and last_seq >= 1
        assert [e["event_type"] for e in events] == ["stored"] * 5 + ["removed"]

        dealer.send_multipart([b"SNAPSHOT"])
        keys = []
        frames = dealer.recv_multipart()
        while frames[0] == b"MSG":
            keys += [e["object_key"] for e in msgpack.unpackb(frames[2], raw=False)[1]]
            frames = dealer.recv_multipart()
        assert frames[0] == b"END"
        assert sorted(keys) == ["k1", "k2", "k3", "k4"]
        watermark = struct.unpack(">Q", frames[3])[0]
        assert watermark == 7  # six events announced so far

        dealer.send_multipart([b"BOGUS"])
        assert dealer.recv_multipart()[0] == b"ERR"
        dealer.close()
    finally:
        c.close()
        m.close()


def test_cli_prints_events():
    import select
    m, endpoint = start_manager()
    proc = subprocess.Popen([str(BUILD / "tierkv"), "events", "--endpoint", endpoint, "--json",
                             "--seconds", "30", "--stats-every", "0"],
                            stdout=subprocess.PIPE, text=True)
    c = tierkv.Client(m.uds)
    try:
        # Probe until the CLI prints something: its subscription has arrived.
        for _ in range(200):
            c.upsert("__probe__", b"x", tenant="__probe__")
            if select.select([proc.stdout], [], [], 0.05)[0]:
                break
        else:
            raise AssertionError("the CLI never printed an event")
        c.put("a", b"1")
        c.remove("a")
        lines = []
        while len(lines) < 2:
            line = proc.stdout.readline()
            assert line, "the CLI stopped early"
            if '"object_key":"a"' in line:
                lines.append(line)
        assert '"event_type":"stored"' in lines[0]
        assert '"event_type":"removed"' in lines[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        c.close()
        m.close()


def test_reference_subscriber_tracks_media():
    import importlib.util
    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("sub", ROOT / "examples" / "kv_events_subscriber.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m, endpoint = start_manager()
    sub = Subscriber(endpoint)
    c = tierkv.Client(m.uds)
    try:
        join(c, sub)
        tracker = mod.KvEventTracker()
        c.put("a", b"1")
        c.put("b", b"2")
        c.upsert("a", b"3")
        c.remove("b")
        sub.events(5)
        for seq, events in sub.messages:
            tracker.on_message(seq, msgpack.packb([0, events, 0]))
        assert tracker.where("node-a", "default", "a") == {"cpu"}
        assert tracker.where("node-a", "default", "b") == set()
        assert tracker.on_message(sub.messages[-1][0] + 5, msgpack.packb([0, [], 0])) == "gap"
        assert tracker.on_message(1, msgpack.packb([0, [], 0])) == "restart"
        # After the restart the state is rebuilt from the admin API.
        assert tracker.objects == {}
        mod.reconcile(m.rest, tracker, "node-a")
        assert tracker.where("node-a", "default", "a") == {"cpu"}
        assert tracker.where("node-a", "default", "b") == set()
    finally:
        c.close()
        sub.close()
        m.close()


def _load_reference_subscriber():
    import importlib.util
    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("sub", ROOT / "examples" / "kv_events_subscriber.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demotion_and_rewarm_publish_media_events(scratch):
    import json
    import urllib.request
    # Queue depth 1: demotions complete in eviction order (side by side, each
    # victim's "stored disk" comes when its own write completes).
    m, endpoint = start_manager("--dram-size", "8MiB", "--ssd-dir", str(scratch / "ssd"),
                                "--ssd-size", "64MiB", "--ssd-queue-depth", "1")
    sub = Subscriber(endpoint)
    c = tierkv.Client(m.uds)
    tracker = _load_reference_subscriber().KvEventTracker()

    def feed(n: int) -> list[dict]:
        start = len(sub.messages)
        ev = sub.events(n)
        for seq, events in sub.messages[start:]:
            tracker.on_message(seq, msgpack.packb([0, events, 0]))
        return ev

    try:
        join(c, sub)
        c.put("a", b"a" * 65536)
        assert [(e["event_type"], e["medium"]) for e in feed(1)] == [("stored", "cpu")]
        # One tier down through the admin API: stored on disk, then removed from cpu.
        req = urllib.request.Request(
            m.rest + "/memory/evict", method="POST",
            data=json.dumps({"chunk_hashes": ["a"], "locations": ["LocalCPUBackend"]}).encode())
        assert json.load(urllib.request.urlopen(req))["num_evicted"] == 1
        ev = feed(2)
        assert [(e["event_type"], e["medium"], e["object_key"]) for e in ev] == [
            ("stored", "disk", "a"), ("removed", "cpu", "a")]
        assert tracker.where("node-a", "default", "a") == {"disk"}
        # A get rewarms it: stored on cpu; the disk copy stays.
        assert c.get("a") == b"a" * 65536
        assert [(e["event_type"], e["medium"]) for e in feed(1)] == [("stored", "cpu")]
        assert tracker.where("node-a", "default", "a") == {"cpu", "disk"}
        # Remove drops both media, each with its own event.
        c.remove("a")
        ev = feed(2)
        assert sorted((e["event_type"], e["medium"]) for e in ev) == [
            ("removed", "cpu"), ("removed", "disk")]
        assert tracker.where("node-a", "default", "a") == set()
        # Eviction under a full pool demotes the same way, oldest first.
        for i in range(12):
            c.put(f"big{i}", bytes([i]) * (1 << 20))
        ev = feed(12 + 2 * 4)  # 12 stored cpu, at least 4 demotions
        demoted = [e["object_key"] for e in ev
                   if e["event_type"] == "stored" and e["medium"] == "disk"]
        assert demoted[:2] == ["big0", "big1"]
        for key in demoted:
            i = next(n for n, e in enumerate(ev)
                     if e["object_key"] == key and e["medium"] == "disk")
            later = [(e["event_type"], e["medium"]) for e in ev[i + 1:] if e["object_key"] == key]
            assert later[:1] == [("removed", "cpu")]
        assert tracker.where("node-a", "default", "big0") == {"disk"}
    finally:
        c.close()
        sub.close()
        m.close()


def test_snapshot_after_restart_lists_recovered_objects_on_disk(scratch):
    replay_ep = f"tcp://127.0.0.1:{free_port()}"
    args = ("--dram-size", "8MiB", "--ssd-dir", str(scratch / "ssd"), "--ssd-size", "64MiB",
            "--kv-events-replay-endpoint", replay_ep, "--kv-events-snapshot-on-join", "true")
    m, _ = start_manager(*args)
    c = tierkv.Client(m.uds)
    for i in range(16):
        c.put(f"k{i}", bytes([i]) * (1 << 20))
    c.close()
    assert m.stop(signal.SIGTERM) == 0
    m.close()
    m2, _ = start_manager(*args)
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    try:
        dealer.setsockopt(zmq.RCVTIMEO, 5000)
        dealer.connect(replay_ep)
        dealer.send_multipart([b"SNAPSHOT"])
        events = []
        frames = dealer.recv_multipart()
        while frames[0] == b"MSG":
            events += msgpack.unpackb(frames[2], raw=False)[1]
            frames = dealer.recv_multipart()
        assert frames[0] == b"END"
        assert events and all(e["medium"] == "disk" for e in events)
        assert "k0" in {e["object_key"] for e in events}
        c = tierkv.Client(m2.uds)
        assert c.get("k0") == bytes([0]) * (1 << 20)
        c.close()
    finally:
        dealer.close()
        m2.close()
