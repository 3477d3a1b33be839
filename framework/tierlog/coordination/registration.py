"""A live broker's registration in ZooKeeper, and the cluster's view of the live brokers.

A broker is alive while its ephemeral ``/brokers/ids/<id>`` exists; ZooKeeper deletes the node
when the broker's session ends, cleanly or by expiry. The node's creation zxid is the *broker
epoch* (Kafka's KAFKA-7235): a broker that comes back, however fast, gets a new one, so the
controller can tell the new incarnation from requests of the old.

kazoo does not recreate ephemeral nodes after its session expires, and a call to ZooKeeper from
inside a kazoo state listener deadlocks (kazoo issue #355). So the listener here only queues the
state change; one thread of the registration's own re-registers and runs the callbacks.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import KazooState, ZnodeStat

from ..errors import InvalidConfigError
from ..log.checkpoint import write_atomically
from ..wire.endpoints import Endpoint
from . import paths

_log = logging.getLogger(__name__)

#: Kafka's ``BrokerIdZNode`` version 5 (with features), which this layout follows.
REGISTRATION_VERSION: Final = 5
_KNOWN_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_STALE_WAIT_MS: Final = 18_000
#: Beyond the session timeout, how long ZooKeeper may take to remove an expired session's node.
_EXPIRY_ALLOWANCE_S: Final = 5.0
#: The file, in a broker's first log dir, naming the ZooKeeper sessions it registered with.
SESSION_RECORD: Final = "zookeeper-sessions"


class BrokerIdAlreadyRegisteredError(InvalidConfigError):
    """Another live broker holds this broker.id: two brokers were given the same id."""

    def __init__(self, broker_id: int, owner_session: int) -> None:
        self.broker_id = broker_id
        self.owner_session = owner_session
        super().__init__(
            f"broker.id {broker_id} is already registered by another broker "
            f"(ZooKeeper session 0x{owner_session:x} holds {paths.broker_path(broker_id)}); "
            "give every broker its own broker.id",
            key="broker.id",
            value=broker_id,
        )


def parse_endpoint(text: str) -> Endpoint:
    """One ``NAME://host:port`` of a registration (IPv6 hosts in brackets)."""
    name, sep, address = text.partition("://")
    if not sep or not name:
        raise ValueError(f"endpoint {text!r} is not NAME://host:port")
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = address.rpartition(":")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"endpoint {text!r} has no valid port")
    return Endpoint(name.upper(), host, int(port_text))


@attrs.frozen
class BrokerInfo:
    """A registered broker as the cluster sees it: where it listens, and its epoch."""

    broker_id: int
    endpoints: tuple[str, ...]
    rack: str | None
    epoch: int

    @classmethod
    def from_node(cls, broker_id: int, data: bytes, stat: ZnodeStat) -> BrokerInfo:
        try:
            payload = json.loads(data)
            endpoints = tuple(str(e) for e in payload["endpoints"])
            rack = payload.get("rack")
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(
                f"{paths.broker_path(broker_id)} is not a broker registration"
            ) from err
        return cls(broker_id, endpoints, None if rack is None else str(rack), stat.czxid)


