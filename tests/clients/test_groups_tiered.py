"""A group resuming from a committed offset that has moved to the remote tier reads from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.waiting import wait_until

from .conftest import (
    LIBRARIES,
    TIERED_TOPIC,
    confluent_kafka,
    create_topic,
    end_offsets,
    fill,
    listening,
    make_records,
    meter_count,
    wait_offloaded,
)
from .groups_members import Member

TOPIC = "tiered-group"
PARTITIONS = 2


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_committed_offset_in_the_remote_tier_is_read_from_there(
    tmp_path: Path, library: str
) -> None:
    with listening(
        tmp_path / "data",
        remote_dir=tmp_path / "remote",
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=1000,
        offsets_topic_num_partitions=2,
    ) as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, configs=TIERED_TOPIC)
        acked = fill(cluster, TOPIC, make_records(400, PARTITIONS, tag="tiered"))
        local_starts = wait_offloaded(cluster, TOPIC, PARTITIONS)
        committed = {p: start // 2 for p, start in local_starts.items()}
        assert all(0 < offset < local_starts[p] for p, offset in committed.items())
        # A simple commit (no member, generation -1) of offsets only the remote tier holds.
        committer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "resumer"}
        )
        try:
            committer.commit(
                offsets=[
                    confluent_kafka.TopicPartition(TOPIC, p, offset)
                    for p, offset in committed.items()
                ],
                asynchronous=False,
            )
        finally:
            committer.close()
        remote_fetches = meter_count(
            cluster, 0, "BrokerTopicMetrics", "RemoteFetchRequestsPerSec", topic=TOPIC
        )
        wanted = {(r.partition, r.offset) for r in acked if r.offset >= committed[r.partition]}
        member = Member(library, cluster.bootstrap_servers, "resumer", TOPIC)
        try:
            wait_until(
                lambda: {(p, o) for p, o, _ in member.records()} >= wanted, "the records", 60
            )
        finally:
            member.stop()
        read = member.records()
        for partition in range(PARTITIONS):
            offsets = [o for p, o, _ in read if p == partition]
            assert min(offsets) == committed[partition]  # resumed exactly there
            assert max(offsets) == end_offsets(acked)[TOPIC, partition] - 1
        assert {(p, o) for p, o, _ in read} == wanted
        assert (
            meter_count(cluster, 0, "BrokerTopicMetrics", "RemoteFetchRequestsPerSec", topic=TOPIC)
            > remote_fetches
        )
