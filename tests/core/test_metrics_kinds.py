"""Metric kinds through the registry: counts, Yammer rates, lazy gauges, percentiles, timers."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from tierlog.metrics import Histogram, MetricName, MetricsRegistry


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry(clock: FakeClock) -> MetricsRegistry:
    return MetricsRegistry(clock=clock)


BYTES = MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec", {"topic": "t"})
ERRORS = MetricName("BrokerTopicMetrics", "RemoteCopyErrorsPerSec", {"topic": "t"})


# --- counter -------------------------------------------------------------------------------------


def test_counter_counts_and_refuses_to_go_down(registry: MetricsRegistry) -> None:
    counter = registry.counter(ERRORS)
    counter.inc()
    counter.inc(4)
    assert counter.count == 5
    with pytest.raises(ValueError, match="only goes up"):
        counter.inc(-1)
    assert registry.value("BrokerTopicMetrics", "RemoteCopyErrorsPerSec", topic="t") == 5


# --- meter ---------------------------------------------------------------------------------------


def test_meter_rates_follow_yammer_moving_averages(
    registry: MetricsRegistry, clock: FakeClock
) -> None:
    meter = registry.meter(BYTES)
    meter.mark(300)

    clock.advance(4.9)  # no full tick interval yet: the moving averages have not started
    assert meter.one_minute_rate == 0.0
    assert meter.count == 300

    clock.advance(0.1)  # first tick: 300 events in 5 s seed every average with 60/s
    snap = meter.snapshot()
    assert snap["count"] == 300
    assert snap["one_minute_rate"] == pytest.approx(60.0)
    assert snap["five_minute_rate"] == pytest.approx(60.0)
    assert snap["fifteen_minute_rate"] == pytest.approx(60.0)
    assert snap["mean_rate"] == pytest.approx(300 / 5.0)

    clock.advance(60.0)  # twelve idle ticks: each average decays by exp(-60 s / its window)
    snap = meter.snapshot()
    assert snap["one_minute_rate"] == pytest.approx(60.0 * math.exp(-1.0))
    assert snap["five_minute_rate"] == pytest.approx(60.0 * math.exp(-60.0 / 300.0))
    assert snap["fifteen_minute_rate"] == pytest.approx(60.0 * math.exp(-60.0 / 900.0))
    assert snap["mean_rate"] == pytest.approx(300 / 65.0)


def test_meter_steady_input_gives_that_rate(registry: MetricsRegistry, clock: FakeClock) -> None:
    meter = registry.meter(BYTES)
    for _ in range(240):  # 20 minutes at 10 events per second, marked once per second
        meter.mark(10)
        clock.advance(1.0)
    assert meter.one_minute_rate == pytest.approx(10.0)
    assert meter.five_minute_rate == pytest.approx(10.0)
    assert meter.fifteen_minute_rate == pytest.approx(10.0)
    assert meter.mean_rate == pytest.approx(10.0)


def test_meter_catches_up_missed_ticks_as_if_read_every_tick(clock: FakeClock) -> None:
    lazy = MetricsRegistry(clock=clock).meter(BYTES)
    eager = MetricsRegistry(clock=clock).meter(BYTES)
    lazy.mark(1000)
    eager.mark(1000)
    for _ in range(37):
        clock.advance(5.0)
        eager.snapshot()
    assert lazy.snapshot() == pytest.approx(eager.snapshot())
    assert 0.0 < lazy.one_minute_rate < lazy.five_minute_rate < lazy.fifteen_minute_rate


def test_meter_refuses_negative_marks(registry: MetricsRegistry) -> None:
    with pytest.raises(ValueError):
        registry.meter(BYTES).mark(-5)


# --- gauge ---------------------------------------------------------------------------------------


def test_gauge_function_is_evaluated_at_read_time(registry: MetricsRegistry) -> None:
    queue: list[int] = []
    calls: list[int] = []

    def queue_size() -> int:
        calls.append(1)
        return len(queue)

    name = MetricName("RemoteLogManager", "RemoteLogReaderTaskQueueSize")
    gauge = registry.gauge(name, queue_size)
    assert calls == []  # creating it reads nothing
    queue.extend([1, 2, 3])
    assert gauge.value == 3
    queue.pop()
    assert registry.value("RemoteLogManager", "RemoteLogReaderTaskQueueSize") == 2
    assert len(calls) == 2


def test_settable_gauge(registry: MetricsRegistry) -> None:
    name = MetricName("ReplicaFetcherManager", "FailedPartitionsCount", {"clientId": "Replica"})
    gauge = registry.gauge(name)
    assert gauge.value == 0
    gauge.inc()
    gauge.inc(2)
    gauge.dec()
    assert gauge.value == 2
    gauge.set(7.5)
    assert registry.snapshot()[name] == 7.5


def test_gauge_set_replaces_its_function_and_inc_refuses_one(registry: MetricsRegistry) -> None:
    gauge = registry.gauge(MetricName("G", "Lag"), lambda: 42)
    with pytest.raises(TypeError, match="function"):
        gauge.inc()
    assert gauge.value == 42
    gauge.set(1)
    gauge.inc()
    assert gauge.value == 2


# --- histogram -----------------------------------------------------------------------------------


def _lower_quantile(ordered: Sequence[float], q: float) -> float:
    """The recorded value at rank floor(q * (n - 1)), the quantile the histogram documents."""
    return ordered[math.floor(q * (len(ordered) - 1))]


QUANTILE_KEYS = {"p50": 0.5, "p75": 0.75, "p95": 0.95, "p99": 0.99, "p999": 0.999}
# Documented bound plus float rounding at bucket edges.
RELATIVE_ERROR = Histogram.RELATIVE_ACCURACY * (1 + 1e-9)


def test_histogram_percentiles_of_uniform_1_to_10000(registry: MetricsRegistry) -> None:
    values = list(range(1, 10_001))
    random.Random(7).shuffle(values)
    histogram = registry.histogram(MetricName("RemoteLogManager", "SegmentBytes"))
    for v in values:
        histogram.update(v)

    snap = histogram.snapshot()
    assert snap["count"] == 10_000
    assert snap["sum"] == 50_005_000
    assert (snap["min"], snap["max"]) == (1, 10_000)
    assert snap["mean"] == pytest.approx(5000.5)
    assert abs(snap["p50"] - 5000) <= 5000 * RELATIVE_ERROR
    ordered = sorted(values)
    for key, q in QUANTILE_KEYS.items():
        exact = _lower_quantile(ordered, q)
        assert abs(snap[key] - exact) <= exact * RELATIVE_ERROR, key


def test_histogram_relative_error_holds_over_many_orders_of_magnitude(
    registry: MetricsRegistry,
) -> None:
    rng = random.Random(11)
    values = [10 ** rng.uniform(-3, 12) for _ in range(20_000)]
    histogram = registry.histogram(MetricName("G", "Wide"))
    for v in values:
        histogram.update(v)
    ordered = sorted(values)
    for q in (0.0, 0.01, 0.1, 0.25, 0.5, 0.9, 0.999, 1.0):
        exact = _lower_quantile(ordered, q)
        assert abs(histogram.quantile(q) - exact) <= exact * RELATIVE_ERROR, q
    assert histogram.quantile(0.0) == min(values)
    assert histogram.quantile(1.0) == max(values)


def test_empty_histogram_reads_as_zeros(registry: MetricsRegistry) -> None:
    snap = registry.histogram(MetricName("G", "Empty")).snapshot()
    assert snap == {k: 0 for k in ("count", "sum", "min", "max", "mean", *QUANTILE_KEYS)}


def test_histogram_zero_values_are_exact(registry: MetricsRegistry) -> None:
    histogram = registry.histogram(MetricName("G", "Zeros"))
    for v in (0, 0, 0, 5):
        histogram.update(v)
    assert histogram.quantile(0.5) == 0.0
    assert histogram.quantile(1.0) == 5


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_histogram_refuses_values_it_cannot_place(registry: MetricsRegistry, bad: float) -> None:
    histogram = registry.histogram(MetricName("G", "Bad"))
    with pytest.raises(ValueError):
        histogram.update(bad)
    assert histogram.count == 0


def test_histogram_quantile_must_be_between_0_and_1(registry: MetricsRegistry) -> None:
    with pytest.raises(ValueError):
        registry.histogram(MetricName("G", "Q")).quantile(1.5)


def test_histogram_memory_is_bounded_whatever_the_number_of_values(
    registry: MetricsRegistry,
) -> None:
    histogram = registry.histogram(MetricName("G", "Bounded"))
    rng = random.Random(3)
    # Log-uniform over a wider range than the tracked one, so the clamping matters too.
    values = [10 ** rng.uniform(-12, 20) for _ in range(1_000_000)]
    for v in values[:200_000]:
        histogram.update(v)
    size_after_200k = histogram.bucket_count
    for v in values[200_000:]:
        histogram.update(v)
    assert histogram.count == 1_000_000
    assert histogram.bucket_count == size_after_200k
    assert size_after_200k <= Histogram.MAX_BUCKETS
    assert Histogram.MAX_BUCKETS < 2500


# --- timer ---------------------------------------------------------------------------------------


def test_timer_records_elapsed_milliseconds_and_rate(
    registry: MetricsRegistry, clock: FakeClock
) -> None:
    timer = registry.timer(MetricName("RemoteLogManager", "RemoteLogReaderFetchRateAndTimeMs"))
    created_at = clock.now
    for seconds in (0.010, 0.020, 0.030, 0.040):
        with timer.time():
            clock.advance(seconds)
    with pytest.raises(RuntimeError), timer.time():  # a failed operation is timed too
        clock.advance(0.5)
        raise RuntimeError("remote read failed")
    clock.now = created_at + 5.0  # one full tick interval for the rate

    snap = timer.snapshot()
    assert snap["count"] == 5
    assert snap["min"] == pytest.approx(10.0)
    assert snap["max"] == pytest.approx(500.0)
    assert snap["sum"] == pytest.approx(600.0)
    assert abs(snap["p50"] - 30.0) <= 30.0 * RELATIVE_ERROR
    assert snap["one_minute_rate"] == pytest.approx(5 / 5.0)
    assert timer.count == 5


def test_timer_works_as_a_decorator(registry: MetricsRegistry, clock: FakeClock) -> None:
    timer = registry.timer(MetricName("G", "Call"))

    @timer.time()
    def call() -> str:
        clock.advance(0.002)
        return "done"

    assert call() == "done"
    assert call() == "done"
    assert timer.count == 2
    assert timer.quantile(1.0) == pytest.approx(2.0)
