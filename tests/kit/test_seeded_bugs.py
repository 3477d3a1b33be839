"""The kit catches real plugin bugs and says which contract they break.

Each plugin below is a working plugin (the kit's directory storage manager, the built-in memory
metadata manager) with one bug planted; its contract runs against it in a separate pytest
session, which must fail, naming the hook and the rule in its output.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import pytest
from tierlog import hookimpl
from tierlog.errors import RemoteResourceNotFoundError, RemoteStorageError
from tierlog.locations import ObjectLocation, SegmentLocation, StoredChunk
from tierlog.log.snapshot import decode_snapshot
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.model import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.testing import DirectoryStorageManager
from tierlog.testing.directory_storage import LOG_FILE

pytest_plugins = ["pytester"]


class OffByOneRangeStorage(DirectoryStorageManager):
    """Reads ``end_position`` as exclusive, so every bounded range misses its last byte."""

    @hookimpl
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> BinaryIO:
        end = None if end_position is None else end_position - 1
        return super().tierlog_fetch_log_segment(remote_log_segment_metadata, start_position, end)


class ExclusiveEndLocateStorage(DirectoryStorageManager):
    """Locates ``[start, end_position)``: the location of every bounded range misses its last
    byte (a fetch of the same range does not)."""

    @hookimpl
    def tierlog_locate_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> SegmentLocation:
        location = super().tierlog_locate_log_segment(
            remote_log_segment_metadata, start_position, end_position
        )
        if end_position is None:
            return location
        return attrs.evolve(location, end=max(start_position, min(end_position, location.end)))


class ShiftedChunkLocateStorage(DirectoryStorageManager):
    """Describes the segment file as one stored chunk, but one byte off from where the range is."""

    @hookimpl
    def tierlog_locate_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> SegmentLocation:
        location = super().tierlog_locate_log_segment(
            remote_log_segment_metadata, start_position, end_position
        )
        if location.whole is None or location.size == 0:
            return location
        shift = 1 if location.start == 0 else -1
        chunk = StoredChunk(
            location=ObjectLocation(path=location.whole.path),
            stored_start=location.start + shift,
            stored_end=location.end + shift,
            plain_start=location.start,
            plain_end=location.end,
        )
        return SegmentLocation.of_chunks([chunk], location.start, location.end)


class NonIdempotentDeleteStorage(DirectoryStorageManager):
    """Refuses to delete what is not there."""

    @hookimpl
    def tierlog_delete_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        if not self.segment_dir(remote_log_segment_metadata).exists():
            raise RemoteResourceNotFoundError(
                f"segment {remote_log_segment_metadata.remote_log_segment_id} does not exist"
            )
        super().tierlog_delete_log_segment_data(remote_log_segment_metadata)


class PartialCopyStorage(DirectoryStorageManager):
    """Writes each file straight into place, so a copy failing midway leaves part of it."""

    @hookimpl
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> CustomMetadata | None:
        final = self.segment_dir(remote_log_segment_metadata)
        final.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(log_segment_data.log_segment, final / LOG_FILE)
            for index_type in IndexType:
                source = log_segment_data.index_path(index_type)
                if source is not None:
                    shutil.copyfile(source, final / index_type.name)
        except OSError as err:
            raise RemoteStorageError(f"cannot copy to {final}: {err}") from err
        (final / IndexType.LEADER_EPOCH.name).write_bytes(log_segment_data.leader_epoch_index)
        return None


class SwallowingCopyStorage(DirectoryStorageManager):
    """Logs nothing and returns normally when its copy fails."""

    @hookimpl
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> CustomMetadata | None:
        try:
            return super().tierlog_copy_log_segment_data(
                remote_log_segment_metadata, log_segment_data
            )
        except RemoteStorageError:
            return None


class EmptySnapshotRefusingStorage(DirectoryStorageManager):
    """Takes a producer snapshot without producers for a broken file."""

    @hookimpl
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> CustomMetadata | None:
        snapshot = log_segment_data.producer_snapshot_index
        if not decode_snapshot(snapshot.read_bytes()):
            raise RemoteStorageError(f"producer snapshot {snapshot} holds no producer")
        return super().tierlog_copy_log_segment_data(remote_log_segment_metadata, log_segment_data)


class LenientConfigureStorage(DirectoryStorageManager):
    """Makes up a directory when ``root`` is missing instead of refusing the configuration."""

    @hookimpl
    def tierlog_configure(self, config: Mapping[str, Any]) -> None:
        root = config.get("root") or tempfile.mkdtemp(prefix="kit-lenient-")
        super().tierlog_configure({**config, "root": root})


#: What the leaking plugins below leave behind, released by the test that planted them.
LEAKED: list[Any] = []


class ThreadLeakingStorage(DirectoryStorageManager):
    """Starts a housekeeping thread in configure that close never stops."""

    @hookimpl
    def tierlog_configure(self, config: Mapping[str, Any]) -> None:
        super().tierlog_configure(config)
        stop = threading.Event()
        LEAKED.append(stop)
        threading.Thread(target=stop.wait, name="kit-housekeeping", daemon=True).start()


class FileLeakingStorage(DirectoryStorageManager):
    """Keeps a lock file open past close."""

    @hookimpl
    def tierlog_configure(self, config: Mapping[str, Any]) -> None:
        super().tierlog_configure(config)
        LEAKED.append(open(Path(self.root()) / ".lock", "wb"))  # noqa: SIM115


class ShrinkingHighestOffsetMetadata(InMemoryRemoteLogMetadataManager):
    """Answers the highest offset from the finished segments still there, so deletes lower it."""

    @hookimpl
    def tierlog_highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int | None:
        ends = [
            segment.end_offset_for_epoch(leader_epoch)
            for segment in self.tierlog_list_remote_log_segments(topic_id_partition, leader_epoch)
            if segment.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]
        return max((end for end in ends if end is not None), default=None)


STORAGE_RUN = """
import pytest
from tierlog.testing import StorageManagerContract
from tests.kit.test_seeded_bugs import {plugin}


