"""The metric kinds: counters, meters, gauges, histograms and timers.

They follow Kafka's Yammer metrics, so the numbers an operator reads mean what they mean in Kafka:

* ``Counter``: a monotonic count.
* ``Meter``: a count plus rates in events per second: the mean rate since creation and the
  exponentially weighted 1, 5 and 15-minute moving averages, updated every 5 seconds of clock
  time exactly as Yammer's ``Meter`` does (a "load average" of the event rate).
* ``Gauge``: a value read when someone looks: a function evaluated at read time, or a value set
  by the owner.
* ``Histogram``: count, sum, min, max, mean (exact) and p50/p75/p95/p99/p999 (within 1% relative
  error) of everything recorded since creation, in a bounded amount of memory.
* ``Timer``: a histogram of durations in milliseconds plus a meter of how often they happen
  (Kafka's ``...RateAndTimeMs``).

Every kind is safe to update from many threads. Time comes from an injectable clock (seconds,
``time.monotonic`` by default) so tests can drive rates without sleeping.
"""

from __future__ import annotations

import abc
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar, Final

Clock = Callable[[], float]
Number = int | float
#: What ``snapshot()`` returns: a plain number, or a dict of numbers for the composite kinds.
MetricValue = int | float | dict[str, Number]


class Metric(abc.ABC):
    """Base of every metric kind."""

    #: Short name of the kind, used in errors and exports.
    kind: ClassVar[str]

    @abc.abstractmethod
    def snapshot(self) -> MetricValue:
        """The current value(s), read consistently under the metric's lock."""


class Counter(Metric):
    """A count that only goes up (requests, errors, bytes)."""

    kind = "counter"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def inc(self, n: int = 1) -> None:
        """Add ``n`` (default 1); negative ``n`` is refused because the count is monotonic."""
        if n < 0:
            raise ValueError(f"a counter only goes up; cannot add {n}")
        with self._lock:
            self._count += n

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def snapshot(self) -> int:
        return self.count


class _MovingAverage:
    """One exponentially weighted moving average of a rate, ticked at a fixed interval."""

    def __init__(self, minutes: int, interval: float) -> None:
        self.alpha = 1.0 - math.exp(-interval / (60.0 * minutes))
        self.rate = 0.0
        self._primed = False

    def tick(self, instant_rate: float, ticks: int) -> None:
        """Fold in one interval at ``instant_rate`` followed by ``ticks - 1`` idle intervals."""
        if self._primed:
            self.rate += self.alpha * (instant_rate - self.rate)
        else:
            self.rate = instant_rate
            self._primed = True
        if ticks > 1:
            self.rate *= (1.0 - self.alpha) ** (ticks - 1)


