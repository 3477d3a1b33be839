"""ConsumerGroupHeartbeat and ConsumerGroupDescribe over the wire, every version, raw frames
against a listening broker: the errors Kafka answers, the group as described, commits checked
against member epochs, and members fenced by the coordinator's timers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.wire.schemas import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

from tests.waiting import wait_until
from tests.wire.raw import RawClient

SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.consumer.heartbeat.interval.ms": 200,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.min.session.timeout.ms": 1000,
}

UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
INVALID_GROUP_ID = 24
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
COORDINATOR_LOAD_IN_PROGRESS = 14
VERSIONS = (0, 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(1, tmp_path_factory.mktemp("kip848"), SETTINGS, listen=True) as c:
        Admin(c.transport).create_topics([NewTopic("orders", 4, 1), NewTopic("payments", 2, 1)])
        yield c


@pytest.fixture
def raw(cluster: EmbeddedCluster) -> Iterator[RawClient]:
    with RawClient.to(cluster) as client:
        # The coordinator of every group is broker 0: make it load before the tests talk to it.
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["warm-up"])
        wait_until(lambda: client.call(request, 4).coordinators[0].error_code == 0, "a coordinator")
        yield client


def wait_for_coordinator(raw: RawClient, group: str) -> None:
    """Until the group's coordinator has loaded (FindCoordinator makes __consumer_offsets)."""
    find = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    wait_until(lambda: raw.call(find, 4).coordinators[0].error_code == 0, "a coordinator")
    wait_until(
        lambda: describe(raw, 1, group)[0].error_code in (0, GROUP_ID_NOT_FOUND),
        "the coordinator to load",
    )


def topic_id(cluster: EmbeddedCluster, name: str) -> uuid.UUID:
    topic = cluster.controller.image().topic(name)
    assert topic is not None
    return uuid.UUID(bytes=topic.topic_id.value)


def beat(raw: RawClient, version: int, group: str, member: str, epoch: int, **fields: Any) -> Any:
    """A heartbeat, retried while the coordinator loads."""
    request = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, **fields
    )
    while True:
        answer = raw.call(request, version)
        if answer.error_code != COORDINATOR_LOAD_IN_PROGRESS:
            return answer
        time.sleep(0.05)


def join(raw: RawClient, version: int, group: str, member: str, *topics: str, **fields: Any) -> Any:
    fields.setdefault("rebalance_timeout_ms", 5000)
    return beat(
        raw,
        version,
        group,
        member,
        0,
        subscribed_topic_names=list(topics or ("orders",)),
        topic_partitions=[],
        **fields,
    )


def owned(answer: Any) -> list[Any]:
    """An answer's assignment as a heartbeat reports it back."""
    cls = ConsumerGroupHeartbeatRequest.TopicPartitions
    return [
        cls(topic_id=tp.topic_id, partitions=tp.partitions)
        for tp in answer.assignment.topic_partitions
    ]


def describe(raw: RawClient, version: int, *groups: str) -> list[Any]:
    request = ConsumerGroupDescribeRequest(
        group_ids=list(groups), include_authorized_operations=False
    )
    return list(raw.call(request, version).groups)


def test_api_versions_advertise_the_consumer_protocol(raw: RawClient) -> None:
    keys = {
        a.api_key: (a.min_version, a.max_version)
        for a in raw.call(ApiVersionsRequest(), 3).api_keys
    }
    assert keys[68] == (0, 1) and keys[69] == (0, 1)


def test_a_classic_only_broker_does_not_advertise_it(tmp_path: Path) -> None:
    settings = {**SETTINGS, "group.coordinator.rebalance.protocols": "classic"}
    with (
        EmbeddedCluster(1, tmp_path, settings, listen=True) as cluster,
        RawClient.to(cluster) as raw,
    ):
        keys = {a.api_key for a in raw.call(ApiVersionsRequest(), 3).api_keys}
        assert 68 not in keys and 69 not in keys and 11 in keys
        answer = raw.call(
            ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0), 1
        )
        assert answer.error_code == 35  # UNSUPPORTED_VERSION, what librdkafka treats as fatal


