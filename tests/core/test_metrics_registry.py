"""The registry: names, get-or-create, removal, snapshots, plugin views and thread safety."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest
from tierlog.errors import LifecycleError, TierlogError
from tierlog.metrics import (
    Counter,
    Gauge,
    Histogram,
    Meter,
    MetricKindError,
    MetricName,
    MetricsRegistry,
    Timer,
)

COPY_BYTES = MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec", {"topic": "t"})
FAILED = MetricName("ReplicaFetcherManager", "FailedPartitionsCount", {"clientId": "Replica"})
QUEUE = MetricName("RemoteLogManager", "RemoteLogReaderTaskQueueSize", {})


# --- names ---------------------------------------------------------------------------------------


def test_metric_name_tags_are_normalised_and_hashable() -> None:
    a = MetricName("BrokerTopicMetrics", "RemoteCopyLagBytes", {"topic": "t", "partition": 0})
    b = MetricName("BrokerTopicMetrics", "RemoteCopyLagBytes", [("partition", "0"), ("topic", "t")])
    assert a == b
    assert hash(a) == hash(b)
    assert a.tags == (("partition", "0"), ("topic", "t"))
    assert a.tag_dict == {"partition": "0", "topic": "t"}
    assert len({a, b, MetricName("BrokerTopicMetrics", "RemoteCopyLagBytes")}) == 2
    assert str(a) == "type=BrokerTopicMetrics,name=RemoteCopyLagBytes,partition=0,topic=t"


@pytest.mark.parametrize(
    "make",
    [
        lambda: MetricName("", "N"),
        lambda: MetricName("G", ""),
        lambda: MetricName("G", "N", {"": "v"}),
        lambda: MetricName("G", "N", {"k": None}),
        lambda: MetricName("G", "N", [("k", "a"), ("k", "b")]),
    ],
)
def test_metric_name_rejects_bad_parts(make: Callable[[], MetricName]) -> None:
    with pytest.raises(ValueError):
        make()


# --- get-or-create -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("create", "kind"),
    [
        (MetricsRegistry.counter, Counter),
        (MetricsRegistry.meter, Meter),
        (MetricsRegistry.gauge, Gauge),
        (MetricsRegistry.histogram, Histogram),
        (MetricsRegistry.timer, Timer),
    ],
)
def test_get_or_create_returns_the_same_metric(
    create: Callable[[MetricsRegistry, MetricName], object], kind: type
) -> None:
    registry = MetricsRegistry()
    first = create(registry, COPY_BYTES)
    assert isinstance(first, kind)
    assert (
        create(registry, MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec", {"topic": "t"}))
        is first
    )
    assert create(registry, COPY_BYTES.with_tags({"topic": "other"})) is not first
    assert registry.get(COPY_BYTES) is first


def test_asking_for_an_existing_name_as_another_kind_fails_clearly() -> None:
    registry = MetricsRegistry()
    meter = registry.meter(COPY_BYTES)
    meter.mark(3)
    with pytest.raises(MetricKindError, match="already registered as a meter, not a gauge") as info:
        registry.gauge(COPY_BYTES)
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, TierlogError)
    assert info.value.name == COPY_BYTES
    assert registry.meter(COPY_BYTES) is meter
    assert meter.count == 3


def test_metrics_are_named_by_metric_name_only() -> None:
    with pytest.raises(TypeError, match="MetricName"):
        MetricsRegistry().counter("RemoteCopyBytesPerSec")  # type: ignore[arg-type]


def test_registering_a_gauge_again_with_a_function_rebinds_it() -> None:
    registry = MetricsRegistry()
    old_state, new_state = [1, 2], [1, 2, 3, 4, 5]
    registry.gauge(QUEUE, lambda: len(old_state))
    same = registry.gauge(QUEUE, lambda: len(new_state))
    assert registry.gauge(QUEUE) is same  # no function: keeps the current one
    assert registry.value("RemoteLogManager", "RemoteLogReaderTaskQueueSize") == 5


def test_an_empty_registry_is_truthy() -> None:
    """``metrics or MetricsRegistry()`` must keep a caller's (still empty) registry."""
    given = MetricsRegistry()
    assert (given or MetricsRegistry()) is given


# --- removal -------------------------------------------------------------------------------------


