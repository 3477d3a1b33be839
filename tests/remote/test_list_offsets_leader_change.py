"""ListOffsets on a tiered partition before and after a leader change (epoch 0 -> 1), then after
remote data is deleted: every special spec and searches by time, answered from the local or the
remote tier, each with the leader epoch of the offset it names."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tierlog.server.protocol import OffsetSpec
from tierlog.testing import Scenario

from tests.remote.conftest import file_scenario

pytest.importorskip("tierlog_fsspec")

SEGMENT = 4096
#: Record n is stamped T + n seconds: an hour ago, inside every retention default.
T = int(time.time() * 1000) - 3_600_000


def stamped(first: int, count: int) -> tuple[list[bytes], list[int]]:
    values = [f"v-{n:05d}-".encode() + b"x" * 100 for n in range(first, first + count)]
    return values, [T + 1000 * n for n in range(first, first + count)]


def at(n: int) -> int:
    """A time between record n-1 and record n: the first record at or after it is n."""
    return T + 1000 * n - 1


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    with file_scenario(tmp_path, brokers=2) as running:
        yield running


def local_start(scenario: Scenario, broker_id: int) -> int:
    return scenario.log("t", 0, broker_id).local_log_start_offset


def tiered_end(scenario: Scenario) -> int:
    return scenario.log("t", 0).highest_offset_in_remote_storage


def expect_follower_trimmed(scenario: Scenario, broker_id: int, below: int) -> None:
    """The follower also dropped its local copies of what was tiered (and caught up)."""
    scenario.expect_in_isr("t", 0, broker_id)
    scenario.wait_until(
        lambda: local_start(scenario, broker_id) >= below,
        f"broker {broker_id} deleted its local copies below {below}",
    )


def test_list_offsets_across_a_leader_change_and_remote_deletions(scenario: Scenario) -> None:
    scenario.create_topic("t", replication_factor=2, segment_bytes=SEGMENT, local_retention_bytes=1)
    first = scenario.leader("t", 0)
    second = 1 - first
    scenario.expect_in_isr("t", 0, second)

    # --- epoch 0, on the first leader ------------------------------------------------------
    values, stamps = stamped(0, 300)
    scenario.produce("t", 0, values, timestamps=stamps).expect_tiered("t", 0)
    scenario.expect_local_deleted("t", 0)
    local = local_start(scenario, first)
    tiered = tiered_end(scenario)
    assert 20 < local <= tiered + 1 < 300
    (
        scenario.expect_list_offsets("t", 0, OffsetSpec.EARLIEST, 0, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.EARLIEST_LOCAL, local, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST_TIERED, tiered, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST, 300, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.MAX_TIMESTAMP, 299, leader_epoch=0)
        .expect_list_offsets("t", 0, at(7), 7, leader_epoch=0)  # remote
        .expect_list_offsets("t", 0, at(local + 1), local + 1, leader_epoch=0)  # local
        .expect_list_offsets("t", 0, at(300), -1)  # newer than every record
    )

    # --- epoch 1, on the second leader -----------------------------------------------------
    expect_follower_trimmed(scenario, second, local)
    scenario.leader_change("t", 0).expect_leader("t", 0, second)
    local = local_start(scenario, second)
    (
        scenario.expect_list_offsets("t", 0, OffsetSpec.EARLIEST, 0, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.EARLIEST_LOCAL, local, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST_TIERED, tiered, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST, 300, leader_epoch=1)
        .expect_list_offsets("t", 0, at(7), 7, leader_epoch=0)
    )
    values, stamps = stamped(300, 300)
    scenario.produce("t", 0, values, timestamps=stamps).expect_tiered("t", 0)
    scenario.expect_local_deleted("t", 0)
    scenario.wait_until(
        lambda: local_start(scenario, second) > 400, "epoch 1 data tiered locally gone"
    )
    local = local_start(scenario, second)
    tiered = tiered_end(scenario)
    assert tiered >= local - 1 > 400
    (
        scenario.expect_list_offsets("t", 0, OffsetSpec.EARLIEST, 0, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.EARLIEST_LOCAL, local, leader_epoch=1)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST_TIERED, tiered, leader_epoch=1)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST, 600, leader_epoch=1)
        .expect_list_offsets("t", 0, OffsetSpec.MAX_TIMESTAMP, 599, leader_epoch=1)
        .expect_list_offsets("t", 0, at(7), 7, leader_epoch=0)  # remote, epoch 0
        .expect_list_offsets("t", 0, at(350), 350, leader_epoch=1)  # remote, epoch 1
        .expect_list_offsets("t", 0, at(599), 599, leader_epoch=1)  # local
    )
    # Older stamps roll the newest record of all into remote storage: MAX_TIMESTAMP is there.
    values, _ = stamped(600, 100)
    scenario.produce("t", 0, values, timestamps=[T - 1000 * n for n in range(1, 101)])
    scenario.wait_until(lambda: local_start(scenario, second) > 600, "record 599 only remote")
    scenario.expect_list_offsets("t", 0, OffsetSpec.MAX_TIMESTAMP, 599, leader_epoch=1)

    # --- the old leader returns as a follower; then remote data is deleted -------------------
    scenario.start_broker(first).expect_in_isr("t", 0, first).expect_leader("t", 0, second)
    scenario.delete_records("t", 0, 350).expect_remote_deleted("t", 0, segments=1)
    (
        scenario.expect_list_offsets("t", 0, OffsetSpec.EARLIEST, 350, leader_epoch=1)
        .expect_list_offsets("t", 0, at(7), 350, leader_epoch=1)  # before the log start
        .expect_list_offsets("t", 0, at(360), 360, leader_epoch=1)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST, 700, leader_epoch=1)
    )
    scenario.settle()
    remaining = scenario.remote_segments("t", 0)
    assert remaining and all(s.end_offset >= 350 for s in remaining)
    assert min(s.start_offset for s in remaining) <= 350

    scenario.with_retention("t", bytes=3 * SEGMENT).expect_remote_deleted("t", 0, segments=4)
    scenario.settle()
    earliest = min(s.start_offset for s in scenario.remote_segments("t", 0))
    assert earliest > 350
    (
        scenario.expect_list_offsets("t", 0, OffsetSpec.EARLIEST, earliest, leader_epoch=1)
        .expect_list_offsets("t", 0, T - 200_000, earliest, leader_epoch=1)  # older than all
        .expect_list_offsets("t", 0, OffsetSpec.LATEST_TIERED, tiered_end(scenario))
        .consume("t", 0, from_offset=earliest, expect=None)
    )
