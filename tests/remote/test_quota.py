"""The byte-rate quota the copy task waits on (KIP-956)."""

from __future__ import annotations

import threading

from tierlog.remote import RateQuota


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_quota_throttles_above_its_rate_and_recovers() -> None:
    clock = Clock()
    quota = RateQuota(1000, window_num=2, window_seconds=1, clock=clock)
    assert quota.throttle_time_ms() == 0
    quota.record(800)
    assert quota.throttle_time_ms() == 0  # 800 bytes within one second: under 1000/s
    quota.record(800)
    assert quota.throttle_time_ms() == 601  # 600 bytes too many at 1000/s
    clock.now += 3  # the samples leave the window
    assert quota.throttle_time_ms() == 0


def test_an_unlimited_quota_never_throttles() -> None:
    quota = RateQuota(2**63 - 1, 11, 1)
    quota.record(10**12)
    assert quota.throttle_time_ms() == 0
    assert quota.acquire(10**12, threading.Event()) == 0
