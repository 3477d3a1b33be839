"""Prometheus export: names, labels and values parse back with prometheus_client's own parser."""

from __future__ import annotations

import logging
import math
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tierlog.metrics import (
    LabelledRegistriesCollector,
    MetricName,
    MetricsRegistry,
    prometheus_labels,
    prometheus_name,
    prometheus_text,
    serve_collector,
    serve_prometheus,
)

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def parse(text: str) -> tuple[dict[str, str], Series]:
    """Family types by name, and every sample's value by (sample name, labels)."""
    types: dict[str, str] = {}
    series: Series = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in series, f"series exported twice: {key}"
            series[key] = sample.value
    return types, series


def labels(**tags: str) -> frozenset[tuple[str, str]]:
    return frozenset(tags.items())


COPY_BYTES = MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec", {"topic": "t"})


def test_name_mapping() -> None:
    assert prometheus_name(COPY_BYTES) == "tierlog_brokertopicmetrics_remotecopybytespersec"
    assert prometheus_name(MetricName("kafka.log-remote", "Tasks%Idle")) == (
        "tierlog_kafka_log_remote_tasks_idle"
    )
    assert prometheus_name(COPY_BYTES, prefix="") == "brokertopicmetrics_remotecopybytespersec"
    assert prometheus_name(MetricName("9x", "N"), prefix="") == "_9x_n"
    assert prometheus_labels(
        MetricName("G", "N", {"clientId": "Replica", "client-id": "a", "quantile": "q"})
    ) == {"clientId": "Replica", "client_id": "a", "tag_quantile": "q"}


def test_every_kind_exports_and_parses_back() -> None:
    clock = FakeClock()
    registry = MetricsRegistry(clock=clock)
    registry.meter(COPY_BYTES).mark(500)
    registry.meter(MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec")).mark(700)
    registry.counter(MetricName("BrokerTopicMetrics", "EmptyProducerSnapshotsWritten")).inc(2)
    registry.gauge(
        MetricName("ReplicaFetcherManager", "FailedPartitionsCount", {"clientId": "Replica"}),
        lambda: 3,
    )
    histogram = registry.histogram(MetricName("RemoteLogManager", "SegmentSizeBytes"))
    for v in range(1, 101):
        histogram.update(v)
    timer = registry.timer(MetricName("RemoteLogManager", "RemoteLogReaderFetchRateAndTimeMs"))
    timer.update(20.0)
    registry.for_plugin("fsspec", "rsm").counter(MetricName("RemoteStorage", "Uploads")).inc(4)
    clock.now += 5.0

    types, series = parse(prometheus_text(registry))

    copy = "tierlog_brokertopicmetrics_remotecopybytespersec"
    assert types[copy] == "counter"
    assert series[(f"{copy}_total", labels(topic="t"))] == 500
    assert series[(f"{copy}_total", labels())] == 700
    assert types[f"{copy}_one_minute_rate"] == "gauge"
    assert series[(f"{copy}_one_minute_rate", labels(topic="t"))] == pytest.approx(100.0)
    assert series[(f"{copy}_mean_rate", labels(topic="t"))] == pytest.approx(100.0)
    for rate in ("five_minute_rate", "fifteen_minute_rate"):
        assert series[(f"{copy}_{rate}", labels())] == pytest.approx(140.0)

    empty = "tierlog_brokertopicmetrics_emptyproducersnapshotswritten"
    assert types[empty] == "counter"
    assert series[(f"{empty}_total", labels())] == 2

    failed = "tierlog_replicafetchermanager_failedpartitionscount"
    assert types[failed] == "gauge"
    assert series[(failed, labels(clientId="Replica"))] == 3

    size = "tierlog_remotelogmanager_segmentsizebytes"
    assert types[size] == "summary"
    assert series[(f"{size}_count", labels())] == 100
    assert series[(f"{size}_sum", labels())] == 5050
    assert series[(f"{size}_min", labels())] == 1
    assert series[(f"{size}_max", labels())] == 100
    for quantile, exact in (("0.5", 50), ("0.75", 75), ("0.95", 95), ("0.99", 99), ("0.999", 99)):
        value = series[(size, labels(quantile=quantile))]
        assert abs(value - exact) <= exact * 0.0100001, quantile

    fetch = "tierlog_remotelogmanager_remotelogreaderfetchrateandtimems"
    assert types[fetch] == "summary"
    assert series[(f"{fetch}_count", labels())] == 1
    assert series[(fetch, labels(quantile="0.99"))] == pytest.approx(20.0)
    assert series[(f"{fetch}_one_minute_rate", labels())] == pytest.approx(0.2)

    uploads = "tierlog_remotestorage_uploads_total"
    assert series[(uploads, labels(plugin="fsspec", role="rsm"))] == 4


def test_removed_metrics_leave_the_export() -> None:
    registry = MetricsRegistry()
    view = registry.for_plugin("gone")
    view.counter(MetricName("RemoteStorage", "Uploads")).inc()
    registry.counter(MetricName("RemoteStorage", "Kept")).inc()
    view.close()
    _, series = parse(prometheus_text(registry))
    assert set(series) == {("tierlog_remotestorage_kept_total", labels())}


def test_a_failing_gauge_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    registry = MetricsRegistry()

    def broken() -> float:
        raise RuntimeError("pool is gone")

    registry.gauge(MetricName("RemoteLogManager", "RemoteLogManagerTasksAvgIdlePercent"), broken)
    registry.gauge(MetricName("RemoteLogManager", "NotANumber"), lambda: "busy")  # type: ignore[arg-type,return-value]
    registry.gauge(MetricName("RemoteLogManager", "Healthy"), lambda: 1.5)
    with caplog.at_level(logging.WARNING, logger="tierlog.metrics"):
        _, series = parse(prometheus_text(registry))
    assert set(series) == {("tierlog_remotelogmanager_healthy", labels())}
    assert "RemoteLogManagerTasksAvgIdlePercent" in caplog.text
    assert "NotANumber" in caplog.text


def test_names_that_collide_after_mapping_export_once(caplog: pytest.LogCaptureFixture) -> None:
    registry = MetricsRegistry()
    registry.counter(MetricName("a.b", "C")).inc(1)
    registry.counter(MetricName("a_b", "C")).inc(2)  # same series once sanitised
    registry.histogram(MetricName("G", "Lat")).update(5)
    registry.counter(MetricName("G", "Lat_min")).inc()  # a counter where the histogram has a gauge
    with caplog.at_level(logging.WARNING, logger="tierlog.metrics"):
        types, series = parse(prometheus_text(registry))
    assert series[("tierlog_a_b_c_total", labels())] == 1
    assert types["tierlog_g_lat_min"] == "gauge"
    assert series[("tierlog_g_lat_min", labels())] == 5
    assert "type=a_b,name=C" in caplog.text
    assert "type=G,name=Lat_min" in caplog.text


def test_non_finite_gauge_values_survive_the_round_trip() -> None:
    registry = MetricsRegistry()
    registry.gauge(MetricName("G", "Unknown")).set(math.nan)
    _, series = parse(prometheus_text(registry))
    assert math.isnan(series[("tierlog_g_unknown", labels())])


def test_serve_prometheus_answers_scrapes_until_closed() -> None:
    registry = MetricsRegistry()
    registry.counter(MetricName("BrokerTopicMetrics", "RemoteDeleteRequestsPerSec")).inc(9)
    try:
        server = serve_prometheus(registry, 0, "127.0.0.1")
    except OSError as err:  # no loopback networking where the tests run
        pytest.skip(f"cannot bind 127.0.0.1:0: {err}")
    with server:
        assert server.port > 0
        assert server.host == "127.0.0.1"
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode("utf-8")
        registry.counter(MetricName("BrokerTopicMetrics", "RemoteDeleteRequestsPerSec")).inc()
        with urllib.request.urlopen(url, timeout=10) as response:
            again = response.read().decode("utf-8")
    name = "tierlog_brokertopicmetrics_remotedeleterequestspersec_total"
    assert parse(text)[1][(name, labels())] == 9
    assert parse(again)[1][(name, labels())] == 10  # read per scrape, not cached
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=10)


