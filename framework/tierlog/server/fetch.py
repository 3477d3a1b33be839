"""Fetch: reading many partitions under one byte budget, and waiting for ``min_bytes``.

Kafka's rules, kept exactly: partitions are read in request order; each reads at most
``min(partition_max_bytes, bytes left of max_bytes)``; the first partition that returns data
may return one whole batch larger than that ("at least one batch", so a consumer never gets
stuck behind a big batch), later ones may not. A failing partition gets its own error code and
never stops the others; a malformed one (see ``request_validation.py``) is never read. A fetch
that found fewer than ``min_bytes`` and no error waits in the fetch purgatory until an append
brings enough data or ``max_wait_ms`` passes.

A consumer fetch below the local log start of a tiered partition is not an error: the partition
is left for a remote read (:class:`PendingRemoteRead`), and the request then waits in the
delayed-remote-fetch purgatory for at most ``remote.fetch.max.wait.ms`` (never for
``fetch.max.wait.ms``, which keeps its meaning for local data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future

import attrs

from ..errors import (
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    error_code_of,
)
from ..log import AbortedTxn, FetchIsolation
from ..model import TopicPartition, Uuid
from . import protocol as p
from .partition import Partition
from .purgatory import DelayedOperation
from .request_validation import fetch_partition_error

PartitionLookup = Callable[[TopicPartition, p.FetchPartition], Partition]
"""Finds the replica to read and checks the caller may read it (raises a TierlogError)."""


@attrs.frozen
class ResolvedFetchTopic:
    """A requested topic with its name and id both known, or the error that says why not."""

    name: str
    topic_id: Uuid
    partitions: tuple[p.FetchPartition, ...]
    error_code: int = p.NONE


RemoteRange = Callable[[Partition, int], bool]
"""Whether an offset of a replica is below its local log start but inside the remote tier."""


@attrs.frozen
class PendingRemoteRead:
    """A partition of a fetch that only the remote tier can answer."""

    topic_index: int
    partition_index: int
    partition: Partition
    fetch_offset: int
    max_bytes: int
    min_one_message: bool
    committed: bool = False


@attrs.frozen
class FetchOutcome:
    response: p.FetchResponse
    bytes_read: int
    has_error: bool
    remote_reads: tuple[PendingRemoteRead, ...] = ()


def isolation_for(replica_id: int, isolation_level: int) -> FetchIsolation:
    if replica_id >= 0:
        return FetchIsolation.LOG_END
    if isolation_level == p.IsolationLevel.READ_COMMITTED:
        return FetchIsolation.TXN_COMMITTED
    return FetchIsolation.HIGH_WATERMARK


def read_partitions(
    request: p.FetchRequest,
    topics: list[ResolvedFetchTopic],
    lookup: PartitionLookup,
    in_remote: RemoteRange | None = None,
) -> FetchOutcome:
    """Reads every requested partition once; never raises for one partition's failure.

    With ``in_remote``, a consumer's offset in the remote tier becomes a pending remote read
    (an empty placeholder in the response) and a follower's gets OFFSET_MOVED_TO_TIERED_STORAGE.
    """
    isolation = isolation_for(request.replica_id, request.isolation_level)
    limit = max(0, request.max_bytes)
    min_one_message = True
    total = 0
    has_error = False
    responses: list[p.FetchableTopicResponse] = []
    remote: list[PendingRemoteRead] = []
    for topic in topics:
        results: list[p.FetchPartitionData] = []
        for fetch in topic.partitions:
            code = topic.error_code or fetch_partition_error(fetch)
            if code != p.NONE:
                results.append(p.FetchPartitionData(fetch.partition, error_code=code))
                has_error = True
                continue
            tp = TopicPartition(topic.name, fetch.partition)
            partition: Partition | None = None
            try:
                partition = lookup(tp, fetch)
                data = partition.read(
                    fetch.fetch_offset,
                    min(fetch.partition_max_bytes, limit),
                    isolation,
                    min_one_message=min_one_message,
                )
                size = data.size_in_bytes
                if size:
                    min_one_message = False
                limit = max(0, limit - size)
                total += size
                aborted = None
                if data.aborted_transactions is not None:
                    aborted = [
                        p.AbortedTransaction(a.producer_id, a.first_offset)
                        for a in data.aborted_transactions
                    ]
                results.append(
                    p.FetchPartitionData(
                        fetch.partition,
                        high_watermark=partition.high_watermark,
                        last_stable_offset=partition.last_stable_offset,
                        log_start_offset=partition.log_start_offset,
                        aborted_transactions=aborted,
                        records=data.records,
                    )
                )
            except OffsetOutOfRangeError as err:
                if (
                    partition is None
                    or in_remote is None
                    or not in_remote(partition, fetch.fetch_offset)
                ):
                    has_error = True
                    results.append(
                        p.FetchPartitionData(fetch.partition, error_code=error_code_of(err))
                    )
                elif request.replica_id >= 0:
                    has_error = True
                    code = OffsetMovedToTieredStorageError.code
                    assert code is not None
                    results.append(p.FetchPartitionData(fetch.partition, error_code=code))
                else:
                    remote.append(
                        PendingRemoteRead(
                            len(responses),
                            len(results),
                            partition,
                            fetch.fetch_offset,
                            min(fetch.partition_max_bytes, limit),
                            min_one_message,
                            isolation is FetchIsolation.TXN_COMMITTED,
                        )
                    )
                    results.append(partition_data(fetch.partition, partition))
            except Exception as err:
                has_error = True
                results.append(p.FetchPartitionData(fetch.partition, error_code=error_code_of(err)))
        responses.append(p.FetchableTopicResponse(topic.name, results, topic_id=topic.topic_id))
    return FetchOutcome(p.FetchResponse(responses), total, has_error, tuple(remote))


def partition_data(
    index: int,
    partition: Partition,
    records: bytes = b"",
    aborted: Iterable[AbortedTxn] | None = None,
) -> p.FetchPartitionData:
    """A successful partition answer with the replica's current offsets."""
    return p.FetchPartitionData(
        index,
        high_watermark=partition.high_watermark,
        last_stable_offset=partition.last_stable_offset,
        log_start_offset=partition.log_start_offset,
        aborted_transactions=None
        if aborted is None
        else [p.AbortedTransaction(a.producer_id, a.first_offset) for a in aborted],
        records=records,
    )


