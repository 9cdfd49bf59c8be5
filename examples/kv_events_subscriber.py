#!/usr/bin/env python3
"""Reference KV event subscriber: keeps, per (backend_id, tenant_id), which
objects live on which media, exactly as docs/kv-events.md describes.

    /usr/bin/python3 examples/kv_events_subscriber.py tcp://127.0.0.1:5557 \
        [--admin http://127.0.0.1:8000] [--replay tcp://127.0.0.1:5558]

Rules it follows:
  - frames: empty topic, 8-byte big-endian sequence, MessagePack
    [timestamp_ms, [event, ...], dp_rank]; iterate all events of a message;
  - stored adds the event's medium for the object (idempotent);
  - removed drops only that medium; the object is gone once no medium is left;
    repeated removes are harmless (media are a set, not a count);
  - an upsert arrives as removed then stored;
  - cleared drops every object of that backend + tenant;
  - a sequence gap means events were lost: with --replay it asks for the missing
    messages; otherwise (or when they are no longer kept) it invalidates the
    state and reconciles through the admin API (/get_all_keys and
    /batch_query_keys) when --admin is given;
  - a sequence that moves backwards means the publisher restarted: reconcile.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections import defaultdict

import msgpack
import zmq


class KvEventTracker:
    """Object -> media map per (backend_id, tenant_id), fed with raw messages."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[bytes | str, set[str]]] = defaultdict(dict)
        self.last_sequence: int | None = None
        self.gaps = 0
        self.restarts = 0
        self.events = 0

    # -- message level -------------------------------------------------------
    def on_message(self, sequence: int, payload: bytes) -> str:
        """Applies one message. Returns "ok", "gap" (events were lost before this
        message) or "restart" (the sequence moved backwards)."""
        status = "ok"
        if self.last_sequence is not None:
            if sequence <= self.last_sequence:
                status = "restart"
                self.restarts += 1
            elif sequence != self.last_sequence + 1:
                status = "gap"
                self.gaps += 1
        self.last_sequence = sequence
        if status == "restart":
            self.objects.clear()  # the publisher's state is new: start over
        self.apply_payload(payload)
        return status

    def apply_payload(self, payload: bytes) -> None:
        _timestamp_ms, events, _dp_rank = msgpack.unpackb(payload, raw=False)
        for event in events:  # up to 64 per message
            self.apply(event)

    # -- event level ---------------------------------------------------------
    def apply(self, e: dict) -> None:
        self.events += 1
        scope = (e["backend_id"], e["tenant_id"])
        kind = e["event_type"]
        if kind == "cleared":
            self.objects.pop(scope, None)
            return
        key = e.get("object_key")
        if key is None:  # object keys suppressed by the publisher: nothing to track
            return
        media = self.objects[scope]
        if kind == "stored":
            media.setdefault(key, set()).add(e["medium"])
        elif kind == "removed":
            held = media.get(key)
            if held is not None:
                held.discard(e["medium"])
                if not held:
                    del media[key]

    def where(self, backend: str, tenant: str, key: bytes | str) -> set[str]:
        return set(self.objects.get((backend, tenant), {}).get(key, set()))

    def invalidate(self) -> None:
        self.objects.clear()


def replay(ctx: zmq.Context, endpoint: str, since: int, tracker: KvEventTracker) -> bool:
    """Asks the replay socket for messages >= since. True if nothing was missing."""
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.RCVTIMEO, 5000)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    s.send_multipart([b"REPLAY", struct.pack(">Q", since)])
    complete = False
    while True:
        frames = s.recv_multipart()
        if frames[0] == b"MSG":
            seq = struct.unpack(">Q", frames[1])[0]
            tracker.last_sequence = seq - 1 if tracker.last_sequence is None else tracker.last_sequence
            tracker.apply_payload(frames[2])
            tracker.last_sequence = max(tracker.last_sequence, seq)
        elif frames[0] == b"END":
            first_kept = struct.unpack(">Q", frames[1])[0]
            complete = first_kept != 0 and first_kept <= since
            break
        else:
            break
    s.close()
    return complete


def reconcile(admin: str, tracker: KvEventTracker, backend: str, tenant: str = "default") -> None:
    """Rebuilds the state of one backend + tenant from the admin API:
    /get_all_keys lists the keys (one per line), /batch_query_keys tells where
    each one lives (blobs[].medium: HBM/DRAM are "cpu", SSD is "disk")."""
    import requests

    keys = requests.get(f"{admin}/get_all_keys", params={"tenant": tenant},
                        timeout=10).text.splitlines()
    state: dict = {}
    for i in range(0, len(keys), 100):
        chunk = keys[i:i + 100]
        reply = requests.get(f"{admin}/batch_query_keys",
                             params={"keys": ",".join(chunk), "tenant": tenant}, timeout=10).json()
        for item in reply.get("data", []):
            if item.get("valid"):
                state[item["key"]] = {"disk" if b["medium"] == "SSD" else "cpu"
                                      for b in item.get("blobs", [])}
    tracker.objects[(backend, tenant)] = state


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("endpoint")
    ap.add_argument("--admin", help="REST admin URL for reconciles")
    ap.add_argument("--replay", help="replay endpoint of the publisher")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: never)")
    args = ap.parse_args()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, 1000)
    sub.connect(args.endpoint)
    tracker = KvEventTracker()
    end = time.time() + args.seconds if args.seconds else None
    while end is None or time.time() < end:
        try:
            _topic, seq_raw, payload = sub.recv_multipart()
        except zmq.Again:
            continue
        seq = struct.unpack(">Q", seq_raw)[0]
        previous = tracker.last_sequence
        status = tracker.on_message(seq, payload)
        if status == "gap":
            healed = bool(args.replay) and replay(ctx, args.replay, previous + 1, tracker)
            if not healed:
                tracker.invalidate()
                print(f"gap before sequence {seq}: state invalidated", file=sys.stderr)
        if status == "restart":
            print(f"publisher restarted (sequence {seq})", file=sys.stderr)
        if status != "ok" and args.admin:
            for backend in {b for b, _ in tracker.objects} or {"?"}:
                reconcile(args.admin, tracker, backend)
        total = sum(len(v) for v in tracker.objects.values())
        print(f"seq={seq} events={tracker.events} objects={total} gaps={tracker.gaps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
