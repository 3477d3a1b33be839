"""Replication on a real three-broker cluster: followers, the ISR, acks=all, failover."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    RequestTimedOutError,
)
from tierlog.log import FetchIsolation, PartitionLog
from tierlog.model import TopicPartition, Uuid
from tierlog.records import iter_batches
from tierlog.server import protocol as p
from tierlog.server.partition import ISR_CHANGE_RETRY_BACKOFF_MS, Partition
from tierlog.server.transport import Fault

from .conftest import Client, batch, values

FAST = {
    "replica.fetch.backoff.ms": 50,
    "replica.fetch.wait.max.ms": 100,
}


def wait_until(condition: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)


def replica(cluster: EmbeddedCluster, broker_id: int, topic: str, index: int = 0) -> Partition:
    found = cluster.broker(broker_id).partition(TopicPartition(topic, index))
    assert found is not None, f"broker {broker_id} does not host {topic}-{index}"
    return found


def log_bytes(partition: Partition) -> bytes:
    """Every segment file of a replica, concatenated: what must be identical on all replicas."""
    return b"".join(s.log_path.read_bytes() for s in partition.log.segments())


def all_records(partition: Partition) -> bytes:
    """The replica's batches from its log start to its log end (a read stops at a segment)."""
    plog = partition.log
    chunks = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        read = bytes(
            plog.read(offset, 1 << 30, FetchIsolation.LOG_END, min_one_message=True).records
        )
        batches = list(iter_batches(read))
        if not batches:
            break
        chunks.append(read)
        offset = batches[-1].last_offset + 1
    return b"".join(chunks)


def isr(client: Client, topic: str, index: int = 0) -> tuple[int, ...]:
    return tuple(client.metadata(topic).topics[0].partitions[index].isr_nodes)


def replicated(cluster: EmbeddedCluster, topic: str, index: int = 0) -> bool:
    """Every live replica holds the leader's log and high watermark."""
    image = cluster.controller.image()
    reg = image.registration(TopicPartition(topic, index))
    assert reg is not None
    leader = replica(cluster, reg.leader, topic, index)
    end = leader.log.log_end_offset
    for broker_id in reg.replicas:
        if broker_id not in image.live_brokers:
            continue
        follower = replica(cluster, broker_id, topic, index)
        if follower.log.log_end_offset != end or follower.high_watermark != leader.high_watermark:
            return False
    return leader.high_watermark == end


def pause_fetches(client: Client, *followers: int) -> Fault:
    """Loses every replica fetch (and epoch query) the given followers send."""
    wanted = set(followers)

    def match(_broker: int, request: p.Request) -> bool:
        return (
            isinstance(request, (p.FetchRequest, p.OffsetsForLeaderEpochRequest))
            and request.replica_id in wanted
        )

    fault = client.transport.faults.add(match, drop=True)
    # A fetch sent before the fault may still be parked at the leader: let it come back.
    time.sleep(3 * FAST["replica.fetch.wait.max.ms"] / 1000)
    return fault


def produce(
    client: Client, topic: str, records: bytes, *, acks: int = -1, timeout_ms: int = 5000
) -> p.PartitionProduceResponse:
    request = p.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[p.TopicProduceData(topic, [p.PartitionProduceData(0, records)])],
    )
    response = client.transport.send(client.leader(topic), request)
    return response.responses[0].partition_responses[0]


def followers_of(client: Client, topic: str) -> list[int]:
    leader = client.leader(topic)
    return [b for b in (0, 1, 2) if b != leader]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, tmp_path / "data", FAST) as running:
        yield running


@pytest.fixture
def lagging_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """Followers leave the ISR after 400 ms without catching up."""
    config = {**FAST, "replica.lag.time.max.ms": 400}
    with EmbeddedCluster(3, tmp_path / "data", config) as running:
        yield running


