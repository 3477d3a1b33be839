"""Export a ``MetricsRegistry`` in the Prometheus text format through ``prometheus_client``.

Name mapping (one rule, so an operator can find any Kafka metric): ``<prefix>_<group>_<name>``,
lower-cased, with every character outside ``[a-z0-9_]`` replaced by ``_``. ``MetricName(
"BrokerTopicMetrics", "RemoteCopyBytesPerSec", {"topic": "t"})`` becomes
``tierlog_brokertopicmetrics_remotecopybytespersec``. Tags become labels with their case kept
(``clientId``), invalid characters replaced by ``_``; a tag named ``quantile`` or starting with
``__`` is exported as ``tag_<name>`` because Prometheus reserves those.

Per kind, with ``B`` the mapped name:

* counter: counter ``B_total``.
* gauge: gauge ``B``.
* meter: counter ``B_total`` (the count) and gauges ``B_mean_rate``, ``B_one_minute_rate``,
  ``B_five_minute_rate``, ``B_fifteen_minute_rate`` (events per second).
* histogram: summary ``B`` (``B{quantile="0.5"}`` .. ``"0.999"``, ``B_sum``, ``B_count``) and
  gauges ``B_min`` and ``B_max``.
* timer: the histogram's families, in milliseconds, plus the meter's rate gauges.

Several registries in one scrape (every broker of a cluster, as ``tierlog run`` serves them):
:class:`LabelledRegistriesCollector` adds a constant label to each registry's series,
``broker="0"``, ``broker="1"``, ..., so one family holds every broker's series and a query sums
or splits them by broker. A metric whose own tag has that label's name keeps it as
``exported_<name>``, as Prometheus renames a clashing target label.

The collector reads the registry on every scrape. Two tierlog metrics that map to the same series
(or to one family name with different types) cannot both be exported; the first in name order is
kept and the clash is logged. A gauge whose function raises or returns a non-number is left out
of that scrape and logged, so one broken plugin gauge cannot fail the whole scrape.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Final, NamedTuple
from wsgiref.simple_server import WSGIServer

import attrs
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric as PromFamily
from prometheus_client.registry import Collector

from .kinds import QUANTILES, Counter, Histogram, Meter, Metric, MetricValue, Number, Timer
from .name import MetricName
from .registry import MetricsRegistry

logger = logging.getLogger(__name__)

DEFAULT_PREFIX: Final = "tierlog"
_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED_LABELS: Final = frozenset({"quantile"})
_RATES: Final = ("mean_rate", "one_minute_rate", "five_minute_rate", "fifteen_minute_rate")


def prometheus_name(name: MetricName, *, prefix: str = DEFAULT_PREFIX) -> str:
    """The Prometheus family name for ``name`` (before any ``_total`` or other suffix)."""
    parts = [prefix, name.group, name.name] if prefix else [name.group, name.name]
    mapped = _INVALID.sub("_", "_".join(parts)).lower()
    return f"_{mapped}" if mapped[0].isdigit() else mapped


def prometheus_labels(name: MetricName) -> dict[str, str]:
    """The Prometheus labels for ``name``'s tags."""
    labels: dict[str, str] = {}
    for key, value in name.tags:
        label = _INVALID.sub("_", key)
        if label[0].isdigit():
            label = f"_{label}"
        if label in _RESERVED_LABELS or label.startswith("__"):
            label = f"tag_{label}"
        labels[label] = value
    return labels


class _Sample(NamedTuple):
    family: str
    type: str
    name: str
    labels: dict[str, str]
    value: Number

    @property
    def series(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted(self.labels.items()))


class _Families:
    """The families of one scrape; refuses a family type clash or a series seen twice."""

    def __init__(self) -> None:
        self._families: dict[str, PromFamily] = {}
        self._series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    def fits(self, sample: _Sample) -> bool:
        existing = self._families.get(sample.family)
        if existing is not None and existing.type != sample.type:
            return False
        return sample.series not in self._series

    def add(self, sample: _Sample, doc: str) -> None:
        family = self._families.get(sample.family)
        if family is None:
            family = self._families[sample.family] = PromFamily(sample.family, doc, sample.type)
        family.add_sample(sample.name, sample.labels, sample.value)
        self._series.add(sample.series)

    def __iter__(self) -> Iterator[PromFamily]:
        return iter(self._families.values())


