"""Reads of a tiered topic by each library: from the earliest offset (the remote tier, then
across into the local one), from a timestamp in the remote tier, from the latest offset, and
from the tiered ListOffsets specs (EARLIEST_LOCAL -4, LATEST_TIERED -5, KIP-405/KIP-1005)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from tierlog.cluster import EmbeddedCluster

from tests.wire.raw import RawClient

from .conftest import (
    EARLIEST,
    LATEST,
    LIBRARIES,
    TIERED_TOPIC,
    At,
    OpenConsumer,
    Stored,
    assert_same_records,
    create_topic,
    end_offsets,
    fill,
    listening,
    make_records,
    meter_count,
    on,
    produce,
    replica,
    unique_topic,
    wait_offloaded,
)

TOPIC = "tiered"
PARTITIONS = 2
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


@attrs.frozen
class TieredTopic:
    cluster: EmbeddedCluster
    acked: list[Stored]
    #: Per partition: the first offset still on local disk (all before it only remote).
    local_starts: dict[int, int]

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def from_offsets(self, starts: dict[int, int]) -> list[Stored]:
        """What a read from ``starts`` (per partition) gets."""
        return [r for r in self.acked if r.offset >= starts[r.partition]]

    def remote_fetches(self) -> int:
        return meter_count(
            self.cluster, 0, "BrokerTopicMetrics", "RemoteFetchRequestsPerSec", topic=TOPIC
        )


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredTopic]:
    """A 2-partition tiered topic of 16 KiB segments: all but the active segment of each
    partition only in the remote tier. Read-only for the tests."""
    root = tmp_path_factory.mktemp("tiered")
    with listening(root / "data", remote_dir=root / "remote") as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, configs=TIERED_TOPIC)
        acked = fill(cluster, TOPIC, make_records(700, PARTITIONS, tag="tiered"))
        local_starts = wait_offloaded(cluster, TOPIC, PARTITIONS)
        ends = end_offsets(acked)
        for partition, start in local_starts.items():
            assert 0 < start < ends[TOPIC, partition], "both tiers must hold records"
        yield TieredTopic(cluster, acked, local_starts)


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_read_from_earliest_crosses_from_the_remote_tier_into_the_local_one(
    tiered: TieredTopic, library: str, open_consumer: OpenConsumer
) -> None:
    remote_fetches = tiered.remote_fetches()
    consumer = open_consumer(library, tiered.bootstrap)
    consumer.assign(on(TOPIC, dict.fromkeys(range(PARTITIONS), EARLIEST)))
    assert consumer.positions() == on(TOPIC, dict.fromkeys(range(PARTITIONS), 0))

    received = consumer.read(end_offsets(tiered.acked))

    assert_same_records(received, tiered.acked)
    assert tiered.remote_fetches() > remote_fetches


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_read_from_a_timestamp_in_the_remote_tier(
    tiered: TieredTopic, library: str, open_consumer: OpenConsumer
) -> None:
    # Partition 0's records are 2 ms apart: one ms before a record's timestamp finds it.
    target = next(r for r in tiered.acked if r.partition == 0 and r.offset == 7)
    assert target.offset < tiered.local_starts[0]
    consumer = open_consumer(library, tiered.bootstrap)
    consumer.assign({(TOPIC, 0): At(target.timestamp - 1)})
    assert consumer.positions() == {(TOPIC, 0): 7}

    wanted = [r for r in tiered.acked if r.partition == 0 and r.offset >= 7]
    assert_same_records(consumer.read(end_offsets(wanted)), wanted)


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_read_from_latest_gets_only_records_produced_after_it(
    tiered: TieredTopic, library: str, open_consumer: OpenConsumer
) -> None:
    topic = unique_topic("latest")
    create_topic(tiered.cluster, topic, PARTITIONS, configs=TIERED_TOPIC)
    before = produce(library, tiered.bootstrap, topic, make_records(40, PARTITIONS, tag="old"))
    consumer = open_consumer(library, tiered.bootstrap)
    consumer.assign(on(topic, dict.fromkeys(range(PARTITIONS), LATEST)))
    assert consumer.positions() == end_offsets(before)

    after = produce(library, tiered.bootstrap, topic, make_records(30, PARTITIONS, tag="new"))

    assert_same_records(consumer.read(end_offsets(after)), after)


def _list_offsets(cluster: EmbeddedCluster, spec: int) -> dict[int, int]:
    """ListOffsets v9 for ``spec`` on every partition, raw over a socket."""
    r = ListOffsetsRequest
    request = r(
        replica_id=-1,
        isolation_level=0,
        topics=[
            r.ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    r.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=spec
                    )
                    for p in range(PARTITIONS)
                ],
            )
        ],
    )
    with RawClient.to(cluster) as raw:
        (topic,) = raw.call(request, 9).topics
    assert all(p.error_code == 0 for p in topic.partitions), topic
    return {p.partition_index: p.offset for p in topic.partitions}


def test_list_offsets_earliest_local_and_latest_tiered_and_reads_from_them(
    tiered: TieredTopic, open_consumer: OpenConsumer
) -> None:
    earliest_local = _list_offsets(tiered.cluster, EARLIEST_LOCAL)
    latest_tiered = _list_offsets(tiered.cluster, LATEST_TIERED)

    assert earliest_local == tiered.local_starts
    for partition in range(PARTITIONS):
        log = replica(tiered.cluster, TOPIC, partition).log
        assert latest_tiered[partition] == log.highest_offset_in_remote_storage
        # Every segment before the active one is tiered: the tiers meet there.
        assert latest_tiered[partition] == earliest_local[partition] - 1
    ends = end_offsets(tiered.acked)
    for starts in (earliest_local, latest_tiered):
        consumer = open_consumer("confluent-kafka", tiered.bootstrap)
        consumer.assign(on(TOPIC, starts))
        assert_same_records(consumer.read(ends), tiered.from_offsets(starts))
