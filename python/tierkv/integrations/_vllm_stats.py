"""The vLLM connector's counters, reported through vLLM's stats hooks.

vLLM asks each connector (scheduler and workers) for a stats object every
step (``get_kv_connector_stats``), sums the workers' objects with
``aggregate``, ships them to its logging process as their ``data`` dict,
rebuilds them there with the connector's ``build_kv_connector_stats``, logs
``reduce()`` each interval and feeds ``data`` to the Prometheus metrics the
connector built with ``build_prom_metrics``. Everything here is plain
counters (ints and float seconds) so ``data`` pickles and serialises as is.

Scheduler counters count logical blocks; worker counters count objects, one
per block and worker, so under tensor parallelism they are the sum over the
ranks.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
        KVConnectorPromMetrics, KVConnectorStats)
    HAVE_PROM_METRICS = True
except ImportError:  # pragma: no cover - vLLM before the stats hooks
    HAVE_PROM_METRICS = False
    KVConnectorPromMetrics = object  # type: ignore[assignment,misc]

    @dataclasses.dataclass
    class KVConnectorStats:  # type: ignore[no-redef]
        data: dict = dataclasses.field(default_factory=dict)


# name -> help text; the Prometheus counter is vllm:tierkv_<name>.
COUNTERS: dict[str, str] = {
    "lookups": "Scheduler lookups of a request's prompt blocks in tierkv.",
    "lookup_blocks": "Prompt blocks the scheduler asked tierkv for.",
    "hit_blocks": "Prompt blocks tierkv held for every worker (loaded instead of computed).",
    "lookup_failures": "Lookups that failed (manager unreachable); their blocks were computed.",
    "load_blocks": "Block objects read into the paged KV cache.",
    "load_bytes": "Bytes read into the paged KV cache.",
    "load_seconds": "Seconds the worker spent reading blocks.",
    "load_failed_blocks": "Block objects that could not be read; vLLM recomputed them.",
    "save_blocks": "Block objects written to tierkv (or already held there).",
    "save_bytes": "Bytes written to tierkv.",
    "save_seconds": "Seconds the worker spent writing blocks.",
    "save_failed_blocks": "Block objects that could not be written.",
}


@dataclasses.dataclass
class TierkvConnectorStats(KVConnectorStats):
    """StepCounters since the last report, in ``data`` (a name of COUNTERS to a
    number). Not thread-safe: each object belongs to one caller."""

    def __post_init__(self) -> None:
        if not isinstance(self.data, dict):
            self.data = {}
        for name in COUNTERS:
            self.data.setdefault(name, 0)

    def reset(self) -> None:
        for name in COUNTERS:
            self.data[name] = 0

    def is_empty(self) -> bool:
        return not any(self.data.get(name) for name in COUNTERS)

    def aggregate(self, other: Any) -> "TierkvConnectorStats":
        """Adds `other`'s counters to this object's; returns this object."""
        data = getattr(other, "data", None) or {}
        for name in COUNTERS:
            self.data[name] = self.data.get(name, 0) + data.get(name, 0)
        return self

    def reduce(self) -> dict[str, int | float]:
        d = self.data
        asked = d["lookup_blocks"]
        return {
            "Lookups": d["lookups"],
            "Hit blocks": d["hit_blocks"],
            "Hit rate (%)": round(100.0 * d["hit_blocks"] / asked, 1) if asked else 0.0,
            "Lookup failures": d["lookup_failures"],
            "Loaded objects": d["load_blocks"],
            "Load MB/s": _rate(d["load_bytes"], d["load_seconds"]),
            "Failed loads": d["load_failed_blocks"],
            "Saved objects": d["save_blocks"],
            "Save MB/s": _rate(d["save_bytes"], d["save_seconds"]),
            "Failed saves": d["save_failed_blocks"],
        }


def _rate(nbytes: float, seconds: float) -> float:
    return round(nbytes / seconds / 1e6, 1) if seconds > 0 else 0.0


class StepCounters:
    """The live counters of one connector half. Thread-safe: the worker's
    thread adds while vLLM's thread takes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = dict.fromkeys(COUNTERS, 0)

    def add(self, **counts: float) -> None:
        with self._lock:
            for name, n in counts.items():
                self._data[name] += n

    def take(self) -> TierkvConnectorStats | None:
        """The counters since the last take (None when nothing happened);
        they restart from zero."""
        with self._lock:
            if not any(self._data.values()):
                return None
            data, self._data = self._data, dict.fromkeys(COUNTERS, 0)
        return TierkvConnectorStats(data=data)


class TierkvPromMetrics(KVConnectorPromMetrics):  # type: ignore[misc,valid-type]
    """One Prometheus counter per name of COUNTERS, ``vllm:tierkv_<name>``,
    with vLLM's per-engine labels."""

    def __init__(self, vllm_config: Any, metric_types: dict, labelnames: list[str],
                 per_engine_labelvalues: dict[int, list[object]]):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        counter_cls = getattr(self, "_counter_cls", None) or next(
            cls for key, cls in metric_types.items() if getattr(key, "__name__", "") == "Counter")
        self._counters = {}
        for name, text in COUNTERS.items():
            metric = counter_cls(name=f"vllm:tierkv_{name}", documentation=text,
                                 labelnames=labelnames)
            self._counters[name] = {engine: metric.labels(*values)
                                    for engine, values in per_engine_labelvalues.items()}

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0) -> None:
        for name, per_engine in self._counters.items():
            n = (transfer_stats_data or {}).get(name, 0)
            if n and engine_idx in per_engine:
                per_engine[engine_idx].inc(n)
