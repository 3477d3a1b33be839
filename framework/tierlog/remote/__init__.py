"""Tiered storage: the remote log manager and what it runs (copy, expiration, remote reads)."""

from __future__ import annotations

from .index_cache import CACHE_DIR_NAME, RemoteIndexCache
from .manager import SCRATCH_DIR_NAME, RemoteLogManager
from .quota import RateQuota
from .reader import ReaderPool, RemoteFetchResult

__all__ = [
    "CACHE_DIR_NAME",
    "SCRATCH_DIR_NAME",
    "RateQuota",
    "ReaderPool",
    "RemoteFetchResult",
    "RemoteIndexCache",
    "RemoteLogManager",
]
