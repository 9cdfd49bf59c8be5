"""Stand-in of the Prometheus client's metric classes (the constructor,
``labels`` and the update methods vLLM's connector metrics use), keeping
every sample in memory and a process-wide registry that refuses a name twice,
as the real default registry does."""

import re

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
REGISTRY: dict[str, "_Metric"] = {}


class _Child:
    def __init__(self):
        self.value = 0.0
        self.observations = []

    def inc(self, amount=1):
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount

    def set(self, value):
        self.value = float(value)

    def observe(self, amount):
        self.observations.append(amount)


class _Metric:
    def __init__(self, name, documentation, labelnames=(), **kwargs):
        if not _NAME.match(name):
            raise ValueError("Invalid metric name: " + name)
        if name in REGISTRY:
            raise ValueError("Duplicated timeseries in CollectorRegistry: " + name)
        REGISTRY[name] = self
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self.children = {}

    def labels(self, *values):
        if len(values) != len(self.labelnames):
            raise ValueError("Incorrect label count")
        key = tuple(str(v) for v in values)
        return self.children.setdefault(key, _Child())


class Counter(_Metric):
    pass


class Gauge(_Metric):
    pass


class Histogram(_Metric):
    pass