def registration_data(
    endpoints: Sequence[str],
    rack: str | None = None,
    *,
    listener_security_protocol_map: Mapping[str, str] | None = None,
) -> bytes:
    """The JSON of ``/brokers/ids/<id>``, laid out as Kafka's, so its tools can read it."""
    parsed = [parse_endpoint(e) for e in endpoints]
    if not parsed:
        raise ValueError("a broker registers at least one endpoint")
    protocols = dict(listener_security_protocol_map or {})
    for endpoint in parsed:
        default = endpoint.name if endpoint.name in _KNOWN_PROTOCOLS else "PLAINTEXT"
        protocols.setdefault(endpoint.name, default)
    plaintext = next((e for e in parsed if protocols[e.name] == "PLAINTEXT"), None)
    payload = {
        "version": REGISTRATION_VERSION,
        "listener_security_protocol_map": protocols,
        "endpoints": [str(e) for e in parsed],
        "jmx_port": -1,
        "features": {},
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "timestamp": str(int(time.time() * 1000)),
        "rack": rack,
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def _session_id(client: KazooClient) -> int | None:
    client_id = client.client_id
    return None if client_id is None else int(client_id[0])


#: Sessions a session record keeps: the newest are all a restart can meet.
_RECORDED_SESSIONS: Final = 8


def _read_sessions(record: Path | None) -> list[int]:
    """The sessions in ``record``, oldest first."""
    if record is None:
        return []
    try:
        return [int(line, 16) for line in record.read_text().split()]
    except FileNotFoundError:
        return []
    except ValueError as err:
        _log.warning("ignoring unreadable %s: %s", record, err)
        return []


def _record_session(record: Path | None, session: int) -> None:
    if record is None:
        return
    kept = [s for s in _read_sessions(record) if s != session][-(_RECORDED_SESSIONS - 1) :]
    write_atomically(record, "".join(f"{s:x}\n" for s in [*kept, session]).encode())


class BrokerRegistration:
    """Keeps ``/brokers/ids/<broker_id>`` alive for as long as the broker runs.

    Callbacks run on the registration's own thread, one at a time, in order:
    ``on_suspended()`` when the connection drops (the session may still be alive),
    ``on_reconnected()`` when it comes back with the same session (the registration stood),
    ``on_reregistered(new_epoch)`` after the session expired and the broker registered again,
    ``on_failed(error)`` when that re-registration was refused.
    """

    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        endpoints: list[str],
        rack: str | None = None,
        *,
        listener_security_protocol_map: Mapping[str, str] | None = None,
        session_record: Path | None = None,
    ) -> None:
        self.client = client
        #: A file in the broker's (locked) log dir naming the sessions it registered with, so
        #: that a restart after a crash knows the registration left behind is its own.
        self.session_record = session_record
        self.broker_id = broker_id
        self.path = paths.broker_path(broker_id)
        self.data = registration_data(
            endpoints, rack, listener_security_protocol_map=listener_security_protocol_map
        )
        self.on_reregistered: list[Callable[[int], None]] = []
        self.on_suspended: list[Callable[[], None]] = []
        self.on_reconnected: list[Callable[[], None]] = []
        self.on_failed: list[Callable[[Exception], None]] = []
        self._lock = threading.RLock()
        self._epoch: int | None = None
        self._past_sessions: set[int] = set(_read_sessions(session_record))
        self._events: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._closed = False

    @property
    def epoch(self) -> int | None:
        """The broker epoch (czxid of the registration), None before ``register``."""
        return self._epoch

    def register(self) -> int:
        """Create the ephemeral registration and return the broker epoch.

        Starts watching the session so the registration is redone after an expiry.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the registration of broker {self.broker_id} is closed")
            epoch = self._create()
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name=f"broker-{self.broker_id}-registration", daemon=True
                )
                self._worker.start()
                self.client.add_listener(self._on_state)
            return epoch

    def deregister(self) -> None:
        """Delete the registration (clean shutdown) and stop watching the session."""
        self.close()
        session = _session_id(self.client)
        try:
            _, stat = self.client.get(self.path)
            if stat.ephemeralOwner == session:
                self.client.delete(self.path, version=stat.version)
        except NoNodeError:
            pass

    def close(self) -> None:
        """Stop watching the session; the node lives until the session ends."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.client.remove_listener(self._on_state)
        self._events.put(None)
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=10)

    # --- internals -----------------------------------------------------------------------------

    def _create(self) -> int:
        self.client.ensure_path(paths.BROKER_IDS)
        deadline: float | None = None
        while True:
            session = _session_id(self.client)
            try:
                _, stat = self.client.create(
                    self.path, self.data, ephemeral=True, include_data=True
                )
            except NodeExistsError:
                try:
                    _, stat = self.client.get(self.path)
                except NoNodeError:
                    continue
                owner = stat.ephemeralOwner
                if owner != session and owner not in self._past_sessions:
                    raise BrokerIdAlreadyRegisteredError(self.broker_id, owner) from None
                if owner != session:
                    # Our registration from a session that ended (in this process, or in the
                    # one that held these log dirs before a crash): ZooKeeper removes it.
                    if deadline is None:
                        deadline = time.monotonic() + self._stale_wait_s()
                    self._wait_gone(deadline)
                    continue
            if session is not None and session not in self._past_sessions:
                self._past_sessions.add(session)
                _record_session(self.session_record, session)
            self._epoch = int(stat.czxid)
            _log.info("broker %d registered at %s, epoch %d", self.broker_id, self.path, stat.czxid)
            return self._epoch

    def _stale_wait_s(self) -> float:
        timeout_ms = float(getattr(self.client, "_session_timeout", _DEFAULT_STALE_WAIT_MS))
        return timeout_ms / 1000 + _EXPIRY_ALLOWANCE_S

    def _wait_gone(self, deadline: float) -> None:
        gone = threading.Event()
        if self.client.exists(self.path, watch=lambda _event: gone.set()) is None:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not gone.wait(remaining):
            _, stat = self.client.get(self.path)
            raise BrokerIdAlreadyRegisteredError(self.broker_id, stat.ephemeralOwner)

    def _on_state(self, state: str) -> None:
        # Never call ZooKeeper here (kazoo #355): hand the change to the worker.
        self._events.put(state)

    def _run(self) -> None:
        lost = suspended = False
        while (state := self._events.get()) is not None:
            if state == KazooState.LOST:
                lost = True
            elif state == KazooState.SUSPENDED:
                suspended = True
                self._notify(self.on_suspended)
            elif state == KazooState.CONNECTED:
                if lost:
                    lost = not self._reregister()
                elif suspended:
                    self._notify(self.on_reconnected)
                suspended = False

    def _reregister(self) -> bool:
        """Register again after an expiry; False when the connection dropped meanwhile (the
        next CONNECTED retries)."""
        try:
            with self._lock:
                if self._closed:
                    return True
                epoch = self._create()
        except (ConnectionLoss, SessionExpiredError):
            return False
        except Exception as err:
            _log.error("broker %d could not register again: %s", self.broker_id, err)
            for failed in list(self.on_failed):
                self._call(failed, err)
            return True
        for callback in list(self.on_reregistered):
            self._call(callback, epoch)
        return True

    def _notify(self, callbacks: list[Callable[[], None]]) -> None:
        for callback in list(callbacks):
            self._call(callback)

    def _call(self, callback: Callable[..., None], *args: object) -> None:
        try:
            callback(*args)
        except Exception:
            _log.exception("broker %d registration callback %r failed", self.broker_id, callback)


