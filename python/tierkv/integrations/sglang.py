"""tierkv as an SGLang HiCache storage backend.

Start SGLang with::

    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "tierkv",
        "module_path": "tierkv.integrations.sglang",
        "class_name": "TierkvHiCacheStorage", "interface_v1": 1,
        "socket": "unix:/run/tierkv/tierkv.sock", "tenant": "sglang"}'

SGLang builds the class as ``cls(storage_config, kwargs)`` and then calls
:meth:`TierkvHiCacheStorage.register_mem_pool_host`. Pages are stored as one
object per page and per part: a multi-head-attention model keeps ``{key}_{tp_rank}_k``
and ``{key}_{tp_rank}_v``, an MLA model ``{key}_{pp_rank or ''}_k``. The
storage namespace (the identity of the cached bytes) is derived from the model
name, the tensor/pipeline layout and the host pool's page geometry, so two
deployments that would not produce the same bytes never read each other's
pages. See docs/sglang.md.
"""

from __future__ import annotations

import threading
from typing import Any

from .. import Client, derive_namespace
from ..errors import TierkvError

try:  # the real base class when SGLang is installed (or the test's stand-in)
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage as _Base
except ImportError:  # pragma: no cover - importable without SGLang
    _Base = object

_DEFAULT_SOCKET = "unix:/tmp/tierkv.sock"
_DUPLICATED = 2  # tierkv status code


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class TierkvHiCacheStorage(_Base):
    """HiCache storage on a tierkv manager (zero-copy ``*_v1`` path and the
    copy path). Every method is safe to call from several threads; a call that
    fails because the manager is unreachable returns the failure value
    (``False``, ``0``, ``None``) and the next call reconnects."""

    def __init__(self, storage_config: Any = None, kwargs: Any = None):
        extra = dict(_field(storage_config, "extra_config", None) or {})
        if isinstance(kwargs, dict):
            extra.update({k: v for k, v in kwargs.items() if k in ("socket", "tenant")})
        self.socket = str(extra.get("socket", _DEFAULT_SOCKET))
        self.tenant = str(extra.get("tenant", "sglang"))
        self.tp_rank = int(_field(storage_config, "tp_rank", 0) or 0)
        self.tp_size = int(_field(storage_config, "tp_size", 1) or 1)
        self.pp_rank = int(_field(storage_config, "pp_rank", 0) or 0)
        self.pp_size = int(_field(storage_config, "pp_size", 1) or 1)
        self.is_mla = bool(_field(storage_config, "is_mla_model", False))
        self.model_name = str(_field(storage_config, "model_name", "") or "")
        self.interface_v1 = bool(int(extra.get("interface_v1", 0) or 0))
        self.mem_pool_host = None
        self.namespace = ""
        self._client: Client | None = None
        self._lock = threading.Lock()
        self._stats = {k: 0 for k in ("set_pages", "set_failed", "set_existing", "get_pages",
                                      "get_failed", "exists_calls", "errors", "reconnects",
                                      "set_bytes", "get_bytes")}

    # -- setup ------------------------------------------------------------
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Binds the host pool whose pages the v1 calls move, derives the
        storage namespace from the model and the pool's geometry, and connects."""
        self.mem_pool_host = mem_pool_host
        geometry = {
            "model": self.model_name,
            "attention": "mla" if self.is_mla else "mha",
            "tp_size": str(self.tp_size),
            "pp_size": str(self.pp_size),
            "page_size": str(_field(mem_pool_host, "page_size", "")),
            "dtype": str(_field(mem_pool_host, "dtype", "")),
            "layout": str(_field(mem_pool_host, "layout", "")),
        }
        if not self.is_mla:
            geometry["tp_rank"] = str(self.tp_rank)  # each rank holds its own heads
        self.namespace = derive_namespace(**geometry)
        with self._lock:
            self._drop_locked()
        self._conn()

    def _conn(self) -> Client:
        with self._lock:
            if self._client is None:
                self._client = Client(self.socket, self.tenant, rank=self.tp_rank,
                                      client_name="sglang-hicache", namespace=self.namespace)
            return self._client

    def _drop_locked(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except TierkvError:
                pass
            self._client = None

    def _failed(self, err: Exception) -> None:
        """A call failed at the connection level: reconnect next time."""
        self._stats["errors"] += 1
        self._stats["reconnects"] += 1
        with self._lock:
            self._drop_locked()

    # -- keys -------------------------------------------------------------
    def _suffixes(self) -> list[str]:
        if self.is_mla:
            return [f"_{self.pp_rank or ''}_k"]
        return [f"_{self.tp_rank}_k", f"_{self.tp_rank}_v"]

    def _object_keys(self, keys: list[str]) -> list[str]:
        sfx = self._suffixes()
        if len(sfx) == 1:
            one = sfx[0]
            return [k + one for k in keys]
        return [k + s for k in keys for s in sfx]

    def _copy_key(self, key: str) -> str:
        return key if self.is_mla else f"{key}_{self.tp_rank}"

    # -- zero-copy interface (interface_v1) ---------------------------------
    def _page_meta(self, host_indices: Any, pages: int) -> tuple[list[int], list[int]]:
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        per = 1 if self.is_mla else 2
        if len(ptrs) != pages * per or len(sizes) != len(ptrs):
            raise ValueError(f"the host pool gave {len(ptrs)} buffers for {pages} pages "
                             f"({per} per page expected)")
        return ptrs, sizes

    def batch_set_v1(self, keys: list[str], host_indices: Any, extra_info: Any = None) -> list[bool]:
        """Stores each page from the host pool, one round trip for the batch;
        a page already stored counts as success."""
        return self._pages("set", keys, host_indices)

    def batch_get_v1(self, keys: list[str], host_indices: Any, extra_info: Any = None) -> list[bool]:
        """Loads each page straight into the host pool, one round trip for the
        batch. A page whose stored size differs from the pool's page is a failed
        page: nothing is copied into it."""
        return self._pages("get", keys, host_indices)

    def _pages(self, kind: str, keys: list[str], host_indices: Any) -> list[bool]:
        if not keys:
            return []
        ptrs, sizes = self._page_meta(host_indices, len(keys))
        objs = self._object_keys(keys)
        try:
            c = self._conn()
            if kind == "set":
                st = c.batch_put_from(list(zip(objs, ptrs, sizes)))
            else:
                st = c.batch_get_into(objs, list(zip(ptrs, sizes)), exact=True)
        except (TierkvError, ConnectionError, OSError) as e:
            self._failed(e)
            self._stats[f"{kind}_failed"] += len(keys)
            return [False] * len(keys)
        return self._tally(st, sizes, len(keys), kind)

    def _tally(self, st: list, sizes: list[int], pages: int, kind: str) -> list[bool]:
        """Per page: every part OK (for a set, an existing object is OK too)."""
        per = len(st) // pages if pages else 1
        oks = [s.ok or (kind == "set" and s.code == _DUPLICATED) for s in st]
        if kind == "set":
            self._stats["set_existing"] += sum(not s.ok for s, ok in zip(st, oks) if ok)
        out = oks if per == 1 else [all(oks[i * per:(i + 1) * per]) for i in range(pages)]
        good = sum(out)
        self._stats[f"{kind}_pages"] += good
        self._stats[f"{kind}_failed"] += pages - good
        self._stats[f"{kind}_bytes"] += sum(n for n, ok in zip(sizes, oks) if ok)
        return out

    # -- copy interface -------------------------------------------------------
    def set(self, key: str, value: Any = None, target_location: Any = None,
            target_sizes: Any = None) -> bool:
        return self.batch_set([key], [value], [target_location] if target_location is not None
                              else None, [target_sizes] if target_sizes is not None else None)

    def batch_set(self, keys: list[str], values: Any = None, target_locations: Any = None,
                  target_sizes: Any = None) -> bool:
        """Stores each value (a CPU tensor, or ``target_locations``/``target_sizes``
        as addresses and byte counts); True when every one is stored (an existing
        key counts as stored)."""
        if not keys:
            return True
        items = []
        for i, key in enumerate(keys):
            if values is not None and values[i] is not None:
                t = values[i].contiguous()
                items.append((self._copy_key(key), t.data_ptr(), t.numel() * t.element_size(), t))
            elif target_locations is not None and target_sizes is not None:
                items.append((self._copy_key(key), int(target_locations[i]), int(target_sizes[i]),
                              None))
            else:
                raise ValueError("batch_set needs values or target locations and sizes")
        try:
            st = self._conn().batch_put_from([(k, p, n) for k, p, n, _ in items])
        except (TierkvError, ConnectionError, OSError) as e:
            self._failed(e)
            self._stats["set_failed"] += len(keys)
            return False
        ok = [s.ok or s.name == "DUPLICATED" for s in st]
        self._stats["set_pages"] += sum(ok)
        self._stats["set_failed"] += len(ok) - sum(ok)
        self._stats["set_bytes"] += sum(n for (_, _, n, _), good in zip(items, ok) if good)
        return all(ok)

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        got = self.batch_get([key], [target_location] if target_location is not None else None,
                             [target_sizes] if target_sizes is not None else None)
        return got[0]

    def batch_get(self, keys: list[str], target_locations: Any = None,
                  target_sizes: Any = None) -> list[Any]:
        """Each value into its target tensor (``target_locations``; its byte size
        must match the stored one exactly), or as a new uint8 CPU tensor; None
        for a miss or a size mismatch."""
        import torch
        if not keys:
            return []
        targets, wanted = [], []
        for i, key in enumerate(keys):
            tgt = target_locations[i] if target_locations is not None else None
            if isinstance(tgt, torch.Tensor):
                n = tgt.numel() * tgt.element_size()
                targets.append((tgt.data_ptr(), n))
                wanted.append(tgt)
            else:
                wanted.append(None)
                targets.append(None)
        try:
            c = self._conn()
            out: list[Any] = [None] * len(keys)
            direct = [i for i, t in enumerate(targets) if t is not None]
            if direct:
                st = c.batch_get_into([self._copy_key(keys[i]) for i in direct],
                                      [targets[i] for i in direct], exact=True)
                for i, s in zip(direct, st):
                    out[i] = wanted[i] if s.ok else None
            fresh = [i for i, t in enumerate(targets) if t is None]
            if fresh:
                vals = c.batch_get([self._copy_key(keys[i]) for i in fresh])
                for i, v in zip(fresh, vals):
                    if v is None:
                        continue
                    if target_sizes is not None and target_sizes[i] is not None and \
                            int(target_sizes[i]) != len(v):
                        continue
                    out[i] = torch.frombuffer(bytearray(v), dtype=torch.uint8)
        except (TierkvError, ConnectionError, OSError) as e:
            self._failed(e)
            self._stats["get_failed"] += len(keys)
            return [None] * len(keys)
        hits = sum(v is not None for v in out)
        self._stats["get_pages"] += hits
        self._stats["get_failed"] += len(keys) - hits
        return out

    # -- lookups ----------------------------------------------------------------
    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def batch_exists(self, keys: list[str], extra_info: Any = None) -> int:
        """How many leading pages are stored (every part of each): the prefix a
        load can use. 0 when the manager is unreachable."""
        if not keys:
            return 0
        self._stats["exists_calls"] += 1
        objs = self._object_keys(keys) if self.interface_v1 else [self._copy_key(k) for k in keys]
        per = len(objs) // len(keys)
        try:
            found = self._conn().batch_exists(objs)
        except (TierkvError, ConnectionError, OSError) as e:
            self._failed(e)
            return 0
        n = 0
        for i in range(len(keys)):
            if not all(found[i * per:(i + 1) * per]):
                break
            n += 1
        return n

    # -- maintenance ---------------------------------------------------------
    def clear(self) -> None:
        """Removes every object of this backend's tenant (all models and ranks
        that share it)."""
        try:
            self._conn().remove_all(force=True)
        except (TierkvError, ConnectionError, OSError) as e:
            self._failed(e)

    def get_stats(self) -> dict:
        """Counters since start: pages set/got/failed, bytes, errors, reconnects."""
        return dict(self._stats)
