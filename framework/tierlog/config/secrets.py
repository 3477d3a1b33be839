"""Keeping secret configuration values out of reprs, logs, error messages and CLI output.

A value is secret when its key is PASSWORD-typed (the value is then a :class:`Password`) or when the
key's name looks like a credential. The name rule matters for plugin keys such as
``rsm.config.s3.secret.key`` or ``rsm.config.encryption.keys``: the core keeps them as raw strings
and cannot know their type. It also covers the keys Kafka types as PASSWORD (``ssl.*.password``,
``sasl.jaas.config``, ``ssl.keystore.key``, ``ssl.keystore.certificate.chain``...). A URL that
carries a user name or password is never shown either, whatever its key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

#: What is shown instead of a secret value (Kafka shows the same).
HIDDEN: Final = "[hidden]"

#: A name holding one of these anywhere is a secret's.
_SECRET_WORDS: Final = (
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "jaas",
    "private",
    "certificate",
    "signature",
    "connection_string",
    "connectionstring",
)
_NAME_PARTS: Final = re.compile(r"[._\-]+")
#: How a URL (or a ``user:password@host`` without a scheme) starts.
_URL_START: Final = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*:")


@attrs.frozen(repr=False)
class Password:
    """A secret string; str() and repr() never show it, so it cannot leak by accident.

    Read the real value through ``.value`` only where it is handed to the system that needs it.
    """

    value: str

    def __repr__(self) -> str:
        return HIDDEN

    __str__ = __repr__


def is_secret_name(name: str) -> bool:
    """Whether a key's name says its value is a credential, whatever its declared type.

    Besides the words above, any part of the name (split at ``.``, ``_``, ``-``) that holds
    ``key`` counts (``access.key``, ``encryption.keys``, ``aws_access_key_id``, ``apikey``), except
    a key store's location or type (``ssl.keystore.type``), which Kafka shows too.
    """
    lowered = name.lower()
    if any(word in lowered for word in _SECRET_WORDS):
        return True
    return any(
        "key" in part and not part.startswith("keystore") for part in _NAME_PARTS.split(lowered)
    )


def url_has_userinfo(url: str) -> bool:
    """Whether ``url`` carries a user name or password (``s3://user:password@bucket/...``).

    Stricter than ``urllib.parse``, which ends the authority at the first ``/``, ``?`` or ``#``:
    a password holding one of them (``s3://AKIA...:ab/cd@bucket``) would slip into the path there.
    So besides an ``@`` in the authority, an authority with a ``:`` followed by an ``@`` anywhere
    later counts (a port followed by an ``@`` in the path is refused too: write it ``%40``), and
    so does any ``@`` before the ``://`` or in a URL without one, which no parser reads the same
    way.
    """
    scheme, separator, rest = url.partition("://")
    if not separator or "@" in scheme:
        return "@" in url
    ends = [index for index in (rest.find(mark) for mark in "/?#") if index >= 0]
    end = min(ends, default=len(rest))
    authority, after = rest[:end], rest[end:]
    return "@" in authority or (":" in authority and "@" in after)


def show_value(value: object) -> str:
    """Render a value for a message the way a user wrote it: strings quoted, booleans lower case.

    A URL that carries credentials is ``[hidden]`` whatever the key it is the value of.
    """
    if isinstance(value, Password):
        return HIDDEN
    if isinstance(value, str):
        return HIDDEN if _URL_START.match(value) and url_has_userinfo(value) else repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show_value(item) for item in value) + "]"
    return str(value)


def redact(name: str, value: object) -> str:
    """``show_value``, except that the value of a secret key is replaced by ``[hidden]``."""
    if is_secret_name(name):
        return HIDDEN
    return show_value(value)


class ConfigSlice(dict[str, Any]):
    """A plugin's configuration slice as ``tierlog_configure`` receives it: a plain ``dict`` whose
    repr and str (what hook tracing and log lines print) show only the values of the keys in
    ``shown``, the ones the plugin declared and that are not secret; every other value, undeclared
    free-form keys included, is ``[hidden]``, as Kafka hides values whose type it does not know.
    """

    __slots__ = ("_shown",)

    def __init__(
        self, values: Mapping[str, Any] | None = None, *, shown: Iterable[str] = ()
    ) -> None:
        super().__init__(values or {})
        self._shown = frozenset(shown)

    def __repr__(self) -> str:
        items = ", ".join(
            f"{name!r}: "
            + (show_value(value) if name in self._shown and not is_secret_name(name) else HIDDEN)
            for name, value in self.items()
        )
        return "{" + items + "}"

    __str__ = __repr__