@pytest.mark.parametrize("version", VERSIONS)
def test_members_split_the_partitions_and_hand_them_over(
    cluster: EmbeddedCluster, raw: RawClient, version: int
) -> None:
    group = f"split-v{version}"
    a = join(raw, version, group, "member-a")
    assert (a.error_code, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (
        0,
        "member-a",
        1,
        200,
    )
    (topic,) = a.assignment.topic_partitions
    assert (topic.topic_id, sorted(topic.partitions)) == (topic_id(cluster, "orders"), [0, 1, 2, 3])
    b = join(raw, version, group, "member-b")
    assert b.member_epoch == 2 and b.assignment.topic_partitions == []
    # a is asked to revoke two partitions, keeping its epoch until it has.
    a = beat(raw, version, group, "member-a", 1)
    assert a.member_epoch == 1 and len(a.assignment.topic_partitions[0].partitions) == 2
    a = beat(raw, version, group, "member-a", 1, topic_partitions=owned(a))
    assert a.member_epoch == 2
    b = beat(raw, version, group, "member-b", 2, topic_partitions=[])
    assert len(b.assignment.topic_partitions[0].partitions) == 2
    (described,) = describe(raw, version, group)
    assert (described.error_code, described.group_state, described.group_epoch) == (0, "Stable", 2)
    assert (described.assignment_epoch, described.assignor_name) == (2, "uniform")
    by_id = {m.member_id: m for m in described.members}
    assert set(by_id) == {"member-a", "member-b"}
    assert by_id["member-b"].assignment.topic_partitions[0].topic_name == "orders"
    assert by_id["member-b"].client_id == "raw-test"
    assert by_id["member-b"].client_host == "/127.0.0.1"
    if version >= 1:
        assert by_id["member-a"].member_type == 1
    assert sorted(
        p for m in described.members for tp in m.assignment.topic_partitions for p in tp.partitions
    ) == [0, 1, 2, 3]
    leave = beat(raw, version, group, "member-a", -1)
    assert (leave.error_code, leave.member_epoch) == (0, -1)
    b = beat(raw, version, group, "member-b", 2)
    assert b.member_epoch == 3 and len(b.assignment.topic_partitions[0].partitions) == 4


@pytest.mark.parametrize("version", VERSIONS)
def test_errors_are_kafkas(raw: RawClient, version: int) -> None:
    group = f"errors-v{version}"
    assert beat(raw, version, group, "ghost", 4).error_code == GROUP_ID_NOT_FOUND
    join(raw, version, group, "member-a")
    assert beat(raw, version, group, "ghost", 1).error_code == UNKNOWN_MEMBER_ID
    assert beat(raw, version, group, "member-a", 7).error_code == FENCED_MEMBER_EPOCH
    assert join(raw, version, group, "b", server_assignor="cooperative-sticky").error_code == (
        UNSUPPORTED_ASSIGNOR
    )
    answer = join(raw, version, group, "c", rebalance_timeout_ms=-1)
    assert answer.error_code == INVALID_REQUEST and "RebalanceTimeoutMs" in answer.error_message
    nameless = join(raw, version, group, "")
    if version == 0:
        assert nameless.error_code == 0 and len(nameless.member_id) == 22
    else:
        assert nameless.error_code == INVALID_REQUEST  # from v1 the client names itself
    # Record keys hold ids with a 16-bit length; longer ones are refused, not half-written.
    overlong = join(raw, version, group, "m" * 32_768)
    assert overlong.error_code == INVALID_REQUEST and "MemberId" in overlong.error_message
    assert join(raw, version, "g" * 32_768, "member-a").error_code == INVALID_GROUP_ID


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_unknown_and_classic_groups(raw: RawClient, version: int) -> None:
    (unknown,) = describe(raw, version, "never-seen")
    assert (unknown.error_code, unknown.group_state) == (GROUP_ID_NOT_FOUND, "Dead")


def test_listed_and_described_as_classic_tools_see_it(raw: RawClient) -> None:
    join(raw, 1, "listed", "member-a", "orders", "payments")
    listed = {g.group_id: g for g in raw.call(ListGroupsRequest(), 5).groups}
    assert (listed["listed"].protocol_type, listed["listed"].group_type) == ("consumer", "consumer")
    assert listed["listed"].group_state == "Stable"
    (described,) = raw.call(
        DescribeGroupsRequest(groups=["listed"], include_authorized_operations=False), 5
    ).groups
    assert (described.protocol_type, described.protocol_data) == ("consumer", "uniform")
    assert [m.member_id for m in described.members] == ["member-a"]


def test_offset_commits_carry_the_member_epoch(raw: RawClient) -> None:
    group = "commits"
    a = join(raw, 1, group, "member-a")
    b = join(raw, 1, group, "member-b")
    assert (a.member_epoch, b.member_epoch) == (1, 2)

    def commit(member: str, epoch: int) -> int:
        r = OffsetCommitRequest
        request = r(
            group_id=group,
            generation_id_or_member_epoch=epoch,
            member_id=member,
            group_instance_id=None,
            topics=[
                r.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        r.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                    ],
                )
            ],
        )
        return int(raw.call(request, 9).topics[0].partitions[0].error_code)

    assert commit("member-b", 2) == 0
    assert commit("member-b", 1) == STALE_MEMBER_EPOCH
    assert commit("member-b", 3) == FENCED_MEMBER_EPOCH
    assert commit("nobody", 2) == UNKNOWN_MEMBER_ID
    assert commit("", -1) == 0  # from outside the group, as an admin tool commits
    f = OffsetFetchRequest
    fetch = f(
        groups=[
            f.OffsetFetchRequestGroup(
                group_id=group,
                member_id="member-b",
                member_epoch=2,
                topics=[
                    f.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name="orders", partition_indexes=[0]
                    )
                ],
            )
        ],
        require_stable=False,
    )
    (fetched,) = raw.call(fetch, 9).groups
    assert (fetched.error_code, fetched.topics[0].partitions[0].committed_offset) == (0, 5)


