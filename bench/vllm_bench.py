#!/usr/bin/env python3
"""The vLLM connector against the plain client, same manager, same run.

1. Transfer: save and load of 64 blocks of a 32-layer model (block of 16
   tokens, 8 KV heads of 128, bf16, FlashAttention layout on CPU tensors:
   2 MiB a block, 64 regions) through the connector's worker (queued to its
   thread, waited for), against the plain client's batch_put_regions /
   batch_get_regions of the same regions. Each round writes fresh blocks and
   reads them back, both sides in turn, the first side alternating; the
   ratio is the median of the rounds' own ratios. Target: at least 0.9 x.
   With --device cuda (scripts/gpu-check.sh) the KV tensors are on the GPU
   and the baseline is torch's own copy of the same block slices to and from
   one pinned host buffer (device-to-host for save, host-to-device for load).
2. The scheduler's lookup of 1 000 block keys (a 16 001-token prompt whose
   blocks are all stored): p50 / p99 of get_num_new_matched_tokens.

    /usr/bin/python3 bench/vllm_bench.py [--build build] [--rounds 10] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import harness

ROOT = harness.ROOT
BLOCKS, LAYERS, BLOCK, HEADS, HEAD = 64, 32, 16, 8, 128


def connector(socket: str, role: str, num_blocks: int):
    import torch
    from vllm_engine import AttentionSpec, vllm_config
    import types
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from tierkv.integrations.vllm import TierkvConnector
    cfg = vllm_config(socket, model="bench/model")
    cfg.cache_config.block_size = BLOCK
    spec = AttentionSpec(BLOCK, HEADS, HEAD, torch.bfloat16)
    kcc = types.SimpleNamespace(num_blocks=num_blocks, kv_cache_groups=[
        types.SimpleNamespace(layer_names=[f"l{i}" for i in range(LAYERS)], kv_cache_spec=spec)])
    r = KVConnectorRole.SCHEDULER if role == "scheduler" else KVConnectorRole.WORKER
    return TierkvConnector(cfg, r, kcc)


def transfer(m, rounds: int, device: str) -> dict:
    import tierkv
    import torch
    from tierkv.integrations.vllm import BlockTransfer
    torch.manual_seed(1)
    kv = {f"l{i}": torch.randn(2, 2 * BLOCKS, BLOCK, HEADS, HEAD).to(torch.bfloat16).to(device)
          for i in range(LAYERS)}
    worker = connector(m.uds, "worker", 2 * BLOCKS)
    worker.register_kv_caches(kv)
    w = worker._worker
    plain = tierkv.Client(m.uds, "plain")
    src, dst = list(range(BLOCKS)), list(range(BLOCKS, 2 * BLOCKS))

    def regions(blocks: list[int]) -> tuple[list[int], list[int]]:
        views = [t[s, b] for b in blocks for t in kv.values() for s in (0, 1)]
        return [v.data_ptr() for v in views], [v.numel() * v.element_size() for v in views]

    (sa, sl), (da, dl) = regions(src), regions(dst)
    nbytes = sum(sl)
    rates: dict[str, list[float]] = {"save": [], "put": [], "load": [], "get": []}
    if device != "cpu":  # the baseline: torch's copies through one pinned buffer
        pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        parts = list(torch.split(pinned, sl))

        def torch_copy(blocks: list[int], to_host: bool) -> bool:
            views = [t[s, b].view(-1).view(torch.uint8) for b in blocks for t in kv.values()
                     for s in (0, 1)]
            for part, v in zip(parts, views):
                (part.copy_(v, non_blocking=True) if to_host
                 else v.copy_(part, non_blocking=True))
            torch.cuda.synchronize()
            return True

    def timed(kind: str, call) -> None:
        t = time.perf_counter()
        call()
        rates[kind].append(nbytes / (time.perf_counter() - t) / 1e9)

    def through_worker(kind: str, blocks: list[int], hashes: list[str]) -> None:
        w.submit(kind, BlockTransfer(kind, blocks, hashes))
        w.drain()
        if kind == "load":
            assert not w.take_load_errors()

    for r in range(rounds):
        hashes = [f"{r:04x}{b:04x}" for b in range(BLOCKS)]
        keys = [f"r{r}b{b}" for b in range(BLOCKS)]
        if device == "cpu":
            put = lambda: all(s.ok for s in plain.batch_put_regions(keys, sa, sl))  # noqa: E731
            get = lambda: all(s.ok for s in plain.batch_get_regions(keys, da, dl))  # noqa: E731
        else:
            put = lambda: torch_copy(src, True)  # noqa: E731
            get = lambda: torch_copy(dst, False)  # noqa: E731
        writes = [("save", lambda: through_worker("save", src, hashes)), ("put", put)]
        reads = [("load", lambda: through_worker("load", dst, hashes)), ("get", get)]
        if r % 2:
            writes.reverse()
            reads.reverse()
        for kind, call in writes + reads:
            timed(kind, call)
        tierkv.Client(m.uds, "vllm").remove_all(force=True)
        plain.remove_all(force=True)
    assert all(torch.equal(t[:, BLOCKS:], t[:, :BLOCKS]) for t in kv.values())
    med = {k: statistics.median(v) for k, v in rates.items()}
    med["save_ratio"] = statistics.median(a / b for a, b in zip(rates["save"], rates["put"]))
    med["load_ratio"] = statistics.median(a / b for a, b in zip(rates["load"], rates["get"]))
    worker.shutdown()
    plain.close()
    return med


def lookups(m, calls: int) -> dict:
    import tierkv
    from vllm_engine import Request
    import vllm_engine
    vllm_engine.BLOCK = BLOCK  # the request's block hashes at this block size
    scheduler = connector(m.uds, "scheduler", 16)
    req = Request("lookup", list(range(1000 * BLOCK + 1)))
    prefix = scheduler._prefixes[0]
    keys = [f"{prefix}/{h.hex()}" for h in req.block_hashes[:1000]]
    c = tierkv.Client(m.uds, "vllm")
    assert all(s.ok for s in c.batch_put([(k, b"x") for k in keys]))
    out = []
    for _ in range(calls + 20):
        t = time.perf_counter()
        assert scheduler.get_num_new_matched_tokens(req, 0) == (1000 * BLOCK, True)
        out.append((time.perf_counter() - t) * 1e6)
    out = sorted(out[20:])
    scheduler.shutdown()
    c.close()
    return {"p50_us": out[len(out) // 2], "p99_us": out[min(len(out) - 1, int(0.99 * len(out)))]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--device", default="cpu", help="where the KV tensors are: cpu or cuda")
    args = ap.parse_args()
    harness.setup(Path(args.build))
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    sys.path.insert(0, str(ROOT / "python" / "tests" / "vllm_standin"))  # vLLM's interface
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    from conftest import Manager

    m = Manager("--dram-size", "2GiB")
    try:
        result = {"device": args.device, "transfer": transfer(m, args.rounds, args.device),
                  "lookup_1000": lookups(m, args.lookups)}
    finally:
        m.close()
    t = result["transfer"]
    cpu = args.device == "cpu"
    put, get = ("batch_put_regions", "batch_get_regions") if cpu else ("torch d2h", "torch h2d")
    print(f"{'64 blocks x 32 layers, ' + args.device:28s} {'connector GB/s':>15s} "
          f"{'baseline GB/s':>14s} {'ratio':>7s}" + (" (target 0.90)" if cpu else ""))
    print(f"{'save / ' + put:28s} {t['save']:15.2f} {t['put']:14.2f} {t['save_ratio']:7.2f}")
    print(f"{'load / ' + get:28s} {t['load']:15.2f} {t['get']:14.2f} {t['load_ratio']:7.2f}")
    lk = result["lookup_1000"]
    print(f"scheduler lookup of 1000 blocks: p50 {lk['p50_us']:.0f} us, p99 {lk['p99_us']:.0f} us")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