def _read_brokers(client: KazooClient, children: Sequence[str]) -> dict[int, BrokerInfo]:
    brokers = {}
    for child in children:
        try:
            broker_id = paths.broker_id_from_node(child)
            data, stat = client.get(paths.broker_path(broker_id))
            brokers[broker_id] = BrokerInfo.from_node(broker_id, data, stat)
        except NoNodeError:
            continue  # gone between the listing and the read
        except ValueError as err:
            _log.warning("ignoring %s/%s: %s", paths.BROKER_IDS, child, err)
    return brokers


def endpoints_of(info: BrokerInfo) -> tuple[Endpoint, ...]:
    """Where a registered broker listens; entries that cannot be read are left out."""
    found = []
    for text in info.endpoints:
        try:
            found.append(parse_endpoint(text))
        except ValueError:
            _log.warning("broker %d registered an unreadable endpoint %r", info.broker_id, text)
    return tuple(found)


def registered_brokers(client: KazooClient) -> dict[int, BrokerInfo]:
    """The brokers registered right now, by id."""
    try:
        children = client.get_children(paths.BROKER_IDS)
    except NoNodeError:
        return {}
    return _read_brokers(client, children)


class BrokerWatch:
    """Calls back with the live brokers whenever their set or an epoch changes; ``stop()`` ends it.

    kazoo's ChildrenWatch stays silent when the children look the same after a reconnect, but a
    broker may have bounced meanwhile with a new epoch; so a reconnect also re-reads, and the
    callback sees every change of (id, epoch), never the same view twice in a row.
    """

    def __init__(
        self, client: KazooClient, callback: Callable[[Mapping[int, BrokerInfo]], None]
    ) -> None:
        from kazoo.recipe.watchers import ChildrenWatch

        self._client = client
        self._callback = callback
        self._lock = threading.Lock()
        self._last: dict[int, int] | None = None
        self._stopped = False
        client.ensure_path(paths.BROKER_IDS)
        client.add_listener(self._on_state)
        self._watch = ChildrenWatch(client, paths.BROKER_IDS, self._on_children)

    def stop(self) -> None:
        self._stopped = True
        self._client.remove_listener(self._on_state)

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        self._deliver(children)
        return True

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED and not self._stopped:
            self._client.handler.spawn(self._refresh)

    def _refresh(self) -> None:
        try:
            children = self._client.get_children(paths.BROKER_IDS)
        except (ConnectionLoss, SessionExpiredError, NoNodeError):
            return
        self._deliver(children)

    def _deliver(self, children: Sequence[str]) -> None:
        with self._lock:
            if self._stopped:
                return
            brokers = _read_brokers(self._client, children)
            view = {broker_id: info.epoch for broker_id, info in brokers.items()}
            if view == self._last:
                return
            self._last = view
            try:
                self._callback(brokers)
            except Exception:
                _log.exception("live-broker callback %r failed", self._callback)


def watch_brokers(
    client: KazooClient, callback: Callable[[Mapping[int, BrokerInfo]], None]
) -> BrokerWatch:
    """Call ``callback(brokers)`` now and on every change of the live brokers or their epochs."""
    return BrokerWatch(client, callback)
