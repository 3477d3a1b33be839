"""The consumer-protocol group state machine (KIP-848), heartbeat by heartbeat.

Heartbeats run through the coordinator's own code: each outcome's records are encoded in
Kafka's formats, replayed into the group (as the coordinator does after appending them), and
kept in a log; after every step the group rebuilt from that log, compacted as
``__consumer_offsets`` is, must equal the live one, so a coordinator failover loses nothing.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from tierlog.groups import consumer_records as cr
from tierlog.groups.consumer_group import ConsumerGroup, ConsumerGroupState, TopicMetadata
from tierlog.groups.consumer_heartbeat import ConsumerGroupSettings, fence, heartbeat
from tierlog.groups.consumer_member import ConsumerGroupMember, MemberState
from tierlog.groups.consumer_protocol import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from tierlog.groups.records import key_version
from tierlog.model import Uuid

T1 = Uuid(b"\x01" * 16)
T2 = Uuid(b"\x02" * 16)


class Topics:
    def __init__(self, **counts: int) -> None:
        self.ids = {"orders": T1, "payments": T2}
        self.counts = dict(counts)

    def topic(self, name: str) -> TopicMetadata | None:
        if name not in self.counts:
            return None
        return TopicMetadata(self.ids.setdefault(name, Uuid.random()), name, self.counts[name])

    def names(self) -> list[str]:
        return sorted(self.counts)


class Harness:
    """One group's coordinator state: the live groups and the record log behind them."""

    def __init__(self, topics: Topics, **config: object) -> None:
        self.topics = topics
        self.settings = ConsumerGroupSettings(heartbeat_interval_ms=1000, **config)  # type: ignore[arg-type]
        self.groups: dict[str, ConsumerGroup] = {}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.ids = iter(f"generated-{i}" for i in range(1000))

    def _replay(self, groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None) -> None:
        def group_for(group_id: str, create: bool) -> ConsumerGroup | None:
            if group_id not in groups and create:
                groups[group_id] = ConsumerGroup(group_id)
            return groups.get(group_id)

        version = key_version(key)
        cr.replay(version, key, value, group_for)
        group_id = cr.decode_key(version, key)[0]
        if group_id in groups and groups[group_id].dead:
            del groups[group_id]

    def write(self, records: list) -> None:
        for record in records:
            self.log.append((record.key, record.value))
            self._replay(self.groups, record.key, record.value)
        self.check_rebuilt()

    def check_rebuilt(self) -> None:
        latest: dict[bytes, bytes | None] = {}
        for key, value in self.log:
            latest.pop(key, None)
            latest[key] = value
        rebuilt: dict[str, ConsumerGroup] = {}
        for key, value in latest.items():
            if value is not None:
                self._replay(rebuilt, key, value)
        assert snapshot(rebuilt) == snapshot(self.groups)

    def send(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        group = self.groups.get(request.group_id)
        outcome = heartbeat(group, request, self.settings, self.topics, next(self.ids))
        self.write(outcome.records)
        self.check_no_partition_held_twice()
        return outcome.response

    def join(self, member: str, *topics: str, group: str = "g", **fields: object) -> Member:
        subscribed = list(topics or ("orders",))
        request = ConsumerGroupHeartbeatRequest(
            group,
            member,
            0,
            rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", 30000),  # type: ignore[arg-type]
            subscribed_topic_names=subscribed,
            topic_partitions=[],
            **fields,  # type: ignore[arg-type]
        )
        answer = self.send(request)
        handle = Member(self, group, answer.member_id or member, request.instance_id)
        handle.take(answer)
        return handle

    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.groups[group_id]

    def check_no_partition_held_twice(self) -> None:
        for group in self.groups.values():
            held = [tp for m in group.members.values() for tp in m.owned()]
            assert len(held) == len(set(held)), "a partition is held by two members"


def snapshot(groups: dict[str, ConsumerGroup]) -> dict:
    return {
        gid: (
            g.group_epoch,
            g.assignment_epoch,
            dict(g.members),
            dict(g.static_members),
            dict(g.target),
            dict(g.subscription_metadata),
            dict(g.partition_holders),
        )
        for gid, g in groups.items()
    }


@attrs.define
class Member:
    """A well-behaved client: owns what it was last given, acknowledges it in its heartbeat."""

    harness: Harness
    group_id: str
    member_id: str
    instance_id: str | None
    epoch: int = 0
    owned: dict[Uuid, frozenset[int]] = attrs.field(factory=dict)

    def take(self, answer: ConsumerGroupHeartbeatResponse) -> None:
        assert answer.error_code == 0
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.owned = {
                tp.topic_id: frozenset(tp.partitions) for tp in answer.assignment.topic_partitions
            }

    def beat(self, **fields: object) -> ConsumerGroupHeartbeatResponse:
        answer = self.harness.send(
            ConsumerGroupHeartbeatRequest(
                self.group_id,
                self.member_id,
                self.epoch,
                instance_id=self.instance_id,
                topic_partitions=[TopicPartitions(t, sorted(p)) for t, p in self.owned.items()],
                **fields,  # type: ignore[arg-type]
            )
        )
        self.take(answer)
        return answer

    def leave(self, epoch: int = -1) -> ConsumerGroupHeartbeatResponse:
        return self.harness.send(
            ConsumerGroupHeartbeatRequest(
                self.group_id, self.member_id, epoch, instance_id=self.instance_id
            )
        )

    def partitions(self) -> set[int]:
        return {p for parts in self.owned.values() for p in parts}


def settle(*members: Member, rounds: int = 10) -> None:
    for _ in range(rounds):
        for member in members:
            member.beat()
    group = members[0].harness.group(members[0].group_id)
    assert group.state == ConsumerGroupState.STABLE


# --- joining and reconciling --------------------------------------------------------------------


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    harness = Harness(Topics(orders=4))
    a = harness.join("a")
    assert a.epoch == 1
    assert a.partitions() == {0, 1, 2, 3}
    group = harness.group()
    assert (group.group_epoch, group.assignment_epoch, group.state) == (
        1,
        1,
        ConsumerGroupState.STABLE,
    )


def test_a_partition_moves_only_after_its_owner_revokes_it() -> None:
    harness = Harness(Topics(orders=4))
    a = harness.join("a")
    b = harness.join("b")
    assert b.epoch == 2 and b.partitions() == set(), "b waits: a still holds its partitions"
    assert harness.group().members["b"].state == MemberState.UNRELEASED_PARTITIONS
    # a is asked to give two up and stays at epoch 1 until it says it has.
    answer = harness.send(ConsumerGroupHeartbeatRequest("g", "a", 1))
    a.take(answer)
    assert a.epoch == 1 and len(a.partitions()) == 2
    assert harness.group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert b.beat().member_epoch == 2 and b.partitions() == set()
    a.beat()  # acknowledges: it owns only what it kept
    assert a.epoch == 2
    b.beat()
    assert len(b.partitions()) == 2 and a.partitions().isdisjoint(b.partitions())
    assert harness.group().state == ConsumerGroupState.STABLE


def test_a_lost_answer_is_forgiven_one_epoch_back() -> None:
    harness = Harness(Topics(orders=2))
    a = harness.join("a")
    b = harness.join("b")
    settle(a, b)
    epoch = a.epoch
    harness.join("c")
    answer = a.beat()
    a.beat()
    assert a.epoch == epoch + 1
    # The answer moving a on is lost: it comes back with the epoch before, owning a subset.
    stale = harness.send(
        ConsumerGroupHeartbeatRequest(
            "g",
            "a",
            epoch,
            topic_partitions=[TopicPartitions(t, sorted(p)) for t, p in a.owned.items()],
        )
    )
    assert stale.member_epoch == epoch + 1 and answer.error_code == 0


def test_epochs_ahead_or_too_far_behind_are_fenced() -> None:
    harness = Harness(Topics(orders=2))
    a = harness.join("a")
    with pytest.raises(FencedMemberEpochError):
        harness.send(ConsumerGroupHeartbeatRequest("g", "a", a.epoch + 1))
    b = harness.join("b")
    c = harness.join("c")
    settle(a, b, c)
    member = harness.group().members["a"]
    behind = next(e for e in range(1, member.member_epoch) if e != member.previous_member_epoch)
    with pytest.raises(FencedMemberEpochError):
        harness.send(ConsumerGroupHeartbeatRequest("g", "a", behind))
    # One epoch back is fenced too if the member claims partitions it no longer has.
    everything = [TopicPartitions(T1, [0, 1])]
    with pytest.raises(FencedMemberEpochError):
        harness.send(
            ConsumerGroupHeartbeatRequest(
                "g", "a", member.previous_member_epoch, topic_partitions=everything
            )
        )


def test_unknown_members_and_groups() -> None:
    harness = Harness(Topics(orders=1))
    with pytest.raises(GroupIdNotFoundError):
        harness.send(ConsumerGroupHeartbeatRequest("nope", "x", 3))
    harness.join("a")
    with pytest.raises(UnknownMemberIdError):
        harness.send(ConsumerGroupHeartbeatRequest("g", "ghost", 1))
    with pytest.raises(UnknownMemberIdError):
        harness.send(ConsumerGroupHeartbeatRequest("g", "ghost", -1))


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"group_id": ""}, InvalidRequestError),
        ({"member_id": ""}, InvalidRequestError),
        ({"rebalance_timeout_ms": -1}, InvalidRequestError),
        ({"topic_partitions": None}, InvalidRequestError),
        ({"subscribed_topic_names": None}, InvalidRequestError),
        ({"instance_id": ""}, InvalidRequestError),
        ({"member_epoch": -3}, InvalidRequestError),
        ({"server_assignor": "sticky"}, UnsupportedAssignorError),
        ({"subscribed_topic_regex": "orders("}, InvalidRegularExpressionError),
    ],
)
def test_malformed_joins_are_refused(fields: dict, error: type[Exception]) -> None:
    request = {
        "group_id": "g",
        "member_id": "a",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["orders"],
        "topic_partitions": [],
        **fields,
    }
    harness = Harness(Topics(orders=1))
    with pytest.raises(error):
        harness.send(ConsumerGroupHeartbeatRequest(**request))
    assert harness.groups == {}, "a refused join leaves nothing behind"


