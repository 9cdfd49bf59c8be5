"""Stand-in of vLLM's connector metrics module, written from its documented
interface: the stats base (a dataclass whose ``data`` dict crosses process
boundaries), the per-connector Prometheus base, and the logging and
Prometheus pipelines the engine runs over a connector's stats (rebuild from
``data`` with the connector class's ``build_kv_connector_stats``, aggregate,
reduce; ``build_prom_metrics`` once, ``observe`` per report)."""

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Gauge, Histogram


@dataclass
class KVConnectorStats:
    data: dict[str, Any] = field(default_factory=dict)

    def reset(self):
        raise NotImplementedError

    def aggregate(self, other):
        raise NotImplementedError

    def reduce(self):
        raise NotImplementedError

    def is_empty(self):
        raise NotImplementedError


class KVConnectorPromMetrics:
    def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        self._kv_transfer_config = vllm_config.kv_transfer_config
        self._gauge_cls = metric_types[Gauge]
        self._counter_cls = metric_types[Counter]
        self._histogram_cls = metric_types[Histogram]
        self._labelnames = labelnames
        self.per_engine_labelvalues = per_engine_labelvalues

    def observe(self, transfer_stats_data, engine_idx=0):
        raise NotImplementedError


class KVConnectorLogging:
    """The logging process's accumulator: one interval's stats, reduced."""

    def __init__(self, connector_cls):
        self.connector_cls = connector_cls
        self.accumulated = None

    def observe(self, transfer_stats_data):
        stats = self.connector_cls.build_kv_connector_stats(transfer_stats_data)
        if stats is None:
            return
        self.accumulated = stats if self.accumulated is None else self.accumulated.aggregate(stats)

    def log(self):
        """The interval's reduce(), or None; the interval restarts."""
        out = None
        if self.accumulated is not None and not self.accumulated.is_empty():
            out = self.accumulated.reduce()
        self.accumulated = None
        return out


class KVConnectorProm:
    def __init__(self, vllm_config, connector_cls, labelnames, per_engine_labelvalues):
        types = {Gauge: Gauge, Counter: Counter, Histogram: Histogram}
        self.prom_metrics = connector_cls.build_prom_metrics(vllm_config, types, labelnames,
                                                             per_engine_labelvalues)

    def observe(self, transfer_stats_data, engine_idx=0):
        if self.prom_metrics is not None:
            self.prom_metrics.observe(transfer_stats_data, engine_idx)
