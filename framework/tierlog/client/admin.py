"""The admin client: topics, partitions, configs, record deletion, offsets, leader elections and
partition reassignments (Kafka's ``Admin``).

Calls are synchronous. Topic creation and deletion and reassignments go to the controller,
partition-level calls to each partition's leader, config calls to any broker (a broker's own
configs to that broker). Retriable errors and unreachable brokers are retried with backoff
until ``default.api.timeout.ms``; an error for one item raises the tierlog error for its code with
the item named, after the other items of the same call were carried out.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from ..errors import (
    BrokerNotAvailableError,
    LeaderNotAvailableError,
    RetriableError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..model import TopicPartition, Uuid
from ..server import protocol as p
from ..server.protocol import AlterConfigOp
from ..server.transport import Transport
from .backoff import ExponentialBackoff
from .config import AdminConfig, coerce_config
from .errors import ClientClosedError
from .metadata import MetadataCache, TopicInfo, topic_error

_T = TypeVar("_T")
#: NOT_CONTROLLER: the request reached a broker that is not (or no longer) the controller.
_NOT_CONTROLLER = 41


@attrs.frozen
class NewTopic:
    """A topic to create; -1 partitions or replication factor take the broker defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, tuple[int, ...]] | None = None
    configs: Mapping[str, str] = attrs.field(factory=dict)


def _assignments(
    replicas: Iterable[Iterable[int]] | None,
) -> tuple[tuple[int, ...], ...] | None:
    return None if replicas is None else tuple(tuple(r) for r in replicas)


@attrs.frozen
class NewPartitions:
    """Grow a topic to ``total_count`` partitions (Kafka's ``NewPartitions.increaseTo``);
    ``new_assignments`` lists the replicas of each new partition, None lets the controller
    place them."""

    total_count: int
    new_assignments: tuple[tuple[int, ...], ...] | None = attrs.field(
        default=None, converter=_assignments
    )

    @classmethod
    def increase_to(
        cls, total_count: int, new_assignments: Iterable[Iterable[int]] | None = None
    ) -> NewPartitions:
        return cls(total_count, new_assignments)


class ConfigResourceType(enum.IntEnum):
    TOPIC = p.ResourceType.TOPIC
    BROKER = p.ResourceType.BROKER


@attrs.frozen
class ConfigResource:
    """A topic (by name) or a broker (by id as text) whose configs are described or altered."""

    type: ConfigResourceType = attrs.field(converter=ConfigResourceType)
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int) -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(broker_id))


@attrs.frozen
class AlterConfig:
    """One incremental change: SET a value, DELETE (back to the default), APPEND or SUBTRACT."""

    name: str
    value: str | None = None
    op: AlterConfigOp = attrs.field(default=AlterConfigOp.SET, converter=AlterConfigOp)


@attrs.frozen
class ListedOffset:
    """A ListOffsets answer: the offset and, where known, its timestamp and leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int | None


@attrs.frozen
class PartitionReassignment:
    """A reassignment under way: every current replica (the targets first), the targets that
    are still joining, and the replicas that leave once every target is in sync."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


class _Retry(Exception):
    """Internal: the round failed in a retriable way; wait and try again."""

    def __init__(self, error: TierlogError) -> None:
        self.error = error
        super().__init__(str(error))


