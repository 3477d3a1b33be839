"""librdkafka's ``group.protocol=consumer`` (KIP-848) against tierlog: consumers subscribe and
split the partitions, rebalance as members join and leave, commit and resume; a classic group
runs beside a consumer-protocol one; a group survives its coordinator's broker stopping.

The brokers run with a 200 ms heartbeat interval and short sessions, so rebalances take
fractions of a second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka.admin
import kafka
import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.groups import group_partition
from tierlog.groups.consumer_protocol import ConsumerGroupDescribeRequest
from tierlog.server.internal_topics import CONSUMER_OFFSETS_TOPIC

from tests.waiting import wait_until

from .conftest import confluent_kafka, create_topic, leader_of, listening
from .groups_members import kafka_python_subscriber

PARTITIONS = 6
PER_PARTITION = 20

GROUP_SETTINGS: dict[str, object] = {
    "offsets_topic_num_partitions": 3,
    "group_consumer_heartbeat_interval_ms": 200,
    "group_consumer_min_heartbeat_interval_ms": 100,
    "group_consumer_session_timeout_ms": 3000,
    "group_consumer_min_session_timeout_ms": 1000,
    "group_initial_rebalance_delay_ms": 0,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with listening(tmp_path_factory.mktemp("kip848"), 1, **GROUP_SETTINGS) as running:
        yield running


def fill(cluster: EmbeddedCluster, topic: str, per_partition: int = PER_PARTITION) -> None:
    create_topic(cluster, topic, PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


class Member:
    """A confluent-kafka consumer speaking the consumer protocol, recording what it read and
    the assignment changes librdkafka reported."""

    def __init__(
        self, cluster: EmbeddedCluster, group: str, topic: str, name: str, **config: object
    ) -> None:
        """Subscribes to ``topic``: a name, or a pattern if it starts with ``^``."""
        self.name = name
        self.read: list[tuple[int, int]] = []
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **config,
            }
        )
        self.consumer.subscribe([topic])
        self.closed = False

    def poll(self, seconds: float = 0.05) -> None:
        message = self.consumer.poll(seconds)
        if message is None:
            return
        assert message.error() is None, f"{self.name}: {message.error()}"
        self.read.append((message.partition(), message.offset()))

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def positions(members: list[Member]) -> dict[int, int]:
    """Each assigned partition's next offset to read, as its owner's consumer holds it."""
    found: dict[int, int] = {}
    for member in members:
        if not member.closed:
            for tp in member.consumer.position(member.consumer.assignment()):
                found[tp.partition] = tp.offset
    return found


def run(members: list[Member], until: Any, what: Any, timeout: float = 60.0) -> None:
    """Polls every open member in turn until ``until()`` holds; after every round no partition
    is held by two members (a partition moves only once its owner has given it up)."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        for member in members:
            if not member.closed:
                member.poll()
        twice = held_twice([m for m in members if not m.closed])
        assert not twice, f"a partition held twice: {sorted(twice)}"


def held_twice(members: list[Member]) -> set[tuple[str, int]]:
    """Partitions two members hold. Each member's assignment is read at its own moment, so a
    partition that moved between two reads (its owner gave it up, then the next one got it)
    is in both; only one that both still hold when read again, in the reverse order, counts."""

    def read(order: list[Member]) -> set[tuple[str, int]]:
        seen: set[tuple[str, int]] = set()
        twice: set[tuple[str, int]] = set()
        for member in order:
            for tp in member.consumer.assignment():
                key = (tp.topic, tp.partition)
                (twice if key in seen else seen).add(key)
        return twice

    first = read(members)
    return first & read(members[::-1]) if first else first


def split_evenly(members: list[Member]) -> bool:
    """Every partition held by exactly one open member, each holding its share."""
    open_members = [m for m in members if not m.closed]
    held = [p for m in open_members for p in m.partitions()]
    share = PARTITIONS // len(open_members)
    return sorted(held) == list(range(PARTITIONS)) and all(
        share <= len(m.partitions()) <= share + 1 for m in open_members
    )


def describe(cluster: EmbeddedCluster, group: str) -> Any:
    """The group as its coordinator (broker 0 here) describes it."""
    (described,) = cluster.broker(0).handle(ConsumerGroupDescribeRequest([group])).groups
    assert described.error_code == 0, described
    return described


def classic_consumer(cluster: EmbeddedCluster, topic: str, group: str) -> Any:
    """A kafka-python consumer in a classic group (see :func:`kafka_python_subscriber`)."""
    return kafka_python_subscriber(
        cluster.bootstrap_servers,
        topic,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )


@pytest.fixture
def members() -> Iterator[list[Member]]:
    opened: list[Member] = []
    yield opened
    for member in opened:
        member.close()


def test_members_split_rebalance_and_read_every_record_once(
    cluster: EmbeddedCluster, members: list[Member]
) -> None:
    fill(cluster, "split")
    a = Member(cluster, "split-group", "split", "a")
    members.append(a)
    run(members, lambda: len(a.partitions()) == PARTITIONS, "the first member to get everything")
    b = Member(cluster, "split-group", "split", "b")
    c = Member(cluster, "split-group", "split", "c")
    members.extend([b, c])
    run(members, lambda: split_evenly(members), "three members to split the partitions")
    # Nobody has committed, so each reads its partitions from the start.
    run(
        members,
        lambda: (
            sum(len(m.read) for m in members) >= PARTITIONS * PER_PARTITION
            and all(len({o for p, o in m.read if p in m.partitions()}) for m in members)
        ),
        "every record to be read",
    )
    b.close()
    run(members, lambda: split_evenly(members), "the two left to take b's partitions")
    assert a.partitions().isdisjoint(c.partitions())
    group = describe(cluster, "split-group")
    assert group.group_state == "Stable"
    assert sorted(m.client_id for m in group.members) == ["a", "c"]


def test_a_pattern_subscription_picks_up_topics_created_later(
    cluster: EmbeddedCluster, members: list[Member]
) -> None:
    fill(cluster, "pattern-one")
    member = Member(cluster, "pattern-group", "^pattern-.*", "by-pattern")
    members.append(member)

    def topics() -> set[str]:
        return {tp.topic for tp in member.consumer.assignment()}

    run(members, lambda: topics() == {"pattern-one"}, "the matching topic to be assigned")
    fill(cluster, "pattern-two")
    create_topic(cluster, "unrelated", 1)
    run(members, lambda: topics() == {"pattern-one", "pattern-two"}, "the new topic too")
    run(members, lambda: len(member.read) >= 2 * PARTITIONS * PER_PARTITION, "both topics read")


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance(
    cluster: EmbeddedCluster, members: list[Member]
) -> None:
    fill(cluster, "static", per_partition=1)
    a = Member(cluster, "static-group", "static", "a", **{"group.instance.id": "host-a"})
    b = Member(cluster, "static-group", "static", "b", **{"group.instance.id": "host-b"})
    members.extend([a, b])
    run(members, lambda: split_evenly(members), "two static members to split the partitions")
    kept = b.partitions()
    epoch = describe(cluster, "static-group").group_epoch
    b.close()  # a static member leaving says it will be back (member epoch -2)
    away = {m.instance_id: m.member_epoch for m in describe(cluster, "static-group").members}
    assert away == {"host-a": epoch, "host-b": -2}
    back = Member(cluster, "static-group", "static", "b-again", **{"group.instance.id": "host-b"})
    members.append(back)
    run(members, lambda: back.partitions() == kept, "the instance to get its partitions back")
    assert a.partitions().isdisjoint(kept)
    assert describe(cluster, "static-group").group_epoch == epoch, "no rebalance happened"


