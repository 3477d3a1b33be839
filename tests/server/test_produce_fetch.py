"""Produce and Fetch through the transport, as a client would send them."""

from __future__ import annotations

import pytest
from tierlog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.records import Compression, ControlType, build_control_batch
from tierlog.server import protocol as p

from .conftest import Client, batch, offsets, values


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_round_trip_for_every_codec(client: Client, codec: Compression) -> None:
    client.create("events", partitions=2, replication_factor=2)
    first = client.produce("events", 1, batch(3, compression=codec, tag="a"))
    second = client.produce("events", 1, batch(2, compression=codec, tag="b"))

    assert (first.error_code, first.base_offset) == (p.NONE, 0)
    assert (second.error_code, second.base_offset) == (p.NONE, 3)
    fetched = client.fetch("events", 1)
    assert fetched.error_code == p.NONE
    assert fetched.high_watermark == fetched.last_stable_offset == 5
    assert fetched.log_start_offset == 0
    assert fetched.aborted_transactions is None
    assert values(fetched.records) == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"]
    assert offsets(fetched.records) == [0, 1, 2, 3, 4]


def test_idempotent_retries_append_once(client: Client) -> None:
    client.create("payments")
    records = batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
    answers = [client.produce("payments", 0, records) for _ in range(3)]
    following = client.produce(
        "payments", 0, batch(1, producer_id=7, producer_epoch=0, base_sequence=2, tag="next")
    )

    assert [(a.error_code, a.base_offset) for a in answers] == [(p.NONE, 0)] * 3
    assert (following.error_code, following.base_offset) == (p.NONE, 2)
    fetched = client.fetch("payments")
    assert offsets(fetched.records) == [0, 1, 2]
    assert fetched.high_watermark == 3


def test_multi_partition_fetch_reports_errors_per_partition(client: Client) -> None:
    client.create("left", partitions=1)
    client.produce("left", 0, batch(2, tag="ok"))
    leader = client.leader("left")
    request = p.FetchRequest(
        [
            p.FetchTopic("left", [p.FetchPartition(0, 0, 1 << 20), p.FetchPartition(0, 99, 100)]),
            p.FetchTopic("left", [p.FetchPartition(5, 0, 100)]),
            p.FetchTopic("missing", [p.FetchPartition(0, 0, 100)]),
            p.FetchTopic("bad/name", [p.FetchPartition(0, 0, 100)]),
        ],
        max_wait_ms=0,
    )
    response = client.transport.send(leader, request)

    codes = [[d.error_code for d in topic.partitions] for topic in response.responses]
    assert codes == [
        [p.NONE, OffsetOutOfRangeError.code],
        [UnknownTopicOrPartitionError.code],
        [UnknownTopicOrPartitionError.code],
        [InvalidTopicError.code],
    ]
    assert values(response.responses[0].partitions[0].records) == [b"ok-0", b"ok-1"]


def test_fetch_from_a_follower_or_non_replica_is_not_leader(client: Client) -> None:
    client.create("solo")
    leader = client.leader("solo")
    other = next(b for b in client.transport.node_ids() if b != leader)
    request = p.FetchRequest([p.FetchTopic("solo", [p.FetchPartition(0, 0, 100)])], max_wait_ms=0)

    response = client.transport.send(other, request)

    assert response.responses[0].partitions[0].error_code == NotLeaderOrFollowerError.code


def test_fetch_by_topic_id_answers_with_name_and_id(client: Client) -> None:
    created = client.create("by-id")
    client.produce("by-id", 0, batch(1))
    request = p.FetchRequest(
        [p.FetchTopic("", [p.FetchPartition(0, 0, 1 << 20)], topic_id=created.topic_id)],
        max_wait_ms=0,
    )

    response = client.transport.send(client.leader("by-id"), request)

    topic = response.responses[0]
    assert (topic.topic, topic.topic_id) == ("by-id", created.topic_id)
    assert values(topic.partitions[0].records) == [b"v-0"]


