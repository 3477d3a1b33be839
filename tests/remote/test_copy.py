"""The copy task: what gets tiered, when, in which metadata states, and what failures leave."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from tierlog.client import Consumer
from tierlog.model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
)
from tierlog.remote.copy import now_ms, started_metadata
from tierlog.remote.copy_slot import CopySlot, HandBack

from tests.server.conftest import batch
from tests.waiting import wait_until

from .conftest import Tiered

SEGMENT = "4096"


def consume_all(tiered: Tiered, topic: str, expected: int, partition: int = 0) -> list[bytes]:
    consumer = Consumer(tiered.cluster.transport, {"auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition)])
        wait_until(
            lambda: (
                got.extend(r.value or b"" for r in consumer.poll(timeout_ms=100))
                or len(got) >= expected
            ),
            f"{expected} records consumed",
        )
    finally:
        consumer.close()
    return got


def rolled_segments(tiered: Tiered, topic: str) -> int:
    return sum(1 for s in tiered.log(topic).segments() if not s.is_active)


def test_offload_and_consume_from_leader(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(3)
    tiered.client.create("t", 1, 3, segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 40)
    rolled = rolled_segments(tiered, "t")
    assert rolled >= 5
    wait_until(lambda: len(tiered.finished("t")) == rolled, "every rolled segment tiered")
    copies = tiered.history.of("copy")
    assert sorted((e.start_offset, e.end_offset) for e in copies) == sorted(
        (s.start_offset, s.end_offset) for s in tiered.finished("t")
    )
    plog = tiered.log("t")
    highest = max(e.end_offset for e in copies)
    # Set by the copy task once its FINISHED update returns, just after the update is visible.
    wait_until(lambda: plog.highest_offset_in_remote_storage == highest, "highest tiered offset")
    for event in copies:
        data = event.detail
        assert data.producer_snapshot_index.name == f"{event.end_offset + 1:020d}.snapshot"
        assert data.leader_epoch_index.startswith(b"0\n")
    assert tiered.remote_objects()
    assert len(consume_all(tiered, "t", 400)) == 400


def test_a_failed_copy_leaves_no_finished_metadata_and_is_retried(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1, **{"remote.log.manager.task.retry.backoff.ms": "10"})
    tiered.history.fail_copies = 2
    tiered.client.create("t", segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 20)
    rolled = rolled_segments(tiered, "t")
    wait_until(lambda: len(tiered.finished("t")) == rolled, "every rolled segment tiered")
    ranges = [(s.start_offset, s.end_offset) for s in tiered.finished("t")]
    assert len(ranges) == len(set(ranges))
    registry = tiered.broker_for("t").plugin_host.metrics  # type: ignore[union-attr]
    errors = registry.value(
        "BrokerTopicMetrics", "RemoteCopyErrorsPerSec", topic="t", partition="0"
    )
    assert errors["count"] == 2  # type: ignore[index]


def test_custom_metadata_over_the_cap_stops_copying(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(1, **{"remote.log.metadata.custom.metadata.max.bytes": "1"})
    tiered.client.create("t", segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 20)
    wait_until(lambda: tiered.history.of("delete"), "the oversized upload deleted")
    assert tiered.finished("t") == []
    assert len(tiered.history.of("copy")) == 1  # the task stops for this leadership
    assert tiered.log("t").highest_offset_in_remote_storage == -1


def test_segments_without_producer_snapshots_are_tiered_with_empty_ones(
    make_tiered: Callable[..., Tiered], caplog: pytest.LogCaptureFixture
) -> None:
    tiered = make_tiered(1)
    tiered.client.create("old", segment_bytes=SEGMENT)
    tiered.fill("old", 30)
    rolled = rolled_segments(tiered, "old")
    directory = tiered.log("old").directory
    tiered.cluster.stop_broker(0)
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()  # as if the data predated snapshots at every roll
    tiered.cluster.start_broker(0)
    caplog.set_level(logging.WARNING, logger="tierlog.remote.copy")
    tiered.alter("old", remote_storage_enable="true", local_retention_bytes="1")
    wait_until(lambda: len(tiered.finished("old")) == rolled, "every old segment tiered")
    warnings = [r for r in caplog.records if "no producer snapshot" in r.getMessage()]
    assert len(warnings) == rolled
    assert "old-0" in warnings[0].getMessage()
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]
    created = registry.value(
        "BrokerTopicMetrics", "EmptyProducerSnapshotsCreated", topic="old", partition="0"
    )
    assert created["count"] == rolled  # type: ignore[index]
    wait_until(
        lambda: tiered.log("old").local_log_start_offset > 0, "local copies deleted after tiering"
    )
    assert len(consume_all(tiered, "old", 300)) == 300
    assert any(
        s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for s in tiered.finished("old")
    )
    assert tiered.history.of("fetch")


def test_an_aged_active_segment_is_rolled_and_offloaded(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.client.create("t", segment_ms="100", remote_storage_enable="true")

    def append_now() -> None:
        stamp = int(time.time() * 1000)  # rolling by age reads the records' timestamps
        assert tiered.client.produce("t", 0, batch(1, timestamp=stamp)).error_code == 0

    append_now()

    def offloaded() -> bool:
        append_now()  # an append after segment.ms rolls the active segment
        return any(s.start_offset == 0 for s in tiered.finished("t"))

    wait_until(offloaded, "the first segment rolled by age and tiered")
    assert tiered.history.of("copy")[0].start_offset == 0


def _job_upload(tiered: Tiered, segment: Any) -> RemoteLogSegmentMetadata:
    """Uploads ``segment`` as a tiering job in another process does: COPY_SEGMENT_STARTED, then
    the data; the caller publishes COPY_SEGMENT_FINISHED."""
    broker = tiered.broker_for("t")
    host = broker.plugin_host
    replica = broker.partition(TopicPartition("t", 0))
    assert host is not None and replica is not None and replica.topic_id is not None
    tip = TopicIdPartition(replica.topic_id, replica.topic_partition)
    started = started_metadata(tip, segment, broker.broker_id, replica.log.leader_epoch_cache)
    host.metadata.add_remote_log_segment_metadata(started)
    host.storage.copy_log_segment_data(started, segment.to_log_segment_data())
    return started


def _finish(tiered: Tiered, started: RemoteLogSegmentMetadata) -> None:
    host = tiered.broker_for("t").plugin_host
    assert host is not None
    update = started.update_to(
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED, started.broker_id, now_ms()
    )
    host.metadata.update_remote_log_segment_metadata(update)


def test_after_a_job_held_the_slot_copying_waits_until_the_metadata_shows_its_uploads(
    make_tiered: Callable[..., Tiered], caplog: pytest.LogCaptureFixture
) -> None:
    """The hand-back note of a job that gave the slot back while its last FINISHED was still
    on its way: the copy task copies nothing until its metadata shows that segment, then goes
    on after it, so no range is tiered twice."""
    caplog.set_level(logging.INFO, logger="tierlog.remote.manager")
    tiered = make_tiered(1)
    tiered.client.create("t", segment_bytes=SEGMENT, remote_storage_enable="true")
    tiered.fill("t", 12)
    plog = tiered.log("t")
    rolled = rolled_segments(tiered, "t")
    wait_until(lambda: len(tiered.finished("t")) == rolled, "the first segments tiered")
    tiered_before = plog.highest_offset_in_remote_storage

    # the job's hold (once the copy task's run lets it go): the copy task skips meanwhile
    slot = CopySlot.acquire(plog.directory, 30)
    assert slot is not None
    with slot:
        tiered.fill("t", 24)
        first, second, *rest = plog.segments_eligible_for_upload()
        assert rest, "the broker has segments of its own left to tier"
        assert first.base_offset == tiered_before + 1
        _finish(tiered, _job_upload(tiered, first))
        in_flight = _job_upload(tiered, second)
        HandBack(plog.leader_epoch_cache.latest_epoch, first.end_offset, second.end_offset).write(
            plog.directory
        )
    uploads = len(tiered.history.of("copy"))
    waiting = f"metadata to show offset {second.end_offset} tiered by a job (it shows "
    wait_until(lambda: waiting in caplog.text, "the copy task to wait for the job's FINISHED")
    wait_until(lambda: caplog.text.count(waiting) >= 3, "the copy task to try again")
    assert len(tiered.history.of("copy")) == uploads, "nothing copied while the metadata lags"
    assert plog.highest_offset_in_remote_storage == tiered_before

    _finish(tiered, in_flight)  # the job's last event reaches the broker's metadata
    end = plog.segments()[-1].base_offset
    wait_until(
        lambda: (f := tiered.finished("t")) and f[-1].end_offset == end - 1,
        "the broker to tier its own segments after the job's",
    )
    finished = tiered.finished("t")
    covered = [o for s in finished for o in range(s.start_offset, s.end_offset + 1)]
    assert covered == list(range(end)), "no offset tiered twice, none left out"
    ids = {s.start_offset: s.remote_log_segment_id for s in finished}
    assert ids[first.base_offset] != ids[second.base_offset]
    assert in_flight.remote_log_segment_id == ids[second.base_offset]
    assert len(tiered.history.of("copy")) == uploads + len(rest)
    assert HandBack.read(plog.directory) is None, "the note is cleared once taken back"
