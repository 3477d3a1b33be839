"""A tierlog remote storage plugin that keeps segments and indexes as blobs in SQLite."""

from .storage import SqliteStorageManager

__all__ = ["SqliteStorageManager"]
