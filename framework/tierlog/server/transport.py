"""How requests reach a broker: one interface, an in-process implementation, injectable faults.

Clients and the controller never call a broker directly; they ``send`` through a
:class:`Transport`, so a network front end can replace the in-process one and tests can slow
down, lose or fail exactly the requests they choose (``transport.faults.add(...)``).
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, overload

import attrs

from ..errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    RequestTimedOutError,
    TierlogError,
)
from . import protocol as p

if TYPE_CHECKING:
    from .broker import Broker


FaultMatch = Callable[[int, p.Request], bool]


@attrs.define(eq=False)
class Fault:
    """What to do to the requests ``match(broker_id, request)`` selects.

    ``delay_ms`` holds a request back before delivering it (past the request's ``timeout_ms``
    it is not delivered and the sender gets RequestTimedOutError); ``drop`` loses it (the sender
    gets RequestTimedOutError, the broker never sees it); ``error`` answers it with that error
    instead of delivering it. ``times`` limits how many requests are affected (None: all).
    ``hits`` counts the requests affected so far.
    """

    match: FaultMatch
    delay_ms: int = 0
    drop: bool = False
    error: TierlogError | type[TierlogError] | None = None
    times: int | None = None
    hits: int = 0


@attrs.define(eq=False)
class FaultInjector:
    """The faults in force on one transport; add and remove them at any time."""

    _faults: list[Fault] = attrs.field(factory=list)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def add(
        self,
        match: FaultMatch,
        *,
        delay_ms: int = 0,
        drop: bool = False,
        error: TierlogError | type[TierlogError] | None = None,
        times: int | None = None,
    ) -> Fault:
        """Start applying a fault; returns it for :meth:`remove` and its ``hits``."""
        if delay_ms < 0:
            raise ValueError(f"delay_ms must not be negative, got {delay_ms}")
        fault = Fault(match, delay_ms, drop, error, times)
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take(self, broker_id: int, request: p.Request) -> list[Fault]:
        with self._lock:
            chosen = []
            for fault in self._faults:
                if fault.times is not None and fault.hits >= fault.times:
                    continue
                if fault.match(broker_id, request):
                    fault.hits += 1
                    chosen.append(fault)
            return chosen

    def apply(self, broker_id: int, request: p.Request, timeout_ms: int | None) -> None:
        """Runs the matching faults; raises when the request must not be delivered."""
        for fault in self._take(broker_id, request):
            if fault.delay_ms:
                if timeout_ms is not None and fault.delay_ms > timeout_ms:
                    time.sleep(timeout_ms / 1000)
                    raise RequestTimedOutError(
                        f"{type(request).__name__} to broker {broker_id} timed out after "
                        f"{timeout_ms} ms"
                    )
                time.sleep(fault.delay_ms / 1000)
            if fault.drop:
                raise RequestTimedOutError(
                    f"{type(request).__name__} to broker {broker_id} was lost"
                )
            if fault.error is not None:
                error = fault.error
                if isinstance(error, type):
                    error = error(f"injected fault on {type(request).__name__} to {broker_id}")
                raise error


class Transport(abc.ABC):
    """Delivers a request to one broker and returns its response.

    Raises BrokerNotAvailableError when the broker cannot be reached and RequestTimedOutError
    when a request is lost or too slow; errors about the request's content come back inside
    the response as error codes, never as exceptions.
    """

    def __init__(self) -> None:
        self.faults = FaultInjector()

    @abc.abstractmethod
    def node_ids(self) -> tuple[int, ...]:
        """The brokers that can be reached now: a client's bootstrap servers."""

    @abc.abstractmethod
    def _deliver(self, broker_id: int, request: p.Request) -> p.Response: ...

    @overload
    def send(
        self, broker_id: int, request: p.ProduceRequest, *, timeout_ms: int | None = None
    ) -> p.ProduceResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.FetchRequest, *, timeout_ms: int | None = None
    ) -> p.FetchResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.ListOffsetsRequest, *, timeout_ms: int | None = None
    ) -> p.ListOffsetsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.MetadataRequest, *, timeout_ms: int | None = None
    ) -> p.MetadataResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.CreateTopicsRequest, *, timeout_ms: int | None = None
    ) -> p.CreateTopicsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.DeleteTopicsRequest, *, timeout_ms: int | None = None
    ) -> p.DeleteTopicsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.DeleteRecordsRequest, *, timeout_ms: int | None = None
    ) -> p.DeleteRecordsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.InitProducerIdRequest, *, timeout_ms: int | None = None
    ) -> p.InitProducerIdResponse: ...
    @overload
    def send(
        self,
        broker_id: int,
        request: p.OffsetsForLeaderEpochRequest,
        *,
        timeout_ms: int | None = None,
    ) -> p.OffsetsForLeaderEpochResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.WriteTxnMarkersRequest, *, timeout_ms: int | None = None
    ) -> p.WriteTxnMarkersResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.DescribeConfigsRequest, *, timeout_ms: int | None = None
    ) -> p.DescribeConfigsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.CreatePartitionsRequest, *, timeout_ms: int | None = None
    ) -> p.CreatePartitionsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.ElectLeadersRequest, *, timeout_ms: int | None = None
    ) -> p.ElectLeadersResponse: ...
    @overload
    def send(
        self,
        broker_id: int,
        request: p.IncrementalAlterConfigsRequest,
        *,
        timeout_ms: int | None = None,
    ) -> p.IncrementalAlterConfigsResponse: ...
    @overload
    def send(
        self,
        broker_id: int,
        request: p.AlterPartitionReassignmentsRequest,
        *,
        timeout_ms: int | None = None,
    ) -> p.AlterPartitionReassignmentsResponse: ...
    @overload
    def send(
        self,
        broker_id: int,
        request: p.ListPartitionReassignmentsRequest,
        *,
        timeout_ms: int | None = None,
    ) -> p.ListPartitionReassignmentsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.DescribeClusterRequest, *, timeout_ms: int | None = None
    ) -> p.DescribeClusterResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.LeaderAndIsrRequest, *, timeout_ms: int | None = None
    ) -> p.LeaderAndIsrResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.StopReplicaRequest, *, timeout_ms: int | None = None
    ) -> p.StopReplicaResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.UpdateMetadataRequest, *, timeout_ms: int | None = None
    ) -> p.UpdateMetadataResponse: ...
    @overload
    def send(
        self,
        broker_id: int,
        request: p.ControlledShutdownRequest,
        *,
        timeout_ms: int | None = None,
    ) -> p.ControlledShutdownResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.AlterPartitionRequest, *, timeout_ms: int | None = None
    ) -> p.AlterPartitionResponse: ...
    @overload
    def send(
        self,
        broker_id: int,
        request: p.AllocateProducerIdsRequest,
        *,
        timeout_ms: int | None = None,
    ) -> p.AllocateProducerIdsResponse: ...
    @overload
    def send(
        self, broker_id: int, request: p.Request, *, timeout_ms: int | None = None
    ) -> p.Response: ...
    def send(
        self, broker_id: int, request: p.Request, *, timeout_ms: int | None = None
    ) -> p.Response:
        self.faults.apply(broker_id, request, timeout_ms)
        return self._deliver(broker_id, request)

    def send_internal(
        self, broker_id: int, request: p.ProduceRequest, *, timeout_ms: int | None = None
    ) -> p.ProduceResponse:
        """Delivers a produce from the runtime's own writers, which may append to internal
        topics (Kafka's ``internalTopicsAllowed``).

        Only a transport that reaches brokers in this process carries it: the flag is not part
        of the request, so nothing that arrives from the network can set it.
        """
        self.faults.apply(broker_id, request, timeout_ms)
        return self._deliver_internal(broker_id, request)

    def _deliver_internal(self, broker_id: int, request: p.ProduceRequest) -> p.ProduceResponse:
        raise InvalidRequestError(
            f"{type(self).__name__} does not carry the runtime's writes to internal topics"
        )


class InProcessTransport(Transport):
    """Routes requests to brokers living in this process, by broker id."""

    def __init__(self) -> None:
        super().__init__()
        self._brokers: dict[int, Broker] = {}
        self._lock = threading.Lock()

    def register(self, broker: Broker) -> None:
        with self._lock:
            self._brokers[broker.broker_id] = broker

    def unregister(self, broker_id: int) -> None:
        with self._lock:
            self._brokers.pop(broker_id, None)

    def node_ids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(sorted(i for i, b in self._brokers.items() if b.serving))

    def _deliver(self, broker_id: int, request: p.Request) -> p.Response:
        return self._serving(broker_id).handle(request)

    def _deliver_internal(self, broker_id: int, request: p.ProduceRequest) -> p.ProduceResponse:
        return self._serving(broker_id).handle_internal_produce(request)

    def _serving(self, broker_id: int) -> Broker:
        with self._lock:
            broker = self._brokers.get(broker_id)
        if broker is None or not broker.serving:
            raise BrokerNotAvailableError(f"broker {broker_id} is not available")
        return broker
