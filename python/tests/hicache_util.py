"""Test helpers for the SGLang HiCache backend: SGLang's stand-in (its base
class, factory, config, host pools of real torch CPU tensors), deterministic
page contents, and a backend built the way SGLang's controller builds it."""

from __future__ import annotations

import hashlib
import os
import sys
import threading

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "sglang_standin"))

from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig  # noqa: E402
from sglang.srt.mem_cache.pool_host import (MambaPoolHost, MHATokenToKVPoolHost,  # noqa: E402
                                            MLATokenToKVPoolHost)
from sglang.srt.mem_cache.storage import StorageBackendFactory  # noqa: E402


def make_pool(attention: str = "mha", layout: str = "layer_first", pages: int = 16,
              page_size: int = 4, **geometry):
    cls = MHATokenToKVPoolHost if attention == "mha" else MLATokenToKVPoolHost
    return cls(pages * page_size, page_size, layout, **geometry)


def indices(pool, first_page: int, n: int) -> torch.Tensor:
    ps = pool.page_size
    return torch.arange(first_page * ps, (first_page + n) * ps)


def content(key: str, nbytes: int) -> torch.Tensor:
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 256, (nbytes,), dtype=torch.uint8, generator=g)


def page_bytes(pool) -> int:
    return pool.page_elems() * torch.empty(0, dtype=pool.dtype).element_size()


def fill(pool, page: int, key: str) -> None:
    data = content(key, page_bytes(pool)).view(pool.dtype)
    pool.set_from_flat_data_page(page * pool.page_size, data)


def holds(pool, page: int, key: str) -> bool:
    return torch.equal(pool.flat_page(page * pool.page_size), content(key, page_bytes(pool)))


def blank(pool, page: int) -> bool:
    return int(pool.flat_page(page * pool.page_size).count_nonzero()) == 0


def config(socket: str, *, tenant: str = "sglang", mla: bool = False, v1=1, tp_rank: int = 0,
           tp_size: int = 1, pp_rank: int = 0, pp_size: int = 1, cp_rank: int = 0,
           cp_size: int = 1, model: str = "org/test-model", metrics: bool = False,
           tp_lcm_size=None, split: bool = False, **extra) -> HiCacheStorageConfig:
    """The config SGLang's controller builds for a dynamic backend."""
    extra_config = {"backend_name": "tierkv", "module_path": "tierkv.integrations.sglang",
                    "class_name": "TierkvHiCacheStorage", "interface_v1": v1,
                    "socket": socket, "tenant": tenant, **extra}
    return HiCacheStorageConfig(
        tp_rank=tp_rank, tp_size=tp_size, pp_rank=pp_rank, pp_size=pp_size,
        attn_cp_rank=cp_rank, attn_cp_size=cp_size, is_mla_model=mla,
        enable_storage_metrics=metrics, is_page_first_layout=False, model_name=model,
        tp_lcm_size=tp_lcm_size, should_split_heads=split, extra_config=extra_config)


def make_backend(socket: str, pool=None, **kw):
    """As SGLang's attach_storage_backend: the factory, then the host pool."""
    pool = pool if pool is not None else make_pool("mla" if kw.get("mla") else "mha")
    b = StorageBackendFactory.create_backend("dynamic", config(socket, **kw), pool)
    b.register_mem_pool_host(pool)
    return b


class Controller:
    """SGLang's HiCache controller's three storage threads, stand-in: a
    prefetch thread (batch_exists), an I/O thread (batch_get_v1) and a backup
    thread (batch_set_v1), each running `rounds` calls. As in SGLang, an
    exception ends the thread for good (recorded in `died`)."""

    def __init__(self, backend, rounds: int, exists_keys, get_call, set_call):
        self.died: list[BaseException] = []
        self.lookups: list[int] = []
        self.threads = [
            threading.Thread(target=self._loop, args=(rounds, lambda: self.lookups.append(
                backend.batch_exists(exists_keys)))),
            threading.Thread(target=self._loop, args=(rounds, get_call)),
            threading.Thread(target=self._loop, args=(rounds, set_call)),
        ]

    def _loop(self, rounds, call) -> None:
        try:
            for _ in range(rounds):
                call()
        except BaseException as e:  # noqa: BLE001 - what SGLang's thread would die of
            self.died.append(e)

    def run(self) -> None:
        for t in self.threads:
            t.start()
        for t in self.threads:
            t.join(timeout=120)


__all__ = ["MambaPoolHost", "Controller", "make_backend", "make_pool", "config", "fill",
           "holds", "blank", "indices", "content", "page_bytes"]
