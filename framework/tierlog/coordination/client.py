"""A broker's ZooKeeper session, from its ``zookeeper.*`` configuration.

``zookeeper.connect`` has ZooKeeper's own syntax, ``host:port[,host:port...][/chroot]``, as
Kafka takes it. A bad value is refused before any connection is tried, naming the key and what is
wrong. The chroot is created when missing (Kafka does the same), so a fresh ensemble needs no
preparation; kazoo itself would only warn and then fail every write.
"""

from __future__ import annotations

import contextlib
import ipaddress
import time
from typing import Final, NamedTuple

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from ..config import BrokerConfig
from ..config.broker import effective_zookeeper_connection_timeout_ms
from ..errors import InvalidConfigError, RequestTimedOutError

CONNECT_KEY: Final = "zookeeper.connect"
#: ZooKeeper's port when a host names none (``ConnectStringParser``).
DEFAULT_PORT: Final = 2181


class ZooKeeperClientTimeoutError(RequestTimedOutError):
    """No ZooKeeper server of ``zookeeper.connect`` answered within
    ``zookeeper.connection.timeout.ms`` (Kafka's ``ZooKeeperClientTimeoutException``)."""


class ZooKeeperConnect(NamedTuple):
    """A parsed ``zookeeper.connect``: the servers, and the chroot or None."""

    hosts: tuple[tuple[str, int], ...]
    chroot: str | None

    @property
    def servers(self) -> str:
        """The servers as kazoo and ZooKeeper take them, without the chroot."""
        return ",".join(_join_host_port(host, port) for host, port in self.hosts)

    def __str__(self) -> str:
        return self.servers + (self.chroot or "")


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _invalid(text: str, problem: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"{CONNECT_KEY} = {text!r}: {problem}; expected host:port[,host:port...][/chroot]",
        key=CONNECT_KEY,
        value=text,
    )


def _parse_host(text: str, entry: str) -> tuple[str, int]:
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if not bracket:
            raise _invalid(text, f"server {entry!r} has an unclosed '['")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _invalid(text, f"server {entry!r} is not an IPv6 address in brackets") from None
        if rest and not rest.startswith(":"):
            raise _invalid(text, f"server {entry!r} has text after ']' that is not :port")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_or_empty = entry.partition(":")
        port_text = port_text_or_empty if colon else None
        if ":" in port_text_or_empty:
            raise _invalid(text, f"server {entry!r}: put an IPv6 address in brackets")
    if not host:
        raise _invalid(text, f"server {entry!r} has no host")
    if any(c.isspace() for c in host) or "/" in host:
        raise _invalid(text, f"server {entry!r} is not a host name")
    if port_text is None:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not port_text.isascii():
        raise _invalid(text, f"server {entry!r} has port {port_text!r}, not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise _invalid(text, f"server {entry!r} has port {port}, outside 1-65535")
    return host, port


def _parse_chroot(text: str, chroot: str) -> str | None:
    if chroot == "/":
        return None
    if chroot.endswith("/"):
        raise _invalid(text, f"chroot {chroot!r} must not end with '/'")
    for part in chroot[1:].split("/"):
        if not part:
            raise _invalid(text, f"chroot {chroot!r} has an empty path component")
        if part in (".", ".."):
            raise _invalid(text, f"chroot {chroot!r} may not contain '{part}' components")
        if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in part):
            raise _invalid(text, f"chroot {chroot!r} contains a control character")
    return chroot


def parse_connect(text: str) -> ZooKeeperConnect:
    """Split ``zookeeper.connect`` into its servers and chroot, refusing what ZooKeeper would."""
    stripped = text.strip()
    if not stripped:
        raise _invalid(text, "it is empty")
    servers, slash, rest = stripped.partition("/")
    chroot = _parse_chroot(text, "/" + rest) if slash else None
    hosts = []
    for entry in servers.split(","):
        entry = entry.strip()
        if not entry:
            raise _invalid(text, "a server is missing between commas")
        hosts.append(_parse_host(text, entry))
    return ZooKeeperConnect(tuple(hosts), chroot)


class _Start(NamedTuple):
    connect: ZooKeeperConnect
    session_s: float
    timeout_ms: int
    deadline: float

    def run(self, client: KazooClient) -> None:
        try:
            client.start(timeout=max(self.deadline - time.monotonic(), 0.001))
        except KazooTimeoutError:
            # kazoo stops and closes a client whose start timed out.
            raise ZooKeeperClientTimeoutError(
                f"no ZooKeeper server answered within {self.timeout_ms} ms "
                f"(zookeeper.connection.timeout.ms); tried {self.connect.servers}"
            ) from None


def _reconnect_forever() -> KazooRetry:
    """Keep reconnecting, never more than a second apart: kazoo's default backoff grows to an
    hour, far past any session timeout a broker could hope to keep."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)


def _ensure_chroot(start: _Start) -> None:
    connect = start.connect
    bootstrap = KazooClient(hosts=connect.servers, timeout=start.session_s)
    start.run(bootstrap)
    try:
        bootstrap.ensure_path(connect.chroot)
    finally:
        with contextlib.suppress(Exception):
            bootstrap.stop()
        bootstrap.close()


def zookeeper_client(config: BrokerConfig) -> KazooClient:
    """A started kazoo client inside the chroot of ``zookeeper.connect`` (created if missing).

    The session timeout is ``zookeeper.session.timeout.ms``; the whole start, chroot creation
    included, is bounded by ``zookeeper.connection.timeout.ms``. The caller stops and closes it.
    """
    text = config.get_str(CONNECT_KEY)
    if text is None:
        raise InvalidConfigError(
            f"{CONNECT_KEY} is not set: a broker runs with ZooKeeper only when it names the "
            "ensemble",
            key=CONNECT_KEY,
        )
    connect = parse_connect(text)
    timeout_ms = effective_zookeeper_connection_timeout_ms(config.snapshot())
    start = _Start(
        connect,
        config.get_int("zookeeper.session.timeout.ms") / 1000,
        timeout_ms,
        time.monotonic() + timeout_ms / 1000,
    )
    if connect.chroot is not None:
        _ensure_chroot(start)
    client = KazooClient(
        hosts=str(connect), timeout=start.session_s, connection_retry=_reconnect_forever()
    )
    start.run(client)
    return client
