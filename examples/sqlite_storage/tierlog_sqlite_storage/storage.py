"""Segments and their indexes as rows of one SQLite database file.

One connection per runtime, shared by the copier and reader threads behind a lock: SQLite
serialises writers anyway, and a copy is one transaction, so a segment appears whole or not
at all. Reads return only the requested byte range (``substr`` on the blob), not the segment.
"""

from __future__ import annotations

import io
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import tierlog
from tierlog.config import REQUIRED, ConfigDef, ConfigKey, ConfigType
from tierlog.errors import RemoteResourceNotFoundError, RemoteStorageError
from tierlog.model import IndexType, LogSegmentData, RemoteLogSegmentMetadata

SCHEMA = """
CREATE TABLE IF NOT EXISTS segments (
    segment_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS indexes (
    segment_id TEXT NOT NULL REFERENCES segments (segment_id) ON DELETE CASCADE,
    index_type TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (segment_id, index_type)
);
"""


class SqliteStorageManager:
    """The ``sqlite`` storage plugin; configure it with ``rsm.config.path``."""

    def __init__(self) -> None:
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @tierlog.hookimpl
    def tierlog_config_definitions(self) -> ConfigDef:
        return ConfigDef(
            keys=(
                ConfigKey(
                    "path",
                    ConfigType.STRING,
                    REQUIRED,
                    doc="The SQLite database file; created, with its tables, when missing.",
                ),
            )
        )

    @tierlog.hookimpl
    def tierlog_configure(self, config: Mapping[str, Any]) -> None:
        path = Path(str(config["path"]))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA foreign_keys=ON")
            connection.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as err:
            raise RemoteStorageError(f"cannot open the SQLite storage at {path}: {err}") from err
        self._connection = connection

    @tierlog.hookimpl
    def tierlog_close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    @contextmanager
    def _database(self, what: str) -> Iterator[sqlite3.Connection]:
        """The connection, held alone; SQLite errors become RemoteStorageError."""
        if self._connection is None:
            raise RemoteStorageError("the SQLite storage is not configured")
        with self._lock:
            try:
                yield self._connection
            except sqlite3.Error as err:
                raise RemoteStorageError(f"SQLite storage failed {what}: {err}") from err

    @tierlog.hookimpl
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> None:
        metadata = remote_log_segment_metadata
        key = str(metadata.remote_log_segment_id.id)
        try:
            segment = Path(log_segment_data.log_segment).read_bytes()
            indexes = {
                index_type.name: Path(source).read_bytes()
                for index_type in IndexType
                if (source := log_segment_data.index_path(index_type)) is not None
            }
        except OSError as err:
            raise RemoteStorageError(f"cannot read the local segment {key}: {err}") from err
        indexes[IndexType.LEADER_EPOCH.name] = bytes(log_segment_data.leader_epoch_index)
        tip = metadata.topic_id_partition
        with self._database(f"copying segment {key}") as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM segments WHERE segment_id = ?", (key,))
                db.execute(
                    "INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        tip.topic,
                        tip.partition,
                        metadata.start_offset,
                        metadata.end_offset,
                        segment,
                    ),
                )
                db.executemany(
                    "INSERT INTO indexes VALUES (?, ?, ?)",
                    [(key, name, data) for name, data in indexes.items()],
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @tierlog.hookimpl
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> BinaryIO:
        key = str(remote_log_segment_metadata.remote_log_segment_id.id)
        with self._database(f"reading segment {key}") as db:
            row = db.execute(
                "SELECT length(data) FROM segments WHERE segment_id = ?", (key,)
            ).fetchone()
            if row is None:
                raise RemoteResourceNotFoundError(f"segment {key} is not in SQLite storage")
            size: int = row[0]
            if start_position >= size and not start_position == size == 0:
                raise RemoteStorageError(
                    f"start position {start_position} is past the end of segment {key} "
                    f"({size} bytes)"
                )
            last = size - 1 if end_position is None else min(end_position, size - 1)
            (data,) = db.execute(
                "SELECT substr(data, ?, ?) FROM segments WHERE segment_id = ?",
                (start_position + 1, last - start_position + 1, key),
            ).fetchone()
        return io.BytesIO(data or b"")

    @tierlog.hookimpl
    def tierlog_fetch_index(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, index_type: IndexType
    ) -> BinaryIO:
        key = str(remote_log_segment_metadata.remote_log_segment_id.id)
        with self._database(f"reading the {index_type.name} index of {key}") as db:
            row = db.execute(
                "SELECT data FROM indexes WHERE segment_id = ? AND index_type = ?",
                (key, index_type.name),
            ).fetchone()
        if row is None:
            raise RemoteResourceNotFoundError(
                f"segment {key} has no {index_type.name} index in SQLite storage"
            )
        return io.BytesIO(row[0])

    @tierlog.hookimpl
    def tierlog_delete_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        key = str(remote_log_segment_metadata.remote_log_segment_id.id)
        with self._database(f"deleting segment {key}") as db:
            db.execute("DELETE FROM segments WHERE segment_id = ?", (key,))