def test_a_silent_member_is_fenced_when_its_session_expires(raw: RawClient) -> None:
    group = "sessions"
    join(raw, 1, group, "quiet")
    loud = join(raw, 1, group, "loud")
    epoch = loud.member_epoch

    def quiet_gone() -> bool:
        nonlocal epoch
        epoch = beat(raw, 1, group, "loud", epoch, topic_partitions=[]).member_epoch
        members = {m.member_id for m in describe(raw, 1, group)[0].members}
        return members == {"loud"}

    wait_until(quiet_gone, "the silent member's session to expire", timeout=15)
    assert beat(raw, 1, group, "quiet", 1).error_code == UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_in_time_is_fenced(raw: RawClient) -> None:
    group = "stubborn"
    join(raw, 1, group, "stubborn", rebalance_timeout_ms=300)
    join(raw, 1, group, "waiting")
    asked = beat(raw, 1, group, "stubborn", 1)
    assert len(asked.assignment.topic_partitions[0].partitions) == 2
    # It keeps heartbeating (its session stays alive) but never gives the partitions up.
    everything = [
        ConsumerGroupHeartbeatRequest.TopicPartitions(
            topic_id=asked.assignment.topic_partitions[0].topic_id, partitions=[0, 1, 2, 3]
        )
    ]

    def fenced() -> bool:
        return beat(raw, 1, group, "stubborn", 1, topic_partitions=everything).error_code == (
            UNKNOWN_MEMBER_ID
        )

    wait_until(fenced, "the member to be fenced after its rebalance timeout", timeout=15)
    waiting = beat(raw, 1, group, "waiting", 2, topic_partitions=[])
    assert sorted(waiting.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]