def test_max_bytes_returns_at_least_one_batch_only_for_the_first_partition(
    client: Client,
) -> None:
    client.create("big", partitions=2, replication_factor=1)
    # Both partitions on one leader: reassign by creating with explicit assignments instead.
    request = p.CreateTopicsRequest(
        [
            p.CreatableTopic(
                "pair",
                assignments=[
                    p.CreatableReplicaAssignment(0, [0]),
                    p.CreatableReplicaAssignment(1, [0]),
                ],
            )
        ]
    )
    assert client.transport.send(0, request).topics[0].error_code == p.NONE
    large = batch(1, value_size=4000, tag="large")
    client.produce("pair", 0, large)
    client.produce("pair", 1, large)
    fetch = p.FetchRequest(
        [p.FetchTopic("pair", [p.FetchPartition(0, 0, 1000), p.FetchPartition(1, 0, 1000)])],
        max_wait_ms=0,
        max_bytes=1000,
    )

    response = client.transport.send(0, fetch)

    first, second = response.responses[0].partitions
    assert values(first.records) == [b"large-0"]
    assert len(first.records) == len(large)
    assert (second.error_code, second.records) == (p.NONE, b"")


def test_max_bytes_budget_is_shared_across_partitions(client: Client) -> None:
    request = p.CreateTopicsRequest(
        [
            p.CreatableTopic(
                "shared",
                assignments=[
                    p.CreatableReplicaAssignment(0, [1]),
                    p.CreatableReplicaAssignment(1, [1]),
                ],
            )
        ]
    )
    assert client.transport.send(1, request).topics[0].error_code == p.NONE
    one = batch(1, value_size=100)
    for _ in range(3):
        client.produce("shared", 0, one)
        client.produce("shared", 1, one)
    fetch = p.FetchRequest(
        [
            p.FetchTopic(
                "shared", [p.FetchPartition(0, 0, 1 << 20), p.FetchPartition(1, 0, 1 << 20)]
            )
        ],
        max_wait_ms=0,
        max_bytes=len(one) * 4,
    )

    first, second = client.transport.send(1, fetch).responses[0].partitions

    assert len(offsets(first.records)) == 3
    assert len(offsets(second.records)) == 1


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(client: Client) -> None:
    client.create("txns")
    client.produce(
        "txns",
        0,
        batch(
            2, producer_id=11, producer_epoch=0, base_sequence=0, transactional=True, tag="aborted"
        ),
    )
    assert client.end_transaction("txns", 0, 11, commit=False) == p.NONE
    client.produce(
        "txns",
        0,
        batch(
            1,
            producer_id=12,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
            tag="committed",
        ),
    )
    assert client.end_transaction("txns", 0, 12, commit=True) == p.NONE
    client.produce(
        "txns",
        0,
        batch(1, producer_id=13, producer_epoch=0, base_sequence=0, transactional=True, tag="open"),
    )

    committed = client.fetch("txns", isolation_level=p.IsolationLevel.READ_COMMITTED)
    uncommitted = client.fetch("txns")

    # 0-1 aborted, 2 ABORT marker, 3 committed, 4 COMMIT marker, 5 still open.
    assert committed.high_watermark == 6
    assert committed.last_stable_offset == 5
    assert committed.aborted_transactions == (p.AbortedTransaction(11, 0),)
    assert b"open-0" not in values(committed.records)
    assert values(committed.records)[-1] == b"committed-0"
    assert values(uncommitted.records)[-1] == b"open-0"
    assert uncommitted.aborted_transactions is None


def test_oversized_batch_is_refused_and_nothing_is_written(client: Client) -> None:
    client.create("small", max_message_bytes="1024")
    answer = client.produce("small", 0, batch(1, value_size=5000))

    assert answer.error_code == RecordTooLargeError.code
    assert answer.error_message
    fetched = client.fetch("small")
    assert (fetched.high_watermark, fetched.records) == (0, b"")
    assert client.produce("small", 0, batch(1)).base_offset == 0


def test_unknown_topic_and_partition_are_answered_per_partition(client: Client) -> None:
    client.create("known")
    leader = client.leader("known")
    request = p.ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            p.TopicProduceData(
                "known", [p.PartitionProduceData(0, batch(1)), p.PartitionProduceData(3, batch(1))]
            ),
            p.TopicProduceData("unknown", [p.PartitionProduceData(0, batch(1))]),
            p.TopicProduceData("no good", [p.PartitionProduceData(0, batch(1))]),
        ],
    )

    response = client.transport.send(leader, request)

    codes = [[r.error_code for r in t.partition_responses] for t in response.responses]
    assert codes == [
        [p.NONE, UnknownTopicOrPartitionError.code],
        [UnknownTopicOrPartitionError.code],
        [InvalidTopicError.code],
    ]
    assert client.metadata("unknown").topics[0].error_code == UnknownTopicOrPartitionError.code