def test_followers_end_with_byte_identical_logs(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("copied", partitions=2, replication_factor=3, segment_bytes="600")
    for round_ in range(8):
        for index in (0, 1):
            answer = client.produce("copied", index, batch(3, tag=f"r{round_}p{index}"))
            assert answer.error_code == p.NONE

    for index in (0, 1):
        wait_until(lambda index=index: replicated(cluster, "copied", index), what="replication")
        copies = [replica(cluster, b, "copied", index) for b in (0, 1, 2)]
        assert copies[0].log.segment_count > 1
        assert len({log_bytes(c) for c in copies}) == 1
        assert len({c.log.log_end_offset for c in copies}) == 1
        assert len({tuple(c.log.leader_epoch_cache.entries()) for c in copies}) == 1
        assert set(isr(client, "copied", index)) == {0, 1, 2}
    # One fetcher thread per source broker serves all the partitions it leads for us.
    for broker_id in (0, 1, 2):
        manager = cluster.broker(broker_id).replica_fetcher_manager
        assert manager is not None
        assert all(thread.fetcher_id == 0 for thread in manager.threads().values())


def test_high_watermark_waits_for_every_in_sync_replica(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("held", replication_factor=3)
    assert produce(client, "held", batch(1, tag="first")).error_code == p.NONE
    wait_until(lambda: replicated(cluster, "held"))
    slow = followers_of(client, "held")[0]
    fault = pause_fetches(client, slow)

    leader_only = produce(client, "held", batch(2, tag="second"), acks=p.Acks.LEADER)
    timed_out = produce(client, "held", batch(1, tag="third"), timeout_ms=300)
    hw_while_paused = replica(cluster, client.leader("held"), "held").high_watermark
    consumer_view = client.fetch("held")
    client.transport.faults.remove(fault)

    assert leader_only.error_code == p.NONE
    assert timed_out.error_code == RequestTimedOutError.code
    assert hw_while_paused == 1
    assert values(consumer_view.records) == [b"first-0"]
    wait_until(lambda: replicated(cluster, "held"))
    assert values(client.fetch("held").records) == [
        b"first-0",
        b"second-0",
        b"second-1",
        b"third-0",
    ]


def test_acks_all_waits_until_the_isr_has_the_data(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("patient", replication_factor=3)
    slow = followers_of(client, "patient")[0]
    fault = pause_fetches(client, slow)
    answers: list[p.PartitionProduceResponse] = []
    producer = threading.Thread(
        target=lambda: answers.append(produce(client, "patient", batch(1), timeout_ms=10_000))
    )
    producer.start()
    time.sleep(0.5)
    waiting = not answers
    client.transport.faults.remove(fault)
    producer.join()

    assert waiting
    assert (answers[0].error_code, answers[0].base_offset) == (p.NONE, 0)
    assert replica(cluster, slow, "patient").log.log_end_offset == 1


def test_follower_fetches_read_past_the_high_watermark(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("ahead", replication_factor=3)
    slow, other = followers_of(client, "ahead")
    fault = pause_fetches(client, slow)
    produce(client, "ahead", batch(2), acks=p.Acks.LEADER)
    wait_until(lambda: replica(cluster, other, "ahead").log.log_end_offset == 2)
    request = p.FetchRequest(
        [p.FetchTopic("ahead", [p.FetchPartition(0, 0, 1 << 20)])],
        replica_id=slow,
        max_wait_ms=0,
    )
    # Sent as the paused follower itself would, bypassing its lost requests.
    client.transport.faults.remove(fault)
    as_follower = client.transport.send(client.leader("ahead"), request).responses[0]
    as_consumer = client.fetch("ahead")

    # The HW waits for the slow follower (still in the ISR); its own fetch reads past it.
    assert as_follower.partitions[0].error_code == p.NONE
    assert as_follower.partitions[0].high_watermark == 0
    assert len(values(as_follower.partitions[0].records)) == 2
    assert (as_consumer.high_watermark, values(as_consumer.records)) == (0, [])


def test_a_lagging_follower_leaves_the_isr_and_rejoins(
    lagging_cluster: EmbeddedCluster,
) -> None:
    cluster = lagging_cluster
    client = Client(cluster)
    client.create("laggy", replication_factor=3)
    slow = followers_of(client, "laggy")[0]
    epoch_before = client.metadata("laggy").topics[0].partitions[0].leader_epoch
    fault = pause_fetches(client, slow)
    produce(client, "laggy", batch(1), acks=p.Acks.LEADER)

    wait_until(lambda: slow not in isr(client, "laggy"), what="ISR shrink")
    # Without the slow follower the ISR has the data: the HW moves and acks=all succeeds.
    wait_until(lambda: client.fetch("laggy").high_watermark == 1, what="HW")
    assert produce(client, "laggy", batch(1)).error_code == p.NONE
    client.transport.faults.remove(fault)

    wait_until(lambda: slow in isr(client, "laggy"), what="ISR expansion")
    wait_until(lambda: replicated(cluster, "laggy"))
    assert client.metadata("laggy").topics[0].partitions[0].leader_epoch == epoch_before
    assert cluster.controller.image().registration(TopicPartition("laggy", 0)).partition_epoch >= 2  # type: ignore[union-attr]


def test_min_insync_replicas_refuses_acks_all_before_appending(
    lagging_cluster: EmbeddedCluster,
) -> None:
    cluster = lagging_cluster
    client = Client(cluster)
    client.create("strict", replication_factor=3, min_insync_replicas="3")
    slow = followers_of(client, "strict")[0]
    fault = pause_fetches(client, slow)
    # A follower is out of sync only when there is something it has not caught up with.
    produce(client, "strict", batch(1), acks=p.Acks.LEADER)
    wait_until(lambda: slow not in isr(client, "strict"), what="ISR shrink")

    refused = produce(client, "strict", batch(1))
    accepted = produce(client, "strict", batch(1), acks=p.Acks.LEADER)
    client.transport.faults.remove(fault)

    assert refused.error_code == NotEnoughReplicasError.code
    assert (accepted.error_code, accepted.base_offset) == (p.NONE, 1)


def test_isr_shrinking_under_a_waiting_produce_fails_it_after_append(
    lagging_cluster: EmbeddedCluster,
) -> None:
    cluster = lagging_cluster
    client = Client(cluster)
    client.create("shrinking", replication_factor=3, min_insync_replicas="3")
    slow = followers_of(client, "shrinking")[0]
    fault = pause_fetches(client, slow)

    answer = produce(client, "shrinking", batch(1), timeout_ms=10_000)
    client.transport.faults.remove(fault)

    # Appended while the ISR had 3; committed once the slow one left it, with 2.
    assert answer.error_code == NotEnoughReplicasAfterAppendError.code
    assert client.fetch("shrinking").high_watermark == 1


def test_failover_keeps_every_acknowledged_record(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("durable", replication_factor=3, min_insync_replicas="2")
    acknowledged = []
    for i in range(5):
        answer = client.produce("durable", 0, batch(2, tag=f"a{i}"))
        assert answer.error_code == p.NONE
        acknowledged.extend([f"a{i}-0".encode(), f"a{i}-1".encode()])
    old_leader = client.leader("durable")
    epoch = client.metadata("durable").topics[0].partitions[0].leader_epoch

    cluster.stop_broker(old_leader, clean=False)
    new_leader = client.leader("durable")
    after = client.metadata("durable").topics[0].partitions[0]
    more = client.produce("durable", 0, batch(1, tag="b"))

    assert new_leader not in (old_leader, p.NO_LEADER)
    assert after.leader_epoch == epoch + 1
    assert old_leader not in after.isr_nodes
    assert more.error_code == p.NONE
    assert values(client.fetch("durable").records) == [*acknowledged, b"b-0"]

    cluster.start_broker(old_leader)
    wait_until(lambda: old_leader in isr(client, "durable"), what="rejoin")
    wait_until(lambda: replicated(cluster, "durable"))
    copies = [replica(cluster, b, "durable") for b in (0, 1, 2)]
    assert len({all_records(c) for c in copies}) == 1
    assert client.leader("durable") == new_leader


def test_a_returning_leader_truncates_what_was_never_committed(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("diverge", replication_factor=3)
    assert client.produce("diverge", 0, batch(2, tag="kept")).error_code == p.NONE
    wait_until(lambda: replicated(cluster, "diverge"))
    old_leader = client.leader("diverge")
    fault = pause_fetches(client, *followers_of(client, "diverge"))
    lost = produce(client, "diverge", batch(3, tag="lost"), acks=p.Acks.LEADER)
    assert lost.error_code == p.NONE
    assert replica(cluster, old_leader, "diverge").log.log_end_offset == 5

    cluster.stop_broker(old_leader, clean=False)
    client.transport.faults.remove(fault)
    assert client.produce("diverge", 0, batch(1, tag="new")).error_code == p.NONE
    cluster.start_broker(old_leader)

    wait_until(lambda: replicated(cluster, "diverge"))
    returned = replica(cluster, old_leader, "diverge")
    assert values(all_records(returned)) == [b"kept-0", b"kept-1", b"new-0"]
    copies = [replica(cluster, b, "diverge") for b in (0, 1, 2)]
    assert len({log_bytes(c) for c in copies}) == 1
    assert [e.epoch for e in returned.log.leader_epoch_cache.entries()] == [0, 1]


def test_leader_answers_offsets_for_leader_epoch(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("epochs", replication_factor=3)
    client.produce("epochs", 0, batch(2))
    old_leader = client.leader("epochs")
    cluster.stop_broker(old_leader)
    client.produce("epochs", 0, batch(3))
    leader = client.leader("epochs")

    def ask(epoch: int, current: int = p.UNKNOWN_EPOCH) -> p.EpochEndOffset:
        request = p.OffsetsForLeaderEpochRequest(
            [p.OffsetForLeaderTopic("epochs", [p.OffsetForLeaderPartition(0, epoch, current)])],
            replica_id=old_leader,
        )
        return client.transport.send(leader, request).topics[0].partitions[0]

    first, latest, fenced = ask(0), ask(1), ask(1, current=0)
    assert (first.error_code, first.leader_epoch, first.end_offset) == (p.NONE, 0, 2)
    assert (latest.error_code, latest.leader_epoch, latest.end_offset) == (p.NONE, 1, 5)
    assert fenced.error_code != p.NONE


def test_a_restarted_follower_catches_up(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("behind", partitions=3, replication_factor=3)
    follower = 2
    cluster.stop_broker(follower)
    for index in range(3):
        for i in range(4):
            assert client.produce("behind", index, batch(2, tag=f"{i}")).error_code == p.NONE

    cluster.start_broker(follower)

    for index in range(3):
        wait_until(lambda index=index: replicated(cluster, "behind", index))
        wait_until(lambda index=index: follower in isr(client, "behind", index))
        copies = [replica(cluster, b, "behind", index) for b in (0, 1, 2)]
        assert len({log_bytes(c) for c in copies}) == 1


def test_a_restarted_follower_rejoins_many_isrs_in_a_few_commits(
    cluster: EmbeddedCluster, client: Client
) -> None:
    """Leaders send their ISR changes in batches, and the controller commits each batch at
    once: rejoining 60 ISRs takes a handful of commits, not 60."""
    client.create("wide", partitions=60, replication_factor=3)
    follower = 2
    cluster.stop_broker(follower)
    assert all(follower not in isr(client, "wide", n) for n in range(60))
    commits: list[object] = []
    unsubscribe = cluster.controller.subscribe(commits.append)
    try:
        cluster.start_broker(follower)
        wait_until(
            lambda: all(follower in isr(client, "wide", n) for n in range(60)),
            timeout=60,
            what="the follower back in every ISR",
        )
    finally:
        unsubscribe()
    assert len(commits) < 30, f"{len(commits)} commits to rejoin 60 ISRs"


def test_a_follower_behind_the_leaders_log_start_restarts_there(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("trimmed", replication_factor=3, segment_bytes="200")
    follower = followers_of(client, "trimmed")[0]
    cluster.stop_broker(follower)
    for i in range(6):
        assert client.produce("trimmed", 0, batch(2, tag=f"{i}")).error_code == p.NONE
    leader = client.leader("trimmed")
    deleted = client.transport.send(
        leader,
        p.DeleteRecordsRequest([p.DeleteRecordsTopic("trimmed", [p.DeleteRecordsPartition(0, 8)])]),
    )
    assert deleted.topics[0].partitions[0].low_watermark == 8

    cluster.start_broker(follower)

    wait_until(lambda: replicated(cluster, "trimmed"))
    copies = [replica(cluster, b, "trimmed") for b in (0, 1, 2)]
    assert [c.log.log_start_offset for c in copies] == [8, 8, 8]
    assert values(all_records(replica(cluster, follower, "trimmed")))[-1] == b"5-1"
    wait_until(lambda: follower in isr(client, "trimmed"), what="rejoin")


def test_partitions_spread_over_num_replica_fetchers_threads_per_leader(tmp_path: Path) -> None:
    config = {**FAST, "num.replica.fetchers": 2}
    with EmbeddedCluster(3, tmp_path / "data", config) as cluster:
        client = Client(cluster)
        assignments = [p.CreatableReplicaAssignment(i, [0, 2]) for i in range(8)]
        request = p.CreateTopicsRequest([p.CreatableTopic("spread", assignments=assignments)])
        assert client.transport.send(0, request).topics[0].error_code == p.NONE
        for index in range(8):
            assert client.produce("spread", index, batch(1)).error_code == p.NONE

        manager = cluster.broker(2).replica_fetcher_manager
        assert manager is not None
        threads = manager.threads()
        served = [tp for thread in threads.values() for tp in thread.partitions()]
        assert set(threads) <= {(0, 0), (0, 1)}
        assert sorted(served) == [TopicPartition("spread", i) for i in range(8)]
        assert {manager.fetcher_id(tp) for tp in served} == {0, 1}
        for index in range(8):
            wait_until(lambda index=index: replicated(cluster, "spread", index))


def test_unclean_election_lets_an_out_of_sync_replica_lead_when_the_topic_allows_it(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("lossy", replication_factor=3, unclean_leader_election_enable="true")
    assert client.produce("lossy", 0, batch(1, tag="both")).error_code == p.NONE
    wait_until(lambda: replicated(cluster, "lossy"))
    leader = client.leader("lossy")
    first, second = followers_of(client, "lossy")
    cluster.stop_broker(first)
    cluster.stop_broker(second)
    assert client.produce("lossy", 0, batch(1, tag="lost")).error_code == p.NONE
    epoch = client.metadata("lossy").topics[0].partitions[0].leader_epoch
    cluster.stop_broker(leader)

    cluster.start_broker(first)
    after = client.metadata("lossy").topics[0].partitions[0]
    assert (after.leader_id, after.isr_nodes, after.leader_epoch) == (first, (first,), epoch + 2)
    assert client.produce("lossy", 0, batch(1, tag="after")).error_code == p.NONE

    cluster.start_broker(leader)
    cluster.start_broker(second)
    wait_until(lambda: replicated(cluster, "lossy"))
    wait_until(lambda: set(isr(client, "lossy")) == {0, 1, 2}, what="everyone back in sync")
    for broker_id in (0, 1, 2):
        assert values(all_records(replica(cluster, broker_id, "lossy"))) == [b"both-0", b"after-0"]


def test_a_refused_isr_change_is_not_proposed_again_before_the_backoff(tmp_path: Path) -> None:
    """A leader whose ISR change the controller refused waits before asking again, instead of
    asking on every follower fetch (thousands of AlterPartition a second on a busy cluster)."""
    plog = PartitionLog.open(tmp_path / "isr-0", {})
    partition = Partition(plog, None, broker_id=0)
    state = p.LeaderAndIsrPartitionState("isr", 0, 0, 1, isr=(0,), replicas=(0, 1))
    partition.make_leader(state, Uuid.random())
    try:
        change = partition.update_follower_fetch_state(1, 0).isr_change
        assert change is not None and change.isr == (0, 1)
        assert partition.complete_isr_change(change, None, -1) is False
        refused_at = time.monotonic() * 1000
        assert partition.update_follower_fetch_state(1, 0).isr_change is None
        later = int(refused_at + ISR_CHANGE_RETRY_BACKOFF_MS + 1)
        again = partition.update_follower_fetch_state(1, 0, now_ms=later).isr_change
        assert again is not None and again.isr == (0, 1)
        assert partition.complete_isr_change(again, (0, 1), 1) is False  # nothing to commit
        assert partition.isr == (0, 1)
    finally:
        plog.close()
