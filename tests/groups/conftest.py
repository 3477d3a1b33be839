"""Listening brokers with a group coordinator, and a raw client that speaks its APIs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.groups.subscriptions import encode_assignment, encode_subscription

from tests.wire.raw import RawClient

LOOPBACK_ANY_PORT = "PLAINTEXT://127.0.0.1:0"

#: Fast groups: no initial delay, short sessions allowed, few offsets partitions.
GROUP_SETTINGS: dict[str, object] = {
    "listeners": LOOPBACK_ANY_PORT,
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "4",
}


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., EmbeddedCluster]]:
    """``make_cluster(size=1, **config)``: a started, listening cluster with fast groups."""
    clusters: list[EmbeddedCluster] = []

    def make(size: int = 1, **config: object) -> EmbeddedCluster:
        settings = dict(GROUP_SETTINGS)
        settings.update({key.replace("_", "."): value for key, value in config.items()})
        cluster = EmbeddedCluster(size, tmp_path / f"c{len(clusters)}", settings, listen=True)
        cluster.start()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in reversed(clusters):
        cluster.stop()


def create_topic(cluster: EmbeddedCluster, name: str, partitions: int = 1) -> None:
    Admin(cluster.transport).create_topics([NewTopic(name, partitions, 1)])


class GroupClient(RawClient):
    """A raw connection with one method per group API (newest versions unless told)."""

    def find(self, group: str, version: int = 4) -> Any:
        if version >= 4:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
            return self.call(request, version).coordinators[0]
        return self.call(FindCoordinatorRequest(key=group, key_type=0), version)

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        topics: tuple[str, ...] = ("t",),
        session_ms: int = 10_000,
        rebalance_ms: int = 10_000,
        instance: str | None = None,
        protocol_type: str = "consumer",
        protocol: str = "range",
        version: int = 9,
    ) -> Any:
        r = JoinGroupRequest
        request = r(
            group_id=group,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=[
                r.JoinGroupRequestProtocol(
                    name=protocol, metadata=encode_subscription(list(topics))
                )
            ],
            reason=None,
        )
        return self.call(request, version)

    def join_twice(self, group: str, **kwargs: Any) -> Any:
        """KIP-394: a first join learns its member id, the second joins with it (a static
        member, with a ``group.instance.id``, joins at once)."""
        first = self.join(group, **kwargs)
        if kwargs.get("instance") is not None:
            return first
        assert first.error_code == 79, first  # MEMBER_ID_REQUIRED
        return self.join(group, first.member_id, **kwargs)

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, dict[str, list[int]]] | None = None,
        *,
        instance: str | None = None,
        version: int = 5,
    ) -> Any:
        r = SyncGroupRequest
        request = r(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                r.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                for m, a in (assignments or {}).items()
            ],
        )
        return self.call(request, version)

    def heartbeat(
        self, group: str, generation: int, member_id: str, *, instance: str | None = None
    ) -> int:
        request = HeartbeatRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )
        code: int = self.call(request, 4).error_code
        return code

    def leave(self, group: str, *members: tuple[str, str | None], version: int = 5) -> Any:
        r = LeaveGroupRequest
        if version < 3:
            return self.call(r(group_id=group, member_id=members[0][0]), version)
        request = r(
            group_id=group,
            members=[
                r.MemberIdentity(member_id=m, group_instance_id=i, reason="done")
                for m, i in members
            ],
        )
        return self.call(request, version)

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        *,
        generation: int = -1,
        member_id: str = "",
        metadata: str = "",
        version: int = 9,
    ) -> dict[tuple[str, int], int]:
        r = OffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                r.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=metadata,
                )
            )
        request = r(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[r.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()],
        )
        answer = self.call(request, version)
        return {
            (t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions
        }

    def fetch_offsets(
        self, group: str, partitions: list[tuple[str, int]] | None = None, version: int = 8
    ) -> tuple[int, dict[tuple[str, int], tuple[int, str | None, int]]]:
        """(group error, {(topic, partition): (offset, metadata, error)})."""
        r = OffsetFetchRequest
        topics: dict[str, list[int]] | None = None
        if partitions is not None:
            topics = {}
            for topic, partition in partitions:
                topics.setdefault(topic, []).append(partition)
        if version >= 8:
            request = r(
                groups=[
                    r.OffsetFetchRequestGroup(
                        group_id=group,
                        topics=None
                        if topics is None
                        else [
                            r.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                                name=t, partition_indexes=p
                            )
                            for t, p in topics.items()
                        ],
                    )
                ],
                require_stable=True,
            )
            answer = self.call(request, version).groups[0]
        else:
            request = r(
                group_id=group,
                topics=None
                if topics is None
                else [
                    r.OffsetFetchRequestTopic(name=t, partition_indexes=p)
                    for t, p in topics.items()
                ],
            )
            answer = self.call(request, version)
        found = {
            (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in answer.topics
            for p in t.partitions
        }
        return (answer.error_code if version >= 2 else 0), found

    def list_groups(self, states: list[str] | None = None, version: int = 5) -> Any:
        request = ListGroupsRequest(states_filter=states or [], types_filter=[])
        return self.call(request, version)

    def describe(self, *groups: str, version: int = 5) -> Any:
        request = DescribeGroupsRequest(groups=list(groups), include_authorized_operations=False)
        return self.call(request, version).groups

    def delete_groups(self, *groups: str) -> dict[str, int]:
        answer = self.call(DeleteGroupsRequest(groups_names=list(groups)), 2)
        return {r.group_id: r.error_code for r in answer.results}

    def delete_offsets(self, group: str, topic: str, partitions: list[int]) -> Any:
        r = OffsetDeleteRequest
        request = r(
            group_id=group,
            topics=[
                r.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[
                        r.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p)
                        for p in partitions
                    ],
                )
            ],
        )
        return self.call(request, 0)


def connect(cluster: EmbeddedCluster, broker_id: int = 0) -> GroupClient:
    endpoint = cluster.endpoints.snapshot()[broker_id]
    return GroupClient(f"{endpoint.host}:{endpoint.port}")


def groups_ready(cluster: EmbeddedCluster) -> EmbeddedCluster:
    """Creates ``__consumer_offsets`` (as a first FindCoordinator does) and waits until every
    live broker has loaded the partitions it leads; creates topic ``t`` with 4 partitions."""
    create_topic(cluster, "t", 4)
    with connect(cluster, min(cluster.controller.live_brokers())) as client:
        assert client.find("warm-up").error_code == 0
    for broker_id in cluster.controller.live_brokers():
        coordinator = cluster.broker(broker_id).group_coordinator
        assert coordinator is not None and coordinator.wait_loaded()
    return cluster


@pytest.fixture
def cluster(make_cluster: Callable[..., EmbeddedCluster]) -> EmbeddedCluster:
    return groups_ready(make_cluster())


@pytest.fixture
def client(cluster: EmbeddedCluster) -> Iterator[GroupClient]:
    with connect(cluster) as made:
        yield made
