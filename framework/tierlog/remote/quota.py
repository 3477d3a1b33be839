"""Byte-rate quotas for remote copies and reads (KIP-956).

A quota keeps ``window_num`` samples of ``window_seconds`` each; it is exceeded while the bytes
recorded in those samples, divided by the time they span, exceed the allowed rate. The copy
task waits (at most a second at a time, so stopping is never held up) until the rate falls back.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

UNLIMITED = 2**63 - 1


class RateQuota:
    """A sliding-window byte-rate quota; thread-safe."""

    def __init__(
        self,
        bytes_per_second: int,
        window_num: int,
        window_seconds: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._window_num = max(1, window_num)
        self._window_seconds = max(1, window_seconds)
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()
        self._condition = threading.Condition()

    @property
    def unlimited(self) -> bool:
        return self.bytes_per_second >= UNLIMITED or self.bytes_per_second <= 0

    def _trim(self, now: float) -> None:
        horizon = now - self._window_num * self._window_seconds
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()

    def throttle_time_ms(self) -> int:
        """How long until the rate is back under the quota (0: not exceeded)."""
        if self.unlimited:
            return 0
        with self._condition:
            now = self._clock()
            self._trim(now)
            total = sum(size for _, size in self._samples)
            if not self._samples:
                return 0
            elapsed = max(now - self._samples[0][0], float(self._window_seconds))
            allowed = self.bytes_per_second * elapsed
            if total <= allowed:
                return 0
            return int((total - allowed) / self.bytes_per_second * 1000) + 1

    def record(self, size: int) -> None:
        with self._condition:
            self._samples.append((self._clock(), size))
            self._condition.notify_all()

    def acquire(self, size: int, stopped: threading.Event) -> int:
        """Waits while over quota (1 s at a time), then records ``size``; returns ms waited."""
        waited = 0
        while not stopped.is_set():
            throttle = self.throttle_time_ms()
            if throttle <= 0:
                break
            pause = min(throttle, 1000)
            stopped.wait(pause / 1000)
            waited += pause
        self.record(size)
        return waited
