"""A RemoteStorageManager that keeps segments in a local directory: a complete, small plugin.

It exists so the kit can run a broker without any storage distribution installed, and as a
reference for plugin authors: every promise of the storage hooks is kept in a few lines.
Configure it with ``rsm.config.root`` (or ``plugin.<name>.root``) and register an instance
through ``extra_plugins``; the layout is ``<root>/<topic>-<topic id>/<partition>/<start
offset>-<segment id>/`` holding ``segment.log`` and one file per index type.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from .. import hookimpl
from ..errors import InvalidConfigError, RemoteResourceNotFoundError, RemoteStorageError
from ..locations import ObjectLocation, SegmentLocation
from ..model import CustomMetadata, IndexType, LogSegmentData, RemoteLogSegmentMetadata

LOG_FILE = "segment.log"


class DirectoryStorageManager:
    """Stores each upload as one directory, renamed into place so it appears whole."""

    def __init__(self) -> None:
        self._root: Path | None = None

    def root(self) -> Path:
        """The configured directory (a method: pluggy 1.5 reads every attribute at register)."""
        if self._root is None:
            raise RemoteStorageError("the directory storage manager is not configured")
        return self._root

    @hookimpl
    def tierlog_configure(self, config: Mapping[str, Any]) -> None:
        root = config.get("root")
        if not root:
            raise InvalidConfigError("the directory storage manager needs 'root'", key="root")
        self._root = Path(str(root))
        self._root.mkdir(parents=True, exist_ok=True)

    @hookimpl
    def tierlog_close(self) -> None:
        self._root = None

    def segment_dir(self, metadata: RemoteLogSegmentMetadata) -> Path:
        """Where an upload lives; derived from the metadata alone, so no custom metadata."""
        tip = metadata.topic_id_partition
        return (
            self.root()
            / f"{tip.topic}-{tip.topic_id}"
            / str(tip.partition)
            / f"{metadata.start_offset:020d}-{metadata.remote_log_segment_id.id}"
        )

    @hookimpl
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> CustomMetadata | None:
        final = self.segment_dir(remote_log_segment_metadata)
        staging = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        try:
            staging.mkdir(parents=True)
            shutil.copyfile(log_segment_data.log_segment, staging / LOG_FILE)
            for index_type in IndexType:
                source = log_segment_data.index_path(index_type)
                if source is not None:
                    shutil.copyfile(source, staging / index_type.name)
            (staging / IndexType.LEADER_EPOCH.name).write_bytes(log_segment_data.leader_epoch_index)
            self._replace(staging, final)
        except OSError as err:
            shutil.rmtree(staging, ignore_errors=True)
            raise RemoteStorageError(f"cannot copy segment to {final}: {err}") from err
        return None

    @staticmethod
    def _replace(staging: Path, final: Path) -> None:
        """Swap in the new upload: an older one of the same id is moved aside, then removed."""
        old = final.with_name(f".{final.name}.{uuid.uuid4().hex}.old")
        with contextlib.suppress(FileNotFoundError):
            final.rename(old)
        staging.rename(final)
        shutil.rmtree(old, ignore_errors=True)

    @hookimpl
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> BinaryIO:
        path = self.segment_dir(remote_log_segment_metadata) / LOG_FILE
        stream = self._open(path, remote_log_segment_metadata, "segment")
        size = os.fstat(stream.fileno()).st_size
        if start_position >= size and not start_position == size == 0:
            stream.close()
            raise RemoteStorageError(
                f"start position {start_position} is past the end of segment "
                f"{remote_log_segment_metadata.remote_log_segment_id} ({size} bytes)"
            )
        last = size - 1 if end_position is None else min(end_position, size - 1)
        stream.seek(start_position)
        return io.BufferedReader(_Window(stream, last - start_position + 1))

    @hookimpl
    def tierlog_locate_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> SegmentLocation:
        """The ``.log`` file itself: it holds the segment's bytes as they are."""
        path = (self.segment_dir(remote_log_segment_metadata) / LOG_FILE).absolute()
        try:
            size = path.stat().st_size
        except FileNotFoundError as err:
            raise RemoteResourceNotFoundError(
                f"segment {remote_log_segment_metadata.remote_log_segment_id} has no segment in "
                "remote storage"
            ) from err
        except OSError as err:
            raise RemoteStorageError(f"cannot stat {path}: {err}") from err
        if start_position >= size and not start_position == size == 0:
            raise RemoteStorageError(
                f"start position {start_position} is past the end of segment "
                f"{remote_log_segment_metadata.remote_log_segment_id} ({size} bytes)"
            )
        stop = size if end_position is None else min(end_position + 1, size)
        return SegmentLocation.of_object(ObjectLocation(path=str(path)), start_position, stop)

    @hookimpl
    def tierlog_fetch_index(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, index_type: IndexType
    ) -> BinaryIO:
        path = self.segment_dir(remote_log_segment_metadata) / index_type.name
        return self._open(path, remote_log_segment_metadata, f"{index_type.name} index")

    @hookimpl
    def tierlog_delete_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        final = self.segment_dir(remote_log_segment_metadata)
        doomed = final.with_name(f".{final.name}.{uuid.uuid4().hex}.old")
        try:
            final.rename(doomed)
        except FileNotFoundError:
            return
        except OSError as err:
            raise RemoteStorageError(f"cannot delete {final}: {err}") from err
        shutil.rmtree(doomed, ignore_errors=True)

    @staticmethod
    def _open(path: Path, metadata: RemoteLogSegmentMetadata, what: str) -> io.BufferedReader:
        try:
            return open(path, "rb")
        except FileNotFoundError as err:
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} has no {what} in remote storage"
            ) from err
        except OSError as err:
            raise RemoteStorageError(f"cannot open {path}: {err}") from err


class _Window(io.RawIOBase):
    """At most ``length`` bytes of a file from its current position."""

    def __init__(self, file: io.BufferedReader, length: int) -> None:
        self._file = file
        self._left = length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self._left)
        if wanted <= 0:
            return 0
        got = self._file.readinto(view[:wanted])
        self._left -= got
        return got

    def close(self) -> None:
        self._file.close()
        super().close()
