"""A partition's local log in Kafka's on-disk layout.

``PartitionLog`` is the entry point: open a partition directory, append batches as leader or
follower, read by offset or timestamp, apply retention, truncate, and close cleanly. Around it:

* segments and their indexes (``LogSegment``, ``OffsetIndex``, ``TimeIndex``,
  ``TransactionIndex``) in ``<20-digit base offset>.log/.index/.timeindex/.txnindex`` files;
* producer state for idempotent and transactional producers (``ProducerStateManager``), saved in
  ``.snapshot`` files at every roll and at clean shutdown;
* the leader-epoch cache and its ``leader-epoch-checkpoint`` file (``LeaderEpochCache``);
* atomic checkpoint writes (``write_atomically``) and the file naming rules (``files``);
* the ``.lock`` file that keeps a second broker off a log directory (``DirectoryLock``).

Typical use::

    log = PartitionLog.open(data_dir / "orders-0", {"segment.bytes": 256 * 1024 * 1024})
    info = log.append_as_leader(batch_bytes, leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)
    fetched = log.read(info.first_offset, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    log.close()
"""

from __future__ import annotations

from . import files
from .checkpoint import TEMP_SUFFIX, fsync_directory, write_atomically
from .dir_lock import LOCK_FILE_NAME, DirectoryLock
from .epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
)
from .log_batches import iter_log_batches
from .log_config import INHERIT_RETENTION, LogConfig
from .offset_index import OffsetIndex, OffsetPosition
from .partition_log import LOADED_INDEX_LIMIT, PartitionLog
from .producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
    TxnMetadata,
)
from .results import (
    FetchDataInfo,
    FetchIsolation,
    LogAppendInfo,
    LogOffsetMetadata,
    SegmentInfo,
    TimestampAndOffset,
)
from .segment import BatchLocation, LogSegment, SegmentRead
from .snapshot import (
    EMPTY_SNAPSHOT,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    is_snapshot_file,
    list_snapshot_files,
    offset_from_snapshot_file,
    read_snapshot_file,
    snapshot_file_name,
    write_empty_snapshot,
    write_snapshot_file,
)
from .time_index import TimeIndex, TimestampOffset
from .timestamp_search import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    is_search_by_time,
)
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from .uploadable import UploadableSegment

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "EMPTY_SNAPSHOT",
    "INHERIT_RETENTION",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LEADER_EPOCH_CHECKPOINT_FILENAME",
    "LOADED_INDEX_LIMIT",
    "LOCK_FILE_NAME",
    "MAX_TIMESTAMP",
    "NUM_BATCHES_TO_RETAIN",
    "TEMP_SUFFIX",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AbortedTxn",
    "AppendOrigin",
    "BatchLocation",
    "BatchMetadata",
    "CompletedTxn",
    "DirectoryLock",
    "EpochEntry",
    "FetchDataInfo",
    "FetchIsolation",
    "LeaderEpochCache",
    "LeaderEpochCheckpointFile",
    "LogAppendInfo",
    "LogConfig",
    "LogOffsetMetadata",
    "LogSegment",
    "OffsetIndex",
    "OffsetPosition",
    "PartitionLog",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SegmentInfo",
    "SegmentRead",
    "SnapshotEntry",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampOffset",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "TxnMetadata",
    "UploadableSegment",
    "decode_snapshot",
    "encode_snapshot",
    "files",
    "fsync_directory",
    "is_search_by_time",
    "is_snapshot_file",
    "iter_log_batches",
    "list_snapshot_files",
    "offset_from_snapshot_file",
    "read_snapshot_file",
    "snapshot_file_name",
    "write_atomically",
    "write_empty_snapshot",
    "write_snapshot_file",
]
