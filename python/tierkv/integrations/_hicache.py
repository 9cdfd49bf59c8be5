"""Support for the SGLang HiCache backend: per-thread connections, counters in
SGLang's own types, and the identity that goes into every object key.

Nothing here imports SGLang at module load; SGLang's classes are looked up
when they are needed, so the package imports with or without SGLang.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import threading
import time
from typing import Any

from .. import Client
from ..errors import TierkvError

log = logging.getLogger("tierkv.integrations.sglang")

# A thread whose connect failed does not try again for this long: its calls
# answer with failure values at once meanwhile (SGLang then recomputes).
RECONNECT_INTERVAL_S = 1.0

_METRICS_MODULES = ("sglang.srt.observability.metrics_collector", "sglang.srt.metrics.collector")


def sglang_class(module: str, name: str) -> Any:
    """SGLang's class `name` from `module`, or None when SGLang lacks it."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


class Connections:
    """One tierkv Client per calling thread, opened on first use.

    SGLang calls a backend from its prefetch, I/O and backup threads at once;
    a connection serialises its calls, so each thread gets its own and a
    backup never delays a lookup. Thread-safe."""

    def __init__(self, address: str, tenant: str, rank: int, namespace: str,
                 client_name: str = "sglang-hicache"):
        self.address, self.tenant, self.rank, self.namespace = address, tenant, rank, namespace
        self.client_name = client_name
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[Client] = []
        self.connect_failures = 0

    def get(self) -> Client | None:
        """This thread's client, or None while the manager cannot be reached."""
        c = getattr(self._local, "client", None)
        if c is not None:
            return c
        now = time.monotonic()
        if now < getattr(self._local, "retry_at", 0.0):
            return None
        try:
            c = Client(self.address, self.tenant, rank=self.rank, client_name=self.client_name,
                       namespace=self.namespace)
        except (TierkvError, OSError) as e:
            self._local.retry_at = now + RECONNECT_INTERVAL_S
            with self._lock:
                self.connect_failures += 1
            log.warning("tierkv: cannot connect to %s (%s); the KV is recomputed meanwhile",
                        self.address, e)
            return None
        self._local.client = c
        with self._lock:
            self._all.append(c)
        return c

    def drop(self) -> None:
        """Closes this thread's client (the next call connects again)."""
        c = getattr(self._local, "client", None)
        self._local.client = None
        if c is None:
            return
        with self._lock:
            if c in self._all:
                self._all.remove(c)
        _close(c)

    def close_all(self) -> None:
        with self._lock:
            clients, self._all = self._all, []
        for c in clients:
            _close(c)
        self._local = threading.local()


def _close(c: Client) -> None:
    try:
        c.close()
    except (TierkvError, OSError):
        pass


class Counters:
    """Page counters since start (for :meth:`stats`) and the per-call figures
    SGLang's ``get_stats`` drains (pages and GB/s per prefetch and backup).
    Thread-safe."""

    NAMES = ("set_pages", "set_failed", "set_existing", "get_pages", "get_failed",
             "exists_calls", "errors", "set_bytes", "get_bytes")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = {k: 0 for k in self.NAMES}
        self._drain = {"prefetch_pgs": [], "backup_pgs": [], "prefetch_bandwidth": [],
                       "backup_bandwidth": []}

    def add(self, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                self._totals[k] += v

    def transfer(self, kind: str, pages: int, nbytes: int, seconds: float) -> None:
        """One batch get ("get") or set ("set") that moved `pages` pages."""
        if pages <= 0:
            return
        side = "prefetch" if kind == "get" else "backup"
        with self._lock:
            self._drain[f"{side}_pgs"].append(pages)
            self._drain[f"{side}_bandwidth"].append(nbytes / max(seconds, 1e-9) / 1e9)

    def totals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._totals)

    def take_storage_metrics(self) -> Any:
        """SGLang's StorageMetrics holding what was recorded since the last
        call (then forgotten), or None when SGLang does not have the class."""
        cls = None
        for module in _METRICS_MODULES:
            cls = sglang_class(module, "StorageMetrics")
            if cls is not None:
                break
        if cls is None:
            return None
        m = cls()
        with self._lock:
            for name, values in self._drain.items():
                getattr(m, name).extend(values)
                values.clear()
        return m


def digest(inputs: dict[str, str]) -> str:
    """Hex SHA-256 of the canonical JSON of `inputs`."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def model_identity(config: Any, extra: dict, pool: Any) -> dict[str, str]:
    """What every page of the deployment depends on, whatever the rank: the
    model (and an operator's tag), its attention kind, the host pool's layout,
    dtype and page size."""
    return {
        "engine": "sglang-hicache",
        "model": str(field(config, "model_name", "") or ""),
        "tag": str(extra.get("extra_backend_tag", "") or ""),
        "attention": "mla" if field(config, "is_mla_model", False) else "mha",
        "layout": str(field(pool, "layout", "")),
        "dtype": str(field(pool, "dtype", "")),
        "page_size": str(field(pool, "page_size", "")),
    }


def field(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)
