"""The client's view of the cluster: brokers, the controller, and each partition's leader.

Clients route every produce, fetch and list-offsets to the partition's leader, so they keep the
answer of the last MetadataRequest and ask again only when something says it is stale: a
retriable error such as NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION, a broker that
cannot be reached, or ``metadata.max.age.ms`` passing. A refresh asks any reachable broker, as a
Kafka client asks any of its bootstrap servers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import attrs

from ..errors import (
    BrokerNotAvailableError,
    InvalidTopicError,
    LeaderNotAvailableError,
    RetriableError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..model import TopicPartition, Uuid
from ..server import protocol as p
from ..server.transport import Transport


@attrs.frozen
class PartitionInfo:
    """One partition as metadata describes it (Kafka's ``PartitionInfo``)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    in_sync_replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = p.NONE


@attrs.frozen
class TopicInfo:
    """One topic as metadata describes it."""

    name: str
    topic_id: Uuid
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


class MetadataCache:
    """The latest metadata the client has seen, refreshed through MetadataRequest on demand.

    Thread-safe: a producer's caller threads and its sender thread share one cache.
    """

    def __init__(self, transport: Transport, *, request_timeout_ms: int, max_age_ms: int) -> None:
        self._transport = transport
        self._request_timeout_ms = request_timeout_ms
        self._max_age_ms = max_age_ms
        self._lock = threading.Lock()
        self._topics: dict[str, TopicInfo] = {}
        self._topic_errors: dict[str, int] = {}
        self._brokers: tuple[int, ...] = ()
        self._controller_id = p.NO_LEADER
        self._cluster_id: str | None = None
        self._stale: set[str] = set()
        self._updated_at: dict[str, float] = {}

    # --- reading ------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        with self._lock:
            return self._topics.get(name)

    def topic_error(self, name: str) -> int:
        """The error code the last refresh gave for ``name`` (0 if none)."""
        with self._lock:
            return self._topic_errors.get(name, p.NONE)

    def leader(self, tp: TopicPartition) -> PartitionInfo | None:
        """The partition's metadata if it has a live leader, else None."""
        with self._lock:
            topic = self._topics.get(tp.topic)
        if topic is None or tp.partition >= len(topic.partitions):
            return None
        info = topic.partitions[tp.partition]
        return info if info.leader >= 0 else None

    @property
    def controller_id(self) -> int:
        with self._lock:
            return self._controller_id

    @property
    def cluster_id(self) -> str | None:
        with self._lock:
            return self._cluster_id

    def is_stale(self, topic: str) -> bool:
        """True when ``topic`` was marked stale or is older than ``metadata.max.age.ms``."""
        with self._lock:
            if topic in self._stale or topic not in self._topics:
                return True
            age = (time.monotonic() - self._updated_at.get(topic, 0.0)) * 1000
            return age >= self._max_age_ms

    def mark_stale(self, topic: str) -> None:
        """Makes the next ``ensure`` for ``topic`` ask the cluster again."""
        with self._lock:
            self._stale.add(topic)

    def node_ids(self) -> tuple[int, ...]:
        """Brokers to ask: the ones metadata named, else the transport's bootstrap list."""
        reachable = self._transport.node_ids()
        with self._lock:
            known = self._brokers
        ordered = [b for b in known if b in reachable] or list(reachable)
        return tuple(ordered)

    # --- refreshing ---------------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None) -> p.MetadataResponse:
        """Asks a reachable broker for ``topics`` (None: all) and records the answer.

        Raises BrokerNotAvailableError when no broker answers; per-topic errors are recorded,
        not raised (see ``topic_error``).
        """
        names = None if topics is None else sorted(set(topics))
        request = p.MetadataRequest(
            None if names is None else [p.MetadataRequestTopic(name) for name in names]
        )
        last_error: TierlogError | None = None
        for node in self.node_ids():
            try:
                response = self._transport.send(node, request, timeout_ms=self._request_timeout_ms)
            except RetriableError as err:
                last_error = err
                continue
            self._record(response, names)
            return response
        raise BrokerNotAvailableError(
            f"no broker answered a metadata request: {last_error or 'no broker is reachable'}"
        )

    def ensure(self, topics: Iterable[str]) -> None:
        """Refreshes ``topics`` if any is unknown or stale; raises what refresh raises."""
        wanted = set(topics)
        if any(self.is_stale(t) for t in wanted):
            self.refresh(wanted)

    def _record(self, response: p.MetadataResponse, asked: list[str] | None) -> None:
        now = time.monotonic()
        with self._lock:
            self._brokers = tuple(sorted(b.node_id for b in response.brokers))
            self._controller_id = response.controller_id
            self._cluster_id = response.cluster_id
            seen = set()
            for topic in response.topics:
                if topic.name is None:
                    continue
                seen.add(topic.name)
                self._topic_errors[topic.name] = topic.error_code
                self._updated_at[topic.name] = now
                self._stale.discard(topic.name)
                if topic.error_code != p.NONE:
                    self._topics.pop(topic.name, None)
                    continue
                partitions = tuple(
                    PartitionInfo(
                        topic.name,
                        part.partition_index,
                        part.leader_id,
                        part.leader_epoch,
                        part.replica_nodes,
                        part.isr_nodes,
                        part.offline_replicas,
                        part.error_code,
                    )
                    for part in sorted(topic.partitions, key=lambda x: x.partition_index)
                )
                self._topics[topic.name] = TopicInfo(
                    topic.name, topic.topic_id, topic.is_internal, partitions
                )
            missing = (set(self._topics) if asked is None else set(asked)) - seen
            for name in missing:
                self._topics.pop(name, None)
                self._topic_errors[name] = UnknownTopicOrPartitionError.code or 3
                self._updated_at[name] = now


def topic_error(topic: str, code: int) -> TierlogError:
    """The error for a topic-level metadata error code, naming the topic."""
    cls = error_for_code(code)
    if cls is InvalidTopicError:
        return cls(f"topic {topic!r} is not a legal topic name")
    if cls is UnknownTopicOrPartitionError:
        return cls(f"topic {topic!r} does not exist")
    if cls is LeaderNotAvailableError:
        return cls(f"topic {topic!r} has no leader yet")
    return cls(f"topic {topic!r}: {cls.kafka_name}")
