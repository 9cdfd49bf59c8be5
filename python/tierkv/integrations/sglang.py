"""tierkv as an SGLang HiCache storage backend (L3).

Start SGLang with::

    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "tierkv",
        "module_path": "tierkv.integrations.sglang",
        "class_name": "TierkvHiCacheStorage", "interface_v1": 1,
        "socket": "unix:/run/tierkv/tierkv.sock", "tenant": "sglang"}'

One object per page: the page's bytes in SGLang's flat page order (for a
multi-head-attention model all K, then all V; the same bytes the copy path's
``get_data_page`` gives), gathered from and scattered into the host pool's
buffers in one round trip per batch, whatever the layout (``layer_first``:
2 x layers parts per page; ``page_first`` / ``page_first_direct`` /
``page_head``: K and V). The object key is ``<identity>/<page hash>``: the
identity digests the model, the operator's tag, the layout, dtype, page size
and page bytes, and every rank that slices a page (tp unless the cache is
rank-replicated, pp, attention cp), so two deployments that would not produce
the same bytes never read each other's pages. See docs/sglang.md.

No method raises into SGLang's threads: a failure (the manager down, a bad
page table) is logged and answered with the failure value.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable

from .. import derive_namespace
from ..errors import TierkvError
from ._hicache import Connections, Counters, digest, field, model_identity, sglang_class

log = logging.getLogger("tierkv.integrations.sglang")

_DEFAULT_SOCKET = "unix:/tmp/tierkv.sock"
_STORAGE = "sglang.srt.mem_cache.hicache_storage"


class _Binding:
    """How the pages of one host pool become objects: which page-table call
    gives their parts, how many objects a page makes (several when a rank's
    heads are split for a larger tp), and each object's key prefix."""

    def __init__(self, name: str, pool: Any, prefixes: list[str], parts: int, *,
                 reorder_kv: bool = False, split: int = 0, logical: bool = False):
        self.name, self.pool, self.prefixes = name, pool, prefixes
        self.parts_per_object = parts
        self.reorder_kv, self.split, self.logical = reorder_kv, split, logical

    def keys(self, hashes: list[str]) -> list[str]:
        return [f"{p}/{h}" for h in hashes for p in self.prefixes]

    def regions(self, host_indices: Any, pages: int) -> tuple[list[int], list[int]]:
        """(addresses, lengths) of every part of every object, in key order."""
        if self.split:
            ptrs, sizes = self.pool.get_split_heads_page_buffer_meta(host_indices, self.split)
        else:
            ptrs, sizes = self.pool.get_page_buffer_meta(host_indices)
        ptrs, sizes = list(ptrs), _sizes(sizes, len(ptrs))
        want = pages * len(self.prefixes) * self.parts_per_object
        if len(ptrs) != want:
            raise ValueError(f"pool {self.name}: the page table gave {len(ptrs)} regions for "
                             f"{pages} pages ({want} expected)")
        if self.reorder_kv:  # K0 V0 K1 V1 ... -> K0 K1 ... V0 V1 ...
            ptrs, sizes = _k_then_v(ptrs, self.parts_per_object), \
                _k_then_v(sizes, self.parts_per_object)
        return ptrs, sizes


def _k_then_v(values: list[int], per: int) -> list[int]:
    """Each run of `per` alternating K, V values as its K values, then its V."""
    out: list[int] = []
    for i in range(0, len(values), per):
        out += values[i:i + per:2]
        out += values[i + 1:i + per:2]
    return out


def _sizes(sizes: Any, n: int) -> list[int]:
    if isinstance(sizes, int):
        return [sizes] * n
    return [int(s) for s in sizes]