def test_commit_and_resume_where_the_group_left_off(
    cluster: EmbeddedCluster, members: list[Member]
) -> None:
    fill(cluster, "resume")
    first = Member(cluster, "resume-group", "resume", "first")
    members.append(first)
    run(members, lambda: len(first.read) >= PARTITIONS * PER_PARTITION // 2, "half the records")
    first.commit()
    committed = {p: max(o for q, o in first.read if q == p) + 1 for p, _ in first.read}
    first.close()
    second = Member(cluster, "resume-group", "resume", "second")
    members.append(second)
    remaining = PARTITIONS * PER_PARTITION - sum(committed.values())
    run(members, lambda: len(second.read) >= remaining, "the rest of the records")
    starts: dict[int, int] = {}
    for partition, offset in second.read:
        starts.setdefault(partition, offset)
    assert starts == {p: committed.get(p, 0) for p in starts}, "resumed at the commits"
    assert len(second.read) == remaining, "nothing read twice"


def test_a_classic_group_and_a_consumer_group_side_by_side(
    cluster: EmbeddedCluster, members: list[Member]
) -> None:
    fill(cluster, "both")
    modern = Member(cluster, "modern", "both", "modern")
    members.append(modern)
    classic = classic_consumer(cluster, "both", "classic")
    try:
        read_classic: list[tuple[int, int]] = []
        total = PARTITIONS * PER_PARTITION

        def both_done() -> bool:
            for batch in classic.poll(timeout_ms=50).values():
                read_classic.extend((r.partition, r.offset) for r in batch)
            return len(read_classic) >= total and len(modern.read) >= total

        run(
            members,
            both_done,
            lambda: (
                f"both groups to read the topic (classic {len(read_classic)}, "
                f"consumer protocol {len(modern.read)} of {total})"
            ),
            timeout=60,
        )
        assert len(set(read_classic)) == len(set(modern.read)) == total
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        listing = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        types = {g.group_id: g.type.name for g in listing.valid}
        assert types["classic"] == "CLASSIC" and types["modern"] == "CONSUMER"
        # The group id of a live classic group is not taken by the consumer protocol.
        intruder = Member(cluster, "classic", "both", "intruder")
        members.append(intruder)
        deadline = time.monotonic() + 10
        error = None
        while error is None and time.monotonic() < deadline:
            message = intruder.consumer.poll(0.1)
            if message is not None and message.error() is not None:
                error = message.error()
        # GROUP_ID_NOT_FOUND, which librdkafka treats as fatal for the consumer.
        assert error is not None and error.code() == confluent_kafka.KafkaError._FATAL
        assert "The group id does not exist" in error.str()
    finally:
        classic.close()


def test_an_empty_group_changes_protocol_keeping_its_offsets(
    cluster: EmbeddedCluster, members: list[Member]
) -> None:
    """classic -> consumer -> classic: each group resumes where the one before committed."""
    fill(cluster, "switch", per_partition=4)
    total = PARTITIONS * 4

    def classic_reads(count: int) -> list[tuple[int, int]]:
        consumer = classic_consumer(cluster, "switch", "switching")
        read: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        try:
            while len(read) < count:
                assert time.monotonic() < deadline, f"classic read {len(read)} of {count}"
                for batch in consumer.poll(timeout_ms=100, max_records=count - len(read)).values():
                    read.extend((r.partition, r.offset) for r in batch)
            while True:
                try:
                    consumer.commit()
                    break
                except kafka.errors.RebalanceInProgressError:
                    assert time.monotonic() < deadline, "a classic commit during a rebalance"
                    # The poll completes the rebalance; what it reads is committed with the rest.
                    for batch in consumer.poll(timeout_ms=100).values():
                        read.extend((r.partition, r.offset) for r in batch)
        finally:
            consumer.close()
        return read

    first = classic_reads(total // 3)
    modern = Member(cluster, "switching", "switch", "modern")
    members.append(modern)
    run(members, lambda: len(modern.read) >= total // 3, "the consumer protocol to read on")
    modern.commit()
    modern.close()
    last = classic_reads(total - len(first) - len(modern.read))
    assert sorted(first + modern.read + last) == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(4)
    ), "every record read once across the three groups"


def test_the_group_survives_its_coordinator_stopping(tmp_path: Path) -> None:
    # Sessions outlast the coordinator's move, however slowly a loaded machine makes it.
    settings = {**GROUP_SETTINGS, "group_consumer_session_timeout_ms": 15000}
    with listening(tmp_path, 3, **settings) as cluster:
        fill(cluster, "failover", per_partition=5)
        group = "failover-group"
        members = [Member(cluster, group, "failover", name) for name in ("a", "b")]
        try:
            run(members, lambda: split_evenly(members), "two members to split the partitions")
            # Read to the end means every partition's position, not a count of records: a
            # partition can be read twice while it moves, leaving its new owner short.
            everything = {p: 5 for p in range(PARTITIONS)}
            run(members, lambda: positions(members) == everything, "all read")
            for member in members:
                member.commit()
            offsets_partition = group_partition(group, 3)
            coordinator = leader_of(cluster, CONSUMER_OFFSETS_TOPIC, offsets_partition)
            assert coordinator is not None
            before = {m.name: m.partitions() for m in members}
            cluster.stop_broker(coordinator)
            wait_until(
                lambda: (
                    leader_of(cluster, CONSUMER_OFFSETS_TOPIC, offsets_partition)
                    not in (None, coordinator)
                ),
                "a new coordinator",
            )
            # The new coordinator loads the group: members keep their partitions, and a third
            # member joining is given a share, which means the group epoch carried on.
            newcomer = Member(cluster, group, "failover", "c")
            members.append(newcomer)
            run(members, lambda: split_evenly(members), "three members after the failover")
            for member in members[:2]:
                assert member.partitions() <= before[member.name]
            committed = newcomer.consumer.committed(
                [confluent_kafka.TopicPartition("failover", p) for p in range(PARTITIONS)],
                timeout=10,
            )
            assert [tp.offset for tp in committed] == [5] * PARTITIONS
        finally:
            for member in members:
                member.close()
