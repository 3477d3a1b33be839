"""Producer ids: handed out by the controller in blocks, spent by each broker one by one.

As in Kafka since KIP-730, the controller owns the only counter of producer ids and gives a
broker a whole :class:`ProducerIdsBlock` at a time (AllocateProducerIds), so answering an
InitProducerId costs a broker no round trip to the controller until its block runs out. The
controller persists the start of the next block before it returns a block; a restarted
controller, even after a crash, therefore never hands out an id twice. Ids of a block a broker
did not use up are lost, as in Kafka: there are 2**63 of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

import attrs

from ..errors import UnknownServerError

PRODUCER_ID_BLOCK_SIZE: Final = 1000
"""How many ids one block holds (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``)."""

MAX_PRODUCER_ID: Final = (1 << 63) - 1


@attrs.frozen
class ProducerIdsBlock:
    """The ids ``first_producer_id`` .. ``last_producer_id``, given to one broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


BlockSource = Callable[[int], ProducerIdsBlock]
"""Allocates a fresh block for a broker id (the controller's ``allocate_producer_ids``)."""


class ProducerIdManager:
    """A broker's producer ids: the current block, and a new one from the controller once it
    is spent (Kafka's ``RPCProducerIdManager``, with the controller in-process)."""

    def __init__(self, broker_id: int, allocate: BlockSource) -> None:
        self._broker_id = broker_id
        self._allocate = allocate
        self._lock = threading.Lock()
        self._block: ProducerIdsBlock | None = None
        self._next = 0

    def generate_producer_id(self) -> int:
        """An id no producer of this cluster has had; raises if the controller cannot give a
        new block (the error to answer)."""
        with self._lock:
            if self._block is None or self._next > self._block.last_producer_id:
                block = self._allocate(self._broker_id)
                if block.size <= 0 or block.last_producer_id > MAX_PRODUCER_ID:
                    raise UnknownServerError(f"the controller gave an unusable block {block}")
                self._block, self._next = block, block.first_producer_id
            producer_id = self._next
            self._next += 1
            return producer_id
