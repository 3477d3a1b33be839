"""Kafka's rules for topic names, checked before a name reaches a path on disk.

A topic name becomes a directory name (``<topic>-<partition>``), so a bad one must be refused
before anything is created: only ASCII letters, digits, ``.``, ``_`` and ``-``, at most 249
characters (Kafka's limit, leaving room for the partition suffix in a 255-byte file name), and
never ``.`` or ``..``. Names starting with ``__`` are reserved for the runtime's own topics
(``__remote_log_metadata``); clients may not create them.
"""

from __future__ import annotations

import re

from ..errors import InvalidTopicError

MAX_NAME_LENGTH = 249
INTERNAL_PREFIX = "__"
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
INTERNAL_TOPICS = frozenset({REMOTE_LOG_METADATA_TOPIC})

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
    if is_internal(name) and not internal_allowed:
        raise InvalidTopicError(
            f"topic name {name!r} is reserved: names starting with {INTERNAL_PREFIX!r} are "
            f"for the runtime's internal topics"
        )
    return name


def is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


def collision_key(name: str) -> str:
    """Names equal under this key collide in metric names ('.' and '_' are the same there)."""
    return name.replace(".", "_")
