"""Whether the client of the request being handled is still connected.

A handler that parks a request for long (a JoinGroup waiting for its rebalance, which may take
the members' whole rebalance timeout) asks this now and then and stops waiting once nobody is
left to answer, so the connection's thread does not outlive the connection. Requests handled
outside a listener (the in-process transport) always count as connected.
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["peer_connected", "serving"]


def _always() -> bool:
    return True


_connected: ContextVar[Callable[[], bool]] = ContextVar("peer_connected", default=_always)


def peer_connected() -> bool:
    """False once the client of the current request has closed or reset its connection."""
    return _connected.get()()


@contextlib.contextmanager
def serving(conn: socket.socket) -> Iterator[None]:
    """Handles a request of ``conn``'s client: ``peer_connected`` looks at ``conn``."""
    token = _connected.set(lambda: _is_open(conn))
    try:
        yield
    finally:
        _connected.reset(token)


#: The peer shut its side down (Linux's POLLRDHUP: seen even with unread requests still queued
#: before the end of the stream), or the connection failed or was reset.
_HUNG_UP = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR


def _is_open(conn: socket.socket) -> bool:
    """False once the peer has closed or reset the connection. Without POLLRDHUP, a readable
    socket whose next byte is end-of-stream counts as closed."""
    try:
        poller = select.poll()  # not select(): it refuses descriptors past FD_SETSIZE
        poller.register(conn, _HUNG_UP | select.POLLIN)
        events = sum(event for _, event in poller.poll(0))
        if events & _HUNG_UP:
            return False
        if events & select.POLLIN and not hasattr(select, "POLLRDHUP"):
            return conn.recv(1, socket.MSG_PEEK) != b""
        return True
    except (OSError, ValueError):
        return False
