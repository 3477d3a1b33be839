"""Metrics for tierlog: named like Kafka's, safe across threads, exported to Prometheus.

A runtime owns one ``MetricsRegistry``; each plugin gets a ``MetricsView`` of it
(``registry.for_plugin(name, *roles)``) that tags and owns the plugin's metrics (KIP-877).
"""

from __future__ import annotations

from ..errors import MetricKindError
from .kinds import (
    QUANTILES,
    Clock,
    Counter,
    Gauge,
    Histogram,
    Meter,
    Metric,
    MetricValue,
    Number,
    Timer,
)
from .name import MetricName, freeze_tags
from .prometheus import (
    DEFAULT_PREFIX,
    LabelledRegistriesCollector,
    PrometheusServer,
    RegistryCollector,
    prometheus_labels,
    prometheus_name,
    prometheus_text,
    serve_collector,
    serve_prometheus,
)
from .registry import MetricsRegistry, MetricsScope, MetricsView

__all__ = [
    "DEFAULT_PREFIX",
    "QUANTILES",
    "Clock",
    "Counter",
    "Gauge",
    "Histogram",
    "LabelledRegistriesCollector",
    "Meter",
    "Metric",
    "MetricKindError",
    "MetricName",
    "MetricValue",
    "MetricsRegistry",
    "MetricsScope",
    "MetricsView",
    "Number",
    "PrometheusServer",
    "RegistryCollector",
    "Timer",
    "freeze_tags",
    "prometheus_labels",
    "prometheus_name",
    "prometheus_text",
    "serve_collector",
    "serve_prometheus",
]
