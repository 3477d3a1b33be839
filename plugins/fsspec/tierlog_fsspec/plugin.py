"""The ``fsspec`` plugin: tierlog's RemoteStorageManager on any fsspec filesystem.

This module is what the ``tierlog`` entry point loads at discovery, so it imports nothing heavy:
fsspec, s3fs, zstandard and cryptography are imported when ``tierlog_configure`` builds the
storage. The hooks are thin; the work is in :mod:`tierlog_fsspec.storage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

import tierlog
from tierlog.errors import LifecycleError

if TYPE_CHECKING:
    from tierlog.config import ConfigDef
    from tierlog.locations import SegmentLocation
    from tierlog.metrics import MetricsView
    from tierlog.model import (
        CustomMetadata,
        IndexType,
        LogSegmentData,
        RemoteLogSegmentMetadata,
    )
    from tierlog.plugins import PluginContext

    from .storage import FsspecStorage


class FsspecRemoteStorageManager:
    """One instance per runtime (the entry point names the class), configured from its slice."""

    def __init__(self) -> None:
        self._storage: FsspecStorage | None = None

    def storage(self) -> FsspecStorage:
        """The configured storage. A method, not a property: registering a plugin may read
        every attribute (older pluggy does), and this raises before configure."""
        if self._storage is None:
            raise LifecycleError("the fsspec storage plugin is not configured (or already closed)")
        return self._storage

    # --- lifecycle ------------------------------------------------------------------------------

    @tierlog.hookimpl
    def tierlog_config_definitions(self) -> ConfigDef:
        from .config import config_def

        return config_def()

    @tierlog.hookimpl
    def tierlog_configure(self, config: Mapping[str, Any], context: PluginContext) -> None:
        from .config import FsspecStorageConfig
        from .storage import FsspecStorage

        if self._storage is not None:
            raise LifecycleError("the fsspec storage plugin is already configured")
        self._storage = FsspecStorage(FsspecStorageConfig.from_mapping(config))

    @tierlog.hookimpl
    def tierlog_register_metrics(self, metrics: MetricsView) -> None:
        if self._storage is not None:
            self._storage.bind_metrics(metrics)

    @tierlog.hookimpl
    def tierlog_close(self) -> None:
        storage, self._storage = self._storage, None
        if storage is not None:
            storage.close()

    # --- RemoteStorageManager ------------------------------------------------------------------

    @tierlog.hookimpl
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> CustomMetadata | None:
        return self.storage().copy(remote_log_segment_metadata, log_segment_data)

    @tierlog.hookimpl
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> BinaryIO:
        return self.storage().fetch(remote_log_segment_metadata, start_position, end_position)

    @tierlog.hookimpl
    def tierlog_locate_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
        expires_in_s: int,
    ) -> SegmentLocation | None:
        return self.storage().locate(
            remote_log_segment_metadata, start_position, end_position, expires_in_s
        )

    @tierlog.hookimpl
    def tierlog_fetch_index(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, index_type: IndexType
    ) -> BinaryIO:
        return self.storage().fetch_index(remote_log_segment_metadata, index_type)

    @tierlog.hookimpl
    def tierlog_delete_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        self.storage().delete(remote_log_segment_metadata)

    def __repr__(self) -> str:
        state = "configured" if self._storage is not None else "not configured"
        return f"FsspecRemoteStorageManager({state})"
