"""Which backend errors are worth retrying, and how long to wait between attempts.

fsspec backends raise builtins (``FileNotFoundError``, ``PermissionError``, ``TimeoutError``,
``OSError`` with an errno) plus their own transport errors. A transient error (timeout, dropped
connection, throttling, a 5xx) is retried with exponential backoff and jitter; anything else is
permanent and fails at once.
"""

from __future__ import annotations

import errno
import random
from typing import Final

import attrs

_TRANSIENT_ERRNOS: Final = frozenset(
    {
        errno.EAGAIN,
        errno.EBUSY,  # s3fs: SlowDown, ServiceUnavailable (503), OperationAborted
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
        errno.EPIPE,
        errno.EINTR,
        getattr(errno, "EREMOTEIO", errno.EIO),  # s3fs: InternalError (500)
    }
)

#: Transport errors of common backends (botocore, aiohttp, requests), matched by class name so
#: that no backend library has to be imported to classify its errors.
_TRANSIENT_NAMES: Final = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientPayloadError",
        "ChunkedEncodingError",
        "ProtocolError",
    }
)


def is_transient(err: BaseException) -> bool:
    """Whether ``err`` may go away by itself (so the request is worth repeating)."""
    if isinstance(err, FileNotFoundError | PermissionError | IsADirectoryError):
        return False
    if isinstance(err, TimeoutError | ConnectionError | InterruptedError):
        return True
    if isinstance(err, OSError) and err.errno in _TRANSIENT_ERRNOS:
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(err).__mro__)


@attrs.frozen
class RetryPolicy:
    """Attempts per request and the exponential backoff (with jitter) between them."""

    max_attempts: int = 3
    backoff_ms: int = 100
    backoff_max_ms: int = 5000

    def delay_seconds(self, retry: int) -> float:
        """Wait before retry number ``retry`` (1-based): half to all of ``backoff * 2**(retry-1)``,
        capped, so that clients that failed together do not retry together."""
        ceiling = min(self.backoff_max_ms, self.backoff_ms * 2 ** (retry - 1))
        return random.uniform(ceiling / 2, ceiling) / 1000.0