def test_an_empty_group_is_deleted_with_its_records(
    cluster: EmbeddedCluster, raw: RawClient
) -> None:
    group = "deleted"
    join(raw, 1, group, "member-a")
    deletion = DeleteGroupsRequest(groups_names=[group])
    (refused,) = raw.call(deletion, 2).results
    assert refused.error_code == 68  # NON_EMPTY_GROUP
    assert beat(raw, 1, group, "member-a", -1).error_code == 0
    listed = {g.group_id: g.group_state for g in raw.call(ListGroupsRequest(), 5).groups}
    assert listed[group] == "Empty"
    (deleted,) = raw.call(deletion, 2).results
    assert deleted.error_code == 0
    (gone,) = describe(raw, 1, group)
    assert gone.error_code == GROUP_ID_NOT_FOUND
    # A new group under the same id starts from epoch 1.
    assert join(raw, 1, group, "member-b").member_epoch == 1


def test_a_restarted_coordinator_rebuilds_the_group_and_its_timers(tmp_path: Path) -> None:
    # Sessions long enough that no member expires between the restart and the comparison.
    settings = {**SETTINGS, "group.consumer.session.timeout.ms": 5000}
    with EmbeddedCluster(1, tmp_path, settings, listen=True) as cluster:
        Admin(cluster.transport).create_topics([NewTopic("orders", 4, 1)])
        with RawClient.to(cluster) as raw:
            wait_for_coordinator(raw, "kept")
            join(raw, 1, "kept", "a", rebalance_timeout_ms=60000)
            join(raw, 1, "kept", "b")
            asked = beat(raw, 1, "kept", "a", 1)  # a is now revoking two partitions
            before = describe(raw, 1, "kept")
        cluster.restart_broker(0)
        with RawClient.to(cluster) as raw:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=["kept"])
            wait_until(
                lambda: raw.call(request, 4).coordinators[0].error_code == 0, "a coordinator"
            )
            after = describe(raw, 1, "kept")
            assert after == before, "the group is rebuilt from its records as it was"
            # a carries on where it was: acknowledging the revocation moves it to epoch 2.
            moved = beat(raw, 1, "kept", "a", 1, topic_partitions=owned(asked))
            assert (moved.error_code, moved.member_epoch) == (0, 2)

            # b, silent since the restart, is fenced when its session (re-armed on load) ends.
            def b_fenced() -> bool:
                beat(raw, 1, "kept", "a", 2, topic_partitions=owned(asked))
                return [m.member_id for m in describe(raw, 1, "kept")[0].members] == ["a"]

            wait_until(b_fenced, "b's session to expire after the restart", timeout=30)


def test_metrics_count_groups_by_state_and_rebalances(
    cluster: EmbeddedCluster, raw: RawClient
) -> None:
    metrics = "group-coordinator-metrics"

    def rebalances() -> int:
        value = cluster.metric(0, metrics, "consumer-group-rebalance-rate")
        assert isinstance(value, dict)
        return int(value["count"])

    def count(**tags: str) -> int:
        name = "group-count" if "protocol" in tags else "consumer-group-count"
        return int(cluster.metric(0, metrics, name, **tags))  # type: ignore[arg-type]

    before, total, stable = rebalances(), count(protocol="consumer"), count(state="Stable")
    join(raw, 1, "measured", "a")
    assert (count(protocol="consumer"), count(state="Stable")) == (total + 1, stable + 1)
    join(raw, 1, "measured", "b")  # a still holds b's share: the group reconciles
    assert count(state="Reconciling") >= 1
    assert rebalances() == before + 2, "each member joining moved the group epoch"
    beat(raw, 1, "measured", "b", -1)
    assert rebalances() == before + 3
