#!/usr/bin/env python3
"""Offload KV blocks of a paged cache to tierkv and load them back in batches.

A numpy array stands in for the GPU KV cache of an engine: `num_blocks` pages of
[layers, 2 (K/V), block_tokens, heads, head_dim] float16. Each page holding a
full block of a prompt prefix is stored under a key derived from the hash of the
token prefix it covers (the convention of prefix caches: equal prefixes give
equal keys, across requests and engines). Pages are copied straight from the
array's memory (raw address + length) into the manager's pool and back.

    /usr/bin/python3 examples/paged_kv_offload.py [unix:/tmp/tierkv.sock]
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

import tierkv

LAYERS, HEADS, HEAD_DIM, BLOCK_TOKENS = 4, 8, 64, 16


def block_keys(tokens: list[int], model: str = "demo-7b") -> list[str]:
    """One key per full block: a hash chained over the prefix up to that block."""
    keys, parent = [], model.encode()
    for start in range(0, len(tokens) - len(tokens) % BLOCK_TOKENS, BLOCK_TOKENS):
        block = np.asarray(tokens[start:start + BLOCK_TOKENS], dtype=np.int32).tobytes()
        parent = hashlib.sha256(parent + block).digest()
        keys.append(f"{model}/{parent.hex()[:32]}")
    return keys


def main(address: str) -> None:
    num_blocks = 64
    kv = np.zeros((num_blocks, LAYERS, 2, BLOCK_TOKENS, HEADS, HEAD_DIM), dtype=np.float16)
    page_bytes = kv[0].nbytes
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, 32000, size=BLOCK_TOKENS * 10 + 5).tolist()  # 10 full blocks
    keys = block_keys(prompt)
    pages = list(range(len(keys)))  # the engine's block table for this prompt
    kv[pages] = rng.standard_normal(kv[pages].shape).astype(np.float16)  # "prefill"
    expected = kv[pages].copy()

    with tierkv.Client(address, tenant="paged-kv-demo") as store:
        # Offload: skip blocks another engine already stored.
        present = store.batch_exists(keys)
        items = [(k, kv[p].ctypes.data, page_bytes)
                 for k, p, there in zip(keys, pages, present) if not there]
        statuses = store.batch_put_from(items)
        stored = sum(1 for s in statuses if s)
        dup = sum(1 for s in statuses if s.name == "DUPLICATED")  # a racing engine won
        print(f"offloaded {stored} blocks of {page_bytes} bytes ({dup} already there)")

        kv[pages] = 0  # the GPU pages are reused for other requests

        # A later request with the same prefix: load the cached blocks back into
        # freshly allocated pages, in one batch.
        new_pages = list(range(32, 32 + len(keys)))
        targets = [(kv[p].ctypes.data, page_bytes) for p in new_pages]
        loaded = store.batch_get_into(keys, targets)
        hits = sum(1 for s in loaded if s)
        assert all(s.size == page_bytes for s in loaded if s)
        assert np.array_equal(kv[new_pages], expected), "loaded KV differs"
        print(f"loaded {hits}/{len(keys)} blocks back; contents verified")
        store.remove_all(force=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "unix:/tmp/tierkv.sock")
