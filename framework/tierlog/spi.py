"""Typed facades over the role hooks, so the runtime calls plugins like ordinary methods.

Each facade calls only the chosen provider (plus any wrapper plugins around it), checks the
contract on both sides of the call, and turns an unexpected exception from a plugin into a
``RemoteStorageError`` that names the plugin: a failure is then clearly the plugin's or ours.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO, TypeVar

import pluggy

from .errors import PluginError, RemoteStorageError, TierlogError
from .locations import DEFAULT_EXPIRES_IN_S, SegmentLocation
from .model import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)

T = TypeVar("T")


class _Facade:
    role = ""

    def __init__(self, provider: str, callers: dict[str, pluggy.HookCaller]) -> None:
        self.provider = provider
        self._callers = callers

    def _has(self, hook: str) -> bool:
        return hook in self._callers

    def _call(self, hook: str, **kwargs: Any) -> Any:
        try:
            return self._callers[hook](**kwargs)
        except TierlogError:
            raise
        except Exception as err:
            raise RemoteStorageError(
                f"{self.role} plugin {self.provider!r} raised {type(err).__name__} in "
                f"{hook.removeprefix('tierlog_')}: {err}"
            ) from err

    def _expect(self, hook: str, value: Any, kind: type[T] | tuple[type, ...], what: str) -> T:
        if not isinstance(value, kind):
            raise PluginError(
                f"{self.role} plugin {self.provider!r} returned {type(value).__name__} from "
                f"{hook.removeprefix('tierlog_')}; expected {what}"
            )
        return value  # type: ignore[return-value]


class RemoteStorageManager(_Facade):
    """Copy, fetch, locate and delete segment data through the chosen storage plugin."""

    role = "RemoteStorageManager"

    def copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> CustomMetadata | None:
        if remote_log_segment_metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(
                "copy_log_segment_data takes metadata in state COPY_SEGMENT_STARTED, got "
                f"{remote_log_segment_metadata.state.name}"
            )
        hook = "tierlog_copy_log_segment_data"
        result = self._call(
            hook,
            remote_log_segment_metadata=remote_log_segment_metadata,
            log_segment_data=log_segment_data,
        )
        if result is None:
            return None
        return self._expect(hook, result, CustomMetadata, "CustomMetadata or None")

    def fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        _check_range(start_position, end_position)
        hook = "tierlog_fetch_log_segment"
        stream = self._call(
            hook,
            remote_log_segment_metadata=remote_log_segment_metadata,
            start_position=start_position,
            end_position=end_position,
        )
        return _readable(self, hook, stream)

    def can_locate(self) -> bool:
        """Whether the plugin implements ``tierlog_locate_log_segment`` (it may still answer
        None for a segment it cannot locate)."""
        return self._has("tierlog_locate_log_segment")

    def locate_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
        expires_in_s: int = DEFAULT_EXPIRES_IN_S,
    ) -> SegmentLocation | None:
        """Where the bytes of ``fetch_log_segment`` with the same range are stored, or None
        when the plugin cannot say. The location's ``end`` is exclusive."""
        _check_range(start_position, end_position)
        if isinstance(expires_in_s, bool) or not isinstance(expires_in_s, int) or expires_in_s <= 0:
            raise ValueError(
                f"expires_in_s must be a positive number of seconds, got {expires_in_s!r}"
            )
        hook = "tierlog_locate_log_segment"
        if not self._has(hook):
            return None
        result = self._call(
            hook,
            remote_log_segment_metadata=remote_log_segment_metadata,
            start_position=start_position,
            end_position=end_position,
            expires_in_s=expires_in_s,
        )
        if result is None:
            return None
        location = self._expect(hook, result, SegmentLocation, "SegmentLocation or None")
        stop = None if end_position is None else end_position + 1
        if location.start != start_position or (stop is not None and location.end > stop):
            shown = "None" if end_position is None else end_position
            raise PluginError(
                f"{self.role} plugin {self.provider!r} located bytes [{location.start}, "
                f"{location.end}) for the range [{start_position}, {shown}]; a location starts "
                "at start_position and ends (exclusive) at most one past end_position"
            )
        return location

    def fetch_index(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, index_type: IndexType
    ) -> BinaryIO:
        hook = "tierlog_fetch_index"
        stream = self._call(
            hook, remote_log_segment_metadata=remote_log_segment_metadata, index_type=index_type
        )
        return _readable(self, hook, stream)

    def delete_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        self._call(
            "tierlog_delete_log_segment_data",
            remote_log_segment_metadata=remote_log_segment_metadata,
        )