def _samples(
    base: str, metric: Metric, value: MetricValue, labels: dict[str, str]
) -> list[_Sample]:
    """The samples one metric exports, following the table in the module docstring."""
    if not isinstance(value, dict):
        if isinstance(metric, Counter):
            return [_Sample(base, "counter", f"{base}_total", labels, value)]
        return [_Sample(base, "gauge", base, labels, value)]
    samples: list[_Sample] = []
    if isinstance(metric, Meter):
        samples.append(_Sample(base, "counter", f"{base}_total", labels, value["count"]))
    if isinstance(metric, Histogram | Timer):
        for key, q in QUANTILES:
            quantile_labels = {**labels, "quantile": str(q)}
            samples.append(_Sample(base, "summary", base, quantile_labels, value[key]))
        samples.append(_Sample(base, "summary", f"{base}_sum", labels, value["sum"]))
        samples.append(_Sample(base, "summary", f"{base}_count", labels, value["count"]))
        for key in ("min", "max"):
            samples.append(_Sample(f"{base}_{key}", "gauge", f"{base}_{key}", labels, value[key]))
    if isinstance(metric, Meter | Timer):
        for key in _RATES:
            samples.append(_Sample(f"{base}_{key}", "gauge", f"{base}_{key}", labels, value[key]))
    return samples


class RegistryCollector:
    """A ``prometheus_client`` collector that reads a ``MetricsRegistry`` on every scrape."""

    def __init__(self, registry: MetricsRegistry, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._registry = registry
        self._prefix = prefix

    def describe(self) -> list[PromFamily]:
        """Nothing up front: the set of metrics changes at run time, so it is read per scrape."""
        return []

    def collect(self) -> Iterator[PromFamily]:
        families = _Families()
        _add_registry(families, self._registry, self._prefix, {})
        yield from families


class LabelledRegistriesCollector:
    """Several registries read on every scrape, each series labelled with its registry's key.

    One collector rather than one per registry, because the text format allows each family
    once: the same metric of two brokers must be two series of one family. ``registries`` is
    called per scrape, so a broker that stopped, started or restarted (a new registry) shows
    as it is now.
    """

    def __init__(
        self,
        registries: Callable[[], Mapping[str, MetricsRegistry]],
        *,
        label: str = "broker",
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if not _LABEL.match(label) or label in _RESERVED_LABELS or label.startswith("__"):
            raise ValueError(f"{label!r} cannot be a Prometheus label name")
        self._registries = registries
        self._label = label
        self._prefix = prefix

    def describe(self) -> list[PromFamily]:
        return []

    def collect(self) -> Iterator[PromFamily]:
        families = _Families()
        for value, registry in sorted(self._registries().items()):
            _add_registry(families, registry, self._prefix, {self._label: value})
        yield from families


def _add_registry(
    families: _Families, registry: MetricsRegistry, prefix: str, constant: Mapping[str, str]
) -> None:
    """Adds every readable, non-clashing metric of ``registry``, with ``constant`` labels."""
    for name, metric in registry.items():
        try:
            value = metric.snapshot()
        except Exception:
            logger.warning("metric %s could not be read; left out", name, exc_info=True)
            continue
        base = prometheus_name(name, prefix=prefix)
        labels = prometheus_labels(name)
        for label, label_value in constant.items():
            if label in labels:
                labels[f"exported_{label}"] = labels.pop(label)
            labels[label] = label_value
        samples = _samples(base, metric, value, labels)
        if not all(isinstance(sample.value, int | float) for sample in samples):
            logger.warning("metric %s read as a non-number (%r); left out", name, value)
            continue
        if not all(families.fits(sample) for sample in samples):
            logger.warning("metric %s clashes with an exported Prometheus series; left out", name)
            continue
        doc = f"tierlog {metric.kind} {name.group} {name.name}"
        for sample in samples:
            families.add(sample, doc)


def prometheus_text(registry: MetricsRegistry, *, prefix: str = DEFAULT_PREFIX) -> str:
    """The registry in the Prometheus text exposition format."""
    collectors = CollectorRegistry()
    collectors.register(RegistryCollector(registry, prefix=prefix))
    return generate_latest(collectors).decode("utf-8")


@attrs.define(eq=False)
class PrometheusServer:
    """A running ``/metrics`` HTTP endpoint; ``close()`` (or leaving ``with``) stops it."""

    _httpd: WSGIServer
    _thread: threading.Thread

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        return self._httpd.server_port

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve_prometheus(
    registry: MetricsRegistry,
    port: int,
    addr: str = "127.0.0.1",
    *,
    prefix: str = DEFAULT_PREFIX,
) -> PrometheusServer:
    """Serve the registry for Prometheus scrapes on ``addr:port`` (port 0 picks a free port).

    Uses a private ``CollectorRegistry``, so nothing else registered with ``prometheus_client``'s
    global registry is exposed, and several runtimes in one process do not clash.
    """
    return serve_collector(RegistryCollector(registry, prefix=prefix), port, addr)


def serve_collector(collector: Collector, port: int, addr: str = "127.0.0.1") -> PrometheusServer:
    """Serve one collector (a :class:`LabelledRegistriesCollector`, say) on ``addr:port``, in a
    private ``CollectorRegistry`` as :func:`serve_prometheus` does."""
    collectors = CollectorRegistry()
    collectors.register(collector)
    httpd, thread = start_http_server(port, addr=addr, registry=collectors)
    return PrometheusServer(httpd, thread)