class Admin:
    """Manages topics and configs (Kafka's ``Admin`` client), synchronously."""

    def __init__(
        self, transport: Transport, config: AdminConfig | Mapping[str, Any] | None = None
    ) -> None:
        self._config = config = coerce_config(config, AdminConfig)
        self._transport = transport
        self._metadata = MetadataCache(
            transport, request_timeout_ms=config.request_timeout_ms, max_age_ms=0
        )
        self._backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._closed = False

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- topics -------------------------------------------------------------------------------

    def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, Uuid]:
        """Creates ``topics``; returns their ids. Raises for the first topic that failed."""
        wanted = list(topics)
        request = p.CreateTopicsRequest(
            [_creatable(topic) for topic in wanted],
            timeout_ms=self._config.request_timeout_ms,
            validate_only=validate_only,
        )

        def attempt() -> p.CreateTopicsResponse:
            response: p.CreateTopicsResponse = self._send_to_controller(request)
            for result in response.topics:
                if result.error_code == _NOT_CONTROLLER:
                    raise _Retry(LeaderNotAvailableError("the controller moved"))
            return response

        response = self._retrying(attempt, timeout_ms)
        failures = [
            _item_error(r.error_code, f"creating topic {r.name!r}", r.error_message)
            for r in response.topics
            if r.error_code != p.NONE
        ]
        if failures:
            raise failures[0]
        return {r.name: r.topic_id for r in response.topics}

    def delete_topics(self, names: Iterable[str], *, timeout_ms: int | None = None) -> None:
        """Deletes the named topics; raises for the first one that could not be deleted."""
        request = p.DeleteTopicsRequest(
            topic_names=list(names), timeout_ms=self._config.request_timeout_ms
        )

        def attempt() -> p.DeleteTopicsResponse:
            response: p.DeleteTopicsResponse = self._send_to_controller(request)
            for result in response.responses:
                if result.error_code == _NOT_CONTROLLER:
                    raise _Retry(LeaderNotAvailableError("the controller moved"))
            return response

        response = self._retrying(attempt, timeout_ms)
        for result in response.responses:
            if result.error_code != p.NONE:
                raise _item_error(
                    result.error_code, f"deleting topic {result.name!r}", result.error_message
                )

    def create_partitions(
        self,
        new_partitions: Mapping[str, NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Adds partitions to existing topics; raises for the first topic refused, after the
        others were grown: InvalidPartitionsError (not an increase), UnknownTopicOrPartitionError,
        InvalidReplicaAssignmentError, InvalidRequestError (an internal topic)."""
        request = p.CreatePartitionsRequest(
            [
                p.CreatePartitionsTopic(
                    name,
                    wanted.total_count,
                    None
                    if wanted.new_assignments is None
                    else [p.CreatePartitionsAssignment(r) for r in wanted.new_assignments],
                )
                for name, wanted in new_partitions.items()
            ],
            timeout_ms=self._config.request_timeout_ms,
            validate_only=validate_only,
        )

        def attempt() -> p.CreatePartitionsResponse:
            response: p.CreatePartitionsResponse = self._send_to_controller(request)
            for result in response.results:
                if result.error_code == _NOT_CONTROLLER:
                    raise _Retry(LeaderNotAvailableError("the controller moved"))
            return response

        response = self._retrying(attempt, timeout_ms)
        for result in response.results:
            if result.error_code != p.NONE:
                raise _item_error(
                    result.error_code,
                    f"creating partitions of {result.name!r}",
                    result.error_message,
                )

    def list_topics(self, *, internal: bool = False, timeout_ms: int | None = None) -> set[str]:
        """The names of all topics (internal ones only when asked)."""
        response = self._retrying(lambda: self._metadata_request(None), timeout_ms)
        return {
            t.name
            for t in response.topics
            if t.name is not None and t.error_code == p.NONE and (internal or not t.is_internal)
        }

    def describe_topics(
        self, names: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, TopicInfo]:
        """Partitions, leaders and replicas of each named topic; raises for an unknown one."""
        wanted = list(names)
        self._retrying(lambda: self._metadata_request(wanted), timeout_ms)
        result = {}
        for name in wanted:
            info = self._metadata.topic(name)
            if info is None:
                code = self._metadata.topic_error(name) or UnknownTopicOrPartitionError.code
                assert code is not None
                raise topic_error(name, code)
            result[name] = info
        return result

    # --- reassignments -----------------------------------------------------------------------

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Iterable[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Moves each partition to the given brokers (KIP-455); None cancels its reassignment.

        Returns once the controller has accepted them; the data moves in the background (see
        :meth:`list_partition_reassignments`). A new target for a partition already moving
        replaces the old one. Raises for the first partition refused, after the others were
        accepted: InvalidReplicaAssignmentError (empty, a broker twice, an unknown broker),
        NoReassignmentInProgressError (cancelling where nothing moves),
        UnknownTopicOrPartitionError.
        """
        topics: dict[str, list[p.ReassignablePartition]] = {}
        for tp, replicas in reassignments.items():
            topics.setdefault(tp.topic, []).append(
                p.ReassignablePartition(tp.partition, None if replicas is None else replicas)
            )
        request = p.AlterPartitionReassignmentsRequest(
            [p.ReassignableTopic(name, parts) for name, parts in topics.items()],
            timeout_ms=self._config.request_timeout_ms,
        )

        def attempt() -> p.AlterPartitionReassignmentsResponse:
            response: p.AlterPartitionReassignmentsResponse = self._send_to_controller(request)
            if response.error_code == _NOT_CONTROLLER:
                raise _Retry(LeaderNotAvailableError("the controller moved"))
            return response

        response = self._retrying(attempt, timeout_ms)
        if response.error_code != p.NONE:
            raise _item_error(response.error_code, "reassigning partitions", response.error_message)
        for topic in response.responses:
            for part in topic.partitions:
                if part.error_code != p.NONE:
                    tp = TopicPartition(topic.name, part.partition_index)
                    raise _item_error(part.error_code, f"reassigning {tp}", part.error_message)

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments under way, of ``partitions`` or (None) of the whole cluster; a
        partition that is not moving (or does not exist) is not in the answer."""
        topics: dict[str, list[int]] | None = None
        if partitions is not None:
            topics = {}
            for tp in partitions:
                topics.setdefault(tp.topic, []).append(tp.partition)
        request = p.ListPartitionReassignmentsRequest(
            None
            if topics is None
            else [p.ListPartitionReassignmentsTopics(n, parts) for n, parts in topics.items()],
            timeout_ms=self._config.request_timeout_ms,
        )

        def attempt() -> p.ListPartitionReassignmentsResponse:
            response: p.ListPartitionReassignmentsResponse = self._send_to_controller(request)
            if response.error_code == _NOT_CONTROLLER:
                raise _Retry(LeaderNotAvailableError("the controller moved"))
            return response

        response = self._retrying(attempt, timeout_ms)
        if response.error_code != p.NONE:
            raise _item_error(
                response.error_code, "listing partition reassignments", response.error_message
            )
        return {
            TopicPartition(topic.name, part.partition_index): PartitionReassignment(
                part.replicas, part.adding_replicas, part.removing_replicas
            )
            for topic in response.topics
            for part in topic.partitions
        }

    # --- leader elections --------------------------------------------------------------------

    def elect_leaders(
        self,
        election_type: p.ElectionType,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, TierlogError | None]:
        """Runs a preferred or unclean leader election (KIP-460) on ``partitions``, or (None)
        on every partition of the cluster; returns each partition's outcome: None where a
        leader was elected, else its error (ElectionNotNeededError where the partition already
        had the leader asked for, PreferredLeaderNotAvailableError...), as Kafka's
        ``ElectLeadersResult.partitions()``. With None, partitions that needed no election are
        left out."""
        topics: dict[str, list[int]] | None = None
        if partitions is not None:
            topics = {}
            for tp in partitions:
                topics.setdefault(tp.topic, []).append(tp.partition)
        request = p.ElectLeadersRequest(
            election_type,
            None
            if topics is None
            else [p.TopicPartitions(n, parts) for n, parts in topics.items()],
            timeout_ms=self._config.request_timeout_ms,
        )

        def attempt() -> p.ElectLeadersResponse:
            response: p.ElectLeadersResponse = self._send_to_controller(request)
            if response.error_code == _NOT_CONTROLLER:
                raise _Retry(LeaderNotAvailableError("the controller moved"))
            return response

        response = self._retrying(attempt, timeout_ms)
        if response.error_code != p.NONE:
            raise _item_error(response.error_code, "electing leaders", None)
        outcomes: dict[TopicPartition, TierlogError | None] = {}
        for topic in response.replica_election_results:
            for part in topic.partition_result:
                tp = TopicPartition(topic.topic, part.partition_id)
                outcomes[tp] = (
                    None
                    if part.error_code == p.NONE
                    else _item_error(
                        part.error_code, f"electing a leader for {tp}", part.error_message
                    )
                )
        return outcomes

    # --- configs ------------------------------------------------------------------------------

    def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, dict[str, p.DescribeConfigsResourceResult]]:
        """Every config entry of each resource, by name."""
        out: dict[ConfigResource, dict[str, p.DescribeConfigsResourceResult]] = {}
        for node, group in self._by_config_node(resources).items():
            request = p.DescribeConfigsRequest(
                [p.DescribeConfigsResource(r.type, r.name) for r in group],
                include_synonyms=include_synonyms,
            )
            response = self._retrying(functools.partial(self._send, node, request), timeout_ms)
            for result in response.results:
                resource = ConfigResource(result.resource_type, result.resource_name)
                if result.error_code != p.NONE:
                    raise _item_error(
                        result.error_code, f"describing configs of {resource}", result.error_message
                    )
                out[resource] = {entry.name: entry for entry in result.configs}
        return out

    def alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfig]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Applies incremental config changes (IncrementalAlterConfigs) to each resource."""
        failure: TierlogError | None = None
        for node, group in self._by_config_node(changes).items():
            request = p.IncrementalAlterConfigsRequest(
                [
                    p.AlterConfigsResource(
                        r.type,
                        r.name,
                        [p.AlterableConfig(c.name, c.op, c.value) for c in changes[r]],
                    )
                    for r in group
                ],
                validate_only=validate_only,
            )
            response = self._retrying(functools.partial(self._send, node, request), timeout_ms)
            for result in response.responses:
                if result.error_code != p.NONE and failure is None:
                    resource = ConfigResource(result.resource_type, result.resource_name)
                    failure = _item_error(
                        result.error_code, f"altering configs of {resource}", result.error_message
                    )
        if failure is not None:
            raise failure

    # --- partitions ---------------------------------------------------------------------------

    def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Deletes records below each offset (-1: the high watermark); returns low watermarks."""

        def request_for(tps: list[TopicPartition]) -> p.DeleteRecordsRequest:
            topics: dict[str, list[p.DeleteRecordsPartition]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(
                    p.DeleteRecordsPartition(tp.partition, offsets[tp])
                )
            return p.DeleteRecordsRequest(
                [p.DeleteRecordsTopic(n, parts) for n, parts in topics.items()],
                timeout_ms=self._config.request_timeout_ms,
            )

        def answers(
            response: p.DeleteRecordsResponse,
        ) -> Iterable[tuple[TopicPartition, int, int]]:
            for topic in response.topics:
                for part in topic.partitions:
                    yield (
                        TopicPartition(topic.name, part.partition_index),
                        part.error_code,
                        part.low_watermark,
                    )

        return self._per_leader(
            list(offsets), request_for, answers, "deleting records of", timeout_ms
        )

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: p.IsolationLevel = p.IsolationLevel.READ_UNCOMMITTED,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets by :class:`~tierlog.server.protocol.OffsetSpec` or timestamp, per partition."""

        def request_for(tps: list[TopicPartition]) -> p.ListOffsetsRequest:
            topics: dict[str, list[p.ListOffsetsPartition]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(
                    p.ListOffsetsPartition(tp.partition, specs[tp])
                )
            return p.ListOffsetsRequest(
                [p.ListOffsetsTopic(n, parts) for n, parts in topics.items()],
                isolation_level=isolation_level,
            )

        def answers(
            response: p.ListOffsetsResponse,
        ) -> Iterable[tuple[TopicPartition, int, ListedOffset]]:
            for topic in response.topics:
                for part in topic.partitions:
                    epoch = None if part.leader_epoch == p.UNKNOWN_EPOCH else part.leader_epoch
                    yield (
                        TopicPartition(topic.name, part.partition_index),
                        part.error_code,
                        ListedOffset(part.offset, part.timestamp, epoch),
                    )

        return self._per_leader(list(specs), request_for, answers, "listing offsets of", timeout_ms)

    # --- plumbing -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the admin client is closed")

    def _send(self, node: int, request: Any) -> Any:
        try:
            return self._transport.send(node, request, timeout_ms=self._config.request_timeout_ms)
        except RetriableError as err:
            raise _Retry(err) from err

    def _metadata_request(self, topics: list[str] | None) -> p.MetadataResponse:
        try:
            return self._metadata.refresh(topics)
        except RetriableError as err:
            raise _Retry(err) from err

    def _send_to_controller(self, request: Any) -> Any:
        self._metadata_request([])
        controller = self._metadata.controller_id
        if controller < 0:
            raise _Retry(BrokerNotAvailableError("no controller is known"))
        return self._send(controller, request)

    def _by_config_node(
        self, resources: Iterable[ConfigResource]
    ) -> dict[int, list[ConfigResource]]:
        groups: dict[int, list[ConfigResource]] = {}
        any_node: int | None = None
        for resource in resources:
            if resource.type is ConfigResourceType.BROKER and resource.name:
                node = int(resource.name)
            else:
                if any_node is None:
                    any_node = self._retrying(self._any_node, None)
                node = any_node
            groups.setdefault(node, []).append(resource)
        return groups

    def _any_node(self) -> int:
        nodes = self._metadata.node_ids()
        if not nodes:
            raise _Retry(BrokerNotAvailableError("no broker is reachable"))
        return nodes[0]

    def _retrying(self, attempt: Callable[[], _T], timeout_ms: int | None) -> _T:
        """Runs ``attempt`` until it stops raising _Retry or the API timeout passes."""
        self._check_open()
        limit = self._config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit / 1000
        failures = 0
        while True:
            try:
                return attempt()
            except _Retry as retry:
                delay = self._backoff.backoff(failures) / 1000
                failures += 1
                if time.monotonic() + delay >= deadline:
                    raise retry.error from None
                time.sleep(delay)

    def _per_leader(
        self,
        partitions: list[TopicPartition],
        request_for: Callable[[list[TopicPartition]], Any],
        answers: Callable[[Any], Iterable[tuple[TopicPartition, int, _T]]],
        doing: str,
        timeout_ms: int | None,
    ) -> dict[TopicPartition, _T]:
        """Sends each leader its partitions, retrying partitions with retriable errors."""
        results: dict[TopicPartition, _T] = {}

        def attempt() -> None:
            todo = [tp for tp in partitions if tp not in results]
            self._metadata_request(sorted({tp.topic for tp in todo}))
            by_leader: dict[int, list[TopicPartition]] = {}
            retry: TierlogError | None = None
            for tp in todo:
                info = self._metadata.leader(tp)
                if info is not None:
                    by_leader.setdefault(info.leader, []).append(tp)
                    continue
                code = self._metadata.topic_error(tp.topic)
                error = (
                    topic_error(tp.topic, code)
                    if code != p.NONE
                    else UnknownTopicOrPartitionError(f"{tp} does not exist")
                )
                if not error.retriable:
                    raise error
                retry = error
            for leader, tps in by_leader.items():
                try:
                    response = self._send(leader, request_for(tps))
                except _Retry as err:
                    retry = err.error
                    continue
                for tp, code, value in answers(response):
                    if code == p.NONE:
                        results[tp] = value
                        continue
                    error = _item_error(code, f"{doing} {tp}", None)
                    if not error.retriable:
                        raise error
                    retry = error
            if retry is not None:
                raise _Retry(retry)

        self._retrying(attempt, timeout_ms)
        return {tp: results[tp] for tp in partitions}


def _creatable(topic: NewTopic) -> p.CreatableTopic:
    assignments = [
        p.CreatableReplicaAssignment(index, brokers)
        for index, brokers in sorted((topic.replica_assignment or {}).items())
    ]
    return p.CreatableTopic(
        topic.name,
        -1 if assignments else topic.num_partitions,
        -1 if assignments else topic.replication_factor,
        assignments,
        [p.CreatableTopicConfig(k, v) for k, v in topic.configs.items()],
    )


def _item_error(code: int, what: str, message: str | None) -> TierlogError:
    cls = error_for_code(code)
    detail = f": {message}" if message else ""
    return cls(f"{cls.kafka_name or code} {what}{detail}")
