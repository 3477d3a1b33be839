"""The consumer: manual assignment, positions, and ``poll`` with Kafka's fetch semantics.

Like Kafka's consumer it does its work in the caller's thread, inside ``poll``: it finds a
position for every assigned partition that lacks one (``auto.offset.reset`` through ListOffsets,
or ``seek``), fetches from each partition's leader, and returns the records at or after each
position. Each partition has its own retry state: a partition answering a retriable error
(NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, the KIP-1007 remote-storage-not-ready error...)
waits out an exponential backoff while the other partitions keep being fetched.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..errors import (
    LeaderNotAvailableError,
    OffsetOutOfRangeError,
    RetriableError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..model import TopicPartition
from ..records import NO_PARTITION_LEADER_EPOCH, iter_batches
from ..server import protocol as p
from ..server.transport import Transport
from .backoff import ExponentialBackoff
from .config import ConsumerConfig, coerce_config
from .errors import ClientClosedError, NoOffsetForPartitionError
from .metadata import MetadataCache, topic_error
from .records import ConsumerRecord, classify_batches

_STRATEGIES = {"earliest": p.OffsetSpec.EARLIEST, "latest": p.OffsetSpec.LATEST}


@attrs.define(eq=False)
class _PartitionState:
    """What the consumer knows about one assigned partition."""

    position: int | None = None
    #: A reset asked for by seek_to_beginning/seek_to_end or an out-of-range fetch.
    reset: p.OffsetSpec | None = None
    backoff_until: float = 0.0
    failures: int = 0
    buffer: deque[ConsumerRecord] = attrs.field(factory=deque)
    #: Where fetching resumes once the buffer is drained (past skipped control/aborted batches).
    buffer_end: int | None = None


class Consumer:
    """Reads records from assigned partitions (Kafka's ``KafkaConsumer`` with ``assign``).

    Not thread-safe, like Kafka's consumer: use it from one thread.
    """

    def __init__(
        self,
        transport: Transport,
        config: ConsumerConfig | Mapping[str, Any] | None = None,
    ) -> None:
        self._config = config = coerce_config(config, ConsumerConfig)
        self._transport = transport
        self._metadata = MetadataCache(
            transport,
            request_timeout_ms=config.request_timeout_ms,
            max_age_ms=config.metadata_max_age_ms,
        )
        self._backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._isolation = (
            p.IsolationLevel.READ_COMMITTED
            if config.read_committed
            else p.IsolationLevel.READ_UNCOMMITTED
        )
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._next_leader = 0
        self._closed = False

    @property
    def config(self) -> ConsumerConfig:
        return self._config

    # --- assignment and positions -------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replaces the assignment; partitions kept from the old one keep their positions."""
        self._check_open()
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign takes TopicPartitions, not {type(tp).__name__}")
        self._states = {tp: self._states.get(tp) or _PartitionState() for tp in wanted}

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next poll returns ``tp``'s records from ``offset`` on."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must be a non-negative int, not {offset!r}")
        state = self._state(tp)
        self._set_position(state, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Moves to each partition's log start offset, looked up at the next poll or position."""
        self._seek_to(partitions, p.OffsetSpec.EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Moves to each partition's end (the LSO with read_committed), looked up lazily."""
        self._seek_to(partitions, p.OffsetSpec.LATEST)

    def _seek_to(self, partitions: Iterable[TopicPartition] | None, spec: p.OffsetSpec) -> None:
        for tp in self._states if partitions is None else list(partitions):
            state = self._state(tp)
            self._set_position(state, None)
            state.reset = spec

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``tp``, looking it up if needed.

        Raises NoOffsetForPartitionError with ``auto.offset.reset=none`` and no position, and
        the last retriable error if none is found within ``timeout_ms``
        (``default.api.timeout.ms``).
        """
        state = self._state(tp)
        limit = self._config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit / 1000
        while True:
            last_error = self._update_positions([tp])
            if state.position is not None:
                return state.position
            if time.monotonic() >= deadline:
                raise last_error or RetriableError(f"no position for {tp} within {limit} ms")
            self._sleep_until(min(state.backoff_until, deadline))

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        return self._offsets_for(list(partitions), p.OffsetSpec.EARLIEST, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's end offset (high watermark, or LSO with read_committed)."""
        return self._offsets_for(list(partitions), p.OffsetSpec.LATEST, timeout_ms)

    def partitions_for(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions, to ``assign`` them all; raises if the topic is unknown."""
        self._check_open()
        self._metadata.refresh([topic])
        info = self._metadata.topic(topic)
        if info is None:
            code = self._metadata.topic_error(topic) or UnknownTopicOrPartitionError.code or 3
            raise topic_error(topic, code)
        return [TopicPartition(topic, part.partition) for part in info.partitions]

    # --- poll ---------------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records from the assigned partitions at their positions, waiting up to ``timeout_ms``.

        Returns at most ``max.poll.records`` records and advances the positions past them. An
        error for one partition that is not retriable is raised (after records already fetched
        for the others are kept for the next poll).
        """
        self._check_open()
        if not self._states:
            raise ValueError("poll needs an assignment: call assign first")
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            records = self._drain()
            if records:
                return records
            self._update_positions(list(self._states))
            remaining = deadline - time.monotonic()
            fetched = self._fetch(max(remaining, 0.0))
            records = self._drain()
            if records or time.monotonic() >= deadline:
                return records
            if not fetched:
                now = time.monotonic()
                waits = [s.backoff_until for s in self._states.values() if s.backoff_until > now]
                idle = now + self._config.retry_backoff_ms / 1000
                self._sleep_until(min([*waits, idle, deadline]))

    def close(self) -> None:
        """Releases the assignment; the consumer cannot be used afterwards."""
        self._closed = True
        self._states = {}

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    def _state(self, tp: TopicPartition) -> _PartitionState:
        self._check_open()
        state = self._states.get(tp)
        if state is None:
            raise ValueError(f"partition {tp} is not assigned to this consumer")
        return state

    @staticmethod
    def _set_position(state: _PartitionState, offset: int | None) -> None:
        state.position = offset
        state.reset = None
        state.buffer.clear()
        state.buffer_end = None
        state.backoff_until = 0.0
        state.failures = 0

    @staticmethod
    def _sleep_until(when: float) -> None:
        delay = when - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _drain(self) -> list[ConsumerRecord]:
        """Hands out buffered records, up to ``max.poll.records``, advancing positions."""
        out: list[ConsumerRecord] = []
        limit = self._config.max_poll_records
        for state in self._states.values():
            while state.buffer and len(out) < limit:
                record = state.buffer.popleft()
                out.append(record)
                state.position = record.offset + 1
            if not state.buffer and state.buffer_end is not None:
                if state.position is not None:
                    state.position = max(state.position, state.buffer_end)
                state.buffer_end = None
            if len(out) >= limit:
                break
        return out

    def _backoff_partition(self, tp: TopicPartition, state: _PartitionState) -> None:
        delay = self._backoff.backoff(state.failures) / 1000
        state.failures += 1
        state.backoff_until = time.monotonic() + delay
        self._metadata.mark_stale(tp.topic)

    def _leaders(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, TierlogError]]:
        """The partitions grouped by leader, and why the others have no known leader."""
        partitions = list(partitions)
        if not partitions:
            return {}, {}
        with contextlib.suppress(RetriableError):
            self._metadata.ensure({tp.topic for tp in partitions})
        by_leader: dict[int, list[TopicPartition]] = {}
        missing: dict[TopicPartition, TierlogError] = {}
        for tp in partitions:
            info = self._metadata.leader(tp)
            if info is not None:
                by_leader.setdefault(info.leader, []).append(tp)
                continue
            code = self._metadata.topic_error(tp.topic)
            if code != p.NONE:
                missing[tp] = topic_error(tp.topic, code)
            elif self._metadata.topic(tp.topic) is not None:
                missing[tp] = LeaderNotAvailableError(f"no leader known for {tp}")
            else:
                missing[tp] = UnknownTopicOrPartitionError(f"no metadata for {tp}")
        return by_leader, missing

    # --- positions through ListOffsets --------------------------------------------------------

    def _update_positions(self, partitions: list[TopicPartition]) -> TierlogError | None:
        """Looks up positions for partitions that need a reset; returns the last retriable error.

        Partitions still backing off from an earlier failure are skipped this time.
        """
        now = time.monotonic()
        needing: dict[p.OffsetSpec, list[TopicPartition]] = {}
        without: list[TopicPartition] = []
        for tp in partitions:
            state = self._states[tp]
            if state.position is not None:
                continue
            if state.backoff_until > now:
                continue
            spec = state.reset
            if spec is None:
                policy = self._config.auto_offset_reset
                if policy == "none":
                    without.append(tp)
                    continue
                spec = _STRATEGIES[policy]
            needing.setdefault(spec, []).append(tp)
        if without:
            raise NoOffsetForPartitionError(sorted(without))
        last_error: TierlogError | None = None
        for spec, tps in needing.items():
            offsets, errors = self._list_offsets_once(tps, spec)
            for tp, offset in offsets.items():
                self._set_position(self._states[tp], offset)
            for tp, error in errors.items():
                if not error.retriable:
                    raise error
                self._backoff_partition(tp, self._states[tp])
                last_error = error
        return last_error

    def _list_offsets_once(
        self, partitions: list[TopicPartition], spec: int
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, TierlogError]]:
        """One ListOffsets round to each leader: offsets found, and errors by partition."""
        offsets: dict[TopicPartition, int] = {}
        by_leader, errors = self._leaders(partitions)
        for leader, tps in by_leader.items():
            topics: dict[str, list[p.ListOffsetsPartition]] = {}
            for tp in tps:
                info = self._metadata.leader(tp)
                epoch = info.leader_epoch if info is not None else p.UNKNOWN_EPOCH
                topics.setdefault(tp.topic, []).append(
                    p.ListOffsetsPartition(tp.partition, spec, epoch)
                )
            request = p.ListOffsetsRequest(
                [p.ListOffsetsTopic(name, parts) for name, parts in topics.items()],
                isolation_level=self._isolation,
            )
            try:
                response = self._transport.send(
                    leader, request, timeout_ms=self._config.request_timeout_ms
                )
            except RetriableError as err:
                for tp in tps:
                    errors[tp] = err
                continue
            answered = set()
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    answered.add(tp)
                    if part.error_code == p.NONE:
                        offsets[tp] = part.offset
                    else:
                        errors[tp] = _partition_error(part.error_code, tp, "listing offsets of")
            for tp in tps:
                if tp not in answered:
                    errors[tp] = UnknownTopicOrPartitionError(f"no list-offsets answer for {tp}")
        return offsets, errors

    def _offsets_for(
        self, partitions: list[TopicPartition], spec: int, timeout_ms: int | None
    ) -> dict[TopicPartition, int]:
        limit = self._config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit / 1000
        found: dict[TopicPartition, int] = {}
        attempts = 0
        while True:
            todo = [tp for tp in partitions if tp not in found]
            offsets, errors = self._list_offsets_once(todo, spec)
            found.update(offsets)
            for error in errors.values():
                if not error.retriable:
                    raise error
            if not errors:
                return {tp: found[tp] for tp in partitions}
            for tp in errors:
                self._metadata.mark_stale(tp.topic)
            if time.monotonic() >= deadline:
                raise next(iter(errors.values()))
            self._sleep_until(
                min(deadline, time.monotonic() + self._backoff.backoff(attempts) / 1000)
            )
            attempts += 1

    # --- fetching -----------------------------------------------------------------------------

    def _fetch(self, max_wait_s: float) -> bool:
        """One fetch round over the partitions ready to fetch; False if there were none."""
        now = time.monotonic()
        fetchable = [
            tp
            for tp, state in self._states.items()
            if state.position is not None and not state.buffer and state.backoff_until <= now
        ]
        by_leader, missing = self._leaders(fetchable)
        for tp, error in missing.items():
            if not error.retriable:
                raise error
            self._backoff_partition(tp, self._states[tp])
        if not by_leader:
            return False
        leaders = sorted(by_leader)
        start = self._next_leader % len(leaders)
        self._next_leader += 1
        order = leaders[start:] + leaders[:start]
        got_data = False
        # Requests go out one after another, so only the last of a round may wait for data:
        # an idle leader must not hold back the records another one already has.
        for index, leader in enumerate(order):
            last = index == len(order) - 1
            wait_ms = 0
            if last and not got_data:
                wait_ms = min(int(max_wait_s * 1000), self._config.fetch_max_wait_ms)
            got_data |= self._fetch_from(leader, by_leader[leader], wait_ms)
        return True

    def _fetch_from(self, leader: int, partitions: list[TopicPartition], wait_ms: int) -> bool:
        topics: dict[str, list[p.FetchPartition]] = {}
        asked: dict[TopicPartition, int] = {}
        for tp in partitions:
            position = self._states[tp].position
            assert position is not None
            info = self._metadata.leader(tp)
            topics.setdefault(tp.topic, []).append(
                p.FetchPartition(
                    tp.partition,
                    position,
                    self._config.max_partition_fetch_bytes,
                    current_leader_epoch=info.leader_epoch if info else p.UNKNOWN_EPOCH,
                )
            )
            asked[tp] = position
        request = p.FetchRequest(
            [p.FetchTopic(name, parts) for name, parts in topics.items()],
            max_wait_ms=wait_ms,
            min_bytes=self._config.fetch_min_bytes if wait_ms else 0,
            max_bytes=self._config.fetch_max_bytes,
            isolation_level=self._isolation,
        )
        timeout = self._config.request_timeout_ms + wait_ms
        try:
            response = self._transport.send(leader, request, timeout_ms=timeout)
        except RetriableError:
            for tp in partitions:
                self._backoff_partition(tp, self._states[tp])
            return False
        if response.error_code != p.NONE:
            error = error_for_code(response.error_code)(f"fetch from broker {leader} failed")
            if not error.retriable:
                raise error
            for tp in partitions:
                self._backoff_partition(tp, self._states[tp])
            return False
        got_data = False
        failure: TierlogError | None = None
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                state = self._states.get(tp)
                if state is None or state.position != asked.get(tp):
                    continue  # reassigned or moved by seek while the fetch was out
                try:
                    got_data |= self._handle_partition(tp, state, part)
                except TierlogError as err:
                    failure = failure or err
        if failure is not None:
            raise failure
        return got_data

    def _handle_partition(
        self, tp: TopicPartition, state: _PartitionState, part: p.FetchPartitionData
    ) -> bool:
        code = part.error_code
        if code == OffsetOutOfRangeError.code:
            position = state.position
            if self._config.auto_offset_reset == "none":
                raise OffsetOutOfRangeError(
                    f"fetch position {position} is out of range for {tp} "
                    f"(log start {part.log_start_offset}, high watermark {part.high_watermark}) "
                    f"and auto.offset.reset is none"
                )
            self._set_position(state, None)
            state.reset = _STRATEGIES[self._config.auto_offset_reset]
            return False
        if code != p.NONE:
            error = _partition_error(code, tp, "fetching")
            if error.retriable:
                self._backoff_partition(tp, state)
                return False
            raise error
        state.failures = 0
        position = state.position
        assert position is not None
        end: int | None = None
        for batch, visible in classify_batches(
            iter_batches(part.records, validate=self._config.check_crcs, allow_partial_tail=True),
            part.aborted_transactions,
            read_committed=self._config.read_committed,
        ):
            end = batch.next_offset
            if not visible or batch.last_offset < position:
                continue
            epoch = batch.partition_leader_epoch
            leader_epoch = None if epoch == NO_PARTITION_LEADER_EPOCH else epoch
            timestamp_type = batch.timestamp_type
            for record in batch.records():
                if record.offset < position:
                    continue
                state.buffer.append(
                    ConsumerRecord(
                        tp.topic,
                        tp.partition,
                        record.offset,
                        record.timestamp,
                        timestamp_type,
                        record.key,
                        record.value,
                        record.headers,
                        leader_epoch,
                    )
                )
        if end is not None and end > position:
            state.buffer_end = end
        return bool(state.buffer) or state.buffer_end is not None


def _partition_error(code: int, tp: TopicPartition, doing: str) -> TierlogError:
    cls = error_for_code(code)
    return cls(f"{cls.kafka_name or code} {doing} {tp}")