def with_partition_results(
    response: p.FetchResponse, results: dict[tuple[int, int], p.FetchPartitionData]
) -> p.FetchResponse:
    """``response`` with the partitions at (topic index, partition index) replaced."""
    topics = []
    for ti, topic in enumerate(response.responses):
        parts = [results.get((ti, pi), part) for pi, part in enumerate(topic.partitions)]
        topics.append(attrs.evolve(topic, partitions=parts))
    return attrs.evolve(response, responses=topics)


class DelayedFetch(DelayedOperation):
    """A fetch parked until ``min_bytes`` are available, an error shows up, or time is up."""

    def __init__(
        self,
        delay_ms: int,
        min_bytes: int,
        read: Callable[[], FetchOutcome],
        abandoned: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(delay_ms)
        self._min_bytes = min_bytes
        self._read = read
        self._abandoned = abandoned
        self._outcome: FetchOutcome | None = None

    def try_complete(self) -> bool:
        if self._abandoned is not None and self._abandoned():
            # Nobody will use more data (a follower that is shutting down): answer now.
            return self.force_complete()
        outcome = self._read()
        if outcome.bytes_read < self._min_bytes and not outcome.has_error:
            return False
        with self._lock:
            if self.is_completed:
                return False
            self._outcome = outcome
        return self.force_complete()

    def on_complete(self) -> None:
        if self._outcome is None:
            self._outcome = self._read()

    @property
    def response(self) -> p.FetchResponse:
        if self._outcome is None:
            raise RuntimeError("the delayed fetch has not completed")
        return self._outcome.response


class DelayedRemoteFetch(DelayedOperation):
    """A fetch waiting for its remote reads, for at most ``remote.fetch.max.wait.ms``.

    On expiry the reads still queued are cancelled and those running have their result
    dropped: the partitions are answered empty and the client fetches the same offset again.
    """

    def __init__(
        self,
        delay_ms: int,
        reads: list[Future[object]],
        on_expire: Callable[[], None],
    ) -> None:
        super().__init__(delay_ms)
        self._reads = reads
        self._on_expire = on_expire
        self.expired = False

    def try_complete(self) -> bool:
        if not self.is_completed and all(read.done() for read in self._reads):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.expired = not all(read.done() for read in self._reads)

    def on_expiration(self) -> None:
        # Outside the operation's lock: a cancelled read's callback pokes the purgatory.
        for read in self._reads:
            read.cancel()
        self._on_expire()
