"""Plugins for lifecycle tests: they record every call they get into a shared list."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import tierlog
from tierlog.model import RemoteLogSegmentMetadata


class RecordingPlugin:
    """Records its lifecycle calls as ``(name, phase)``; can be told to fail in one phase."""

    def __init__(self, name: str, calls: list[Any], fail_in: str | None = None) -> None:
        self.name = name
        self.calls = calls
        self.fail_in = fail_in
        self.config: Mapping[str, Any] | None = None
        self.context: Any = None
        self.metrics: Any = None
        self.broker: Any = None

    def _record(self, phase: str) -> None:
        self.calls.append((self.name, phase))
        if self.fail_in == phase:
            raise RuntimeError(f"{self.name} fails in {phase}")

    @tierlog.hookimpl
    def tierlog_configure(self, config: Mapping[str, Any], context: Any) -> None:
        self.config, self.context = dict(config), context
        self._record("configure")

    @tierlog.hookimpl
    def tierlog_register_metrics(self, metrics: Any) -> None:
        self.metrics = metrics
        self._record("register_metrics")

    @tierlog.hookimpl
    def tierlog_on_broker_ready(self, broker: Any) -> None:
        self.broker = broker
        self._record("on_broker_ready")

    @tierlog.hookimpl
    def tierlog_close(self) -> None:
        self._record("close")


class RecordingStorage(RecordingPlugin):
    """A storage provider that keeps segments in a dict (enough to exercise the SPI plumbing)."""

    def __init__(self, name: str, calls: list[Any], fail_in: str | None = None) -> None:
        super().__init__(name, calls, fail_in)
        self.objects: dict[Any, bytes] = {}

    @tierlog.hookimpl
    def tierlog_copy_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, log_segment_data: Any
    ) -> Any:
        self.calls.append((self.name, "copy"))
        key = remote_log_segment_metadata.remote_log_segment_id
        self.objects[key] = log_segment_data.log_segment.read_bytes()
        return tierlog.model.CustomMetadata(self.name.encode())

    @tierlog.hookimpl
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> Any:
        import io

        data = self.objects[remote_log_segment_metadata.remote_log_segment_id]
        end = len(data) if end_position is None else end_position + 1
        return io.BytesIO(data[start_position:end])

    @tierlog.hookimpl
    def tierlog_fetch_index(self, remote_log_segment_metadata: Any, index_type: Any) -> Any:
        import io

        return io.BytesIO(b"")

    @tierlog.hookimpl
    def tierlog_delete_log_segment_data(self, remote_log_segment_metadata: Any) -> None:
        self.objects.pop(remote_log_segment_metadata.remote_log_segment_id, None)


class RecordingMetadata(RecordingPlugin):
    """A metadata provider that answers every lookup from a plain dict."""

    def __init__(self, name: str, calls: list[Any], fail_in: str | None = None) -> None:
        super().__init__(name, calls, fail_in)
        self.segments: dict[Any, RemoteLogSegmentMetadata] = {}

    @tierlog.hookimpl
    def tierlog_add_remote_log_segment_metadata(self, remote_log_segment_metadata: Any) -> None:
        self.segments[remote_log_segment_metadata.remote_log_segment_id] = (
            remote_log_segment_metadata
        )

    @tierlog.hookimpl
    def tierlog_update_remote_log_segment_metadata(
        self, remote_log_segment_metadata_update: Any
    ) -> None:
        key = remote_log_segment_metadata_update.remote_log_segment_id
        self.segments[key] = self.segments[key].create_with_updates(
            remote_log_segment_metadata_update
        )

    @tierlog.hookimpl
    def tierlog_remote_log_segment_metadata(
        self, topic_id_partition: Any, epoch_for_offset: int, offset: int
    ) -> Any:
        return None

    @tierlog.hookimpl
    def tierlog_highest_offset_for_epoch(self, topic_id_partition: Any, leader_epoch: int) -> Any:
        return None

    @tierlog.hookimpl
    def tierlog_put_remote_partition_delete_metadata(
        self, remote_partition_delete_metadata: Any
    ) -> None:
        pass

    @tierlog.hookimpl
    def tierlog_list_remote_log_segments(
        self, topic_id_partition: Any, leader_epoch: int | None
    ) -> Iterator[Any]:
        return iter(list(self.segments.values()))

    @tierlog.hookimpl
    def tierlog_on_partition_leadership_changes(
        self, leader_partitions: Any, follower_partitions: Any
    ) -> None:
        pass

    @tierlog.hookimpl
    def tierlog_on_stop_partitions(self, partitions: Any) -> None:
        pass
