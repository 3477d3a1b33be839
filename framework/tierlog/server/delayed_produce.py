"""acks=all: a produce waits until the ISR has what it appended (Kafka's DelayedProduce).

Each appended partition needs its high watermark to pass the last offset appended. It is done
with NONE then, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
``min.insync.replicas`` meanwhile; with NOT_LEADER_OR_FOLLOWER if this broker stopped leading it
(or a new leader epoch began); with REQUEST_TIMED_OUT if the request's timeout passes first.
"""

from __future__ import annotations

import attrs

from ..errors import (
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from . import protocol as p
from .partition import Partition
from .purgatory import DelayedOperation


def _code(error: type[Exception]) -> int:
    code = getattr(error, "code", None)
    assert isinstance(code, int)
    return code


@attrs.define(eq=False)
class PendingAck:
    """One partition of a produce waiting for replication."""

    partition: Partition
    leader_epoch: int
    required_offset: int
    min_insync_replicas: int
    error_code: int | None = None

    def check(self) -> bool:
        """Decides this partition if it can be decided now; returns whether it is."""
        if self.error_code is not None:
            return True
        partition = self.partition
        if not partition.is_leader or partition.leader_epoch != self.leader_epoch:
            self.error_code = _code(NotLeaderOrFollowerError)
        elif partition.high_watermark >= self.required_offset:
            if len(partition.in_sync_replicas()) < self.min_insync_replicas:
                self.error_code = _code(NotEnoughReplicasAfterAppendError)
            else:
                self.error_code = p.NONE
        return self.error_code is not None


class DelayedProduce(DelayedOperation):
    def __init__(self, delay_ms: int, pending: list[PendingAck]) -> None:
        super().__init__(delay_ms)
        self.pending = pending

    def try_complete(self) -> bool:
        decided = [ack.check() for ack in self.pending]
        if all(decided):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        for ack in self.pending:
            if not ack.check():
                ack.error_code = _code(RequestTimedOutError)
