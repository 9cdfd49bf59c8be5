#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/).

The seeds are well-formed inputs of every kind, so mutation starts from
structure the decoders accept. Run it again when the protocol changes."""

from __future__ import annotations

import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent


def s(b: bytes | str) -> bytes:
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<I", len(b)) + b


def frame(opcode: int, body: bytes, rid: int = 1) -> bytes:
    return struct.pack("<HBBHHQII", 0x4B54, 1, 0, opcode, 0, rid, len(body), 0) + body


def write(target: str, name: str, data: bytes) -> None:
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


key = s("default") + s("prefix/abc")
bodies = {
    "hello": struct.pack("<I", 3) + s("fuzz"),
    "alloc": s("default") + s("k1") + struct.pack("<Q", 4096) + s("grp") + b"\x00",
    "put": s("default") + s("k2") + s("") + b"\x01" + s(b"v" * 100),
    "key": key,
    "batch_keys": s("default") + struct.pack("<I", 3) + s("a") + s("b") + s("k2"),
    "batch_alloc": s("default") + struct.pack("<I", 2) + (s("x") + struct.pack("<Q", 10) + s("") + b"\x00") * 2,
    "batch_ids": struct.pack("<I", 2) + struct.pack("<QQ", 257, 513),
    "batch_put": s("default") + struct.pack("<I", 2) + s("p1") + s("") + b"\x00" + s(b"x" * 10) + s("p2") + s("g") + b"\x01" + s(b"y"),
    "report": struct.pack("<IB", 1, 1) + b"\x00" + struct.pack("<QQ", 100, 5) + b"\x00" * 40 + struct.pack("<QQ", 1000, 50),
    "remove_all": s("default") + b"\x01",
    "list_keys": s("default") + s("p") + struct.pack("<I", 10),
}

# protocol_fuzz: first byte picks the decoder.
order = ["hello", None, "key", "alloc", "put", "batch_keys", "batch_alloc", "batch_ids",
         "batch_put", "report", "remove_all", "list_keys"]
for i, name in enumerate(order):
    if name:
        write("protocol", f"{i:02d}_{name}", bytes([i]) + bodies[name])
write("protocol", "13_statuses", bytes([13]) + struct.pack("<H", 0) + struct.pack("<H", 3) + s("full"))
write("protocol", "header", frame(8, key))

# session_fuzz: whole client streams.
stream = b"".join([
    frame(1, bodies["hello"], 1), frame(5, bodies["put"], 2), frame(8, s("default") + s("k2"), 3),
    frame(2, bodies["alloc"], 4), frame(3, struct.pack("<Q", 0), 5), frame(6, s("default") + s("k2"), 6),
    frame(7, struct.pack("<Q", 0), 7), frame(9, key, 8), frame(10, s("default") + s("k2"), 9),
    frame(24, bodies["batch_put"], 10), frame(25, bodies["batch_keys"], 11),
    frame(26, bodies["batch_keys"], 12), frame(27, bodies["batch_keys"], 13),
    frame(20, bodies["batch_alloc"], 14), frame(22, bodies["batch_keys"], 15),
    frame(13, bodies["list_keys"], 16), frame(29, bodies["report"], 17),
    frame(28, bodies["batch_keys"], 18), frame(12, bodies["remove_all"], 19),
])
write("session", "full_stream", stream)
# Gets without a lease: HELLO with the generation flag (empty namespace first),
# then LOCATE and BATCH_LOCATE of stored and absent keys.
write("session", "locate", b"".join([
    frame(1, bodies["hello"] + s("") + b"\x01", 1), frame(5, bodies["put"], 2),
    frame(14, s("default") + s("k2"), 3), frame(30, bodies["batch_keys"], 4),
    frame(14, key, 5),
]))
write("session", "unknown_opcode", frame(999, b"xyz") + frame(9, key, 2))
write("session", "truncated_body", frame(8, s("default")[:3]))

# rest_body_fuzz
for i, body in enumerate([
    '{"chunk_hashes": ["a1b2", "c3d4"]}',
    '{"chunk_hashes": ["a"], "locations": ["LocalCPUBackend"], "tenant_id": "t"}',
    '{"chunk_hashes": ["a", "b"], "lookup_id": "req_001"}',
    'key_a,key_b,,key_c',
]):
    write("rest_body", f"body_{i}", body.encode())

# config_fuzz
write("config", "defaults.toml", (HERE.parent / "deploy" / "tierkv.toml").read_bytes())
write("config", "events.toml", b'kv-events-endpoint = "tcp://127.0.0.1:0"\nkv-events-queue-capacity = 16\n'
      b'"ock.mmc.metrics.tls.enable" = false\ndram-size = "64MiB"\n')
write("config", "ini.ini", b"[default]\ndram-size=4mb\nlease-ms=100\n")