def test_a_v0_member_joining_without_an_id_is_given_one() -> None:
    harness = Harness(Topics(orders=1))
    answer = harness.send(
        ConsumerGroupHeartbeatRequest(
            "g",
            "",
            0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=["orders"],
            topic_partitions=[],
            api_version=0,
        )
    )
    assert answer.member_id == "generated-0"


def test_group_max_size() -> None:
    harness = Harness(Topics(orders=2), max_size=2)
    a = harness.join("a")
    harness.join("b")
    with pytest.raises(GroupMaxSizeReachedError):
        harness.join("c")
    a.beat()  # members already in are not refused


# --- leaving ------------------------------------------------------------------------------------


def test_a_member_leaving_gives_its_partitions_to_the_others() -> None:
    harness = Harness(Topics(orders=4))
    a, b = harness.join("a"), harness.join("b")
    settle(a, b)
    epoch = harness.group().group_epoch
    assert b.leave().member_epoch == -1
    assert "b" not in harness.group().members
    assert harness.group().group_epoch == epoch + 1
    a.beat()
    assert a.partitions() == {0, 1, 2, 3}


def test_a_fenced_member_joins_again_afresh_under_its_id() -> None:
    harness = Harness(Topics(orders=2))
    a, b = harness.join("a"), harness.join("b")
    settle(a, b)
    again = harness.join("a")
    assert harness.group().members["a"].member_epoch == again.epoch
    settle(again, b)
    assert again.partitions() | b.partitions() == {0, 1}


