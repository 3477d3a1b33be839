"""Producer state: the bookkeeping behind idempotent and transactional producers.

For each producer id that wrote to the partition the log remembers its epoch, the metadata of its
last five batches (so a retried batch is answered with its original offsets instead of being
written twice), the coordinator epoch of its last transaction marker, and the first offset of its
open transaction. From the open transactions follows the last stable offset (LSO) that
read_committed consumers may read up to, and from the aborted ones the transaction index.

The state is rebuilt on load from the latest ``.snapshot`` file plus a replay of the log after it;
see ``ProducerStateManager.truncate_and_reload``.

Threading: the log calls ``ProducerStateManager`` under its own lock, as Kafka does. Only the
snapshot-file queries (``snapshot_file``, ``latest_snapshot_offset``, ``oldest_snapshot_offset``,
``snapshot_offsets``, ``delete_snapshots_below``) may also be called from other threads, such as
the remote copier looking up the snapshot to upload with a segment.
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import logging
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

import attrs

from ..errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from ..records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlType,
    EndTxnMarker,
    RecordBatch,
)
from .snapshot import (
    SnapshotEntry,
    decode_snapshot,
    list_snapshot_files,
    snapshot_file_name,
    write_snapshot_file,
)

log = logging.getLogger(__name__)

#: How many recent batches per producer are kept for duplicate detection (Kafka's value; a
#: producer has at most five requests in flight when idempotence is on).
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_INT32_MAX = (1 << 31) - 1

V = TypeVar("V")


class AppendOrigin(enum.Enum):
    """Who is appending, which decides how much is validated.

    CLIENT appends are validated fully. REPLICATION appends copy what a leader already
    validated, so stale epochs are only logged. COORDINATOR appends (offset commits, markers)
    carry no sequence numbers, so only epochs are checked.
    """

    CLIENT = "client"
    REPLICATION = "replication"
    COORDINATOR = "coordinator"


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` on the int32 ring sequences wrap around."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


@attrs.frozen
class BatchMetadata:
    """What is remembered of one appended batch: its sequence and offset range, its timestamp."""

    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @classmethod
    def of(
        cls, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> BatchMetadata:
        """The metadata of a batch, deriving its first sequence (wrapping as Kafka does)."""
        first_seq = NO_SEQUENCE if last_seq < 0 else _decrement_sequence(last_seq, offset_delta)
        return cls(first_seq, last_seq, last_offset, offset_delta, timestamp)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@attrs.frozen
class ProducerStateEntry:
    """One producer's state; a value: appends build a new entry."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    #: First offset of the producer's open transaction, None when none is open.
    current_txn_first_offset: int | None = None
    #: The last batches appended in the current epoch, oldest first (at most five).
    batch_metadata: tuple[BatchMetadata, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Whether no batch of the current epoch is remembered."""
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def with_batch(self, producer_epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """This entry after appending ``batch``; a new epoch forgets the older epoch's batches."""
        kept = self.batch_metadata if producer_epoch == self.producer_epoch else ()
        return attrs.evolve(
            self,
            producer_epoch=producer_epoch,
            batch_metadata=(*kept, batch)[-NUM_BATCHES_TO_RETAIN:],
            last_timestamp=batch.timestamp,
        )

    def with_end_txn(
        self, producer_epoch: int, coordinator_epoch: int, timestamp: int
    ) -> ProducerStateEntry:
        """This entry after a transaction marker: no open transaction, the marker's epochs."""
        kept = self.batch_metadata if producer_epoch == self.producer_epoch else ()
        return attrs.evolve(
            self,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=None,
            last_timestamp=timestamp,
            batch_metadata=kept,
        )

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The remembered batch ``header`` retries (same epoch and sequence range), if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, header.last_sequence)

    def to_snapshot_entry(self) -> SnapshotEntry:
        """What a snapshot keeps of this entry: only the last batch survives a reload."""
        return SnapshotEntry(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            last_sequence=self.last_seq,
            last_offset=self.last_data_offset,
            offset_delta=self.last_offset_delta,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=(
                -1 if self.current_txn_first_offset is None else self.current_txn_first_offset
            ),
        )

    @classmethod
    def from_snapshot_entry(cls, entry: SnapshotEntry) -> ProducerStateEntry:
        batches: tuple[BatchMetadata, ...] = ()
        if entry.last_offset >= 0:
            batches = (
                BatchMetadata.of(
                    entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp
                ),
            )
        return cls(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            coordinator_epoch=entry.coordinator_epoch,
            last_timestamp=entry.timestamp,
            current_txn_first_offset=(
                entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
            ),
            batch_metadata=batches,
        )


