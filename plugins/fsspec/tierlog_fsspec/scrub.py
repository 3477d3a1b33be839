"""Keeping credentials out of error messages and log records.

The plugin never formats a storage option into a message itself; what it cannot control is the
text of backend exceptions and the records of backend loggers (botocore logs request headers at
DEBUG, which may carry a session token). Both pass through a :class:`Scrubber` that replaces
every configured secret with ``[hidden]``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

HIDDEN: Final = "[hidden]"

#: Loggers of the libraries under fsspec backends that may log request details.
BACKEND_LOGGERS: Final = (
    "fsspec",
    "s3fs",
    "aiobotocore",
    "aiobotocore.endpoint",
    "aiobotocore.credentials",
    "aiobotocore.httpsession",
    "aiobotocore.client",
    "botocore",
    "botocore.auth",
    "botocore.client",
    "botocore.credentials",
    "botocore.endpoint",
    "botocore.hooks",
    "botocore.httpsession",
    "botocore.parsers",
    "botocore.retryhandler",
    "urllib3.connectionpool",
    "gcsfs",
    "adlfs",
)


class Scrubber:
    """Replaces known secret strings in text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, HIDDEN)
        return value

    def leaks(self, value: str) -> bool:
        return any(secret in value for secret in self._secrets)

    def cause(self, err: BaseException) -> BaseException:
        """``err``, or a stand-in with a scrubbed message when its text (or its causes') holds a
        secret, so chaining it cannot leak."""
        chain: list[BaseException] = []
        current: BaseException | None = err
        while current is not None and len(chain) < 16:
            chain.append(current)
            current = current.__cause__ or current.__context__
        if not any(self.leaks(str(link)) for link in chain):
            return err
        stand_in = ScrubbedError(f"{type(err).__name__}: {self.text(str(err))}")
        stand_in.__suppress_context__ = True
        return stand_in


class ScrubbedError(Exception):
    """Stands in for a backend exception whose message held a credential."""


class ScrubbingFilter(logging.Filter):
    """A logging filter that rewrites records holding a secret; installed on backend loggers."""

    def __init__(self, scrubber: Scrubber) -> None:
        super().__init__()
        self.scrubber = scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging module's to report, not ours
            return True
        if self.scrubber.leaks(message):
            record.msg, record.args = self.scrubber.text(message), ()
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and self.scrubber.leaks(str(error)):
            record.exc_info, record.exc_text = None, None
            record.msg = f"{record.msg} (exception details hidden: they held a credential)"
        return True

    def install(self, names: Iterable[str] = BACKEND_LOGGERS) -> None:
        for name in names:
            logging.getLogger(name).addFilter(self)

    def uninstall(self, names: Iterable[str] = BACKEND_LOGGERS) -> None:
        for name in names:
            logging.getLogger(name).removeFilter(self)
