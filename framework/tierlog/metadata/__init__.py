"""RemoteLogMetadataManager implementations and the per-partition cache they share.

``InMemoryRemoteLogMetadataManager`` is the built-in plugin named ``memory``.
"""

from __future__ import annotations

from .cache import RemoteLogLeaderEpochState, RemoteLogMetadataCache
from .memory import InMemoryRemoteLogMetadataManager

__all__ = [
    "InMemoryRemoteLogMetadataManager",
    "RemoteLogLeaderEpochState",
    "RemoteLogMetadataCache",
]