class Meter(Metric):
    """A count of events and how fast they happen, in events per second.

    The 1/5/15-minute rates are exponentially weighted moving averages updated every
    ``TICK_INTERVAL`` seconds, as in Yammer (and so in Kafka's ``...PerSec`` metrics): events
    marked since the last tick are folded in when at least one full interval has passed, and
    every further idle interval decays the rates. The first tick seeds each average with that
    interval's rate. Ticks happen lazily on ``mark`` and on reads, so there is no timer thread.
    """

    kind = "meter"
    TICK_INTERVAL: Final = 5.0

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._count = 0
        self._uncounted = 0
        self._start = clock()
        self._last_tick = self._start
        self._averages = tuple(_MovingAverage(m, self.TICK_INTERVAL) for m in (1, 5, 15))

    def mark(self, n: int = 1) -> None:
        """Record ``n`` events (default 1), e.g. the size of a copied segment for a bytes meter."""
        if n < 0:
            raise ValueError(f"a meter counts events; cannot mark {n}")
        with self._lock:
            self._tick_if_due()
            self._count += n
            self._uncounted += n

    def _tick_if_due(self) -> None:
        ticks = int((self._clock() - self._last_tick) // self.TICK_INTERVAL)
        if ticks <= 0:
            return
        self._last_tick += ticks * self.TICK_INTERVAL
        instant_rate = self._uncounted / self.TICK_INTERVAL
        self._uncounted = 0
        for average in self._averages:
            average.tick(instant_rate, ticks)

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    @property
    def mean_rate(self) -> float:
        """Events per second since the meter was created."""
        return float(self.snapshot()["mean_rate"])

    @property
    def one_minute_rate(self) -> float:
        return float(self.snapshot()["one_minute_rate"])

    @property
    def five_minute_rate(self) -> float:
        return float(self.snapshot()["five_minute_rate"])

    @property
    def fifteen_minute_rate(self) -> float:
        return float(self.snapshot()["fifteen_minute_rate"])

    def snapshot(self) -> dict[str, Number]:
        """``count``, ``mean_rate`` and ``one/five/fifteen_minute_rate``."""
        with self._lock:
            self._tick_if_due()
            elapsed = self._clock() - self._start
            one, five, fifteen = (average.rate for average in self._averages)
            return {
                "count": self._count,
                "mean_rate": self._count / elapsed if elapsed > 0 else 0.0,
                "one_minute_rate": one,
                "five_minute_rate": five,
                "fifteen_minute_rate": fifteen,
            }


class Gauge(Metric):
    """A value read at the moment someone looks (queue sizes, lag, failed partitions).

    Either backed by a function, evaluated on every read and never cached, or by a value the
    owner sets (``set``, ``inc``, ``dec``). ``set`` drops the function; ``inc``/``dec`` on a
    function-backed gauge are refused because they would be silently ignored.
    """

    kind = "gauge"

    def __init__(self, fn: Callable[[], Number] | None = None) -> None:
        self._lock = threading.Lock()
        self._fn = fn
        self._value: Number = 0

    def set_function(self, fn: Callable[[], Number]) -> None:
        """Read the gauge from ``fn`` from now on."""
        with self._lock:
            self._fn = fn

    def set(self, value: Number) -> None:
        """Hold ``value`` from now on (dropping any function)."""
        with self._lock:
            self._fn = None
            self._value = value

    def inc(self, n: Number = 1) -> None:
        with self._lock:
            self._require_settable()
            self._value += n

    def dec(self, n: Number = 1) -> None:
        with self._lock:
            self._require_settable()
            self._value -= n

    def _require_settable(self) -> None:
        if self._fn is not None:
            raise TypeError("this gauge is read from a function; use set() to replace it")

    @property
    def value(self) -> Number:
        """The function's result now, or the value last set. A function's errors propagate."""
        with self._lock:
            fn, value = self._fn, self._value
        # Called outside the lock: the function may itself read other metrics.
        return fn() if fn is not None else value

    def snapshot(self) -> Number:
        return self.value


#: Quantiles every histogram reports, by snapshot key.
QUANTILES: Final[tuple[tuple[str, float], ...]] = (
    ("p50", 0.5),
    ("p75", 0.75),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
)


class Histogram(Metric):
    """The distribution of recorded values (sizes, durations) in bounded memory.

    Values go into logarithmic buckets whose bounds grow by a factor ``(1 + a) / (1 - a)`` with
    ``a = RELATIVE_ACCURACY`` (1%): every value in a bucket is within ``a`` of the bucket's
    representative, so each reported quantile is within 1% of the recorded value at that rank
    (the "lower" quantile, rank ``q * (count - 1)``). Count, sum, min, max and mean are exact.

    Bounded memory: values from ``MIN_TRACKED`` to ``MAX_TRACKED`` use at most ``MAX_BUCKETS``
    buckets (about 2,400) whatever the number of observations. Smaller values (and 0) share one
    bucket reported as 0; larger ones share the top bucket. Quantiles are clamped to the exact
    min and max, so p0 and p100 are exact.

    The distribution is cumulative since creation: a scrape-based system derives recent
    behaviour from the differences between reads, and the count and sum stay monotonic.

    Why not a library: ``hdrhistogram`` records integers up to a fixed highest value and pulls
    in ``pbr`` and ``setuptools`` at run time; ``ddsketch`` implements this same bucket scheme
    but is untyped. Neither is thread-safe, so either would still need this wrapper.
    """

    kind = "histogram"
    RELATIVE_ACCURACY: Final = 0.01
    MIN_TRACKED: Final = 1e-6
    MAX_TRACKED: Final = 1e15

    _GAMMA: Final = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
    _LOG_GAMMA: Final = math.log(_GAMMA)
    _LOWEST_INDEX: Final = math.ceil(math.log(MIN_TRACKED) / _LOG_GAMMA)
    _HIGHEST_INDEX: Final = math.ceil(math.log(MAX_TRACKED) / _LOG_GAMMA)
    _ZERO_INDEX: Final = _LOWEST_INDEX - 1
    #: Upper bound on the number of buckets one histogram ever holds.
    MAX_BUCKETS: Final = _HIGHEST_INDEX - _ZERO_INDEX + 1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[int, int] = {}
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf

    @classmethod
    def _index(cls, value: float) -> int:
        if value < cls.MIN_TRACKED:
            return cls._ZERO_INDEX
        index = math.ceil(math.log(value) / cls._LOG_GAMMA)
        return max(cls._LOWEST_INDEX, min(index, cls._HIGHEST_INDEX))

    @classmethod
    def _representative(cls, index: int) -> float:
        if index == cls._ZERO_INDEX:
            return 0.0
        # The point whose relative distance to both bucket bounds is the same (``a``).
        return 2.0 * cls._GAMMA**index / (cls._GAMMA + 1.0)

    def update(self, value: Number) -> None:
        """Record one value; it must be a finite number >= 0."""
        if not (0 <= value < math.inf):
            raise ValueError(f"histograms record finite values >= 0, got {value!r}")
        index = self._index(value)
        with self._lock:
            self._buckets[index] = self._buckets.get(index, 0) + 1
            self._count += 1
            self._sum += value
            self._min = min(self._min, value)
            self._max = max(self._max, value)

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    @property
    def bucket_count(self) -> int:
        """Buckets in use now; never more than ``MAX_BUCKETS``."""
        with self._lock:
            return len(self._buckets)

    def quantile(self, q: float) -> float:
        """The value at quantile ``q`` (0..1), within 1% relative error; 0.0 when empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be between 0 and 1, got {q}")
        with self._lock:
            return self._quantiles((q,))[0]

    def _quantiles(self, qs: tuple[float, ...]) -> list[float]:
        """Quantiles for ascending ``qs`` in one walk over the buckets; caller holds the lock."""
        if self._count == 0:
            return [0.0 for _ in qs]
        results: list[float] = []
        ranked = iter(sorted(self._buckets.items()))
        seen = 0
        index = self._ZERO_INDEX
        for q in qs:
            rank = q * (self._count - 1)
            while seen <= rank:
                index, bucket = next(ranked)
                seen += bucket
            results.append(min(max(self._representative(index), self._min), self._max))
        return results

    def snapshot(self) -> dict[str, Number]:
        """``count``, ``sum``, ``min``, ``max``, ``mean`` and ``p50``..``p999``."""
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> dict[str, Number]:
        empty = self._count == 0
        values: dict[str, Number] = {
            "count": self._count,
            "sum": self._sum,
            "min": 0.0 if empty else self._min,
            "max": 0.0 if empty else self._max,
            "mean": 0.0 if empty else self._sum / self._count,
        }
        quantiles = self._quantiles(tuple(q for _, q in QUANTILES))
        values.update(zip((key for key, _ in QUANTILES), quantiles, strict=True))
        return values


class Timer(Metric):
    """How long something takes (a histogram in milliseconds) and how often (a meter).

    ``with timer.time(): ...`` records the elapsed clock time, also when the block raises, so
    failed operations count too. ``time()`` also works as a decorator.
    """

    kind = "timer"

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._histogram = Histogram()
        self._meter = Meter(clock)

    def update(self, milliseconds: Number) -> None:
        """Record one duration in milliseconds."""
        self._histogram.update(milliseconds)
        self._meter.mark()

    @contextmanager
    def time(self) -> Iterator[None]:
        """Time the ``with`` block and record it in milliseconds."""
        start = self._clock()
        try:
            yield
        finally:
            self.update(max(0.0, (self._clock() - start) * 1000.0))

    @property
    def count(self) -> int:
        return self._histogram.count

    def quantile(self, q: float) -> float:
        """Duration in milliseconds at quantile ``q``."""
        return self._histogram.quantile(q)

    def snapshot(self) -> dict[str, Number]:
        """The histogram's keys (in ms) plus the meter's rates (``count`` is the histogram's)."""
        rates = self._meter.snapshot()
        del rates["count"]
        return {**self._histogram.snapshot(), **rates}
