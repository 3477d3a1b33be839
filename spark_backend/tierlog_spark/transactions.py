"""The aborted transactions a read_committed read of one segment range must drop.

Kafka's rule: a transaction's entry sits in the transaction index of the segment holding its
ABORT marker, which may come after the segments holding its records. So the indexes of this and
the following segments are searched until an entry's last stable offset shows that no later
marker can concern the range.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierlog.errors import RemoteResourceNotFoundError
from tierlog.log.txn_index import ENTRY_SIZE, AbortedTxn
from tierlog.model import IndexType, RemoteLogSegmentMetadata
from tierlog.spi import RemoteStorageManager

__all__ = ["aborted_transactions"]


def aborted_transactions(
    storage: RemoteStorageManager,
    segments: Iterable[RemoteLogSegmentMetadata],
    first_offset: int,
    last_offset: int,
    local: Iterable[AbortedTxn] = (),
) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``first_offset..last_offset``, from the transaction
    indexes of ``segments`` (those with an index, in offset order) and, if those do not settle
    it, from ``local`` (what the brokers' local indexes hold)."""
    found: list[AbortedTxn] = []
    for segment in segments:
        data = _index_bytes(storage, segment)
        source = f"the transaction index of {segment.remote_log_segment_id}"
        for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            aborted = AbortedTxn.decode(data, position, source=source)
            if aborted.last_offset >= first_offset and aborted.first_offset <= last_offset:
                found.append(aborted)
            if aborted.last_stable_offset > last_offset:
                return found
    found.extend(
        aborted
        for aborted in local
        if aborted.last_offset >= first_offset
        and aborted.first_offset <= last_offset
        and aborted not in found
    )
    return found


def _index_bytes(storage: RemoteStorageManager, segment: RemoteLogSegmentMetadata) -> bytes:
    try:
        stream = storage.fetch_index(segment, IndexType.TRANSACTION)
    except RemoteResourceNotFoundError:
        return b""  # no file means no aborted transactions
    try:
        return bytes(stream.read())
    finally:
        stream.close()
