"""ListOffsets waiting for remote lookups (KIP-1075's delayed remote list offsets).

A search by time in data only the remote tier holds reads remote storage, so it runs on the
remote log manager's reader pool, like a remote fetch, and the request waits for it here for at
most ``remote.list.offsets.request.timeout.ms``. The partitions that need no remote data are
answered at once and combined with the looked-up ones into one response; a lookup not done in
time answers REQUEST_TIMED_OUT for its own partition only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import attrs

from . import protocol as p
from .partition import Partition
from .purgatory import DelayedOperation


@attrs.frozen
class PendingRemoteLookup:
    """A partition of a ListOffsets request that only a remote lookup can answer."""

    topic_index: int
    partition_index: int
    topic: str
    partition: Partition
    request: p.ListOffsetsPartition

    @property
    def key(self) -> tuple[int, int]:
        return (self.topic_index, self.partition_index)


def with_list_offsets_results(
    response: p.ListOffsetsResponse,
    results: dict[tuple[int, int], p.ListOffsetsPartitionResponse],
) -> p.ListOffsetsResponse:
    """``response`` with the partitions at (topic index, partition index) replaced."""
    topics = []
    for ti, topic in enumerate(response.topics):
        parts = [results.get((ti, pi), part) for pi, part in enumerate(topic.partitions)]
        topics.append(attrs.evolve(topic, partitions=parts))
    return attrs.evolve(response, topics=topics)


class DelayedRemoteListOffsets(DelayedOperation):
    """A ListOffsets request waiting for its remote lookups, within its timeout.

    On expiry the lookups still queued are cancelled, so they never take a reader thread from
    the fetches; one already running finishes, but the request no longer waits for it.
    """

    def __init__(
        self, delay_ms: int, lookups: Sequence[Future[Any]], on_expire: Callable[[], None]
    ) -> None:
        super().__init__(delay_ms)
        self._lookups = tuple(lookups)
        self._on_expire = on_expire
        self.expired = False

    def try_complete(self) -> bool:
        if not self.is_completed and all(lookup.done() for lookup in self._lookups):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.expired = not all(lookup.done() for lookup in self._lookups)

    def on_expiration(self) -> None:
        # Outside the operation's lock: a cancelled lookup's callback pokes the purgatory.
        for lookup in self._lookups:
            lookup.cancel()
        self._on_expire()