class TestBrokenPlugin(StorageManagerContract):
    required_settings = ("rsm.config.root",)

    @pytest.fixture
    def storage_settings(self, tmp_path):
        return {{
            "remote.log.storage.manager.name": "broken",
            "rsm.config.root": str(tmp_path / "remote"),
        }}

    @pytest.fixture
    def storage_extra_plugins(self):
        return {{"broken": {plugin}}}
"""

METADATA_RUN = """
import pytest
from tierlog.testing import MetadataManagerContract
from tests.kit.test_seeded_bugs import {plugin}


class TestBrokenPlugin(MetadataManagerContract):
    @pytest.fixture
    def metadata_settings(self):
        return {{"remote.log.metadata.manager.name": "broken"}}

    @pytest.fixture
    def metadata_extra_plugins(self):
        return {{"broken": {plugin}()}}
"""


def run_contract(
    pytester: pytest.Pytester, template: str, plugin: type, *args: str
) -> pytest.RunResult:
    pytester.makepyfile(test_broken_plugin=template.format(plugin=plugin.__name__))
    return pytester.runpytest("-p", "no:cacheprovider", "-q", *args)


def failed_tests(result: pytest.RunResult) -> set[str]:
    """Names of the contract tests the run reports as failed."""
    prefix = "FAILED test_broken_plugin.py::TestBrokenPlugin::"
    return {
        line.removeprefix(prefix).split(" ")[0]
        for line in result.outlines
        if line.startswith(prefix)
    }


def violations(result: pytest.RunResult) -> list[str]:
    """The ContractViolation lines of the run's failure reports."""
    return [line for line in result.outlines if line.startswith("E ") and "contract " in line]


def test_an_off_by_one_range_read_fails_the_fetch_contract(pytester: pytest.Pytester) -> None:
    result = run_contract(pytester, STORAGE_RUN, OffByOneRangeStorage)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) > 0 and outcomes.get("passed", 0) > 0, outcomes
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_fetch_log_segment: a range [[]start, end[]] returns exactly bytes "
            "start..end inclusive*",
        ]
    )
    failed = failed_tests(result)
    assert "test_fetch_returns_exactly_the_inclusive_range[first-byte]" in failed
    broken = violations(result)
    assert len(broken) == len(failed), broken
    assert all("contract tierlog_fetch_log_segment" in line for line in broken), broken


def test_a_locate_off_by_one_at_the_end_fails_the_locate_contract(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(pytester, STORAGE_RUN, ExclusiveEndLocateStorage, "-k", "locate")
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_locate_log_segment: a location of [[]start, end[]] covers segment "
            "bytes [[]start, end + 1), its end exclusive*",
        ]
    )
    failed = failed_tests(result)
    assert "test_locate_yields_the_bytes_fetch_returns[first-byte]" in failed
    assert "test_locate_yields_the_bytes_fetch_returns[whole-segment]" not in failed
    broken = violations(result)
    assert len(broken) == len(failed), broken
    assert all("contract tierlog_locate_log_segment" in line for line in broken), broken


def test_a_location_of_the_wrong_bytes_fails_the_locate_contract(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(pytester, STORAGE_RUN, ShiftedChunkLocateStorage, "-k", "locate")
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_locate_log_segment: a location gives exactly the bytes "
            "fetch_log_segment returns for the same range (exactly-one-batch: *",
        ]
    )
    assert "test_locate_yields_the_bytes_fetch_returns[exactly-one-batch]" in failed_tests(result)