class _TierkvBackend:
    """The backend's logic; :data:`TierkvHiCacheStorage` adds SGLang's base
    class. Every method may be called from several threads at once."""

    def __init__(self, storage_config: Any = None, kwargs: Any = None):
        extra = dict(field(storage_config, "extra_config", None) or {})
        if isinstance(kwargs, dict):
            extra.update({k: v for k, v in kwargs.items() if k in ("socket", "tenant")})
        self.config = storage_config
        self.extra = extra
        self.socket = str(extra.get("socket", _DEFAULT_SOCKET))
        self.tenant = str(extra.get("tenant", "sglang"))
        # As SGLang decides between its zero-copy and copy paths.
        self.interface_v1 = bool(extra.get("interface_v1", 0))
        cfg = {k: int(field(storage_config, k, d) or d) for k, d in (
            ("tp_rank", 0), ("tp_size", 1), ("pp_rank", 0), ("pp_size", 1),
            ("attn_cp_rank", 0), ("attn_cp_size", 1))}
        self.tp_rank, self.tp_size = cfg["tp_rank"], cfg["tp_size"]
        self.pp_rank, self.pp_size = cfg["pp_rank"], cfg["pp_size"]
        self.cp_rank, self.cp_size = cfg["attn_cp_rank"], cfg["attn_cp_size"]
        self.is_mla = bool(field(storage_config, "is_mla_model", False))
        self.split_factor = 0
        if field(storage_config, "should_split_heads", False):
            lcm = int(field(storage_config, "tp_lcm_size", 0) or 0)
            if lcm <= 0 or lcm % self.tp_size:
                raise ValueError(f"tierkv: tp_lcm_size {lcm} is not a multiple of tp_size "
                                 f"{self.tp_size}")
            if not self.interface_v1:
                raise ValueError("tierkv: split heads (tp_lcm_size) needs interface_v1")
            self.split_factor = lcm // self.tp_size
        self.namespace = ""
        self.mem_pool_host = None
        self.registered_pools: dict[str, Any] = {}
        self._bindings: dict[str, _Binding] = {}
        self._conns: Connections | None = None
        self._counters = Counters()

    # -- setup ----------------------------------------------------------------
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Binds the KV host pool. Raises ValueError (SGLang then stops at
        start, naming the cause) when its layout has no page table for the
        zero-copy path. Never connects: the first call does."""
        self.mem_pool_host = mem_pool_host
        model = model_identity(self.config, self.extra, mem_pool_host)
        self.namespace = derive_namespace(**model)
        if self._conns is not None:
            self._conns.close_all()
        self._conns = Connections(self.socket, self.tenant, self.tp_rank, self.namespace)
        self._bindings["kv"] = self._bind("kv", mem_pool_host, kv=True)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        """Binds a hybrid model's side pool (mamba, swa, indexer, ...) for the
        ``*_v2`` calls; ``kv`` is the pool given to register_mem_pool_host."""
        name = str(getattr(host_pool_name, "value", host_pool_name))
        self.registered_pools[name] = host_pool
        if name == "kv" and "kv" in self._bindings:
            return
        self._bindings[name] = self._bind(name, host_pool, kv=False)

    def _bind(self, name: str, pool: Any, *, kv: bool) -> _Binding:
        if kv and getattr(pool, "kv_buffer", 0) is None:  # a logical anchor (no KV bytes)
            return _Binding(name, pool, [], 0, logical=True)
        import torch
        probe = torch.arange(int(field(pool, "page_size", 1) or 1))
        split = self.split_factor if kv else 0
        try:
            if split:
                ptrs, sizes = pool.get_split_heads_page_buffer_meta(probe, split)
            else:
                ptrs, sizes = pool.get_page_buffer_meta(probe)
            sizes = _sizes(sizes, len(ptrs))
        except Exception as e:  # noqa: BLE001 - the pool's own refusal, reported whole
            if kv and not self.interface_v1:  # the copy path moves flat pages instead
                page = pool.get_dummy_flat_data_page()
                return self._binding_of(name, pool, [page.numel() * page.element_size()], kv)
            raise ValueError(f"tierkv: host pool {name!r} (layout "
                             f"{field(pool, 'layout', '?')!r}) has no page table for "
                             f"zero-copy storage: {e}") from e
        if not ptrs:
            raise ValueError(f"tierkv: host pool {name!r} gave no regions for a page")
        objects = split or 1
        if len(ptrs) % objects:
            raise ValueError(f"tierkv: host pool {name!r} split into {objects} gave "
                             f"{len(ptrs)} regions per page")
        return self._binding_of(name, pool, sizes, kv, objects=objects)

    def _binding_of(self, name: str, pool: Any, sizes: list[int], kv: bool, *,
                    objects: int = 1) -> _Binding:
        per = len(sizes) // objects
        base = model_identity(self.config, self.extra, pool)
        base.update(pool=name, page_bytes=str(sum(sizes[:per])),
                    pp=f"{self.pp_rank}/{self.pp_size}", cp=f"{self.cp_rank}/{self.cp_size}")
        if self.is_mla:
            ranks = [""]  # every tp rank holds the same bytes
        elif objects > 1:  # this rank's heads, as the ranks of a tp_lcm_size deployment
            lcm = self.tp_size * objects
            ranks = [f"{self.tp_rank * objects + i}/{lcm}" for i in range(objects)]
        else:
            ranks = [f"{self.tp_rank}/{self.tp_size}"]
        prefixes = [digest(dict(base, tp=r))[:32] for r in ranks]
        reorder = kv and not self.is_mla and per > 2 and per % 2 == 0 and objects == 1
        return _Binding(name, pool, prefixes, per, reorder_kv=reorder,
                        split=objects if objects > 1 else 0)

    # -- zero-copy pages (interface_v1) --------------------------------------
    def batch_set_v1(self, keys: list[str], host_indices: Any, extra_info: Any = None) -> list[bool]:
        """Stores each page from the host pool; a page already stored counts
        as stored. One bool per page."""
        return self._guard(lambda: self._pages("set", "kv", keys, host_indices),
                           lambda: [False] * len(keys))

    def batch_get_v1(self, keys: list[str], host_indices: Any, extra_info: Any = None) -> list[bool]:
        """Loads each page straight into the host pool. A page whose stored
        size is not the pool's page is a failed page; nothing is copied into it."""
        return self._guard(lambda: self._pages("get", "kv", keys, host_indices),
                           lambda: [False] * len(keys))

    def _pages(self, kind: str, pool: str, keys: list[str], host_indices: Any) -> list[bool]:
        if not keys:
            return []
        b = self._bindings.get(pool)
        if b is None:
            raise ValueError(f"host pool {pool!r} is not registered")
        if b.logical:
            return [True] * len(keys)
        addrs, lens = b.regions(host_indices, len(keys))
        objs = b.keys(list(keys))
        per = len(b.prefixes)
        start = time.perf_counter()
        st = self._move(kind, objs, addrs, lens, len(keys))
        if st is None:
            return [False] * len(keys)
        ok_obj = [s.ok or (kind == "set" and s.name == "DUPLICATED") for s in st]
        out = [all(ok_obj[i * per:(i + 1) * per]) for i in range(len(keys))]
        self._after(st, kind, out, sum(lens) // max(1, len(keys)), start)
        if kind == "set":
            self._counters.add(set_existing=sum(s.name == "DUPLICATED" for s in st))
        return out

    def _move(self, kind: str, objs: list[str], addrs: list[int], lens: list[int],
              pages: int) -> list | None:
        """One scatter/gather call; None (the pages counted failed) when the
        manager cannot be reached or the call fails as a whole."""
        c = self._client()
        if c is None:
            self._counters.add(**{f"{kind}_failed": pages})
            return None
        try:
            return (c.batch_put_regions(objs, addrs, lens) if kind == "set"
                    else c.batch_get_regions(objs, addrs, lens))
        except (TierkvError, OSError) as e:
            self._lost(e, kind, pages)
            return None

    def _after(self, st: list, kind: str, out: list[bool], page_bytes: int, start: float) -> None:
        good = sum(out)
        self._counters.add(**{f"{kind}_pages": good, f"{kind}_failed": len(out) - good,
                              f"{kind}_bytes": good * page_bytes})
        self._counters.transfer(kind, good, good * page_bytes, time.perf_counter() - start)
        if any(s.name == "UNAVAILABLE" for s in st):
            self._conns.drop()  # the manager went away: reconnect on the next call

    def _lost(self, e: Exception, kind: str, pages: int) -> list[bool]:
        """A call failed as a whole (the connection): fail its pages, reconnect next time."""
        log.warning("tierkv: %s of %d pages failed: %s", kind, pages, e)
        self._counters.add(errors=1)
        if kind in ("set", "get"):
            self._counters.add(**{f"{kind}_failed": pages})
        if self._conns is not None:
            self._conns.drop()
        return [False] * pages

    # -- lookups ----------------------------------------------------------------
    def batch_exists(self, keys: list[str], extra_info: Any = None) -> int:
        """How many leading pages are stored (every object of each): the
        prefix a load can use. 0 while the manager cannot be reached."""
        return self._guard(lambda: self._leading("kv", keys), lambda: 0)

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def _leading(self, pool: str, keys: list[str]) -> int:
        found = self._found(pool, keys)
        return found.index(False) if False in found else len(found)

    def _found(self, pool: str, keys: list[str]) -> list[bool]:
        """Per page: every object of it stored."""
        if not keys:
            return []
        self._counters.add(exists_calls=1)
        b = self._bindings.get(pool)
        if b is None:
            raise ValueError(f"host pool {pool!r} is not registered")
        if b.logical:
            return [True] * len(keys)
        c = self._client()
        if c is None:
            return [False] * len(keys)
        try:
            found = c.batch_exists(b.keys(list(keys)))
        except (TierkvError, OSError) as e:
            self._lost(e, "exists", 0)
            return [False] * len(keys)
        per = len(b.prefixes)
        return [all(found[i * per:(i + 1) * per]) for i in range(len(keys))]

    # -- hybrid models (v2) ----------------------------------------------------
    def batch_exists_v2(self, keys: list[str], pool_transfers: Any = None,
                        extra_info: Any = None) -> Any:
        """The usable KV prefix given every side pool's hit policy
        (``all_pages``: each page of the prefix; ``trailing_pages``: the last
        ``len(transfer.keys)`` pages before the stop point)."""
        return self._guard(lambda: self._exists_v2(list(keys), pool_transfers or []),
                           lambda: _transfer_result(0, {}, []))

    def _exists_v2(self, keys: list[str], transfers: list) -> Any:
        kv_pages = self._leading("kv", keys)
        hits: dict[str, int] = {"kv": kv_pages} if kv_pages else {}
        restorable = set(range(1, kv_pages + 1))
        for t in transfers:
            if not restorable:
                break
            name = str(getattr(t.name, "value", t.name))
            present = self._found(name, keys[:kv_pages])
            if _policy(t) == "trailing_pages":
                window = max(1, len(t.keys) if t.keys else 1)
                ok = {p for p in range(1, kv_pages + 1)
                      if all(present[max(0, p - window):p])}
            else:
                lead = present.index(False) if False in present else kv_pages
                ok = set(range(1, lead + 1))
            if ok:
                hits[name] = max(ok)
            restorable &= ok
        stops = sorted(restorable)
        return _transfer_result(stops[-1] if stops else 0, hits, stops)

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict[str, list[bool]]:
        """Loads each transfer's pages into its pool; one bool per page and pool."""
        return self._v2("get", transfers)

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict[str, list[bool]]:
        """Stores each transfer's pages from its pool; one bool per page and pool."""
        return self._v2("set", transfers)

    def _v2(self, kind: str, transfers: list) -> dict[str, list[bool]]:
        out: dict[str, list[bool]] = {}
        for t in transfers or []:
            name = str(getattr(t.name, "value", t.name))
            keys = list(t.keys or [])
            out[name] = self._guard(
                lambda: self._pages(kind, name, keys, t.host_indices),
                lambda: [False] * len(keys))
        return out

    # -- copy path (interface_v1 off) ------------------------------------------
    def set(self, key: str, value: Any = None, target_location: Any = None,
            target_sizes: Any = None) -> bool:
        return self.batch_set([key], None if value is None else [value],
                              None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])

    def batch_set(self, keys: list[str], values: Any = None, target_locations: Any = None,
                  target_sizes: Any = None) -> bool:
        """Stores each flat page (a CPU tensor, or address and size); True when
        every one is stored (one already stored counts)."""
        return self._guard(lambda: all(self._copy("set", keys, values, target_locations,
                                                  target_sizes)), lambda: False)

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        got = self.batch_get([key], None if target_location is None else [target_location],
                             None if target_sizes is None else [target_sizes])
        return got[0]

    def batch_get(self, keys: list[str], target_locations: Any = None,
                  target_sizes: Any = None) -> list[Any]:
        """Each page into its target tensor (its byte size must be the stored
        one exactly), or as a new uint8 tensor; None for a miss."""
        return self._guard(lambda: self._copy_get(keys, target_locations, target_sizes),
                           lambda: [None] * len(keys))

    def _copy(self, kind: str, keys: list[str], values: Any, locations: Any,
              sizes: Any) -> list[bool]:
        if not keys:
            return []
        b = self._bindings["kv"]
        if b.split:
            raise ValueError("the copy path cannot move split-head pages")
        hold, addrs, lens = [], [], []
        for i in range(len(keys)):
            if values is not None and values[i] is not None:
                t = values[i]
                if not t.is_contiguous():
                    if kind == "get":
                        raise ValueError("a target page must be a contiguous tensor")
                    t = t.contiguous()
                hold.append(t)
                addrs.append(t.data_ptr())
                lens.append(t.numel() * t.element_size())
            else:
                addrs.append(int(locations[i]))
                lens.append(int(sizes[i]))
        objs = [f"{b.prefixes[0]}/{k}" for k in keys]
        start = time.perf_counter()
        st = self._move(kind, objs, addrs, lens, len(keys))
        if st is None:
            return [False] * len(keys)
        out = [s.ok or (kind == "set" and s.name == "DUPLICATED") for s in st]
        self._after(st, kind, out, sum(lens) // len(keys), start)
        return out

    def _copy_get(self, keys: list[str], locations: Any, sizes: Any) -> list[Any]:
        import torch
        if not keys:
            return []
        targets = list(locations) if locations is not None else [None] * len(keys)
        if any(t is None for t in targets):
            page = self.mem_pool_host.get_dummy_flat_data_page()
            targets = [page.clone() if t is None else t for t in targets]
        tensors = [t if isinstance(t, torch.Tensor) else None for t in targets]
        ok = self._copy("get", keys, tensors, targets, sizes)
        return [t if good else None for t, good in zip(targets, ok)]

    # -- maintenance ------------------------------------------------------------
    def clear(self) -> None:
        """Removes this deployment's pages (every pool, this rank's identity);
        other models and ranks in the tenant keep theirs."""
        self._guard(self._clear, lambda: None)

    def _clear(self) -> None:
        c = self._client()
        if c is None:
            return
        for b in self._bindings.values():
            for prefix in b.prefixes:
                while True:
                    batch = c.list_keys(prefix + "/", 4096)
                    if not batch:
                        break
                    c.batch_remove(batch)

    def get_stats(self) -> Any:
        """SGLang's StorageMetrics with the pages and GB/s of every prefetch
        and backup since the last call, or None without SGLang's class."""
        return self._guard(self._counters.take_storage_metrics, lambda: None)

    def stats(self) -> dict[str, int]:
        """Counters since start: pages set / got / failed, bytes, errors."""
        out = self._counters.totals()
        out["connect_failures"] = self._conns.connect_failures if self._conns else 0
        return out

    def close(self) -> None:
        if self._conns is not None:
            self._conns.close_all()

    # -- helpers ------------------------------------------------------------
    def _client(self) -> Any:
        if self._conns is None:
            raise ValueError("register_mem_pool_host was not called")
        return self._conns.get()

    def _guard(self, call: Callable[[], Any], failure: Callable[[], Any]) -> Any:
        """Runs `call`; any exception is logged and answered with `failure()`."""
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - never raise into SGLang's threads
            log.error("tierkv: HiCache storage call failed: %s", e, exc_info=True)
            self._counters.add(errors=1)
            return failure()


def _policy(transfer: Any) -> str:
    p = getattr(transfer, "hit_policy", "all_pages")
    return str(getattr(p, "value", p))


@dataclasses.dataclass
class _Result:
    kv_hit_pages: int
    extra_pool_hit_pages: dict


def _transfer_result(kv_pages: int, hits: dict[str, int], stops: list[int]) -> Any:
    """SGLang's PoolTransferResult (with the restorable stop points where its
    release has that field), or an equivalent without SGLang."""
    cls = sglang_class(_STORAGE, "PoolTransferResult") or _Result
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    if len(names) > 2:
        return cls(kv_pages, hits, *([stops] + [None] * (len(names) - 3)))
    return cls(kv_pages, hits)


_CLASSES: dict[Any, type] = {}


def _storage_class() -> type:
    """The backend class on SGLang's HiCacheStorage when SGLang can be
    imported now (so its factory's issubclass check holds whatever was
    imported first), else on the backend alone."""
    base = sglang_class(_STORAGE, "HiCacheStorage")
    if base not in _CLASSES:
        bases = (_TierkvBackend,) if base is None else (_TierkvBackend, base)
        _CLASSES[base] = type("TierkvHiCacheStorage", bases,
                              {"__doc__": _TierkvBackend.__doc__, "__module__": __name__})
    return _CLASSES[base]


def __getattr__(name: str) -> Any:
    if name == "TierkvHiCacheStorage":
        return _storage_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