def test_remove_drops_one_metric_and_a_later_request_starts_afresh() -> None:
    registry = MetricsRegistry()
    registry.counter(FAILED).inc(5)
    assert registry.remove(FAILED) is True
    assert FAILED not in registry
    assert registry.remove(FAILED) is False
    assert registry.counter(FAILED).count == 0


def _partition_gauges(registry: MetricsRegistry) -> None:
    for topic in ("a", "b"):
        for partition in (0, 1):
            tags = {"topic": topic, "partition": partition}
            registry.gauge(MetricName("BrokerTopicMetrics", "RemoteCopyLagBytes", tags)).set(1)
            registry.gauge(MetricName("BrokerTopicMetrics", "RemoteCopyLagSegments", tags)).set(1)
    registry.meter(MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec", {"topic": "a"}))
    registry.gauge(QUEUE)


def test_remove_matching_drops_a_partition_leaving_leadership() -> None:
    registry = MetricsRegistry()
    _partition_gauges(registry)
    assert registry.remove_matching(tags={"topic": "a", "partition": 1}) == 2
    remaining = {
        (n.name, n.tag_dict.get("topic"), n.tag_dict.get("partition")) for n in registry.names()
    }
    assert ("RemoteCopyLagBytes", "a", "1") not in remaining
    assert ("RemoteCopyLagSegments", "a", "1") not in remaining
    assert ("RemoteCopyLagBytes", "a", "0") in remaining
    assert ("RemoteCopyBytesPerSec", "a", None) in remaining
    assert len(registry.names()) == 8 - 2 + 2


def test_remove_matching_by_group_and_name() -> None:
    registry = MetricsRegistry()
    _partition_gauges(registry)
    assert registry.remove_matching(group="BrokerTopicMetrics", name="RemoteCopyLagBytes") == 4
    assert registry.remove_matching(group="BrokerTopicMetrics") == 5
    assert registry.names() == [QUEUE]


def test_remove_matching_needs_a_criterion() -> None:
    registry = MetricsRegistry()
    registry.counter(FAILED)
    with pytest.raises(ValueError):
        registry.remove_matching()
    assert FAILED in registry


# --- snapshot and value --------------------------------------------------------------------------


def test_snapshot_and_value_give_plain_values() -> None:
    registry = MetricsRegistry()
    registry.counter(FAILED).inc(2)
    registry.meter(COPY_BYTES).mark(1024)
    registry.gauge(QUEUE, lambda: 7)

    snapshot = registry.snapshot()
    assert snapshot[FAILED] == 2
    assert snapshot[QUEUE] == 7
    meter_values = snapshot[COPY_BYTES]
    assert isinstance(meter_values, dict)
    assert meter_values["count"] == 1024
    assert set(meter_values) == {
        "count",
        "mean_rate",
        "one_minute_rate",
        "five_minute_rate",
        "fifteen_minute_rate",
    }
    assert registry.value("ReplicaFetcherManager", "FailedPartitionsCount", clientId="Replica") == 2
    with pytest.raises(KeyError, match="FailedPartitionsCount"):
        registry.value("ReplicaFetcherManager", "FailedPartitionsCount", clientId="Other")


# --- plugin views (KIP-877) ----------------------------------------------------------------------


UPLOADS = MetricName("RemoteStorage", "UploadsPerSec")


def test_plugin_views_tag_their_metrics_and_keep_plugins_apart() -> None:
    registry = MetricsRegistry()
    fsspec = registry.for_plugin("fsspec", "remote.log.storage.manager")
    other = registry.for_plugin("other", "remote.log.storage.manager")
    fsspec.meter(UPLOADS).mark(3)
    other.meter(UPLOADS).mark(10)

    fsspec_name = MetricName(
        "RemoteStorage", "UploadsPerSec", {"plugin": "fsspec", "role": "remote.log.storage.manager"}
    )
    assert fsspec.tags == {"plugin": "fsspec", "role": "remote.log.storage.manager"}
    assert fsspec.names() == [fsspec_name]
    assert registry.meter(fsspec_name) is fsspec.meter(UPLOADS)
    assert registry.meter(fsspec_name).count == 3
    assert registry.meter(UPLOADS.with_tags(other.tags)).count == 10


def test_for_plugin_joins_several_roles_and_allows_none() -> None:
    registry = MetricsRegistry()
    both = registry.for_plugin("fsspec", "rsm", "rlmm", "rsm")
    assert both.tags == {"plugin": "fsspec", "role": "rlmm,rsm"}
    assert registry.for_plugin("solo").tags == {"plugin": "solo"}


def test_a_plugin_cannot_claim_another_plugins_tags() -> None:
    registry = MetricsRegistry()
    other = registry.for_plugin("other")
    other.counter(UPLOADS).inc()
    sneaky = registry.for_plugin("sneaky")
    with pytest.raises(ValueError, match="plugin"):
        sneaky.counter(UPLOADS.with_tags({"plugin": "other"}))
    with pytest.raises(ValueError, match="plugin"):
        sneaky.view(plugin="other")
    assert sneaky.remove(UPLOADS) is False
    sneaky.close()
    assert registry.value("RemoteStorage", "UploadsPerSec", plugin="other") == 1


def test_closing_a_view_removes_only_its_own_metrics() -> None:
    registry = MetricsRegistry()
    registry.counter(FAILED)
    keep = registry.for_plugin("keep")
    keep.counter(UPLOADS)
    closing = registry.for_plugin("closing", "rsm")
    closing.counter(UPLOADS)
    closing.gauge(QUEUE, lambda: 1)
    per_topic = closing.view(topic="t")
    per_topic.histogram(MetricName("RemoteStorage", "UploadBytes"))

    closing.close()

    assert sorted(registry.names()) == sorted([FAILED, UPLOADS.with_tags({"plugin": "keep"})])
    assert closing.closed
    assert per_topic.closed
    closing.close()  # idempotent
    with pytest.raises(LifecycleError):
        closing.counter(UPLOADS)
    with pytest.raises(LifecycleError):
        per_topic.meter(UPLOADS)
    with pytest.raises(LifecycleError):
        closing.view(topic="u")


def test_view_remove_and_context_manager() -> None:
    registry = MetricsRegistry()
    with registry.view(component="copier") as view:
        view.counter(UPLOADS).inc()
        view.counter(FAILED)
        assert view.remove(UPLOADS) is True
        assert view.names() == [FAILED.with_tags({"component": "copier"})]
        assert UPLOADS.with_tags({"component": "copier"}) not in registry
    assert registry.names() == []


def test_a_view_reports_kind_clashes_and_does_not_claim_the_name() -> None:
    registry = MetricsRegistry()
    view = registry.view(component="reader")
    view.meter(UPLOADS)
    with pytest.raises(MetricKindError):
        view.timer(UPLOADS)
    assert view.names() == [UPLOADS.with_tags({"component": "reader"})]


# --- thread safety -------------------------------------------------------------------------------


@pytest.fixture
def busy_thread_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows, so unguarded updates would collide."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.usefixtures("busy_thread_switching")
def test_concurrent_updates_give_exact_totals() -> None:
    registry = MetricsRegistry()
    threads_count, per_thread = 8, 2_000
    start = threading.Barrier(threads_count, timeout=60)  # a failure breaks it, not hangs
    errors: list[BaseException] = []

    def work() -> None:
        try:
            view = registry.view(plugin="p")
            start.wait()
            for i in range(per_thread):
                # Every call goes through get-or-create, as instrumented code does.
                registry.counter(FAILED).inc()
                registry.meter(COPY_BYTES).mark(2)
                registry.histogram(QUEUE).update(i)
                view.timer(UPLOADS).update(1.0)
                registry.gauge(MetricName("G", "InFlight")).inc()
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    total = threads_count * per_thread
    assert (
        registry.value("ReplicaFetcherManager", "FailedPartitionsCount", clientId="Replica")
        == total
    )
    assert registry.meter(COPY_BYTES).count == 2 * total
    histogram = registry.histogram(QUEUE)
    assert histogram.count == total
    assert histogram.snapshot()["sum"] == threads_count * sum(range(per_thread))
    assert registry.timer(UPLOADS.with_tags({"plugin": "p"})).count == total
    assert registry.value("G", "InFlight") == total


@pytest.mark.usefixtures("busy_thread_switching")
def test_concurrent_get_or_create_yields_one_metric_per_name() -> None:
    registry = MetricsRegistry()
    threads_count, rounds = 8, 300
    in_step = threading.Barrier(threads_count, timeout=60)

    def work() -> None:
        for i in range(rounds):
            in_step.wait()  # every thread asks for the same new name at once
            registry.meter(MetricName("G", "Fresh", {"round": i})).mark()

    threads = [threading.Thread(target=work) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    counts = {registry.meter(MetricName("G", "Fresh", {"round": i})).count for i in range(rounds)}
    assert counts == {threads_count}