@attrs.frozen
class TxnMetadata:
    """An open transaction, or a completed one whose marker is not yet below the high watermark."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@attrs.frozen
class CompletedTxn:
    """A transaction its marker ended; ``last_offset`` is the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """Validates one producer's batches of an append and gathers the state they lead to.

    Built by ``ProducerStateManager.prepare_update``; nothing changes in the manager until the
    log has written the batches and calls ``ProducerStateManager.update``. A rejected batch
    raises and leaves this object as it was.
    """

    def __init__(
        self,
        producer_id: int,
        current: ProducerStateEntry,
        origin: AppendOrigin,
        *,
        partition: str = "",
    ) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self._partition = f" in {partition}" if partition else ""
        self._current = current
        self._updated = current
        self._started: list[TxnMetadata] = []

    def append_data_batch(self, header: BatchHeader, first_offset: int | None = None) -> None:
        """Validates and records a data batch the log assigns ``first_offset`` to.

        ``first_offset`` defaults to the header's base offset.
        """
        if first_offset is None:
            first_offset = header.base_offset
        self.append_data(
            producer_epoch=header.producer_epoch,
            first_seq=header.base_sequence,
            last_seq=header.last_sequence,
            last_timestamp=header.max_timestamp,
            first_offset=first_offset,
            last_offset=first_offset + header.last_offset_delta,
            is_transactional=header.is_transactional,
        )

    def append_data(
        self,
        *,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """``append_data_batch`` from the header's values.

        Raises InvalidProducerEpochError for an epoch older than the producer's,
        OutOfOrderSequenceError (client appends) for a sequence that does not follow the last
        one, and InvalidTxnStateError for a non-transactional batch inside an open transaction.
        """
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        batch = BatchMetadata(
            first_seq, last_seq, last_offset, last_offset - first_offset, last_timestamp
        )
        updated = self._updated.with_batch(producer_epoch, batch)
        txn_first_offset = updated.current_txn_first_offset
        if txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {self.producer_id} at offset "
                f"{first_offset}{self._partition}: its transaction from offset "
                f"{txn_first_offset} is still open"
            )
        if txn_first_offset is None and is_transactional:
            updated = attrs.evolve(updated, current_txn_first_offset=first_offset)
            self._started.append(TxnMetadata(self.producer_id, first_offset))
        self._updated = updated

    def append_end_txn_marker(
        self, marker: EndTxnMarker, producer_epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """Records a COMMIT or ABORT marker written at ``offset``.

        Returns the transaction it completes, or None if the producer had no open transaction
        (an empty transaction changes neither the LSO nor the transaction index). Raises
        InvalidProducerEpochError for a stale producer epoch and
        TransactionCoordinatorFencedError for a marker from a coordinator epoch older than the
        last one seen (a zombie coordinator);
        replication only logs both.
        """
        self._check_producer_epoch(producer_epoch, offset)
        if self._updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"coordinator epoch {marker.coordinator_epoch} of the marker for producer "
                f"{self.producer_id} at offset {offset}{self._partition} is older than the "
                f"current coordinator epoch {self._updated.coordinator_epoch}"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            log.info("%s", message)
        txn_first_offset = self._updated.current_txn_first_offset
        completed = None
        if txn_first_offset is not None:
            completed = CompletedTxn(
                self.producer_id,
                txn_first_offset,
                offset,
                marker.control_type is ControlType.ABORT,
            )
        self._updated = self._updated.with_end_txn(
            producer_epoch, marker.coordinator_epoch, timestamp
        )
        return completed

    def append(self, batch: RecordBatch, first_offset: int | None = None) -> CompletedTxn | None:
        """Records a whole batch, data or control (log loading replays batches this way).

        A control batch's marker is read from its first record; a control batch the cleaner
        emptied completes nothing.
        """
        offset = batch.base_offset if first_offset is None else first_offset
        if not batch.is_control:
            self.append_data_batch(batch, offset)
            return None
        for record in batch.records():
            marker = EndTxnMarker.from_record(record)
            return self.append_end_txn_marker(
                marker, batch.producer_epoch, offset, record.timestamp
            )
        return None

    def to_entry(self) -> ProducerStateEntry:
        """The producer's state after the batches appended so far."""
        return self._updated

    @property
    def started_transactions(self) -> list[TxnMetadata]:
        return list(self._started)

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch >= self._updated.producer_epoch:
            return
        message = (
            f"epoch {producer_epoch} of producer {self.producer_id} at offset {offset}"
            f"{self._partition} is older than its last seen epoch {self._updated.producer_epoch}"
        )
        if self.origin is AppendOrigin.REPLICATION:
            log.warning("%s", message)
            return
        # Since Kafka 2.7 this is INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED: the producer can
        # abort its transaction and carry on.
        raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self._updated, self._current
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {self.producer_id} started epoch {producer_epoch} at offset "
                    f"{offset}{self._partition} with sequence {first_seq}: a new epoch must "
                    f"start at 0 (current epoch {updated.producer_epoch})"
                )
            return
        # A producer whose state is unknown here (its records were deleted by retention or
        # DeleteRecords) may continue with any sequence.
        if current.producer_epoch == NO_PRODUCER_EPOCH:
            return
        if not _in_sequence(updated.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset "
                f"{offset}{self._partition}: {first_seq} (incoming), {updated.last_seq} "
                f"(current end sequence)"
            )

    def __repr__(self) -> str:
        return (
            f"ProducerAppendInfo(producer_id={self.producer_id}, origin={self.origin.name}, "
            f"entry={self._updated!r}, started={self._started!r})"
        )


