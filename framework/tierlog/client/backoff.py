"""Exponential backoff with jitter, as Kafka's clients wait between retries.

Kafka's ``ExponentialBackoff``: the n-th retry waits ``retry.backoff.ms * 2**n``, capped at
``retry.backoff.max.ms``, times a random factor in [0.8, 1.2] so that many clients hit by the
same failure do not retry in lockstep (the retry storm KIP-1007's not-ready error causes).
"""

from __future__ import annotations

import math
import random

import attrs

JITTER = 0.2
MULTIPLIER = 2.0


@attrs.frozen
class ExponentialBackoff:
    """Retry delays in milliseconds: ``backoff(n)`` is the wait after n + 1 failures."""

    initial_ms: int
    max_ms: int
    multiplier: float = MULTIPLIER
    jitter: float = JITTER
    _rng: random.Random = attrs.field(factory=random.Random, eq=False, repr=False)

    def backoff(self, attempts: int) -> float:
        """The wait after ``attempts`` failed attempts (0: after the first failure)."""
        exp_max = 0.0
        if self.initial_ms > 0 and self.max_ms > self.initial_ms:
            exp_max = math.log(self.max_ms / self.initial_ms) / math.log(self.multiplier)
        term = float(max(self.initial_ms, 0) * self.multiplier ** min(max(attempts, 0), exp_max))
        term = min(term, max(self.max_ms, self.initial_ms))
        if self.jitter <= 0 or term == 0:
            return term
        return term * float(self._rng.uniform(1 - self.jitter, 1 + self.jitter))
