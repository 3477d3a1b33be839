"""The kit catches real plugin bugs and says which contract they break.

Each plugin below is a working plugin (the kit's directory storage manager, the built-in memory
metadata manager) with one bug planted; its contract runs against it in a separate pytest
session, which must fail, naming the hook and the rule in its output.
"""

from __future__ import annotations

from typing import BinaryIO

import pytest
from tierlog import hookimpl
from tierlog.errors import RemoteResourceNotFoundError
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.model import RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from tierlog.testing import DirectoryStorageManager

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


def run_contract(pytester: pytest.Pytester, template: str, plugin: type) -> pytest.RunResult:
    pytester.makepyfile(test_broken_plugin=template.format(plugin=plugin.__name__))
    return pytester.runpytest("-p", "no:cacheprovider", "-q")


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