class _OffsetMap(Generic[V]):
    """A small map ordered by offset (ongoing transactions, snapshot files)."""

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._values: dict[int, V] = {}

    def put(self, offset: int, value: V) -> None:
        if offset not in self._values:
            bisect.insort(self._keys, offset)
        self._values[offset] = value

    def pop(self, offset: int) -> V | None:
        value = self._values.pop(offset, None)
        if value is not None:
            del self._keys[bisect.bisect_left(self._keys, offset)]
        return value

    def get(self, offset: int) -> V | None:
        return self._values.get(offset)

    def first(self) -> tuple[int, V] | None:
        return (self._keys[0], self._values[self._keys[0]]) if self._keys else None

    def last(self) -> tuple[int, V] | None:
        return (self._keys[-1], self._values[self._keys[-1]]) if self._keys else None

    def items(self) -> list[tuple[int, V]]:
        return [(key, self._values[key]) for key in self._keys]

    def keys_below(self, offset: int) -> list[int]:
        return self._keys[: bisect.bisect_left(self._keys, offset)]

    def clear(self) -> None:
        self._keys.clear()
        self._values.clear()

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._keys))


class ProducerStateManager:
    """The producer state of one partition, and its snapshot files in the log directory."""

    def __init__(
        self,
        log_dir: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self._log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # Transactions not yet ended, by first offset.
        self._ongoing: _OffsetMap[TxnMetadata] = _OffsetMap()
        # Ended transactions whose marker is not yet below the high watermark, by first offset.
        self._unreplicated: _OffsetMap[TxnMetadata] = _OffsetMap()
        self._snapshot_lock = threading.Lock()
        self._snapshots: _OffsetMap[Path] = _OffsetMap()
        self._map_end_offset = 0
        self._last_snapshot_offset = 0
        self._load_snapshot_list()

    @property
    def log_dir(self) -> Path:
        return self._log_dir

    # --- appends ---------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """An append info for ``producer_id`` starting from its current state."""
        current = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, partition=self._log_dir.name)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Applies an append info after its batches are in the log."""
        if append_info.producer_id == NO_PRODUCER_ID:
            raise ValueError(f"invalid producer id {append_info.producer_id} in {self._log_dir}")
        self._producers[append_info.producer_id] = append_info.to_entry()
        for txn in append_info.started_transactions:
            self._ongoing.put(txn.first_offset, txn)

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The remembered batch that ``header`` retries, whose offsets answer the retry."""
        entry = self._producers.get(header.producer_id)
        return entry.find_duplicate_batch(header) if entry is not None else None

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def update_map_end_offset(self, offset: int) -> None:
        """Records that the state covers the log up to ``offset`` (exclusive)."""
        self._map_end_offset = offset

    @property
    def map_end_offset(self) -> int:
        """The offset after the last one the state covers: where a replay continues."""
        return self._map_end_offset

    # --- transactions ----------------------------------------------------------------------------

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO right after ``completed`` ends, for its transaction-index entry.

        Computed before ``complete_txn``: the first offset of the earliest transaction still
        open by another producer, or the offset after the marker.
        """
        for _, txn in self._ongoing.items():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Ends a transaction; it stays unstable until the high watermark passes its marker."""
        txn = self._ongoing.pop(completed.first_offset)
        if txn is None:
            raise ValueError(
                f"cannot complete transaction {completed} in {self._log_dir}: it was not started"
            )
        self._unreplicated.put(
            completed.first_offset, attrs.evolve(txn, last_offset=completed.last_offset)
        )

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forgets ended transactions whose markers are now below the high watermark."""
        self._remove_unreplicated_below(high_watermark)

    def first_unstable_offset(self) -> int | None:
        """The first offset read_committed consumers may not read yet, if any.

        That is the first offset of the earliest transaction that is open, or ended by a marker
        not yet replicated; the LSO is the smaller of this and the high watermark.
        """
        candidates = [m[0] for m in (self._ongoing.first(), self._unreplicated.first()) if m]
        return min(candidates) if candidates else None

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction, whatever is replicated."""
        first = self._ongoing.first()
        return first[0] if first else None

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """The open transactions, by first offset."""
        return [txn for _, txn in self._ongoing.items()]

    # --- producers -------------------------------------------------------------------------------

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        """The producers currently known, by id (a copy)."""
        return dict(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    def is_empty(self) -> bool:
        return not self._producers and not len(self._unreplicated)

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forgets producers idle for ``producer_id_expiration_ms`` with no open transaction."""
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
        for producer_id in expired:
            del self._producers[producer_id]

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    # --- truncation and loading ------------------------------------------------------------------

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Makes the state match a log holding ``[log_start_offset, log_end_offset)``.

        Snapshots above the log end or at or below the log start are deleted. If the state
        does not already end at ``log_end_offset``, it is reloaded from the latest remaining
        snapshot (skipping producers that have expired by ``now_ms``); a corrupt snapshot is
        deleted with a warning and the one before it is tried. The caller then replays the log
        from ``map_end_offset`` to ``log_end_offset``.

        As in Kafka since KIP-360, producers are not dropped because the log start moved past
        their last batch; only expiry removes them, so that they keep their sequence.
        """
        with self._snapshot_lock:
            for offset, _ in self._snapshots.items():
                if offset > log_end_offset or offset <= log_start_offset:
                    self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._map_end_offset:
            self._producers.clear()
            self._ongoing.clear()
            # The log end is at or below the high watermark, so every ended transaction in
            # what remains is replicated.
            self._unreplicated.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Follows the log start forward: the state never starts below it."""
        self._remove_unreplicated_below(log_start_offset)
        if self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snapshot_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forgets every producer and deletes every snapshot; the state begins at ``offset``."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        with self._snapshot_lock:
            for snapshot_offset in self._snapshots:
                self._remove_and_delete_snapshot(snapshot_offset)
        self._last_snapshot_offset = 0
        self._map_end_offset = offset

    def truncate_fully_and_reload_snapshots(self) -> None:
        """Forgets all state and rescans the directory for snapshot files.

        A follower rebuilding from the remote tier calls it after copying the remote snapshot
        into the directory, then ``truncate_and_reload``.
        """
        log.info("reloading the producer state snapshots of %s", self._log_dir)
        self.truncate_fully_and_start_at(0)
        self._load_snapshot_list()

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while True:
            with self._snapshot_lock:
                latest = self._snapshots.last()
            if latest is None:
                self._last_snapshot_offset = self._map_end_offset = log_start_offset
                return
            offset, path = latest
            try:
                data = path.read_bytes()
                entries = decode_snapshot(data, source=str(path))
            except FileNotFoundError:
                log.warning("producer snapshot %s disappeared; trying an older one", path)
                with self._snapshot_lock:
                    self._snapshots.pop(offset)
                continue
            except KafkaStorageError as err:
                log.warning("cannot load producer snapshot %s, deleting it: %s", path, err)
                with self._snapshot_lock:
                    self._remove_and_delete_snapshot(offset)
                continue
            except OSError as err:
                raise KafkaStorageError(f"cannot read producer snapshot {path}: {err}") from err
            log.info("loading producer state from snapshot %s", path)
            for snapshot_entry in entries:
                entry = ProducerStateEntry.from_snapshot_entry(snapshot_entry)
                if not self._is_expired(entry, now_ms):
                    self._load_entry(entry)
            self._last_snapshot_offset = self._map_end_offset = offset
            return

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing.put(
                entry.current_txn_first_offset,
                TxnMetadata(entry.producer_id, entry.current_txn_first_offset),
            )

    def _remove_unreplicated_below(self, offset: int) -> None:
        for first_offset, txn in self._unreplicated.items():
            if txn.last_offset is not None and txn.last_offset < offset:
                self._unreplicated.pop(first_offset)

    # --- snapshots -------------------------------------------------------------------------------

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Writes ``<map end offset>.snapshot`` unless the state has not moved since the last one.

        The log calls it at every roll (the name is then the new segment's base offset) and at
        clean shutdown. Returns the file written, if any.
        """
        if self._map_end_offset <= self._last_snapshot_offset:
            return None
        offset = self._map_end_offset
        path = self._log_dir / snapshot_file_name(offset)
        entries = [entry.to_snapshot_entry() for entry in self._producers.values()]
        write_snapshot_file(path, entries, fsync=sync)
        log.info("wrote producer snapshot at offset %d with %d producer ids", offset, len(entries))
        with self._snapshot_lock:
            self._snapshots.put(offset, path)
        self._last_snapshot_offset = offset
        return path

    def snapshot_file(self, offset: int) -> Path | None:
        """The snapshot taken at ``offset``, if there is one (the one to tier with a segment)."""
        with self._snapshot_lock:
            return self._snapshots.get(offset)

    def snapshot_offsets(self) -> list[int]:
        with self._snapshot_lock:
            return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        with self._snapshot_lock:
            last = self._snapshots.last()
        return last[0] if last else None

    def oldest_snapshot_offset(self) -> int | None:
        with self._snapshot_lock:
            first = self._snapshots.first()
        return first[0] if first else None

    def delete_snapshots_below(self, offset: int) -> None:
        """Deletes the snapshots taken below ``offset`` (exclusive)."""
        with self._snapshot_lock:
            for snapshot_offset in self._snapshots.keys_below(offset):
                self._remove_and_delete_snapshot(snapshot_offset)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Deletes snapshots that match no segment, except the newest one above every segment.

        That newest stray snapshot is the one a clean shutdown wrote at the log end; the others
        belong to segments that no longer exist.
        """
        base_offsets = set(segment_base_offsets)
        with self._snapshot_lock:
            self._snapshots = self._scan_directory()
            latest_stray: int | None = None
            for offset, _ in self._snapshots.items():
                if offset in base_offsets:
                    continue
                if latest_stray is not None:
                    self._remove_and_delete_snapshot(latest_stray)
                latest_stray = offset
            if latest_stray is not None and base_offsets and latest_stray < max(base_offsets):
                self._remove_and_delete_snapshot(latest_stray)

    def _load_snapshot_list(self) -> None:
        with self._snapshot_lock:
            self._snapshots = self._scan_directory()

    def _scan_directory(self) -> _OffsetMap[Path]:
        found: _OffsetMap[Path] = _OffsetMap()
        try:
            files = list_snapshot_files(self._log_dir)
        except OSError as err:
            raise KafkaStorageError(f"cannot list snapshots in {self._log_dir}: {err}") from err
        for offset, path in files.items():
            found.put(offset, path)
        return found

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        """Called with the snapshot lock held."""
        path = self._snapshots.pop(offset)
        if path is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        except OSError as err:
            raise KafkaStorageError(f"cannot delete producer snapshot {path}: {err}") from err

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager(log_dir={str(self._log_dir)!r}, "
            f"producers={len(self._producers)}, map_end_offset={self._map_end_offset})"
        )
