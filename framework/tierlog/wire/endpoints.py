"""Listener addresses: Kafka's ``listeners`` syntax, and who advertises what.

A listener is ``NAME://host:port``; its name maps to a security protocol through
``listener.security.protocol.map``. tierlog serves PLAINTEXT only, so any other protocol is a
configuration error that names the key. The addresses brokers advertise are kept in an
:class:`EndpointDirectory`, which Metadata and DescribeCluster read: a broker is listed once
its listener is bound (with the real port when it asked for port 0) and no longer once it stops.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Mapping, Sequence

import attrs

from ..errors import InvalidConfigError

_LISTENER = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[0-9A-Fa-f:.]*\]|[^:/\[\]]*):(?P<port>\d+)$"
)
SUPPORTED_PROTOCOLS = ("PLAINTEXT",)


@attrs.frozen
class Endpoint:
    """One listener: a name, where it binds or is advertised, and its security protocol."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, comma separated."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name or not protocol:
            raise InvalidConfigError(
                f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL",
                key="listener.security.protocol.map",
                value=text,
            )
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def parse_listeners(
    values: Sequence[str], protocol_map: Mapping[str, str], *, key: str = "listeners"
) -> tuple[Endpoint, ...]:
    """The endpoints ``values`` name; every name known, served, and used once."""
    endpoints: list[Endpoint] = []
    for value in values:
        match = _LISTENER.match(value.strip())
        if match is None:
            raise InvalidConfigError(
                f"{key} entry {value!r} is not NAME://host:port", key=key, value=value
            )
        name = match["name"].upper()
        port = int(match["port"])
        if port > 65535:
            raise InvalidConfigError(f"{key} entry {value!r}: port {port} > 65535", key=key)
        protocol = protocol_map.get(name, name if name in SUPPORTED_PROTOCOLS else "")
        if not protocol:
            raise InvalidConfigError(
                f"{key} entry {value!r}: listener name {name} is not in "
                "listener.security.protocol.map",
                key=key,
                value=value,
            )
        if protocol not in SUPPORTED_PROTOCOLS:
            raise InvalidConfigError(
                f"{key} entry {value!r}: security protocol {protocol} is not supported "
                f"(tierlog serves {', '.join(SUPPORTED_PROTOCOLS)})",
                key=key,
                value=value,
            )
        if any(e.name == name for e in endpoints):
            raise InvalidConfigError(f"{key} names listener {name} twice", key=key, value=value)
        endpoints.append(Endpoint(name, match["host"].strip("[]"), port, protocol))
    if not endpoints:
        raise InvalidConfigError(f"{key} names no listener", key=key, value=",".join(values))
    return tuple(endpoints)


def advertised_host(bind_host: str) -> str:
    """What to advertise for a listener bound to ``bind_host``: itself, or this machine's name
    for a wildcard bind (as Kafka does)."""
    if bind_host in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return bind_host


class EndpointDirectory:
    """Broker id -> the endpoints it advertises, per listener name, for every listening broker
    this process knows. Metadata answers with the endpoints of the listener it came in on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._endpoints: dict[int, dict[str, Endpoint]] = {}

    def register(self, broker_id: int, endpoint: Endpoint) -> None:
        with self._lock:
            self._endpoints.setdefault(broker_id, {})[endpoint.name] = endpoint

    def unregister(self, broker_id: int, endpoint: Endpoint) -> None:
        """Forget ``endpoint`` of ``broker_id``, if it is still the one advertised."""
        with self._lock:
            named = self._endpoints.get(broker_id, {})
            if named.get(endpoint.name) == endpoint:
                del named[endpoint.name]
            if not named:
                self._endpoints.pop(broker_id, None)

    def snapshot(self, listener: str | None = None) -> dict[int, Endpoint]:
        """Each broker's endpoint on ``listener`` (its first one when None)."""
        with self._lock:
            found = {}
            for broker_id, named in self._endpoints.items():
                endpoint = next(iter(named.values())) if listener is None else named.get(listener)
                if endpoint is not None:
                    found[broker_id] = endpoint
            return found

    def bootstrap_servers(self, listener: str | None = None) -> str:
        """``host:port`` of every listening broker, comma separated, in id order."""
        return ",".join(
            f"[{e.host}]:{e.port}" if ":" in e.host else f"{e.host}:{e.port}"
            for _, e in sorted(self.snapshot(listener).items())
        )
