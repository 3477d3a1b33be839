"""A storage wrapper that records every call: what was copied, fetched and deleted, and how.

Register an instance next to any storage plugin (``extra_plugins={"recorder": recorder}``); it
wraps the chosen provider with new-style pluggy wrappers, so the real plugin still does the
work, and keeps the history as Kafka's LocalTieredStorage event history does. Tests then assert
on what reached the storage (which segments, which ranges, from which thread and broker, with
what outcome) instead of on side effects.

In a cluster, register ``recorder.per_broker()`` instead: a class, so each broker gets its own
wrapper, which learns its broker id at configure and records into the shared history; each
event then says which broker made the call (``recorder.of(COPY, broker_id=1)``).
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import attrs

from .. import hookimpl
from ..model import IndexType, LogSegmentData, RemoteLogSegmentId, RemoteLogSegmentMetadata

COPY = "copy"
FETCH = "fetch"
FETCH_INDEX = "fetch_index"
DELETE = "delete"


@attrs.frozen
class StorageEvent:
    """One storage call and its outcome."""

    kind: str
    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    #: ``(start, end)`` for a fetch, the IndexType for an index fetch, None otherwise.
    detail: tuple[int, int | None] | IndexType | None
    #: None when the call returned, else the exception's class name.
    error: str | None
    thread: str
    #: The broker whose runtime made the call, when the recorder knows it (``per_broker``).
    broker_id: int | None = None
    #: The exception's message, when the call raised.
    message: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


class _History:
    """The events of one recorder and of the per-broker wrappers it hands out."""

    def __init__(self) -> None:
        self.events: list[StorageEvent] = []
        self.lock = threading.Lock()


class RecordingStorageManager:
    """Keeps the event history of every storage call made through the runtime; thread-safe."""

    def __init__(self) -> None:
        self._history = _History()
        #: The broker this wrapper records for; None for a recorder shared by every broker.
        self.broker_id: int | None = None

    @property
    def events(self) -> list[StorageEvent]:
        with self._history.lock:
            return list(self._history.events)

    def of(
        self,
        kind: str,
        segment_id: RemoteLogSegmentId | None = None,
        *,
        broker_id: int | None = None,
    ) -> list[StorageEvent]:
        """Events of one kind, optionally for one segment or one broker, in call order."""
        return [
            event
            for event in self.events
            if event.kind == kind
            and (segment_id is None or event.segment_id == segment_id)
            and (broker_id is None or event.broker_id == broker_id)
        ]

    def for_broker(self, broker_id: int) -> list[StorageEvent]:
        """Every call made by one broker's runtime, in call order (needs ``per_broker``)."""
        return [event for event in self.events if event.broker_id == broker_id]

    def clear(self) -> None:
        with self._history.lock:
            self._history.events.clear()

    def per_broker(self) -> type[RecordingStorageManager]:
        """A recorder class to register instead of this instance: each runtime (each broker of
        an embedded cluster) instantiates it, so its calls are recorded with its broker id, into
        this recorder's history."""
        history = self._history

        class BrokerRecorder(RecordingStorageManager):
            def __init__(self) -> None:
                super().__init__()
                self._history = history

            @hookimpl
            def tierlog_configure(self, context: Any) -> None:
                self.broker_id = context.broker_id

        return BrokerRecorder

    def _record(
        self, kind: str, metadata: RemoteLogSegmentMetadata, detail: Any
    ) -> Generator[None, Any, Any]:
        error: str | None = None
        message: str | None = None
        try:
            return (yield)
        except BaseException as err:
            error, message = type(err).__name__, str(err)
            raise
        finally:
            event = StorageEvent(
                kind,
                metadata.remote_log_segment_id,
                metadata.start_offset,
                metadata.end_offset,
                detail,
                error,
                threading.current_thread().name,
                self.broker_id,
                message,
            )
            with self._history.lock:
                self._history.events.append(event)

    @hookimpl(wrapper=True)
    def tierlog_copy_log_segment_data(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        log_segment_data: LogSegmentData,
    ) -> Generator[None, Any, Any]:
        return (yield from self._record(COPY, remote_log_segment_metadata, None))

    @hookimpl(wrapper=True)
    def tierlog_fetch_log_segment(
        self,
        remote_log_segment_metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None,
    ) -> Generator[None, Any, Any]:
        detail = (start_position, end_position)
        return (yield from self._record(FETCH, remote_log_segment_metadata, detail))

    @hookimpl(wrapper=True)
    def tierlog_fetch_index(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata, index_type: IndexType
    ) -> Generator[None, Any, Any]:
        return (yield from self._record(FETCH_INDEX, remote_log_segment_metadata, index_type))

    @hookimpl(wrapper=True)
    def tierlog_delete_log_segment_data(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> Generator[None, Any, Any]:
        return (yield from self._record(DELETE, remote_log_segment_metadata, None))