def scrape(collector: LabelledRegistriesCollector) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode("utf-8")


def test_several_registries_share_each_family_one_series_per_broker() -> None:
    brokers = {"0": MetricsRegistry(), "1": MetricsRegistry()}
    for broker_id, registry in brokers.items():
        registry.meter(COPY_BYTES).mark(10 + int(broker_id))
        registry.gauge(MetricName("G", "N", {"broker": "theirs"})).set(1)
    registries = dict(brokers)
    collector = LabelledRegistriesCollector(lambda: registries)

    types, series = parse(scrape(collector))

    name = "tierlog_brokertopicmetrics_remotecopybytespersec"
    assert types[name] == "counter"
    assert series[(f"{name}_total", labels(topic="t", broker="0"))] == 10
    assert series[(f"{name}_total", labels(topic="t", broker="1"))] == 11
    # a metric's own tag named like the label is kept, renamed as Prometheus does
    assert series[("tierlog_g_n", labels(exported_broker="theirs", broker="1"))] == 1
    del registries["1"]  # read per scrape: a stopped broker's series go away
    _, series = parse(scrape(collector))
    assert {dict(key[1])["broker"] for key in series} == {"0"}


@pytest.mark.parametrize("label", ["", "0broker", "bro-ker", "quantile", "__name__"])
def test_the_registry_label_must_be_a_usable_label_name(label: str) -> None:
    with pytest.raises(ValueError, match="label name"):
        LabelledRegistriesCollector(dict, label=label)


def test_serve_collector_serves_every_registry() -> None:
    brokers = {str(n): MetricsRegistry() for n in range(2)}
    for registry in brokers.values():
        registry.counter(MetricName("C", "N")).inc()
    try:
        server = serve_collector(LabelledRegistriesCollector(lambda: brokers), 0)
    except OSError as err:  # no loopback networking where the tests run
        pytest.skip(f"cannot bind 127.0.0.1:0: {err}")
    url = f"http://127.0.0.1:{server.port}/metrics"
    with server, urllib.request.urlopen(url, timeout=10) as response:
        _, series = parse(response.read().decode("utf-8"))
    assert series == {("tierlog_c_n_total", labels(broker=b)): 1 for b in brokers}