def test_a_non_idempotent_delete_fails_the_delete_contract(pytester: pytest.Pytester) -> None:
    result = run_contract(pytester, STORAGE_RUN, NonIdempotentDeleteStorage)
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_delete_log_segment_data: delete is idempotent: deleting a "
            "segment again succeeds; got RemoteResourceNotFoundError*",
        ]
    )
    assert failed_tests(result) == {"test_delete_is_idempotent"}


def test_a_highest_offset_that_drops_on_delete_fails_the_metadata_contract(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(pytester, METADATA_RUN, ShrinkingHighestOffsetMetadata)
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_highest_offset_for_epoch: it only grows: deleting segments does "
            "not lower it*",
        ]
    )
    failed = failed_tests(result)
    assert "test_highest_offset_per_epoch_only_grows" in failed
    broken = violations(result)
    assert len(broken) == len(failed), broken
    assert all("contract tierlog_highest_offset_for_epoch" in line for line in broken), broken


# --- copy, configure and close ------------------------------------------------------------------

QUICK = ("-k", "not leader_change")  # the bugs below show without the cluster scenario


def test_a_copy_leaving_a_partial_segment_fails_the_all_or_nothing_rule(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(pytester, STORAGE_RUN, PartialCopyStorage, *QUICK)
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_copy_log_segment_data: copies are all or nothing: after a copy "
            "failed midway (the producer-snapshot file was gone) fetching the segment raises "
            "RemoteResourceNotFoundError, never a partial segment; got no error*",
        ]
    )
    failed = failed_tests(result)
    assert {
        f"test_a_failed_copy_raises_and_leaves_nothing_visible[{missing}]"
        for missing in ("offset-index", "time-index", "transaction-index", "producer-snapshot")
    } <= failed, failed


def test_a_copy_swallowing_its_error_fails_the_copy_contract(pytester: pytest.Pytester) -> None:
    result = run_contract(pytester, STORAGE_RUN, SwallowingCopyStorage, *QUICK)
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_copy_log_segment_data: a copy that fails (the offset-index file "
            "to upload is gone) raises RemoteStorageError; returning normally would make the "
            "runtime record an upload that does not exist; got no error*",
        ]
    )
    assert failed_tests(result) == {
        f"test_a_failed_copy_raises_and_leaves_nothing_visible[{missing}]"
        for missing in ("offset-index", "time-index", "transaction-index", "producer-snapshot")
    }


def test_a_copy_refusing_an_empty_producer_snapshot_fails_the_copy_contract(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(pytester, STORAGE_RUN, EmptySnapshotRefusingStorage, *QUICK)
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_copy_log_segment_data: copy accepts an empty, segment-aligned "
            "producer snapshot (KIP-952*; got RemoteStorageError: producer snapshot*",
        ]
    )
    assert failed_tests(result) == {
        "test_every_kind_of_segment_is_copied_whole[empty-producer-snapshot]"
    }


def test_a_configure_accepting_a_missing_key_fails_the_configure_contract(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(pytester, STORAGE_RUN, LenientConfigureStorage, *QUICK)
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_configure: configure refuses a missing required setting: without "
            "'rsm.config.root' it raises InvalidConfigError naming the key; got the plugin "
            "started without it*",
        ]
    )
    assert failed_tests(result) == {"test_configure_refuses_a_missing_required_setting"}


@pytest.mark.parametrize(
    ("plugin", "leak"),
    [
        (ThreadLeakingStorage, "close stops every thread the plugin started; got ['kit-house*"),
        (FileLeakingStorage, "close releases every file descriptor the plugin opened; got [[]*"),
    ],
    ids=["threads", "file-descriptors"],
)
def test_a_close_that_leaks_fails_the_close_contract(
    pytester: pytest.Pytester, plugin: type, leak: str
) -> None:
    try:
        result = run_contract(pytester, STORAGE_RUN, plugin, "-k", "close_releases")
    finally:
        while LEAKED:
            leaked = LEAKED.pop()
            leaked.set() if isinstance(leaked, threading.Event) else leaked.close()
    result.stdout.fnmatch_lines([f"*contract tierlog_close: {leak}"])
    assert failed_tests(result) == {"test_close_releases_threads_and_file_descriptors"}


def test_the_reference_model_catches_a_highest_offset_that_drops(
    pytester: pytest.Pytester,
) -> None:
    result = run_contract(
        pytester, METADATA_RUN, ShrinkingHighestOffsetMetadata, "-k", "reference_model"
    )
    result.stdout.fnmatch_lines(
        [
            "*contract tierlog_highest_offset_for_epoch: after add [[]0, 19[]] epochs {0: 0}; "
            "*DELETE_SEGMENT_STARTED*: the answer is the reference model's (epoch 0)*",
        ]
    )
    assert failed_tests(result) == {"test_random_operations_match_the_reference_model"}
