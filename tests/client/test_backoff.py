"""Retry backoff grows exponentially to its cap, with jitter around each step."""

from __future__ import annotations

import random

from tierlog.client.backoff import ExponentialBackoff


def test_backoff_doubles_until_the_cap() -> None:
    backoff = ExponentialBackoff(100, 1000, jitter=0.0)
    assert [backoff.backoff(n) for n in range(6)] == [100, 200, 400, 800, 1000, 1000]


def test_jitter_stays_within_twenty_percent() -> None:
    backoff = ExponentialBackoff(100, 1000, rng=random.Random(5))
    waits = [backoff.backoff(2) for _ in range(200)]
    assert all(320 <= w <= 480 for w in waits)
    assert len(set(waits)) > 1


def test_cap_below_initial_keeps_initial() -> None:
    assert ExponentialBackoff(100, 50, jitter=0.0).backoff(5) == 100
    assert ExponentialBackoff(0, 1000, jitter=0.0).backoff(3) == 0
