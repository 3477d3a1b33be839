"""Kafka's rules for topic names, checked before a name reaches a path on disk.

A topic name becomes a directory name (``<topic>-<partition>``), so a bad one must be refused
before anything is created: only ASCII letters, digits, ``.``, ``_`` and ``-``, at most 249
characters (Kafka's limit, leaving room for the partition suffix in a 255-byte file name), and
never ``.`` or ``..``. Names starting with ``__`` are reserved for the runtime's own topics
(see ``internal_topics.py``, which says which topics are internal); clients may not create them.
"""

from __future__ import annotations

import re

from ..errors import InvalidTopicError

MAX_NAME_LENGTH = 249
RESERVED_PREFIX = "__"

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: object, *, internal_allowed: bool = False) -> str:
    """Returns ``name`` if Kafka would accept it; raises InvalidTopicError saying why not."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError(f"a topic name must be a non-empty string, got {name!r}")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters, more than the maximum {MAX_NAME_LENGTH}"
        )
    if _LEGAL.fullmatch(name) is None:
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it may contain only ASCII letters, digits, "
            f"'.', '_' and '-'"
        )
    if is_reserved(name) and not internal_allowed:
        raise InvalidTopicError(
            f"topic name {name!r} is reserved: names starting with {RESERVED_PREFIX!r} are "
            f"for the runtime's internal topics"
        )
    return name


def is_reserved(name: str) -> bool:
    """Whether only the runtime may create a topic of this name."""
    return name.startswith(RESERVED_PREFIX)


def collision_key(name: str) -> str:
    """Names equal under this key collide in metric names ('.' and '_' are the same there)."""
    return name.replace(".", "_")
