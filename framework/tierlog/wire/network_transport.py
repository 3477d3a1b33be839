"""A :class:`Transport` over TCP: the broker types, sent to another broker's listener.

In a multi-process cluster brokers reach each other as any Kafka client reaches them: the
controller sends LeaderAndIsr and UpdateMetadata, followers Fetch from their leaders, leaders
send AlterPartition, each over the Kafka wire. Each broker gets a pool of connections, each
carrying one request at a time, so a follower's long-polling fetch never holds up the
controller's LeaderAndIsr to the same broker. A new connection asks ApiVersions first and uses,
per API, the highest version both ends serve.

Failures are the transport's usual ones: a broker that cannot be reached, or whose connection
breaks or answers garbage, is BrokerNotAvailableError (NetworkError when the connection broke
mid-request), a request not answered in time RequestTimedOutError; the connection involved is
dropped either way, as its stream can no longer be trusted.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from ..errors import (
    BrokerNotAvailableError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from ..server import protocol as p
from ..server.transport import Transport
from .apis import ADMIN_CLIENT_ID, APIS
from .codec import MESSAGES, from_wire, to_wire
from .inter_broker_apis import (
    leader_and_isr_response_from_wire,
    leader_and_isr_to_wire,
    stop_replica_to_wire,
)

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_API_VERSIONS_VERSION = 3
_MAX_FRAME = 1 << 30

#: api key -> the broker's response type for it.
_RESPONSES: dict[int, type[Any]] = {
    p.ProduceRequest.API_KEY: p.ProduceResponse,
    p.FetchRequest.API_KEY: p.FetchResponse,
    p.ListOffsetsRequest.API_KEY: p.ListOffsetsResponse,
    p.MetadataRequest.API_KEY: p.MetadataResponse,
    p.CreateTopicsRequest.API_KEY: p.CreateTopicsResponse,
    p.DeleteTopicsRequest.API_KEY: p.DeleteTopicsResponse,
    p.DeleteRecordsRequest.API_KEY: p.DeleteRecordsResponse,
    p.InitProducerIdRequest.API_KEY: p.InitProducerIdResponse,
    p.OffsetsForLeaderEpochRequest.API_KEY: p.OffsetsForLeaderEpochResponse,
    p.DescribeConfigsRequest.API_KEY: p.DescribeConfigsResponse,
    p.CreatePartitionsRequest.API_KEY: p.CreatePartitionsResponse,
    p.ElectLeadersRequest.API_KEY: p.ElectLeadersResponse,
    p.IncrementalAlterConfigsRequest.API_KEY: p.IncrementalAlterConfigsResponse,
    p.AlterPartitionReassignmentsRequest.API_KEY: p.AlterPartitionReassignmentsResponse,
    p.ListPartitionReassignmentsRequest.API_KEY: p.ListPartitionReassignmentsResponse,
    p.DescribeClusterRequest.API_KEY: p.DescribeClusterResponse,
    p.LeaderAndIsrRequest.API_KEY: p.LeaderAndIsrResponse,
    p.StopReplicaRequest.API_KEY: p.StopReplicaResponse,
    p.UpdateMetadataRequest.API_KEY: p.UpdateMetadataResponse,
    p.ControlledShutdownRequest.API_KEY: p.ControlledShutdownResponse,
    p.AlterPartitionRequest.API_KEY: p.AlterPartitionResponse,
    p.AllocateProducerIdsRequest.API_KEY: p.AllocateProducerIdsResponse,
}


class NetworkTransport(Transport):
    """Sends requests to brokers by id, at the address ``resolve(broker_id)`` gives (None: the
    broker is not registered, BrokerNotAvailableError). ``node_ids()`` lists the brokers that
    can be reached now. ``client_id`` names this sender in the receivers' logs and metrics."""

    def __init__(
        self,
        resolve: Callable[[int], tuple[str, int] | None],
        node_ids: Callable[[], tuple[int, ...]],
        *,
        client_id: str,
        connect_timeout_ms: int = 5000,
        request_timeout_ms: int = 30000,
    ) -> None:
        super().__init__()
        if connect_timeout_ms <= 0 or request_timeout_ms <= 0:
            raise ValueError(
                f"timeouts must be positive, got connect_timeout_ms={connect_timeout_ms}, "
                f"request_timeout_ms={request_timeout_ms}"
            )
        self._resolve = resolve
        self._node_ids = node_ids
        self.client_id = client_id
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._request_timeout_ms = request_timeout_ms
        self._lock = threading.Lock()
        self._idle: dict[int, list[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._closed = False

    def node_ids(self) -> tuple[int, ...]:
        return self._node_ids()

    def send(self, broker_id: int, request: Any, *, timeout_ms: int | None = None) -> Any:
        self.faults.apply(broker_id, request, timeout_ms)
        return self._call(broker_id, request, timeout_ms, self.client_id)

    def send_internal(
        self, broker_id: int, request: p.ProduceRequest, *, timeout_ms: int | None = None
    ) -> p.ProduceResponse:
        """A produce that may append to internal topics: sent with Kafka's ``__admin_client``
        client id, the one the listener lets write them."""
        self.faults.apply(broker_id, request, timeout_ms)
        answer: p.ProduceResponse = self._call(broker_id, request, timeout_ms, ADMIN_CLIENT_ID)
        return answer

    def send_as_admin(
        self, broker_id: int, request: p.CreateTopicsRequest, *, timeout_ms: int | None = None
    ) -> p.CreateTopicsResponse:
        """A CreateTopics of the runtime's own, which may name internal topics (sent, like
        :meth:`send_internal`, as ``__admin_client``)."""
        self.faults.apply(broker_id, request, timeout_ms)
        answer: p.CreateTopicsResponse = self._call(broker_id, request, timeout_ms, ADMIN_CLIENT_ID)
        return answer

    def _deliver(self, broker_id: int, request: p.Request) -> p.Response:
        answer: p.Response = self._call(broker_id, request, None, self.client_id)
        return answer

    def close(self) -> None:
        """Closes every connection; requests under way fail with BrokerNotAvailableError."""
        with self._lock:
            self._closed = True
            connections = [c for pool in self._idle.values() for c in pool] + list(self._busy)
            self._idle.clear()
        for connection in connections:
            connection.close()

    # --- one request ----------------------------------------------------------------------

    def _call(self, broker_id: int, request: Any, timeout_ms: int | None, client_id: str) -> Any:
        key = type(request).API_KEY
        if key not in _RESPONSES:
            raise TypeError(f"{type(self).__name__} does not send {type(request).__name__}")
        timeout_s = (self._request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = time.monotonic() + timeout_s
        connection = self._connection(broker_id)
        try:
            version = connection.version_of(key, type(request).__name__)
        except UnsupportedVersionError:
            self._release(connection, keep=True)
            raise
        ok = False
        try:
            wire = self._to_wire(request, key, version)
            expects_answer = not (key == p.ProduceRequest.API_KEY and request.acks == p.Acks.NONE)
            message = connection.call(wire, version, client_id, deadline, expects_answer)
            answer = (
                p.ProduceResponse(()) if message is None else self._from_wire(request, key, message)
            )
            ok = True
            return answer
        finally:
            self._release(connection, keep=ok)

    def _to_wire(self, request: Any, key: int, version: int) -> Any:
        wire_class = MESSAGES[key][0][version]
        if key == p.LeaderAndIsrRequest.API_KEY:
            return leader_and_isr_to_wire(request, version, leader_address=self._resolve)
        if key == p.StopReplicaRequest.API_KEY:
            return stop_replica_to_wire(request, version)
        return to_wire(request, wire_class)

    def _from_wire(self, request: Any, key: int, message: Any) -> Any:
        if key == p.LeaderAndIsrRequest.API_KEY:
            return leader_and_isr_response_from_wire(message, request)
        if key == p.FetchRequest.API_KEY:
            return fetch_response_from_wire(message)
        return from_wire(message, _RESPONSES[key])

    # --- the pools ------------------------------------------------------------------------

    def _connection(self, broker_id: int) -> _Connection:
        address = self._resolve(broker_id)
        if address is None:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        with self._lock:
            self._check_open()
            pool = self._idle.setdefault(broker_id, [])
            while pool:
                connection = pool.pop()
                if connection.address == address and connection.reusable():
                    self._busy.add(connection)
                    return connection
                connection.close()
        connection = _Connection.open(broker_id, address, self._connect_timeout_s, self.client_id)
        with self._lock:
            try:
                self._check_open()  # close() may have run while this one connected
            except BrokerNotAvailableError:
                connection.close()
                raise
            self._busy.add(connection)
        return connection

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerNotAvailableError(f"{type(self).__name__} is closed")

    def _release(self, connection: _Connection, *, keep: bool) -> None:
        with self._lock:
            self._busy.discard(connection)
            if keep and not self._closed and not connection.broken:
                self._idle.setdefault(connection.broker_id, []).append(connection)
                return
        connection.close()


def fetch_response_from_wire(message: Any) -> p.FetchResponse:
    """The wire's diverging epoch (epoch, end offset; -1 both when absent) as the broker's
    EpochEndOffset of its partition; the records as bytes."""
    diverging: dict[tuple[int, int], p.EpochEndOffset] = {}
    for t, topic in enumerate(message.responses):
        for partition in topic.partitions:
            epoch = partition.diverging_epoch
            if epoch is not None and epoch.epoch >= 0:
                diverging[(t, partition.partition_index)] = p.EpochEndOffset(
                    partition.partition_index,
                    leader_epoch=epoch.epoch,
                    end_offset=epoch.end_offset,
                )
            partition.diverging_epoch = None
            if partition.records is None:
                partition.records = b""
            leader = partition.current_leader
            if leader is not None and leader.leader_id < 0 and leader.leader_epoch < 0:
                partition.current_leader = None
    answer: p.FetchResponse = from_wire(message, p.FetchResponse)
    if not diverging:
        return answer
    return attrs.evolve(
        answer,
        responses=[
            attrs.evolve(
                topic,
                partitions=[
                    attrs.evolve(data, diverging_epoch=diverging.get((t, data.partition_index)))
                    for data in topic.partitions
                ],
            )
            for t, topic in enumerate(answer.responses)
        ],
    )


class _Connection:
    """One socket to one broker, carrying one request at a time, with the versions agreed."""

    def __init__(self, broker_id: int, address: tuple[str, int], sock: socket.socket) -> None:
        self.broker_id = broker_id
        self.address = address
        self._sock = sock
        self._correlation = itertools.count(1)
        self._versions: dict[int, tuple[int, int]] = {}
        self.broken = False

    @classmethod
    def open(
        cls, broker_id: int, address: tuple[str, int], timeout_s: float, client_id: str
    ) -> _Connection:
        try:
            sock = socket.create_connection(address, timeout=timeout_s)
        except OSError as err:
            raise BrokerNotAvailableError(
                f"cannot connect to broker {broker_id} at {address[0]}:{address[1]}: {err}"
            ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(broker_id, address, sock)
        try:
            versions = connection.call(
                ApiVersionsRequest[_API_VERSIONS_VERSION](
                    client_software_name="tierlog", client_software_version="0"
                ),
                _API_VERSIONS_VERSION,
                client_id,
                time.monotonic() + timeout_s,
                True,
            )
            if versions.error_code != 0:
                raise NetworkError(
                    f"broker {broker_id} answered ApiVersions with error {versions.error_code}"
                )
        except BaseException:
            connection.close()
            raise
        connection._versions = {
            a.api_key: (a.min_version, a.max_version) for a in versions.api_keys
        }
        return connection

    def version_of(self, key: int, name: str) -> int:
        """The highest version of API ``key`` both ends serve."""
        ours = APIS.get(key)
        theirs = self._versions.get(key)
        if ours is not None and theirs is not None:
            high = min(ours.max_version, theirs[1])
            if high >= max(ours.min_version, theirs[0]):
                return high
        shown = "none" if theirs is None else f"{theirs[0]}-{theirs[1]}"
        raise UnsupportedVersionError(
            f"broker {self.broker_id} serves {name.removesuffix('Request')} versions {shown}, "
            f"this one sends "
            + ("none" if ours is None else f"{ours.min_version}-{ours.max_version}")
        )

    def call(
        self,
        message: Any,
        version: int,
        client_id: str,
        deadline: float,
        expects_answer: bool,
    ) -> Any:
        """Sends ``message`` and reads its answer (None when none is due), its correlation id
        checked."""
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        message.API_VERSION = version
        message.with_header(correlation_id=correlation_id, client_id=client_id)
        frame = bytes(message.encode(header=True, framed=True))
        name = type(message).__name__
        try:
            self._sock.settimeout(_remaining(deadline, self, name))
            self._sock.sendall(frame)
            if not expects_answer:
                return None
            size = _SIZE.unpack(self._exactly(4, deadline, name))[0]
            if not 0 <= size <= _MAX_FRAME:
                raise self._garbled(f"a response frame of size {size}")
            data = self._exactly(size, deadline, name)
        except TimeoutError:
            self.broken = True
            raise RequestTimedOutError(
                f"{name} to broker {self.broker_id} not answered in time"
            ) from None
        except OSError as err:
            self.broken = True
            raise NetworkError(
                f"connection to broker {self.broker_id} broke during {name}: {err}"
            ) from None
        try:
            response = message.header.get_response_class().decode(
                data, version=version, header=True
            )
        except Exception as err:  # the codec raises whatever its parser met
            raise self._garbled(f"an undecodable {name} response ({err})") from None
        if response.header.correlation_id != correlation_id:
            raise self._garbled(
                f"correlation id {response.header.correlation_id} for {correlation_id}"
            )
        return response

    def _exactly(self, n: int, deadline: float, name: str) -> bytes:
        data = bytearray()
        while len(data) < n:
            self._sock.settimeout(_remaining(deadline, self, name))
            chunk = self._sock.recv(min(n - len(data), 1 << 20))
            if not chunk:
                raise ConnectionResetError("closed by the broker")
            data += chunk
        return bytes(data)

    def _garbled(self, what: str) -> NetworkError:
        self.broken = True
        return NetworkError(f"broker {self.broker_id} sent {what}; connection dropped")

    def reusable(self) -> bool:
        """Idle and still open: nothing to read (an idle connection has no answer due, so
        anything readable is the broker closing it)."""
        if self.broken:
            return False
        try:
            poller = select.poll()
            poller.register(self._sock, select.POLLIN | select.POLLHUP | select.POLLERR)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def _remaining(deadline: float, connection: _Connection, name: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"{name} to broker {connection.broker_id}")
    return left
