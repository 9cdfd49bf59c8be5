"""Test helpers for the SGLang HiCache backend: a stand-in host pool of torch
CPU tensors, deterministic page contents, and backend construction the way
SGLang's dynamic loader does it."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "sglang_standin"))

from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig  # noqa: E402


class HostPool:
    """Pages of ``page_bytes`` per part (k and v for MHA, one for MLA), held in
    torch CPU tensors; host indices are token indices, ``page_size`` a page."""

    def __init__(self, pages: int, page_bytes: int, mla: bool = False, page_size: int = 16):
        self.page_size = page_size
        self.dtype = torch.bfloat16
        self.layout = "page_first"
        self.page_bytes = page_bytes
        self.parts = [torch.zeros((pages, page_bytes), dtype=torch.uint8)]
        if not mla:
            self.parts.append(torch.zeros((pages, page_bytes), dtype=torch.uint8))

    def indices(self, first_page: int, n: int) -> torch.Tensor:
        return torch.arange(first_page * self.page_size, (first_page + n) * self.page_size)

    def get_page_buffer_meta(self, host_indices):
        """(addresses, sizes): per page, its k then its v (MHA), or its one part (MLA)."""
        pages = (host_indices[::self.page_size] // self.page_size).tolist()
        bases = [part.data_ptr() for part in self.parts]
        ptrs = [b + p * self.page_bytes for p in pages for b in bases]
        return ptrs, [self.page_bytes] * len(ptrs)

    def fill(self, page: int, key: str) -> None:
        for i, part in enumerate(self.parts):
            part[page].copy_(content(key, i, self.page_bytes))

    def holds(self, page: int, key: str) -> bool:
        return all(torch.equal(part[page], content(key, i, self.page_bytes))
                   for i, part in enumerate(self.parts))

    def blank(self, page: int) -> bool:
        return all(int(part[page].count_nonzero()) == 0 for part in self.parts)


def content(key: str, part: int, n: int) -> torch.Tensor:
    seed = int.from_bytes(hashlib.sha256(f"{key}/{part}".encode()).digest()[:4], "little")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 256, (n,), dtype=torch.uint8, generator=g)


def make_backend(socket: str, *, tenant: str = "sglang", mla: bool = False, v1: bool = True,
                 tp_rank: int = 0, model: str = "test-model"):
    """What SGLang's ``--hicache-storage-backend dynamic`` does with the extra config."""
    extra = {"backend_name": "tierkv", "module_path": "tierkv.integrations.sglang",
             "class_name": "TierkvHiCacheStorage", "interface_v1": 1 if v1 else 0,
             "socket": socket, "tenant": tenant}
    cls = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
    config = HiCacheStorageConfig(tp_rank=tp_rank, tp_size=2, is_mla_model=mla,
                                  model_name=model, extra_config=extra)
    return cls(config, {})
