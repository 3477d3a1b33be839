"""Errors only a client raises; every other error comes from :mod:`tierlog.errors` by its code."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import TierlogError
from ..model import TopicPartition


class NoOffsetForPartitionError(TierlogError):
    """The consumer has no position for a partition and ``auto.offset.reset`` is ``none``.

    Kafka's ``NoOffsetForPartitionException``: the application must ``seek`` first.
    """

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = tuple(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(f"no position for {names} and auto.offset.reset is none: seek first")


class ClientClosedError(TierlogError, RuntimeError):
    """A producer, consumer or admin client was used after ``close``."""


class DeliveryTimeoutError(TierlogError, TimeoutError):
    """A batch was not acknowledged within ``delivery.timeout.ms``; names the partition."""
