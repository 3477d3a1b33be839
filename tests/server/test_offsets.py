"""ListOffsets, DeleteRecords and OffsetsForLeaderEpoch."""

from __future__ import annotations

from tierlog.errors import (
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from tierlog.server import protocol as p

from .conftest import T0, Client, batch, offsets


def fill(client: Client, topic: str = "clock") -> None:
    client.create(topic)
    client.produce(topic, 0, batch(3, timestamp=T0))  # offsets 0-2, T0..T0+2
    client.produce(topic, 0, batch(2, timestamp=T0 + 100))  # offsets 3-4
    client.produce(topic, 0, batch(1, timestamp=T0 + 50))  # offset 5, out of order


def test_latest_earliest_and_max_timestamp(client: Client) -> None:
    fill(client)

    latest = client.list_offset("clock", p.OffsetSpec.LATEST)
    earliest = client.list_offset("clock", p.OffsetSpec.EARLIEST)
    newest = client.list_offset("clock", p.OffsetSpec.MAX_TIMESTAMP)
    local = client.list_offset("clock", p.OffsetSpec.EARLIEST_LOCAL)
    tiered = client.list_offset("clock", p.OffsetSpec.LATEST_TIERED)

    assert (latest.error_code, latest.offset) == (p.NONE, 6)
    assert (earliest.offset, local.offset) == (0, 0)
    assert (newest.offset, newest.timestamp) == (4, T0 + 101)
    assert (tiered.error_code, tiered.offset, tiered.leader_epoch) == (p.NONE, -1, -1)
    assert latest.leader_epoch == client.metadata("clock").topics[0].partitions[0].leader_epoch


def test_offset_by_timestamp(client: Client) -> None:
    fill(client)

    assert client.list_offset("clock", T0).offset == 0
    assert client.list_offset("clock", T0 + 2).offset == 2
    found = client.list_offset("clock", T0 + 3)
    assert (found.offset, found.timestamp) == (3, T0 + 100)
    beyond = client.list_offset("clock", T0 + 10_000)
    assert (beyond.error_code, beyond.offset, beyond.timestamp) == (p.NONE, -1, -1)


def test_latest_under_read_committed_is_the_last_stable_offset(client: Client) -> None:
    client.create("open-txn")
    client.produce("open-txn", 0, batch(2))
    client.produce(
        "open-txn",
        0,
        batch(1, producer_id=3, producer_epoch=0, base_sequence=0, transactional=True),
    )

    committed = client.list_offset(
        "open-txn", p.OffsetSpec.LATEST, isolation_level=p.IsolationLevel.READ_COMMITTED
    )
    uncommitted = client.list_offset("open-txn", p.OffsetSpec.LATEST)

    assert (committed.offset, uncommitted.offset) == (2, 3)


def test_list_offsets_errors_per_partition(client: Client) -> None:
    client.create("one")
    leader = client.leader("one")
    other = next(b for b in client.transport.node_ids() if b != leader)
    request = p.ListOffsetsRequest(
        [
            p.ListOffsetsTopic(
                "one", [p.ListOffsetsPartition(0, -1), p.ListOffsetsPartition(1, -1)]
            ),
            p.ListOffsetsTopic("none", [p.ListOffsetsPartition(0, -1)]),
        ]
    )

    on_leader = client.transport.send(leader, request)
    on_other = client.transport.send(other, request)

    assert [[x.error_code for x in t.partitions] for t in on_leader.topics] == [
        [p.NONE, UnknownTopicOrPartitionError.code],
        [UnknownTopicOrPartitionError.code],
    ]
    assert on_other.topics[0].partitions[0].error_code == NotLeaderOrFollowerError.code


def delete_records(client: Client, topic: str, offset: int) -> p.DeleteRecordsPartitionResult:
    request = p.DeleteRecordsRequest(
        [p.DeleteRecordsTopic(topic, [p.DeleteRecordsPartition(0, offset)])]
    )
    return client.transport.send(client.leader(topic), request).topics[0].partitions[0]


def test_delete_records_moves_the_log_start_offset(client: Client) -> None:
    fill(client, "trim")

    result = delete_records(client, "trim", 4)

    assert (result.error_code, result.low_watermark) == (p.NONE, 4)
    assert client.list_offset("trim", p.OffsetSpec.EARLIEST).offset == 4
    fetched = client.fetch("trim", offset=4)
    assert fetched.log_start_offset == 4
    assert offsets(fetched.records)[0] <= 4
    assert client.fetch("trim", offset=2).error_code == OffsetOutOfRangeError.code


def test_delete_records_to_the_high_watermark_with_minus_one(client: Client) -> None:
    fill(client, "all")

    assert delete_records(client, "all", -1).low_watermark == 6


def test_delete_records_beyond_the_high_watermark_changes_nothing(client: Client) -> None:
    fill(client, "keep")

    result = delete_records(client, "keep", 7)

    assert result.error_code == OffsetOutOfRangeError.code
    assert client.list_offset("keep", p.OffsetSpec.EARLIEST).offset == 0


def test_offsets_for_leader_epoch(client: Client) -> None:
    fill(client, "epochs")
    leader = client.leader("epochs")
    epoch = client.metadata("epochs").topics[0].partitions[0].leader_epoch
    request = p.OffsetsForLeaderEpochRequest(
        [
            p.OffsetForLeaderTopic(
                "epochs", [p.OffsetForLeaderPartition(0, epoch, current_leader_epoch=epoch)]
            )
        ],
        replica_id=1,
    )

    result = client.transport.send(leader, request).topics[0].partitions[0]

    assert (result.error_code, result.leader_epoch, result.end_offset) == (p.NONE, epoch, 6)
