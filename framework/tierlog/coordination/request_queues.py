"""The controller's requests to brokers over the network: one queue and one sender per broker.

A controller must never wait on a slow or paused broker: a LeaderAndIsr stuck behind a broker
stopped with SIGSTOP would hold every other decision for the request timeout. So, as Kafka's
``ControllerChannelManager`` does, each broker gets a FIFO queue and a thread of its own; the
controller's ``send`` returns at once. A request that fails is retried, in order, for as long
as the broker stays registered (a broker that goes away gets the whole state again when it
comes back, in a full LeaderAndIsr). Of the UpdateMetadata requests waiting for one broker only
the newest is kept: each carries the whole image.

A broker that comes back gets a new queue, whose sender starts only once the old queue's sender
has ended: a request the old one still had on the wire (to a broker that was paused, say) must
not arrive after the newer ones, least of all an UpdateMetadata, which carries no version a
broker could tell an older image by.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from ..errors import TierlogError
from ..server import protocol as p
from ..server.transport import Transport

log = logging.getLogger(__name__)

#: How long a sender waits before trying a failed request again.
RETRY_BACKOFF_S = 0.2


class _BrokerQueue:
    """The requests waiting for one broker, and the thread that delivers them in order."""

    def __init__(
        self,
        broker_id: int,
        deliver: Callable[[int, p.Request], None],
        predecessor: threading.Thread | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._deliver = deliver
        self._predecessor = predecessor
        self._pending: deque[p.Request] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"controller-to-broker-{broker_id}", daemon=True
        )
        self._thread.start()

    def put(self, request: p.Request) -> None:
        with self._cond:
            if isinstance(request, p.UpdateMetadataRequest):
                self._pending = deque(
                    r for r in self._pending if not isinstance(r, p.UpdateMetadataRequest)
                )
            self._pending.append(request)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def idle(self) -> bool:
        with self._cond:
            return not self._pending

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def _run(self) -> None:
        if self._predecessor is not None:
            self._predecessor.join()  # its request on the wire lands first, or fails
            self._predecessor = None
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                request = self._pending[0]
            try:
                self._deliver(self.broker_id, request)
            except TierlogError as err:
                log.info(
                    "%s to broker %d failed (%s); trying again",
                    type(request).__name__,
                    self.broker_id,
                    err,
                )
                with self._cond:
                    self._cond.wait(RETRY_BACKOFF_S)
                continue
            except Exception:
                log.exception("%s to broker %d failed", type(request).__name__, self.broker_id)
            with self._cond:
                if self._pending and self._pending[0] is request:
                    self._pending.popleft()


class ControllerRequestQueues(Transport):
    """A transport for the controller: LeaderAndIsr, StopReplica and UpdateMetadata are queued
    per broker and answered at once with an empty response (the sender logs what a broker
    refuses); anything else goes straight through ``network``."""

    def __init__(self, network: Transport) -> None:
        super().__init__()
        self._network = network
        self._queues: dict[int, _BrokerQueue] = {}
        #: The sender of each broker's forgotten queue, until a new queue waits for it.
        self._retired: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()
        self._closed = False

    def node_ids(self) -> tuple[int, ...]:
        return self._network.node_ids()

    def _deliver(self, broker_id: int, request: p.Request) -> p.Response:
        match request:
            case p.LeaderAndIsrRequest():
                self._queue(broker_id).put(request)
                return p.LeaderAndIsrResponse()
            case p.StopReplicaRequest():
                self._queue(broker_id).put(request)
                return p.StopReplicaResponse()
            case p.UpdateMetadataRequest():
                self._queue(broker_id).put(request)
                return p.UpdateMetadataResponse()
        return self._network.send(broker_id, request)

    def _queue(self, broker_id: int) -> _BrokerQueue:
        with self._lock:
            if self._closed:
                raise TierlogError("the controller has resigned")
            queue = self._queues.get(broker_id)
            if queue is None:
                predecessor = self._retired.pop(broker_id, None)
                queue = self._queues[broker_id] = _BrokerQueue(
                    broker_id, self._send_now, predecessor
                )
            return queue

    def _send_now(self, broker_id: int, request: p.Request) -> None:
        response: object = self._network.send(broker_id, request)
        for error in getattr(response, "partition_errors", ()):
            if error.error_code != p.NONE:
                log.warning(
                    "broker %d could not apply %s for %s-%d: error %d",
                    broker_id,
                    type(request).__name__,
                    error.topic_name,
                    error.partition_index,
                    error.error_code,
                )
        code = getattr(response, "error_code", p.NONE)
        if code != p.NONE:
            log.warning("broker %d refused %s: error %d", broker_id, type(request).__name__, code)

    def forget(self, broker_id: int) -> None:
        """The broker left the cluster: what waits for it is dropped (it resyncs on return)."""
        with self._lock:
            queue = self._queues.pop(broker_id, None)
            if queue is not None:
                self._retired[broker_id] = queue.thread
        if queue is not None:
            queue.close()

    def drained(self) -> bool:
        """Whether every queued request has been delivered."""
        with self._lock:
            queues = list(self._queues.values())
        return all(queue.idle() for queue in queues)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            queues = list(self._queues.values())
            self._queues.clear()
        for queue in queues:
            queue.close()
        for queue in queues:
            queue.join(timeout=2)
