"""A tiered topic grown with CreatePartitions tiers its new partitions like the old ones."""

from __future__ import annotations

from collections.abc import Callable

from tierlog.server import protocol as p

from tests.waiting import wait_until

from .conftest import Tiered


def test_a_new_partition_of_a_tiered_topic_is_tiered(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(3)
    tiered.client.create("t", 1, 2, segment_bytes="4096", remote_storage_enable="true")
    request = p.CreatePartitionsRequest([p.CreatePartitionsTopic("t", 3)])

    [result] = tiered.cluster.transport.send(0, request).results

    assert result.error_code == p.NONE
    for partition in (1, 2):
        tiered.fill("t", 20, partition=partition)
        rolled = sum(1 for s in tiered.log("t", partition).segments() if not s.is_active)
        assert rolled >= 2
        wait_until(
            lambda partition=partition, rolled=rolled: (
                len(tiered.finished("t", partition)) == rolled
            ),
            f"every rolled segment of t-{partition} tiered",
        )
    copied = {(e.start_offset, e.end_offset) for e in tiered.history.of("copy")}
    assert {(s.start_offset, s.end_offset) for s in tiered.finished("t", 2)} <= copied
