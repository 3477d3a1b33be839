"""A replica whose fetch offset is only in remote storage starts from the leader's local log
start, on the epochs and producer state of the remote segment just below it (Kafka's
TierStateMachine), then joins the ISR and can lead, serving the tiered data remotely."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tierlog.model import IndexType, TopicPartition

from tests.server.conftest import batch
from tests.waiting import wait_until

from .conftest import Tiered
from .test_copy import consume_all

SEGMENT = "4096"
TIERED_TOPIC = {
    "segment_bytes": SEGMENT,
    "remote_storage_enable": "true",
    "local_retention_bytes": "1",
}
PRODUCER_ID = 4242


def isr(tiered: Tiered, topic: str) -> set[int]:
    return set(tiered.client.metadata(topic).topics[0].partitions[0].isr_nodes)


def replica_log(tiered: Tiered, broker_id: int, topic: str) -> Any:
    replica = tiered.cluster.broker(broker_id).partition(TopicPartition(topic, 0))
    assert replica is not None
    return replica.log


def wipe(tiered: Tiered, broker_id: int, topic: str) -> None:
    """A replacement disk: the stopped broker's copy of the partition is gone."""
    logs = Path(tiered.cluster.broker_config(broker_id).get_list("log.dirs")[0])
    shutil.rmtree(logs / f"{topic}-0")


def tier_until_local_start_moves(tiered: Tiered, topic: str) -> int:
    leader_log = tiered.log(topic)
    wait_until(lambda: leader_log.local_log_start_offset > 0, "early local segments deleted")
    return int(leader_log.local_log_start_offset)


def rejoin_and_take_over(tiered: Tiered, topic: str, follower: int, leader: int) -> Any:
    """Starts the wiped follower, waits for it to catch up, then makes it the leader."""
    leader_log = tiered.log(topic)
    tiered.cluster.start_broker(follower)
    wait_until(lambda: follower in isr(tiered, topic), "the rebuilt replica in the ISR")
    rebuilt = replica_log(tiered, follower, topic)
    wait_until(lambda: rebuilt.log_end_offset == leader_log.log_end_offset, "the replica caught up")
    rebuilt_from = [
        e for e in tiered.history.of("fetch_index") if e.thread.startswith("ReplicaFetcherThread")
    ]
    assert {e.detail for e in rebuilt_from} >= {IndexType.LEADER_EPOCH, IndexType.PRODUCER_SNAPSHOT}
    assert rebuilt.log_start_offset == leader_log.log_start_offset == 0
    assert rebuilt.local_log_start_offset > 0
    # A leader records its epoch at its log end when elected; followers learn it with data.
    written = [
        e
        for e in leader_log.leader_epoch_cache.entries()
        if e.start_offset < leader_log.log_end_offset
    ]
    assert rebuilt.leader_epoch_cache.entries() == written
    assert not tiered.history.of("fetch"), "no tiered data is copied to the follower"
    tiered.cluster.stop_broker(leader)
    wait_until(lambda: tiered.client.leader(topic) == follower, "the rebuilt replica leads")
    return rebuilt


def test_a_new_replica_starts_from_remote_storage_and_can_lead(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(2)
    tiered.client.create("t", 1, 2, **TIERED_TOPIC)
    leader = tiered.client.leader("t")
    follower = 1 - leader
    tiered.cluster.stop_broker(follower)
    for n in range(40):
        produced = tiered.client.produce(
            "t",
            0,
            batch(
                10,
                tag=f"b{n}",
                value_size=100,
                producer_id=PRODUCER_ID,
                producer_epoch=0,
                base_sequence=10 * n,
            ),
        )
        assert produced.error_code == 0
    local_start = tier_until_local_start_moves(tiered, "t")
    wipe(tiered, follower, "t")

    rebuilt = rejoin_and_take_over(tiered, "t", follower, leader)

    assert rebuilt.highest_offset_in_remote_storage >= local_start - 1
    producer = rebuilt.producer_state_manager.last_entry(PRODUCER_ID)
    assert producer is not None and producer.last_seq == 399
    values = consume_all(tiered, "t", 400)
    assert values[0].startswith(b"b0-0") and values[-1].startswith(b"b39-9")
    assert tiered.history.of("fetch"), "the new leader served offsets below its local start"


def test_an_empty_remote_producer_snapshot_is_a_valid_start(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(2)
    tiered.client.create("old", 1, 2, segment_bytes=SEGMENT)
    leader = tiered.client.leader("old")
    follower = 1 - leader
    tiered.cluster.stop_broker(follower)
    tiered.fill("old", 30)
    directory = tiered.log("old").directory
    tiered.cluster.stop_broker(leader)
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()  # as if the data predated snapshots at every roll
    tiered.cluster.start_broker(leader)
    wait_until(lambda: tiered.client.leader("old") == leader, "the old leader back")
    tiered.alter("old", remote_storage_enable="true", local_retention_bytes="1")
    tier_until_local_start_moves(tiered, "old")
    wipe(tiered, follower, "old")

    rebuilt = rejoin_and_take_over(tiered, "old", follower, leader)

    assert rebuilt.producer_state_manager.is_empty()
    assert len(consume_all(tiered, "old", 300)) == 300
