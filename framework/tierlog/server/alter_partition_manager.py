"""Sends this broker's ISR changes to the controller in batches, off the fetch path.

A leader that grows or shrinks an ISR (a follower caught up, or fell behind) hands the change
here and goes on answering fetches. One thread sends whatever is queued as one AlterPartition,
one request at a time, as Kafka's AlterPartitionManager does, and the controller commits each
batch at once. A restarted follower rejoining a thousand ISRs thus costs a few round trips and
commits, not one of each per partition on its fetcher's path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..errors import TierlogError
from ..model import TopicPartition
from .controller_view import ControllerView
from .image import IsrChange, PartitionRegistration
from .partition import Partition

log = logging.getLogger(__name__)

#: Applies the controller's answer (a registration, or the error that refused it) to a change.
AnswerHandler = Callable[[Partition, IsrChange, PartitionRegistration | TierlogError], None]

_STOP_WAIT_S = 10.0


class AlterPartitionManager:
    """Queues ISR changes (one per partition) and sends them from a thread of its own."""

    def __init__(self, broker_id: int, controller: ControllerView, on_answer: AnswerHandler):
        self.broker_id = broker_id
        self._controller = controller
        self._on_answer = on_answer
        self._pending: dict[TopicPartition, tuple[Partition, IsrChange]] = {}
        self._changed = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(
            target=self._run, name=f"alter-partition-{broker_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """Queues ``change``; its answer reaches the handler from the sending thread. A
        partition has one change in flight at most (the leader proposes no other meanwhile)."""
        with self._changed:
            if self._stopped:
                return
            self._pending[partition.topic_partition] = (partition, change)
            self._changed.notify()

    def stop(self) -> None:
        """Sends nothing more; a request in flight is waited for (briefly)."""
        with self._changed:
            self._stopped = True
            self._pending.clear()
            self._changed.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_STOP_WAIT_S)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._stopped:
                    self._changed.wait()
                if self._stopped:
                    return
                batch, self._pending = self._pending, {}
            try:
                self._send(batch)
            except Exception:
                log.exception("broker %d: applying answers to ISR changes failed", self.broker_id)

    def _send(self, batch: dict[TopicPartition, tuple[Partition, IsrChange]]) -> None:
        changes = {tp: change for tp, (_, change) in batch.items()}
        refused: TierlogError | None = None
        try:
            answers = self._controller.alter_partitions(self.broker_id, changes)
        except TierlogError as err:  # no controller answered
            refused = err
        except Exception as err:  # anything else must not leave the changes pending forever
            log.exception("broker %d: sending ISR changes failed", self.broker_id)
            refused = TierlogError(f"AlterPartition failed: {err}")
        if refused is not None:  # every change is refused, and proposed again after a backoff
            answers = dict.fromkeys(changes, refused)
        for tp, (partition, change) in batch.items():
            self._on_answer(partition, change, answers[tp])
