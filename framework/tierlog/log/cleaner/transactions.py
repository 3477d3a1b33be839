"""What the cleaner knows about transactions while it walks a log: which batches are aborted
data to drop, and which markers may go.

Kafka's ``CleanedTransactionMetadata``. The aborted transactions of the range being cleaned come
from the transaction indexes; walking the batches in offset order, a transactional batch of a
producer with an aborted transaction open is aborted data (dropped), any other transactional
batch belongs to a committed one. A marker may be dropped once no batch of its transaction is
left: an ABORT marker whose transaction had no data in this pass, a COMMIT marker likewise. An
ABORT marker whose data was seen (and so dropped now) is kept one more round, and its
transaction written to the cleaned segment's transaction index, so that readers of a copy that
still holds the data keep filtering it until the marker goes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from ...records import ControlType, RecordBatch, control_type_id
from ..txn_index import AbortedTxn, TransactionIndex


class _OngoingAbort:
    __slots__ = ("last_observed_batch_offset", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactions:
    """Transaction state over one cleaning pass, in offset order."""

    def __init__(self) -> None:
        self._committed: set[int] = set()
        self._aborted: dict[int, _OngoingAbort] = {}
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        self._seen: set[tuple[int, int]] = set()
        #: The index of the segment being written; kept ABORT markers are recorded in it.
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            identity = (txn.producer_id, txn.first_offset)
            if identity not in self._seen:
                self._seen.add(identity)
                heapq.heappush(self._pending, (txn.first_offset, txn.producer_id, txn))

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _, producer_id, txn = heapq.heappop(pending)
            self._aborted.setdefault(producer_id, _OngoingAbort(txn))

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """Whether a data batch is aborted (its records are to be dropped)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self._aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing.last_observed_batch_offset = batch.last_offset
            return True
        self._committed.add(batch.producer_id)
        return False

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """Whether a control batch may be dropped (once its delete horizon has passed)."""
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        record = next(records, None)
        if record is None:
            return True  # emptied by an earlier pass
        producer_id = batch.producer_id
        control = control_type_id(record)
        if control == ControlType.ABORT:
            ongoing = self._aborted.pop(producer_id, None)
            if ongoing is not None and ongoing.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing.txn)
                return False
            return True
        if control == ControlType.COMMIT:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        return False