def test_a_static_member_steps_out_and_comes_back_to_its_partitions() -> None:
    harness = Harness(Topics(orders=4))
    a = harness.join("a", instance_id="host-a")
    b = harness.join("b", instance_id="host-b")
    settle(a, b)
    kept = b.partitions()
    epoch = harness.group().group_epoch
    assert b.leave(-2).member_epoch == -2
    assert harness.group().members["b"].member_epoch == -2
    with pytest.raises(UnreleasedInstanceIdError):
        harness.join("a2", instance_id="host-a")
    back = harness.join("b2", instance_id="host-b")
    assert back.partitions() == kept, "the new instance takes its predecessor's partitions"
    assert "b" not in harness.group().members
    assert harness.group().group_epoch == epoch, "and no rebalance happened"
    with pytest.raises(FencedInstanceIdError):
        harness.send(ConsumerGroupHeartbeatRequest("g", "b", 1, instance_id="host-b"))


def test_fencing_a_member_bumps_the_group_epoch() -> None:
    harness = Harness(Topics(orders=2))
    a, b = harness.join("a"), harness.join("b")
    settle(a, b)
    group = harness.group()
    outcome = fence(group, group.members["a"], harness.topics)
    harness.write(outcome.records)
    assert "a" not in harness.group().members and outcome.disarm == ["a"]
    b.beat()
    assert b.partitions() == {0, 1}


# --- subscriptions and topics -------------------------------------------------------------------


def test_more_partitions_move_the_group_epoch() -> None:
    topics = Topics(orders=2)
    harness = Harness(topics)
    a, b = harness.join("a"), harness.join("b")
    settle(a, b)
    epoch = harness.group().group_epoch
    topics.counts["orders"] = 4
    a.beat()
    assert harness.group().group_epoch == epoch + 1
    settle(a, b)
    assert a.partitions() | b.partitions() == {0, 1, 2, 3}


