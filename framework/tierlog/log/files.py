"""File and directory names of a partition's local log, exactly as Kafka lays them out.

A segment's files share a prefix, its base offset zero-padded to 20 digits
(``00000000000000000123.log``), so a plain directory listing sorts them by offset and Kafka's
own tools can read a tierlog log directory. A partition's directory is ``<topic>-<partition>``.
Files that are going away carry one more suffix: ``.deleted`` (waiting for
``file.delete.delay.ms``), ``.cleaned`` and ``.swap`` (left by an interrupted rewrite).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from ..model import TopicPartition

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
TXN_INDEX_SUFFIX: Final = ".txnindex"
SNAPSHOT_SUFFIX: Final = ".snapshot"

DELETED_SUFFIX: Final = ".deleted"
CLEANED_SUFFIX: Final = ".cleaned"
SWAP_SUFFIX: Final = ".swap"
#: Suffixes of files left behind on purpose or by an interrupted operation, never live data.
TRANSIENT_SUFFIXES: Final = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)

#: The suffixes of the files that make up one segment.
SEGMENT_SUFFIXES: Final = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
PARTITION_METADATA: Final = "partition.metadata"
#: Per-partition checkpoints of tierlog's log (Kafka keeps these per log directory).
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
#: The high watermark, so a restart begins near where it was, not at the log start.
HIGH_WATERMARK_CHECKPOINT: Final = "replication-offset-checkpoint"
#: The first offset the log cleaner has not cleaned yet (Kafka keeps it per log directory).
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
#: Present only while the log is closed cleanly; its absence at open means "recover".
CLEAN_SHUTDOWN_MARKER: Final = ".kafka_cleanshutdown"

DELETE_DIR_SUFFIX: Final = "-delete"
FUTURE_DIR_SUFFIX: Final = "-future"

_OFFSET_DIGITS: Final = 20


def offset_prefix(offset: int) -> str:
    """The 20-digit, zero-padded offset that names a segment's files."""
    if offset < 0:
        raise ValueError(f"a file offset cannot be negative: {offset}")
    return f"{offset:0{_OFFSET_DIGITS}d}"


def log_file_name(base_offset: int) -> str:
    return offset_prefix(base_offset) + LOG_SUFFIX


def offset_index_file_name(base_offset: int) -> str:
    return offset_prefix(base_offset) + INDEX_SUFFIX


def time_index_file_name(base_offset: int) -> str:
    return offset_prefix(base_offset) + TIME_INDEX_SUFFIX


def txn_index_file_name(base_offset: int) -> str:
    return offset_prefix(base_offset) + TXN_INDEX_SUFFIX


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    """The path of one of a segment's files (``suffix`` from ``SEGMENT_SUFFIXES``)."""
    return directory / (offset_prefix(base_offset) + suffix)


def offset_from_file_name(name: str) -> int:
    """The offset a segment, index or snapshot file is named by; ValueError for other names.

    Transient suffixes are ignored (``00000000000000000042.log.deleted`` gives 42).
    """
    stem = name
    for transient in TRANSIENT_SUFFIXES:
        if stem.endswith(transient):
            stem = stem[: -len(transient)]
            break
    prefix, dot, _suffix = stem.partition(".")
    if not dot or len(prefix) != _OFFSET_DIGITS or not prefix.isdigit():
        raise ValueError(f"not a segment or snapshot file name: {name!r}")
    return int(prefix)


def is_segment_file(name: str, suffix: str) -> bool:
    """Whether ``name`` is a live (not transient) file of the kind ``suffix`` names."""
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    return len(prefix) == _OFFSET_DIGITS and prefix.isdigit()


def log_dir_name(topic_partition: TopicPartition) -> str:
    """``<topic>-<partition>``: the directory holding one partition's log."""
    return f"{topic_partition.topic}-{topic_partition.partition}"


def parse_log_dir_name(name: str) -> TopicPartition:
    """The partition a log directory belongs to; ValueError if the name is not one.

    Deletion (``<topic>-<partition>.<uuid>-delete``) and future (``...-future``) directories are
    recognised too, as Kafka names them during a topic delete or a move between log dirs.
    """
    stem = name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            dot = stem.rfind(".")
            if dot < 0:
                raise ValueError(f"not a log directory name: {name!r}")
            stem = stem[:dot]
            break
    topic, dash, partition = stem.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        raise ValueError(f"not a log directory name: {name!r}")
    return TopicPartition(topic, int(partition))
