"""Keeping the cleaner's disk traffic under ``log.cleaner.io.max.bytes.per.second``.

Kafka's ``Throttler``: the threads report the bytes they read and write; every check interval
the observed rate is compared with the allowed one and the reporting thread sleeps for as long
as it takes to bring the rate back down. One throttler is shared by all cleaner threads, so the
limit bounds their sum.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: How often the rate is checked, in seconds (Kafka's 300 ms).
CHECK_INTERVAL_S = 0.3


class Throttler:
    """Sleeps callers that push the byte rate above ``rate()`` bytes per second."""

    def __init__(
        self,
        rate: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        check_interval: float = CHECK_INTERVAL_S,
    ) -> None:
        self._rate = rate
        self._clock = clock
        self._sleep = sleep
        self._interval = check_interval
        self._lock = threading.Lock()
        self._start = clock()
        self._observed = 0
        #: Seconds spent sleeping so far (for tests and benchmarks).
        self.throttled_s = 0.0

    def maybe_throttle(self, observed: int) -> None:
        with self._lock:
            self._observed += observed
            now = self._clock()
            elapsed = now - self._start
            if elapsed < self._interval:
                return
            desired = self._rate()
            if desired > 0 and self._observed / elapsed > desired:
                pause = self._observed / desired - elapsed
                if pause > 0:
                    self._sleep(pause)
                    self.throttled_s += pause
            self._start = self._clock()
            self._observed = 0