def test_a_subscribed_topic_created_later_is_assigned() -> None:
    topics = Topics(orders=1)
    harness = Harness(topics)
    a = harness.join("a", "orders", "payments")
    assert a.owned == {T1: frozenset({0})}
    topics.counts["payments"] = 2
    a.beat()
    assert a.owned == {T1: frozenset({0}), T2: frozenset({0, 1})}


def test_a_regular_expression_subscription() -> None:
    topics = Topics(orders=1, payments=1)
    harness = Harness(topics)
    answer = harness.send(
        ConsumerGroupHeartbeatRequest(
            "g",
            "a",
            0,
            rebalance_timeout_ms=1000,
            subscribed_topic_regex="pay.*",
            topic_partitions=[],
        )
    )
    assert {tp.topic_id for tp in answer.assignment.topic_partitions} == {T2}


def test_range_is_chosen_by_the_members_that_ask_for_it() -> None:
    harness = Harness(Topics(orders=4, payments=4))
    a = harness.join("a", "orders", "payments", server_assignor="range")
    b = harness.join("b", "orders", "payments", server_assignor="range")
    settle(a, b)
    assert a.owned[T1] == a.owned[T2], "range co-partitions topics of the same size"
    assert harness.group().preferred_assignor() == "range"


# --- commits ------------------------------------------------------------------------------------


def test_offset_commits_are_checked_against_the_member_epoch() -> None:
    harness = Harness(Topics(orders=2))
    a = harness.join("a")
    b = harness.join("b")
    settle(a, b)
    group = harness.group()
    group.validate_offset_commit("a", None, a.epoch)
    group.validate_offset_commit("", None, -1)  # an admin tool outside the group
    with pytest.raises(StaleMemberEpochError):
        group.validate_offset_commit("a", None, a.epoch - 1)
    with pytest.raises(FencedMemberEpochError):
        group.validate_offset_commit("a", None, a.epoch + 1)
    with pytest.raises(UnknownMemberIdError):
        group.validate_offset_commit("ghost", None, 1)


# --- any sequence -------------------------------------------------------------------------------

steps = st.lists(
    st.tuples(st.sampled_from(["join", "beat", "leave", "rejoin", "grow"]), st.integers(0, 3)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_any_sequence_keeps_partitions_single_owned_and_rebuildable(plan: list) -> None:
    topics = Topics(orders=3, payments=2)
    harness = Harness(topics)
    members: dict[int, Member] = {}
    for action, who in plan:
        member = members.get(who)
        if action == "join" and member is None:
            members[who] = harness.join(f"m{who}", "orders", "payments")
        elif action == "beat" and member is not None:
            member.beat()
        elif action == "leave" and member is not None:
            member.leave()
            del members[who]
        elif action == "rejoin" and member is not None:
            # A client fenced or restarted joins again under its id, having dropped everything.
            members[who] = harness.join(f"m{who}", "orders", "payments")
        elif action == "grow":
            topics.counts["orders"] += 1
    # Whatever happened, heartbeats alone bring the group to one stable assignment.
    if members:
        settle(*members.values(), rounds=8)
        owned = [(t, p) for m in members.values() for t, ps in m.owned.items() for p in ps]
        assert len(owned) == len(set(owned))
        assert len(owned) == topics.counts["orders"] + topics.counts["payments"]


def test_records_are_in_kafkas_layout() -> None:
    """Key: int16 key version then the key fields (not flexible); value: int16 version 0 then
    the flexible fields (compact strings and arrays, a tagged-field count), as Kafka 4 writes."""
    epoch = cr.group_epoch_record("g", 5)
    assert epoch.key == b"\x00\x03" + b"\x00\x01g"
    assert epoch.value == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"
    member = ConsumerGroupMember("m", member_epoch=7, previous_member_epoch=6, assigned={T1: {2}})
    current = cr.current_assignment_record("g", member)
    assert current.key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    assert current.value == (
        b"\x00\x00"
        + b"\x00\x00\x00\x07"  # member epoch
        + b"\x00\x00\x00\x06"  # previous member epoch
        + b"\x00"  # state: stable
        + b"\x02"
        + T1.value
        + b"\x02"
        + b"\x00\x00\x00\x02"
        + b"\x00"  # one topic, [2]
        + b"\x01"  # nothing pending revocation
        + b"\x00"
    )
    assert [key_version(r.key) for r in cr.member_tombstones("g", "m")] == [8, 7, 5]
