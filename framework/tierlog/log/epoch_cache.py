"""The leader-epoch cache: which leader epoch wrote which range of a partition's offsets.

Replicas use it to agree on where their logs diverge after a leader change (OffsetsForLeaderEpoch),
and tiered storage uses it to record which epochs a copied segment spans and to check a remote
segment against the partition's lineage. It is persisted in ``leader-epoch-checkpoint``, a small
text file in Kafka's format, whose exact text is also what a tiered segment carries as its
LEADER_EPOCH index.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
from collections.abc import Iterable
from pathlib import Path

import attrs

from ..errors import KafkaStorageError
from .checkpoint import write_atomically

log = logging.getLogger(__name__)

#: Kafka's "no epoch" (OffsetsForLeaderEpoch answers it with UNDEFINED_EPOCH_OFFSET).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
#: The per-partition file name.
LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0

_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


@attrs.frozen(order=True)
class EpochEntry:
    """Leader epoch ``epoch`` wrote its first record at ``start_offset``."""

    epoch: int
    start_offset: int

    def __str__(self) -> str:
        return f"EpochEntry(epoch={self.epoch}, start_offset={self.start_offset})"


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: version ``0``, the count, then ``<epoch> <offset>`` lines."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def in_directory(cls, log_dir: Path) -> LeaderEpochCheckpointFile:
        """The checkpoint file of the partition whose log directory is ``log_dir``."""
        return cls(Path(log_dir) / LEADER_EPOCH_CHECKPOINT_FILENAME)

    def read(self) -> list[EpochEntry]:
        """The entries on disk; none if the file does not exist.

        A malformed file raises KafkaStorageError naming the file and the offending line.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.path}: {err}") from err
        return self.decode(data, source=str(self.path))

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replaces the file atomically and durably."""
        write_atomically(self.path, self.encode(entries))

    @staticmethod
    def encode(entries: Iterable[EpochEntry]) -> bytes:
        """The checkpoint text for ``entries``, as Kafka writes it."""
        entries = list(entries)
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines.extend(f"{entry.epoch} {entry.start_offset}" for entry in entries)
        return ("\n".join(lines) + "\n").encode("utf-8")

    @staticmethod
    def decode(data: bytes, *, source: str = "leader-epoch checkpoint") -> list[EpochEntry]:
        """Parses checkpoint text (a local file or a remote LEADER_EPOCH index).

        Follows Kafka's reader: empty text, or a version line alone, holds no entries; the
        version must be 0; entry lines hold two whitespace-separated integers; the number of
        entries must match the count line. Anything else raises KafkaStorageError naming
        ``source`` and the line.
        """
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise KafkaStorageError(
                f"malformed checkpoint file {source}: not UTF-8 ({err})"
            ) from err
        lines = text.splitlines()
        if not lines:
            return []

        def malformed(number: int, why: str) -> KafkaStorageError:
            return KafkaStorageError(
                f"malformed line {number} in checkpoint file {source}: {why}: {lines[number - 1]!r}"
            )

        def integer(number: int, token: str, low: int, high: int) -> int:
            if not _INTEGER.fullmatch(token):
                raise malformed(number, f"{token!r} is not an integer")
            value = int(token)
            if not low <= value <= high:
                raise malformed(number, f"{value} is out of range")
            return value

        version = integer(1, lines[0].strip(), -_INT32_MAX - 1, _INT32_MAX)
        if version != CHECKPOINT_VERSION:
            raise malformed(1, f"unknown version {version} (expected {CHECKPOINT_VERSION})")
        if len(lines) == 1:
            return []
        expected = integer(2, lines[1].strip(), 0, _INT32_MAX)
        entries = []
        for number, line in enumerate(lines[2:], start=3):
            tokens = line.split()
            if len(tokens) != 2:
                raise malformed(number, "expected '<epoch> <start offset>'")
            epoch = integer(number, tokens[0], -_INT32_MAX - 1, _INT32_MAX)
            start_offset = integer(number, tokens[1], -_INT64_MAX - 1, _INT64_MAX)
            entries.append(EpochEntry(epoch, start_offset))
        if len(entries) != expected:
            raise KafkaStorageError(
                f"malformed checkpoint file {source}: line 2 declares {expected} entries, "
                f"{len(entries)} follow"
            )
        return entries


class LeaderEpochCache:
    """The (epoch, start offset) lineage of one partition, kept in epoch and offset order.

    Thread-safe: the fetch and produce paths read it while the log and the replica fetcher
    change it. Every change is written to the checkpoint (if there is one) before the method
    returns, so the file never lacks an entry the cache had handed out.
    """

    def __init__(
        self,
        checkpoint: LeaderEpochCheckpointFile | None = None,
        *,
        entries: Iterable[EpochEntry] | None = None,
    ) -> None:
        """Loads the entries from ``checkpoint``, or takes ``entries`` (without writing them)."""
        self._lock = threading.RLock()
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        # Kept beside the entries so that lookups by epoch can bisect.
        self._epochs: list[int] = []
        initial = list(entries) if entries is not None else None
        if initial is None:
            initial = checkpoint.read() if checkpoint is not None else []
        for entry in initial:
            self._assign(entry)

    @property
    def checkpoint(self) -> LeaderEpochCheckpointFile | None:
        return self._checkpoint

    # --- changes ---------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that leader epoch ``epoch`` starts at ``start_offset``.

        Re-assigning the latest epoch at the same or a later offset changes nothing. Otherwise
        the entry is appended after removing every later entry that conflicts with it (an epoch
        at least as large, or a start offset at least as large), as Kafka does when a replica
        learns it had diverged.
        """
        with self._lock:
            if self._assign(EpochEntry(epoch, start_offset)):
                self._flush()

    def assign_entries(self, entries: Iterable[EpochEntry]) -> None:
        """Assigns each entry in order, then checkpoints once (a follower loads a remote index)."""
        entries = list(entries)
        with self._lock:
            for entry in entries:
                self._assign(entry)
            if entries:
                self._flush()

    def truncate_from_end(self, end_offset: int) -> None:
        """Removes the entries starting at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            if _truncate_from_end(self._entries, end_offset):
                self._reindex()
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forgets the offsets below ``start_offset`` (the log start moved forward).

        The entries starting at or before ``start_offset`` are removed, and the last of them
        comes back starting at ``start_offset``: the epoch that was current there still is.
        """
        with self._lock:
            if _truncate_from_start(self._entries, start_offset):
                self._reindex()
                self._flush()

    def clear_and_flush(self) -> None:
        """Removes every entry and checkpoints the empty cache."""
        with self._lock:
            self._entries.clear()
            self._epochs.clear()
            self._flush()

    def clear(self) -> None:
        """Removes every entry without touching the checkpoint (the log directory is going away)."""
        with self._lock:
            self._entries.clear()
            self._epochs.clear()

    def flush(self) -> None:
        """Writes the entries to the checkpoint now."""
        with self._lock:
            self._flush()

    def clone_with_checkpoint(
        self, checkpoint: LeaderEpochCheckpointFile | None
    ) -> LeaderEpochCache:
        """A cache holding the same entries, backed by another checkpoint (not written yet)."""
        with self._lock:
            return LeaderEpochCache(checkpoint, entries=list(self._entries))

    # --- queries ---------------------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, in epoch (and offset) order."""
        with self._lock:
            return list(self._entries)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The epoch that is being written to now, if any epoch is known."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of exactly ``epoch``, if it is cached."""
        with self._lock:
            index = bisect.bisect_left(self._epochs, epoch)
            if index < len(self._epochs) and self._epochs[index] == epoch:
                return self._entries[index]
            return None

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of the largest cached epoch below ``epoch``."""
        with self._lock:
            index = bisect.bisect_left(self._epochs, epoch)
            return self._entries[index - 1] if index > 0 else None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest cached epoch below ``epoch`` (by default: below the latest epoch)."""
        with self._lock:
            if epoch is None:
                if not self._entries:
                    return None
                epoch = self._entries[-1].epoch
            entry = self.previous_entry(epoch)
            return entry.epoch if entry is not None else None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest cached epoch above ``epoch``."""
        with self._lock:
            index = bisect.bisect_right(self._epochs, epoch)
            return self._epochs[index] if index < len(self._epochs) else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the last one starting at or before it."""
        with self._lock:
            index = bisect.bisect_right(self._entries, offset, key=lambda entry: entry.start_offset)
            return self._entries[index - 1].epoch if index > 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(epoch, end offset)`` for ``requested_epoch``.

        The answer is the largest cached epoch at or below the requested one, and its end: the
        start offset of the next larger epoch, or ``log_end_offset`` when the latest epoch is
        asked for. A request below every cached epoch (the older epochs' data is gone) gets the
        requested epoch and the first cached epoch's start, so a follower truncates no further
        than the leader's log start. An undefined (-1) request, an empty cache, and an epoch
        above the latest get ``(-1, -1)``.
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested_epoch)
            if higher == len(self._entries):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            end_offset = self._entries[higher].start_offset
            if higher == 0:
                return requested_epoch, end_offset
            return self._entries[higher - 1].epoch, end_offset

    def entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """The epochs that wrote offsets ``start_offset`` to ``end_offset``, both inclusive.

        The first entry is clamped to ``start_offset``: this is the ``segment_leader_epochs`` of
        a segment spanning those offsets. A negative ``start_offset`` keeps the earliest entries
        as they are.
        """
        with self._lock:
            entries = list(self._entries)
        if start_offset >= 0:
            _truncate_from_start(entries, start_offset)
        _truncate_from_end(entries, end_offset + 1)
        return entries

    # --- internals -------------------------------------------------------------------------------

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry {entry}")
        with self._lock:
            latest = self._entries[-1] if self._entries else None
            if (
                latest is not None
                and entry.epoch == latest.epoch
                and entry.start_offset >= latest.start_offset
            ):
                return False
            removed = []
            while self._entries and (
                self._entries[-1].epoch >= entry.epoch
                or self._entries[-1].start_offset >= entry.start_offset
            ):
                removed.append(self._entries.pop())
                self._epochs.pop()
            self._entries.append(entry)
            self._epochs.append(entry.epoch)
            # Replacing an epoch that wrote nothing (same start offset) is routine; anything
            # else means this replica's history diverged from the leader's.
            if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
                log.warning(
                    "new epoch entry %s truncated conflicting entries %s; cache now holds %d",
                    entry,
                    [str(r) for r in reversed(removed)],
                    len(self._entries),
                )
            return True

    def _reindex(self) -> None:
        self._epochs = [entry.epoch for entry in self._entries]

    def _flush(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)

    def __repr__(self) -> str:
        with self._lock:
            return f"LeaderEpochCache({[(e.epoch, e.start_offset) for e in self._entries]})"


def _truncate_from_start(entries: list[EpochEntry], start_offset: int) -> bool:
    """Kafka's truncateFromStart on a sorted list, in place; True if anything changed."""
    count = bisect.bisect_right(entries, start_offset, key=lambda entry: entry.start_offset)
    if count == 0:
        return False
    last_removed = entries[count - 1]
    entries[:count] = [EpochEntry(last_removed.epoch, start_offset)]
    return True


def _truncate_from_end(entries: list[EpochEntry], end_offset: int) -> bool:
    """Kafka's truncateFromEnd on a sorted list, in place; True if anything was removed."""
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return False
    keep = bisect.bisect_left(entries, end_offset, key=lambda entry: entry.start_offset)
    del entries[keep:]
    return True