def _check_range(start_position: int, end_position: int | None) -> None:
    if start_position < 0:
        raise ValueError(f"start_position must be >= 0, got {start_position}")
    if end_position is not None and end_position < start_position:
        raise ValueError(f"end_position {end_position} is before start_position {start_position}")


def _readable(facade: _Facade, hook: str, stream: Any) -> BinaryIO:
    if stream is None or not callable(getattr(stream, "read", None)):
        raise PluginError(
            f"{facade.role} plugin {facade.provider!r} returned {type(stream).__name__} from "
            f"{hook.removeprefix('tierlog_')}; expected a readable binary stream"
        )
    return stream  # type: ignore[no-any-return]


class RemoteLogMetadataManager(_Facade):
    """The chosen metadata plugin, with the runtime's defaults for its optional hooks."""

    role = "RemoteLogMetadataManager"

    def add_remote_log_segment_metadata(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        if remote_log_segment_metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(
                "add_remote_log_segment_metadata takes state COPY_SEGMENT_STARTED, got "
                f"{remote_log_segment_metadata.state.name}"
            )
        self._call(
            "tierlog_add_remote_log_segment_metadata",
            remote_log_segment_metadata=remote_log_segment_metadata,
        )

    def update_remote_log_segment_metadata(
        self, remote_log_segment_metadata_update: RemoteLogSegmentMetadataUpdate
    ) -> None:
        self._call(
            "tierlog_update_remote_log_segment_metadata",
            remote_log_segment_metadata_update=remote_log_segment_metadata_update,
        )

    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, epoch_for_offset: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        hook = "tierlog_remote_log_segment_metadata"
        result = self._call(
            hook,
            topic_id_partition=topic_id_partition,
            epoch_for_offset=epoch_for_offset,
            offset=offset,
        )
        if result is None:
            return None
        return self._expect(hook, result, RemoteLogSegmentMetadata, "RemoteLogSegmentMetadata")

    def highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int | None:
        hook = "tierlog_highest_offset_for_epoch"
        result = self._call(hook, topic_id_partition=topic_id_partition, leader_epoch=leader_epoch)
        return None if result is None else self._expect(hook, result, int, "an offset or None")

    def put_remote_partition_delete_metadata(
        self, remote_partition_delete_metadata: RemotePartitionDeleteMetadata
    ) -> None:
        self._call(
            "tierlog_put_remote_partition_delete_metadata",
            remote_partition_delete_metadata=remote_partition_delete_metadata,
        )

    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        result = self._call(
            "tierlog_list_remote_log_segments",
            topic_id_partition=topic_id_partition,
            leader_epoch=leader_epoch,
        )
        return iter(() if result is None else result)

    def on_partition_leadership_changes(
        self,
        leader_partitions: frozenset[TopicIdPartition],
        follower_partitions: frozenset[TopicIdPartition],
    ) -> None:
        self._call(
            "tierlog_on_partition_leadership_changes",
            leader_partitions=frozenset(leader_partitions),
            follower_partitions=frozenset(follower_partitions),
        )

    def on_stop_partitions(self, partitions: frozenset[TopicIdPartition]) -> None:
        self._call("tierlog_on_stop_partitions", partitions=frozenset(partitions))

    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        hook = "tierlog_remote_log_size"
        if self._has(hook):
            result = self._call(
                hook, topic_id_partition=topic_id_partition, leader_epoch=leader_epoch
            )
            return self._expect(hook, result, int, "a size in bytes")
        return sum(
            segment.segment_size_in_bytes
            for segment in self.list_remote_log_segments(topic_id_partition, leader_epoch)
        )

    def next_segment_with_txn_index(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        hook = "tierlog_next_segment_with_txn_index"
        if self._has(hook):
            result = self._call(
                hook, topic_id_partition=topic_id_partition, epoch=epoch, offset=offset
            )
            if result is None:
                return None
            return self._expect(hook, result, RemoteLogSegmentMetadata, "RemoteLogSegmentMetadata")
        segment = self.remote_log_segment_metadata(topic_id_partition, epoch, offset)
        while segment is not None and segment.txn_idx_empty:
            next_offset = segment.end_offset_for_epoch(epoch)
            if next_offset is None:
                return None
            segment = self.remote_log_segment_metadata(topic_id_partition, epoch, next_offset + 1)
        return segment

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        hook = "tierlog_is_ready"
        if not self._has(hook):
            return True
        result = self._call(hook, topic_id_partition=topic_id_partition)
        return self._expect(hook, result, bool, "a bool")
