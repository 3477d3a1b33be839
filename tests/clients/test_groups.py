"""Consumer groups with real clients over the listener: ``subscribe()`` and committed offsets
with each library, and a group of all three rebalancing on join, leave and a killed process."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kafka
import pytest
from tierlog.cluster import EmbeddedCluster

from tests.waiting import wait_until

from .conftest import LIBRARIES, create_topic, listening
from .groups_members import GenerationLog, Member, ProcessMember, split_evenly

#: Groups start at once, sessions may be short, and the offsets topic is small.
GROUP_SETTINGS: dict[str, object] = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 1000,
    "offsets_topic_num_partitions": 4,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with listening(tmp_path_factory.mktemp("groups"), **GROUP_SETTINGS) as made:
        yield made


def _produce(bootstrap: str, topic: str, count: int, partitions: int, tag: str) -> set[bytes]:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    values = set()
    for n in range(count):
        value = f"{tag}-{n}".encode()
        producer.send(topic, value, partition=n % partitions)
        values.add(value)
    producer.flush()
    producer.close()
    return values


@pytest.mark.parametrize("library", LIBRARIES)
def test_subscribe_commit_and_resume(cluster: EmbeddedCluster, library: str) -> None:
    topic, group = f"sub-{library}", f"group-{library}"
    create_topic(cluster, topic, 3)
    bootstrap = cluster.bootstrap_servers
    first = _produce(bootstrap, topic, 30, 3, "first")
    member = Member(library, bootstrap, group, topic)
    wait_until(lambda: len(member.records()) >= 30, "the first records")
    member.commit()
    member.stop()
    assert {value for _, _, value in member.records()} == first
    second = _produce(bootstrap, topic, 9, 3, "second")
    resumed = Member(library, bootstrap, group, topic)
    try:
        wait_until(lambda: len(resumed.records()) >= 9, "the records after the commit")
        wait_until(lambda: resumed.assignment == {0, 1, 2}, "the whole topic")
    finally:
        resumed.stop()
    # It starts from the committed offsets: nothing of the first batch again.
    assert {value for _, _, value in resumed.records()} == second
    assert sorted(offset for p, offset, _ in resumed.records() if p == 0) == [10, 11, 12]


# Three client libraries share this process; one of them (not identified) now and then drops a
# connection it was still opening without closing its socket, and the garbage collector warns.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)
def test_a_mixed_group_rebalances_on_join_leave_and_kill(cluster: EmbeddedCluster) -> None:
    topic, group, partitions = "mixed", "mixed-group", 6
    create_topic(cluster, topic, partitions)
    bootstrap = cluster.bootstrap_servers
    sent = _produce(bootstrap, topic, 60, partitions, "m")
    generations = GenerationLog(cluster, group, topic)
    members = [Member("confluent-kafka", bootstrap, group, topic)]
    killed: ProcessMember | None = None
    try:
        wait_until(lambda: members[0].assignment == set(range(partitions)), "the first member")
        members += [
            Member("kafka-python", bootstrap, group, topic),
            Member("aiokafka", bootstrap, group, topic),
        ]
        wait_until(
            lambda: split_evenly([m.assignment for m in members], partitions), "three members"
        )
        killed = ProcessMember(bootstrap, group, topic)
        wait_until(
            lambda: split_evenly([m.assignment for m in members] + [killed.assignment], partitions),
            "four members",
        )
        killed.kill()
        # No LeaveGroup: the others take its partitions once its session has expired.
        wait_until(
            lambda: split_evenly([m.assignment for m in members], partitions),
            "three members after the kill",
        )
        leaving = members.pop(1)
        leaving.stop()  # kafka-python leaves the group
        wait_until(
            lambda: split_evenly([m.assignment for m in members], partitions),
            "two members after one left",
        )
        wait_until(
            lambda: {v for m in [*members, leaving] for _, _, v in m.records()} >= sent,
            "every record read",
        )
        read = {v for m in [*members, leaving] for _, _, v in m.records()}
        assert read == sent
    finally:
        if killed is not None and killed.process.poll() is None:
            killed.kill()
        for member in members:
            member.stop()
        seen = generations.stop()
    # The coordinator's own record of each generation: every partition has one owner.
    assert len(seen) >= 4, seen
    for generation, owners in seen.items():
        owned = [p for assigned in owners.values() for p in assigned]
        assert len(owned) == len(set(owned)), f"generation {generation}: {owners}"
    assert max(len(owners) for owners in seen.values()) == 4


def test_offsets_survive_a_broker_restart(tmp_path: Path) -> None:
    with listening(tmp_path / "restart", **GROUP_SETTINGS) as cluster:
        create_topic(cluster, "durable", 2)
        before = _produce(cluster.bootstrap_servers, "durable", 20, 2, "before")
        member = Member("aiokafka", cluster.bootstrap_servers, "durable-group", "durable")
        wait_until(lambda: len(member.records()) >= 20, "the records")
        member.commit()
        member.stop()
        assert {v for _, _, v in member.records()} == before
        cluster.restart_broker(0)
        after = _produce(cluster.bootstrap_servers, "durable", 4, 2, "after")
        resumed = Member("confluent-kafka", cluster.bootstrap_servers, "durable-group", "durable")
        try:
            wait_until(lambda: len(resumed.records()) >= 4, "the records after the restart")
        finally:
            resumed.stop()
        assert {v for _, _, v in resumed.records()} == after


def test_offsets_survive_a_coordinator_failover(tmp_path: Path) -> None:
    with listening(
        tmp_path / "failover", 3, offsets_topic_replication_factor=3, **GROUP_SETTINGS
    ) as cluster:
        create_topic(cluster, "moved", 2, replication_factor=3)
        before = _produce(cluster.bootstrap_servers, "moved", 20, 2, "before")
        member = Member("confluent-kafka", cluster.bootstrap_servers, "moving-group", "moved")
        wait_until(lambda: len(member.records()) >= 20, "the records")
        member.commit()
        member.stop()
        assert {v for _, _, v in member.records()} == before
        coordinator = next(
            b
            for b in cluster.broker_ids
            if any(
                "moving-group" in shard.group_ids()
                for shard in (cluster.broker(b).group_coordinator or _none()).shards()
            )
        )
        cluster.stop_broker(coordinator)
        after = _produce(cluster.bootstrap_servers, "moved", 4, 2, "after")
        resumed = Member("kafka-python", cluster.bootstrap_servers, "moving-group", "moved")
        try:
            wait_until(lambda: len(resumed.records()) >= 4, "the records after the failover")
        finally:
            resumed.stop()
        assert {v for _, _, v in resumed.records()} == after


def _none() -> object:
    raise AssertionError("a broker without a group coordinator")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_as_a_group_member_commits_where_it_stopped(cluster: EmbeddedCluster) -> None:
    topic = "kcat-group"
    create_topic(cluster, topic, 3)
    bootstrap = cluster.bootstrap_servers
    first = _produce(bootstrap, topic, 6, 3, "first")

    def kcat_group(count: int) -> set[bytes]:
        done = subprocess.run(
            [
                "kcat",
                "-b",
                bootstrap,
                "-G",
                "kcat-readers",
                "-X",
                "auto.offset.reset=earliest",
                "-c",
                str(count),
                "-f",
                "%s\\n",
                topic,
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return set(done.stdout.split())

    assert kcat_group(6) == first
    second = _produce(bootstrap, topic, 3, 3, "second")
    assert kcat_group(3) == second  # from the offsets committed as it closed


def test_a_static_member_returns_to_its_partitions_without_a_rebalance(
    cluster: EmbeddedCluster,
) -> None:
    topic, group, partitions = "static", "static-group", 4
    create_topic(cluster, topic, partitions)
    bootstrap = cluster.bootstrap_servers
    generations = GenerationLog(cluster, group, topic)
    static = {"group.instance.id": "reader-1", "session.timeout.ms": 6000}
    first = Member("confluent-kafka", bootstrap, group, topic, **static)
    other = Member("confluent-kafka", bootstrap, group, topic)
    try:
        wait_until(lambda: split_evenly([first.assignment, other.assignment], partitions), "two")
        wait_until(
            lambda: any(len(owners) == 2 for owners in generations.generations.values()),
            "the coordinator's generation of two",
        )
        settled = max(generations.generations)
        kept = first.assignment
        first.stop()  # a static member closing does not leave the group (KIP-345)
        back = Member("confluent-kafka", bootstrap, group, topic, **static)
        wait_until(lambda: back.assignment == kept, "the same partitions again")
        assert other.assignment == set(range(partitions)) - kept
        back.stop()
    finally:
        other.stop()
        seen = generations.stop()
    assert max(seen) == settled  # no rebalance while it was away and back