def test_corrupt_empty_and_control_records_are_refused(client: Client) -> None:
    client.create("strict")
    damaged = bytearray(batch(2))
    damaged[-1] ^= 0xFF
    marker = build_control_batch(ControlType.COMMIT, producer_id=5, producer_epoch=0, timestamp=0)

    assert client.produce("strict", 0, bytes(damaged)).error_code == CorruptRecordError.code
    assert client.produce("strict", 0, b"").error_code == InvalidRecordError.code
    assert client.produce("strict", 0, marker).error_code == InvalidRecordError.code
    assert client.fetch("strict").high_watermark == 0


def test_invalid_acks_are_refused_without_side_effects(client: Client) -> None:
    client.create("acks")
    request = p.ProduceRequest(
        acks=2,
        timeout_ms=1000,
        topic_data=[p.TopicProduceData("acks", [p.PartitionProduceData(0, batch(1))])],
    )

    response = client.transport.send(client.leader("acks"), request)

    assert response.responses[0].partition_responses[0].error_code == InvalidRequiredAcksError.code
    assert client.fetch("acks").high_watermark == 0


def test_acks_zero_gets_an_empty_response_but_the_data_is_written(client: Client) -> None:
    client.create("fire")
    request = p.ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=[p.TopicProduceData("fire", [p.PartitionProduceData(0, batch(1))])],
    )

    response = client.transport.send(client.leader("fire"), request)

    assert response.responses == ()
    assert values(client.fetch("fire").records) == [b"v-0"]


def test_leader_epoch_fencing(client: Client) -> None:
    client.create("epochs")
    client.produce("epochs", 0, batch(1))
    leader = client.leader("epochs")
    epoch = client.metadata("epochs").topics[0].partitions[0].leader_epoch

    def fetch_with(epoch_seen: int) -> int:
        request = p.FetchRequest(
            [
                p.FetchTopic(
                    "epochs", [p.FetchPartition(0, 0, 1000, current_leader_epoch=epoch_seen)]
                )
            ],
            max_wait_ms=0,
        )
        return client.transport.send(leader, request).responses[0].partitions[0].error_code

    assert fetch_with(epoch) == p.NONE
    assert fetch_with(epoch + 1) == UnknownLeaderEpochError.code
    client.cluster.restart_broker(leader)
    assert fetch_with(epoch) == FencedLeaderEpochError.code


def test_batches_carry_the_leader_epoch(client: Client) -> None:
    client.create("stamped")
    client.produce("stamped", 0, batch(1))
    leader = client.leader("stamped")
    partition = client.cluster.broker(leader).partition(TopicPartition("stamped", 0))

    assert partition is not None
    assert (
        partition.log.latest_epoch
        == client.metadata("stamped").topics[0].partitions[0].leader_epoch
    )


def test_acks_all_needs_min_insync_replicas(client: Client) -> None:
    client.create("durable", replication_factor=3, min_insync_replicas="2")
    leader = client.leader("durable")
    # Stopped followers leave the ISR: the leader is the only in-sync replica left.
    for follower in {0, 1, 2} - {leader}:
        client.cluster.stop_broker(follower)

    refused = client.produce("durable", 0, batch(1), acks=p.Acks.ALL)
    leader_only = client.produce("durable", 0, batch(1), acks=p.Acks.LEADER)

    assert refused.error_code == NotEnoughReplicasError.code
    assert (leader_only.error_code, leader_only.base_offset) == (p.NONE, 0)
    assert client.fetch("durable").high_watermark == 1


def test_unknown_isolation_level_is_an_invalid_request(client: Client) -> None:
    client.create("iso")
    request = p.FetchRequest(
        [p.FetchTopic("iso", [p.FetchPartition(0, 0, 100)])], isolation_level=7
    )

    response = client.transport.send(client.leader("iso"), request)

    assert (response.error_code, response.responses) == (InvalidRequestError.code, ())
