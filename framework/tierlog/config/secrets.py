"""Keeping secret configuration values out of reprs, logs, error messages and CLI output.

A value is secret when its key is PASSWORD-typed (the value is then a :class:`Password`) or when the
key's name looks like a credential. The name rule matters for plugin keys such as
``rsm.config.s3.secret.key``: the core keeps them as raw strings and cannot know their type.
"""

from __future__ import annotations

from typing import Final

import attrs

#: What is shown instead of a secret value.
HIDDEN: Final = "[hidden]"

_SECRET_WORDS: Final = ("password", "secret", "token", "credential")


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
    """Whether a key's name says its value is a credential, whatever its declared type."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS) or lowered.endswith(".key")


def show_value(value: object) -> str:
    """Render a value for a message the way a user wrote it: strings quoted, booleans lower case."""
    if isinstance(value, Password):
        return HIDDEN
    if isinstance(value, str):
        return repr(value)
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
