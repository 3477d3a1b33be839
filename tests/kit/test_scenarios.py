"""The runtime scenarios against the fsspec plugin on file:// and the kit's directory storage."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from tierlog import hookimpl
from tierlog.errors import RemoteStorageError
from tierlog.model import RemoteLogSegmentMetadata
from tierlog.server.protocol import OffsetSpec
from tierlog.testing import DirectoryStorageManager, Scenario, ScenarioError
from tierlog.testing.recording import COPY

SEGMENT = 4096


def values(count: int, tag: str = "v") -> list[bytes]:
    return [f"{tag}-{n:05d}-".encode() + b"x" * 100 for n in range(count)]


def fsspec_storage(tmp_path: Path) -> tuple[dict[str, object], dict[str, object]]:
    pytest.importorskip("tierlog_fsspec")
    settings = {
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": (tmp_path / "remote").as_uri(),
    }
    return settings, {}


def directory_storage(tmp_path: Path) -> tuple[dict[str, object], dict[str, object]]:
    settings = {
        "remote.log.storage.manager.name": "directory",
        "rsm.config.root": str(tmp_path / "remote"),
    }
    return settings, {"directory": DirectoryStorageManager}  # one instance per broker


@pytest.fixture(params=[fsspec_storage, directory_storage], ids=["fsspec-file", "directory"])
def scenario(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Scenario]]:
    storage: Callable[[Path], tuple[Mapping[str, object], Mapping[str, object]]] = request.param
    settings, plugins = storage(tmp_path)
    started: list[Scenario] = []

    def make(brokers: int = 1, **extra: object) -> Scenario:
        running = Scenario(
            tmp_path, {**settings, **extra}, brokers=brokers, extra_plugins=plugins, timeout_s=60
        ).start()
        started.append(running)
        return running

    yield make
    for running in started:
        running.close()


def test_offload_then_consume_from_remote(scenario: Callable[..., Scenario]) -> None:
    records = values(300)
    (
        scenario()
        .create_topic("t", segment_bytes=SEGMENT, local_retention_bytes=1)
        .produce("t", 0, records)
        .expect_tiered("t", 0, segments=3)
        .expect_tiered("t", 0)
        .expect_local_deleted("t", 0)
        .consume("t", 0, from_offset=0, expect=records)
        .expect_fetched_from_remote("t", 0)
        .consume("t", 0, from_offset=299, expect=records[299:])
        .expect_not_fetched_from_remote("t", 0)
    )


def test_retention_by_size_and_time_deletes_remote_segments(
    scenario: Callable[..., Scenario],
) -> None:
    running = (
        scenario()
        .create_topic("t", segment_bytes=SEGMENT, local_retention_bytes=1)
        .produce("t", 0, values(300))
        .expect_tiered("t", 0)
        .with_retention("t", bytes=4 * SEGMENT)
        .expect_remote_deleted("t", 0, segments=1)
        .settle()
    )
    first_left = running.remote_segments("t", 0)[0].start_offset
    running.expect_log_start_offset("t", 0, at_least=first_left)
    running.consume("t", 0, from_offset=first_left).expect_fetched_from_remote("t", 0)
    running.with_retention("t", ms=1).expect_remote_deleted("t", 0)


def test_deleting_a_topic_empties_remote_storage(scenario: Callable[..., Scenario]) -> None:
    (
        scenario()
        .create_topic("t", 2, segment_bytes=SEGMENT)
        .produce("t", 0, values(200))
        .produce("t", 1, values(200))
        .expect_tiered("t", 0, segments=2)
        .expect_tiered("t", 1, segments=2)
        .delete_topic("t")
        .expect_remote_empty("t")
    )


def test_switching_tiering_on_and_off(scenario: Callable[..., Scenario]) -> None:
    records = values(200)
    (
        scenario()
        .create_topic("t", segment_bytes=SEGMENT, tiered=False)
        .produce("t", 0, records[:100])
        .expect_no_new_copies("t", 0, for_s=0.3)
        .enable_tiering("t")
        .expect_tiered("t", 0)
        .disable_copy("t")
        .produce("t", 0, records[100:])
        .expect_no_new_copies("t", 0)
        .consume("t", 0, from_offset=0, expect=records)
        .enable_tiering("t")
        .expect_tiered("t", 0)
        .disable_tiering("t")
        .expect_remote_deleted("t", 0)
        .consume("t", 0, from_offset=0, expect=records)
        .expect_not_fetched_from_remote("t", 0)
    )


def test_tiered_data_survives_a_broker_restart(scenario: Callable[..., Scenario]) -> None:
    records = values(300)
    running = (
        scenario()
        .create_topic("t", segment_bytes=SEGMENT, local_retention_bytes=1)
        .produce("t", 0, records[:200])
        .expect_tiered("t", 0)
        .expect_local_deleted("t", 0)
    )
    copies = len(running.events("t", 0, "copy"))
    (
        running.restart_broker(0)
        .consume("t", 0, from_offset=0, expect=records[:200])
        .expect_fetched_from_remote("t", 0)
        .produce("t", 0, records[200:])
        .expect_tiered("t", 0)
        .consume("t", 0, from_offset=0, expect=records)
    )
    uploaded = [(e.start_offset, e.end_offset) for e in running.events("t", 0, "copy")]
    assert len(uploaded) > copies
    assert len(set(uploaded)) == len(uploaded), "a segment was uploaded twice after the restart"


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_new_leader_serves_and_tiers_on_and_the_old_one_catches_up(
    scenario: Callable[..., Scenario], clean: bool
) -> None:
    first, second = values(300, "a"), values(200, "b")
    running = scenario(brokers=3).create_topic(
        "t", replication_factor=3, segment_bytes=SEGMENT, local_retention_bytes=1
    )
    for broker_id in range(3):
        running.expect_in_isr("t", 0, broker_id)
    running.produce("t", 0, first).expect_tiered("t", 0).expect_local_deleted("t", 0)
    tiered = running.log("t", 0).highest_offset_in_remote_storage
    old = running.leader("t", 0)
    copies = len([e for e in running.events("t", 0, "copy") if e.succeeded])

    running.leader_change("t", 0, clean=clean)
    new = running.leader("t", 0)
    assert new not in (old, -1)
    (
        running.expect_leader("t", 0, new)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST_TIERED, tiered, leader_epoch=0)
        .expect_list_offsets("t", 0, OffsetSpec.LATEST, 300, leader_epoch=1)
        .consume("t", 0, from_offset=0, expect=first)
        .expect_fetched_from_remote("t", 0)
        .produce("t", 0, second)
        .expect_tiered("t", 0)
        .start_broker(old)
        .expect_caught_up("t", 0, old)
        .expect_leader("t", 0, new)
        .consume("t", 0, from_offset=0, expect=first + second)
    )
    uploads = [
        (e.start_offset, e.end_offset) for e in running.events("t", 0, "copy") if e.succeeded
    ]
    assert len(uploads) > copies, "the new leader tiered nothing"
    assert all(start > tiered for start, _ in uploads[copies:])
    assert len(set(uploads)) == len(uploads), "a range was uploaded twice after the leader change"
    assert running.log("t", 0, old).log_end_offset == 500


class RefusingStorage(DirectoryStorageManager):
    """A bucket that refuses every upload, and says so in its own log."""

    @hookimpl
    def tierlog_copy_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, log_segment_data: object
    ) -> None:
        logging.getLogger("blobstore").error("PUT refused: quota exceeded for bucket kit")
        raise RemoteStorageError("the bucket refuses writes")


def test_a_timed_out_step_names_the_failing_hook_and_the_plugins_logged_errors(
    tmp_path: Path,
) -> None:
    settings, _ = directory_storage(tmp_path)
    with Scenario(
        tmp_path, settings, extra_plugins={"directory": RefusingStorage}, timeout_s=3
    ) as running:
        running.create_topic("t", segment_bytes=SEGMENT, local_retention_bytes=1)
        running.produce("t", 0, values(100))
        with pytest.raises(ScenarioError) as failed:
            running.expect_tiered("t", 0)
    message = str(failed.value)
    assert "waiting until every rolled segment of t-0 tiered" in message
    assert (
        "tierlog_copy_log_segment_data failed" in message
        and "on broker 0, last: RemoteStorageError: the bucket refuses writes" in message
    ), message
    assert "ERROR blobstore: PUT refused: quota exceeded for bucket kit" in message, message


def test_the_recorder_keeps_each_brokers_calls_apart(tmp_path: Path) -> None:
    settings, plugins = directory_storage(tmp_path)
    with Scenario(tmp_path, settings, brokers=2, extra_plugins=plugins, timeout_s=60) as running:
        running.create_topic(
            "t", replication_factor=2, segment_bytes=SEGMENT, local_retention_bytes=1
        )
        running.produce("t", 0, values(200)).expect_tiered("t", 0)
        leader = running.leader("t", 0)
        follower = 1 - leader
        copies = running.recorder.of(COPY)
        assert copies and {e.broker_id for e in copies} == {leader}
        assert running.recorder.of(COPY, broker_id=follower) == []
        assert running.recorder.for_broker(leader) == [
            e for e in running.recorder.events if e.broker_id == leader
        ]


class UnreadableStorage(DirectoryStorageManager):
    """Stores segments but refuses to read them back."""

    @hookimpl
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> None:
        raise RemoteStorageError("range reads are forbidden by the bucket policy")


def test_a_failed_consume_names_the_failing_hook_not_a_bare_server_error(
    tmp_path: Path,
) -> None:
    settings, _ = directory_storage(tmp_path)
    with Scenario(
        tmp_path, settings, extra_plugins={"directory": UnreadableStorage}, timeout_s=5
    ) as running:
        running.create_topic("t", segment_bytes=SEGMENT, local_retention_bytes=1)
        running.produce("t", 0, values(100)).expect_tiered("t", 0).expect_local_deleted("t", 0)
        with pytest.raises(ScenarioError) as failed:
            running.consume("t", 0, from_offset=0)
    message = str(failed.value)
    assert "consuming t-0 from 0" in message
    assert (
        "tierlog_fetch_log_segment failed" in message
        and "RemoteStorageError: range reads are forbidden by the bucket policy" in message
    ), message
