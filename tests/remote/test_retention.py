"""Retention across tiers, topic deletion, and switching tiering off (KIP-950)."""

from __future__ import annotations

import time
from collections.abc import Callable

from tierlog.client import Admin
from tierlog.model import TopicPartition
from tierlog.server import protocol as p

from tests.server.conftest import offsets
from tests.waiting import wait_until

from .conftest import Tiered

SEGMENT = "4096"


def test_remote_segments_are_deleted_by_retention_size(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.client.create(
        "t",
        segment_bytes=SEGMENT,
        remote_storage_enable="true",
        local_retention_bytes="1",
        retention_bytes=str(4 * 4096),
    )
    tiered.fill("t", 40)
    plog = tiered.log("t")
    wait_until(lambda: tiered.history.of("delete"), "a remote segment deleted by size")
    wait_until(lambda: plog.log_start_offset > 0, "the log start offset moved")

    def total_size() -> int:
        remote = sum(s.segment_size_in_bytes for s in tiered.finished("t"))
        highest = plog.highest_offset_in_remote_storage
        return remote + sum(s.size_in_bytes for s in plog.segments() if s.base_offset > highest)

    # Whole segments only: the excess left is always smaller than one segment.
    wait_until(lambda: total_size() <= 4 * 4096 + 4096, "both tiers within retention.bytes")
    deleted = tiered.history.of("delete")
    assert max(e.end_offset for e in deleted) < plog.log_start_offset
    earliest = tiered.client.list_offset("t", p.OffsetSpec.EARLIEST)
    assert earliest.offset == plog.log_start_offset
    first = tiered.client.fetch("t", 0, plog.log_start_offset)
    assert offsets(first.records)[0] == plog.log_start_offset


def test_remote_segments_are_deleted_by_retention_time(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.client.create("t", segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 30)
    plog = tiered.log("t")
    rolled = [s.base_offset for s in plog.segments() if not s.is_active]
    wait_until(lambda: len(tiered.finished("t")) == len(rolled), "everything tiered")
    tiered.alter("t", retention_ms="1000")  # every record is older than that by now, or soon
    wait_until(lambda: not tiered.finished("t"), "every remote segment expired", timeout=60)
    wait_until(lambda: plog.log_start_offset >= rolled[-1], "the log start offset moved")
    # A segment leaves the finished state (DELETE_SEGMENT_STARTED) before its objects go.
    wait_until(
        lambda: len(tiered.history.of("delete")) >= len(rolled), "every expired segment deleted"
    )
    deleted = sorted(e.start_offset for e in tiered.history.of("delete"))
    assert len(set(deleted)) == len(deleted), "each expired segment deleted once"
    # The active segment is rolled, tiered and expired in turn once retention holds for it.
    assert deleted[: len(rolled)] == rolled


def test_a_log_start_offset_breach_deletes_remote_segments(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.client.create(
        "t", segment_bytes=SEGMENT, remote_storage_enable="true", local_retention_bytes="1"
    )
    tiered.fill("t", 30)
    wait_until(lambda: tiered.log("t").local_log_start_offset > 100, "local copies deleted")
    with Admin(tiered.cluster.transport) as admin:
        admin.delete_records({TopicPartition("t", 0): 100})
    wait_until(
        lambda: tiered.finished("t") and min(s.end_offset for s in tiered.finished("t")) >= 100,
        "remote segments below the log start deleted",
    )
    assert all(e.end_offset < 100 for e in tiered.history.of("delete"))
    assert offsets(tiered.client.fetch("t", 0, 100).records)[0] == 100


def test_deleting_a_topic_empties_remote_storage(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(3)
    tiered.client.create("t", 2, 2, segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 20, partition=0)
    tiered.fill("t", 20, partition=1)
    wait_until(lambda: tiered.finished("t", 0) and tiered.finished("t", 1), "both tiered")
    assert tiered.remote_objects()
    with Admin(tiered.cluster.transport) as admin:
        admin.delete_topics(["t"])
    wait_until(lambda: not tiered.remote_objects(), "remote storage emptied")
    copies = {e.segment_id for e in tiered.history.of("copy")}
    deletes = {e.segment_id for e in tiered.history.of("delete")}
    assert copies <= deletes


def test_copy_disable_keeps_remote_data_readable(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(1)
    tiered.client.create("t", segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 20)
    plog = tiered.log("t")
    rolled = sum(1 for s in plog.segments() if not s.is_active)
    wait_until(lambda: len(tiered.finished("t")) == rolled, "everything tiered")
    tiered.alter("t", remote_log_copy_disable="true")
    copies = len(tiered.history.of("copy"))
    tiered.fill("t", 20)
    tiered.cluster.broker(0).remote_log_manager.wake()  # type: ignore[union-attr]
    time.sleep(0.5)  # ten task intervals in which nothing may be copied
    assert len(tiered.history.of("copy")) == copies
    assert offsets(tiered.client.fetch("t", 0, 0).records)[0] == 0


def test_disabling_with_delete_on_disable_empties_remote_storage(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.client.create(
        "t", segment_bytes=SEGMENT, remote_storage_enable="true", local_retention_bytes="1"
    )
    tiered.fill("t", 20)
    plog = tiered.log("t")
    wait_until(lambda: plog.local_log_start_offset > 0, "local copies deleted")
    tiered.alter("t", remote_storage_enable="false", remote_log_delete_on_disable="true")
    wait_until(lambda: not tiered.remote_objects(), "remote storage emptied")
    wait_until(lambda: plog.log_start_offset == plog.local_log_start_offset, "log start moved up")
    earliest = tiered.client.list_offset("t", p.OffsetSpec.EARLIEST)
    assert earliest.offset == plog.local_log_start_offset


def test_a_quiet_partition_rolls_its_active_segment_to_tier_it(
    make_tiered: Callable[..., Tiered],
) -> None:
    """KAFKA-15047: local retention breached by data in the active segment rolls it, so the
    newest records of a partition that receives no more writes are tiered and removed locally."""
    tiered = make_tiered(1)
    tiered.client.create(
        "t",
        segment_bytes=str(1024 * 1024),
        remote_storage_enable="true",
        local_retention_bytes="0",
    )
    tiered.fill("t", 1, records=50)  # one append: every record lands in the active segment
    plog = tiered.log("t")
    end = plog.log_end_offset
    assert end == 50
    wait_until(
        lambda: any(s.end_offset == end - 1 for s in tiered.finished("t")),
        "the newest records tiered",
    )
    wait_until(lambda: plog.local_log_start_offset == end, "the local copy deleted")
    assert [s.size_in_bytes for s in plog.segments()] == [0]
    fetched = tiered.client.fetch("t", 0, end - 1)
    assert offsets(fetched.records)[-1] == end - 1, "the newest record read from remote storage"
