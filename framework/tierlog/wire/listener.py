"""A broker's TCP listeners: Kafka clients connect here.

One thread accepts on each listener socket, and each connection gets a thread of its own that
reads a frame, answers it, writes the answer, and only then reads the next frame: requests on a
connection are answered strictly in order (Kafka's channel muting), and a request that waits
(a long-poll fetch, a remote read, an acks=all produce) holds only its own connection. The
broker's handlers are blocking calls, so this is the simplest model that keeps every other
connection flowing. ``queued.max.requests`` bounds the requests read and not yet handed to
their handler, as Kafka's request queue does: a frame takes a slot once its size is known and
gives it back when its handler starts, so requests waiting inside the broker hold none.

Bad input closes the connection after one log line naming the problem and the peer, as Kafka
does: a frame over ``socket.request.max.bytes`` or of negative size, a truncated or
undecodable frame, an unknown API key or an unserved version (ApiVersions excepted: KIP-511
answers it with UNSUPPORTED_VERSION and the versions served). A request that decodes but
carries bad data or a bad value (a corrupt record batch, an illegal topic name, a negative
partition index) gets Kafka's error code, and one log line per request names what was refused
and the peer. Nothing a client sends reaches another connection or a partition it did not name.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import typing
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO, Final

from ..config import BrokerConfig
from ..errors import BrokerNotAvailableError
from ..metrics import MetricsRegistry
from .apis import APIS, ConnectionClosed, RequestContext, api_versions_response
from .codec import (
    FrameError,
    ResponseError,
    decode_request,
    encode_response,
    peek_header,
    response_errors,
)
from .endpoints import (
    Endpoint,
    EndpointDirectory,
    advertised_host,
    parse_listeners,
    parse_protocol_map,
)
from .metrics import NetworkMetrics, elapsed_ms, error_name
from .peer import serving

if TYPE_CHECKING:
    from ..server.broker import Broker

log = logging.getLogger(__name__)

_API_VERSIONS_KEY = 18
_UNSUPPORTED_VERSION = 35  # UNSUPPORTED_VERSION
#: How often blocked accept/read calls look at whether the listener is stopping.
_POLL_S = 0.5


class WireListener:
    """The listeners of one broker. :meth:`start` binds (port 0 picks a free port) and
    registers the advertised endpoints; :meth:`stop` closes every socket."""

    def __init__(
        self,
        broker: Callable[[], Broker],
        config: BrokerConfig,
        endpoints: EndpointDirectory,
        *,
        metrics: MetricsRegistry | None = None,
        port_offset: int = 0,
    ) -> None:
        self._broker = broker
        self.broker_id = config.get_int("broker.id")
        self._endpoints = endpoints
        protocols = parse_protocol_map(config.get_str("listener.security.protocol.map") or "")
        self._binds = tuple(
            _offset(e, port_offset)
            for e in parse_listeners(config.get_list("listeners"), protocols)
        )
        advertised = (
            config.get_list("advertised.listeners") if config.get("advertised.listeners") else ()
        )
        self._advertised = {
            e.name: _offset(e, port_offset)
            for e in (
                parse_listeners(advertised, protocols, key="advertised.listeners")
                if advertised
                else ()
            )
        }
        for name in self._advertised:
            if all(b.name != name for b in self._binds):
                raise ValueError(f"advertised.listeners names {name}, which listeners does not")
        self._max_frame = config.get_int("socket.request.max.bytes")
        self._idle_s = config.get_int("connections.max.idle.ms") / 1000.0
        self._max_connections = config.get_int("max.connections")
        self._max_per_ip = config.get_int("max.connections.per.ip")
        self._slots = threading.BoundedSemaphore(config.get_int("queued.max.requests"))
        self._metrics_registry = metrics
        self._metrics: dict[str, NetworkMetrics] = {}
        self._lock = threading.Lock()
        self._sockets: list[tuple[socket.socket, Endpoint]] = []
        self._connections: set[socket.socket] = set()
        self._per_ip: Counter[str] = Counter()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self.bound: tuple[Endpoint, ...] = ()
        self.advertised: tuple[Endpoint, ...] = ()

    # --- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        bound, advertised = [], []
        try:
            for endpoint in self._binds:
                family = socket.AF_INET6 if ":" in endpoint.host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind((endpoint.host, endpoint.port))
                except OSError as err:
                    sock.close()
                    raise OSError(
                        err.errno,
                        f"broker {self.broker_id} cannot listen on {endpoint}: {err.strerror}",
                    ) from None
                sock.listen(128)
                sock.settimeout(_POLL_S)
                real = Endpoint(
                    endpoint.name, endpoint.host, sock.getsockname()[1], endpoint.security_protocol
                )
                self._sockets.append((sock, real))
                bound.append(real)
                shown = self._advertised.get(endpoint.name)
                if shown is None or shown.port == 0:
                    host = shown.host if shown is not None and shown.host else endpoint.host
                    shown = Endpoint(real.name, advertised_host(host), real.port)
                advertised.append(shown)
                if self._metrics_registry is not None:
                    self._metrics[real.name] = NetworkMetrics(self._metrics_registry, real.name)
        except BaseException:
            self.stop()
            raise
        self.bound, self.advertised = tuple(bound), tuple(advertised)
        for endpoint in self.advertised:
            self._endpoints.register(self.broker_id, endpoint)
        for sock, endpoint in self._sockets:
            thread = threading.Thread(
                target=self._accept_loop,
                args=(sock, endpoint),
                name=f"tierlog-listener-{self.broker_id}-{endpoint.name}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        log.info(
            "broker %d listening on %s",
            self.broker_id,
            ", ".join(str(e) for e in self.bound),
        )

    def stop(self) -> None:
        """Stops accepting, closes every connection, and waits for the accept threads."""
        self._stopping.set()
        for endpoint in self.advertised:
            self._endpoints.unregister(self.broker_id, endpoint)
        with self._lock:
            sockets = [sock for sock, _ in self._sockets]
            connections = list(self._connections)
        for sock in sockets + connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)
        for metrics in self._metrics.values():
            metrics.close()

    # --- connections ----------------------------------------------------------------------

    def _accept_loop(self, sock: socket.socket, endpoint: Endpoint) -> None:
        while not self._stopping.is_set():
            try:
                conn, address = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by stop()
            ip = str(address[0])
            peer = f"{ip}:{address[1]}"
            with self._lock:
                refused = self._refusal(ip)
                if refused is None:
                    self._connections.add(conn)
                    self._per_ip[ip] += 1
            if refused is not None:
                log.warning(
                    "broker %d: closing connection from %s: %s", self.broker_id, peer, refused
                )
                conn.close()
                continue
            threading.Thread(
                target=self._serve,
                args=(conn, ip, peer, endpoint),
                name=f"tierlog-connection-{self.broker_id}-{peer}",
                daemon=True,
            ).start()

    def _refusal(self, ip: str) -> str | None:
        if len(self._connections) >= self._max_connections:
            return f"max.connections ({self._max_connections}) reached"
        if self._per_ip[ip] >= self._max_per_ip:
            return f"max.connections.per.ip ({self._max_per_ip}) reached for {ip}"
        return None

    def _serve(self, conn: socket.socket, ip: str, peer: str, endpoint: Endpoint) -> None:
        metrics = self._metrics.get(endpoint.name)
        if metrics is not None:
            metrics.connection_opened()
        reader: BinaryIO | None = None
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(self._idle_s)
            reader = typing.cast(BinaryIO, conn.makefile("rb", buffering=256 * 1024))
            while not self._stopping.is_set():
                waiting_since = time.perf_counter()
                frame, slot = self._read_frame(reader)
                try:
                    received = time.perf_counter()
                    if metrics is not None:
                        metrics.received(len(frame))
                    with serving(conn):
                        self._answer(conn, frame, slot, peer, endpoint, metrics, received)
                finally:
                    slot.release()
                if metrics is not None:
                    metrics.waited(received - waiting_since, time.perf_counter() - received)
        except ConnectionClosed as why:
            # The reason as text: the exception would keep this frame alive in any handler
            # that holds records (and with it the connection's buffers).
            if reason := str(why):
                log.warning(
                    "broker %d: closing connection from %s: %s", self.broker_id, peer, reason
                )
        except TimeoutError:
            log.info(
                "broker %d: closing connection from %s: idle for connections.max.idle.ms",
                self.broker_id,
                peer,
            )
        except OSError as err:
            if not self._stopping.is_set():
                log.debug("broker %d: connection from %s ended: %s", self.broker_id, peer, str(err))
        except Exception:
            log.exception("broker %d: connection from %s failed", self.broker_id, peer)
        finally:
            with self._lock:
                self._connections.discard(conn)
                self._per_ip[ip] -= 1
                if self._per_ip[ip] <= 0:
                    del self._per_ip[ip]
            # The socket closes only when its reader does too: a reader left to the garbage
            # collector would hold the connection open, unanswered, long after this thread.
            if reader is not None:
                reader.close()
            conn.close()
            if metrics is not None:
                metrics.connection_closed()

    def _read_frame(self, reader: BinaryIO) -> tuple[bytes, _Slot]:
        """The next frame, and the ``queued.max.requests`` slot it holds until its handler
        starts (taken once its size is known, so an idle connection holds none)."""
        read = reader.read
        prefix = read(4)
        if not prefix:
            raise ConnectionClosed("")  # the client hung up between requests
        if len(prefix) < 4:
            raise ConnectionClosed("truncated frame size")
        size = int.from_bytes(prefix, "big", signed=True)
        if size < 0:
            raise ConnectionClosed(f"frame of negative size {size}")
        if size > self._max_frame:
            raise ConnectionClosed(
                f"frame of {size} bytes is larger than socket.request.max.bytes ({self._max_frame})"
            )
        slot = _Slot(self._slots)
        try:
            frame = read(size)
            if len(frame) < size:
                raise ConnectionClosed(f"truncated frame: {len(frame)} of {size} bytes")
        except BaseException:
            slot.release()
            raise
        return bytes(frame), slot

    def _answer(
        self,
        conn: socket.socket,
        frame: bytes,
        slot: _Slot,
        peer: str,
        endpoint: Endpoint,
        metrics: NetworkMetrics | None,
        received: float,
    ) -> None:
        try:
            header = peek_header(frame)
        except FrameError as err:
            raise ConnectionClosed(str(err)) from None
        api = APIS.get(header.api_key)
        if api is None:
            raise ConnectionClosed(f"unknown API key {header.api_key}")
        if not api.serves(header.api_version):
            if header.api_key == _API_VERSIONS_KEY:
                # KIP-511: a v0 answer the client can read, naming the versions served.
                response = api_versions_response(0, _UNSUPPORTED_VERSION)
                conn.sendall(encode_response(response, 0, header.correlation_id))
                return
            raise ConnectionClosed(
                f"{api.name} v{header.api_version} is not served "
                f"(versions {api.min_version}-{api.max_version})"
            )
        try:
            message, client_id = decode_request(frame, header)
        except FrameError as err:
            raise ConnectionClosed(str(err)) from None
        broker = self._broker()
        ctx = RequestContext(
            broker=broker,
            endpoints=self._endpoints,
            listener=endpoint.name,
            version=header.api_version,
            client_id=client_id,
            peer=peer,
        )
        slot.release()  # handled now: a request that waits in its handler holds no slot
        try:
            started = time.perf_counter()
            response = api.handler(ctx, message)
            handled = time.perf_counter()
        except BrokerNotAvailableError as err:
            raise ConnectionClosed(str(err)) from None  # stopping: clients go to another broker
        errors = () if response is None else tuple(response_errors(response))
        refused = [_refusal(error) for error in errors if _malformed(error)]
        if refused:  # logged before the answer goes, so the client never sees it first
            shown = "; ".join(refused[:_REFUSALS_SHOWN])
            if len(refused) > _REFUSALS_SHOWN:
                shown += f"; and {len(refused) - _REFUSALS_SHOWN} more"
            log.warning(
                "broker %d: refused %s v%d from %s: %s",
                self.broker_id,
                api.name,
                header.api_version,
                peer,
                shown,
            )
        if response is not None:
            conn.sendall(encode_response(response, header.api_version, header.correlation_id))
        if metrics is not None:
            metrics.request_done(
                api.name,
                header.api_version,
                (error.code for error in errors),
                queue_ms=(started - received) * 1000.0,
                local_ms=(handled - started) * 1000.0,
                send_ms=elapsed_ms(handled),
            )


#: Error codes only a malformed request gets: its data or a value in it is wrong, not the state
#: of the cluster (NOT_LEADER_OR_FOLLOWER and the like are a client's ordinary life).
MALFORMED: Final = frozenset(
    {
        2,  # CORRUPT_MESSAGE
        10,  # MESSAGE_TOO_LARGE
        17,  # INVALID_TOPIC_EXCEPTION
        18,  # RECORD_LIST_TOO_LARGE
        21,  # INVALID_REQUIRED_ACKS
        42,  # INVALID_REQUEST
        87,  # INVALID_RECORD
    }
)
_UNKNOWN_TOPIC_OR_PARTITION = 3
_REFUSALS_SHOWN = 3


def _malformed(error: ResponseError) -> bool:
    """A code of :data:`MALFORMED`, or UNKNOWN_TOPIC_OR_PARTITION for a negative partition.

    Kafka answers these with the code alone; tierlog also logs them, once per request, so an
    operator can tell which client sends bad data. A partition index past the last is not
    among them: a client whose metadata is newer than the broker's asks for one.
    """
    return error.code in MALFORMED or (
        error.code == _UNKNOWN_TOPIC_OR_PARTITION
        and error.partition is not None
        and error.partition < 0
    )


def _refusal(error: ResponseError) -> str:
    where = "the request" if error.topic is None else _shown(error.topic)
    if error.partition is not None:
        where += f"-{error.partition}"
    text = f" ({_shown(error.message, 200)})" if error.message else ""
    return f"{where}: {error_name(error.code)}{text}"


def _shown(text: str, limit: int = 60) -> str:
    """``text`` fit for one log line: a hostile name can be empty, huge or unprintable."""
    if text and len(text) <= limit and text.isprintable():
        return text
    return repr(text[:limit]) + (f"... ({len(text)} characters)" if len(text) > limit else "")


def _offset(endpoint: Endpoint, offset: int) -> Endpoint:
    if offset == 0 or endpoint.port == 0:
        return endpoint
    return Endpoint(
        endpoint.name, endpoint.host, endpoint.port + offset, endpoint.security_protocol
    )


class _Slot:
    """One ``queued.max.requests`` slot, released at most once."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        slots.acquire()
        self._slots: threading.BoundedSemaphore | None = slots

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.release()
