"""Building segments and driving the memory manager through the SPI the way the runtime does."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from tierlog import hookspecs
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.model import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from tierlog.plugins import BUILTIN_PLUGINS, TierlogPluginManager, make_plugin_manager
from tierlog.spi import RemoteLogMetadataManager

STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED

RLMM_HOOKS = (
    hookspecs.REMOTE_LOG_METADATA_MANAGER_HOOKS
    + hookspecs.REMOTE_LOG_METADATA_MANAGER_OPTIONAL_HOOKS
)

TIP = TopicIdPartition.of(Uuid.random(), "orders", 0)
OTHER_TIP = TopicIdPartition.of(TIP.topic_id, "orders", 1)


def make_plugin_manager_with_memory(
    plugin: InMemoryRemoteLogMetadataManager | None = None,
) -> TierlogPluginManager:
    """A plugin manager whose only plugin is a memory manager: the built-in ``memory`` once
    plugins.py lists it, otherwise (or when ``plugin`` is given) an instance registered by hand."""
    if plugin is None and "memory" in BUILTIN_PLUGINS:
        blocked = [name for name in BUILTIN_PLUGINS if name != "memory"]
        extra: dict[str, object] = {}
    else:
        blocked = list(BUILTIN_PLUGINS)
        plugin = plugin if plugin is not None else InMemoryRemoteLogMetadataManager()
        extra = {"memory-under-test": plugin}
    return make_plugin_manager(
        blocked=blocked, load_entry_points=False, extra_plugins=extra, environ={}
    )


def memory_plugin(pm: TierlogPluginManager) -> tuple[str, InMemoryRemoteLogMetadataManager]:
    """The name and instance of the plugin manager's one memory manager."""
    (found,) = [
        (name, plugin)
        for name, plugin in pm.plugins_in_order()
        if isinstance(plugin, InMemoryRemoteLogMetadataManager)
    ]
    return found


def metadata_facade(
    pm: TierlogPluginManager, hooks: Iterable[str] = RLMM_HOOKS
) -> RemoteLogMetadataManager:
    """The runtime's facade over the memory plugin's hooks (and only those in ``hooks``)."""
    name, plugin = memory_plugin(pm)
    others = [p for _, p in pm.plugins_in_order() if p is not plugin]
    callers = {hook: pm.subset_hook_caller(hook, remove_plugins=others) for hook in hooks}
    return RemoteLogMetadataManager(name, callers)


class Segments:
    """Makes segment metadata and, given a facade, drives it through its states there."""

    def __init__(self, rlmm: RemoteLogMetadataManager | None = None) -> None:
        self._rlmm = rlmm
        self._clock = itertools.count(1_000)

    @property
    def rlmm(self) -> RemoteLogMetadataManager:
        assert self._rlmm is not None, "this Segments only builds values"
        return self._rlmm

    def new(
        self,
        start: int,
        end: int,
        epochs: Mapping[int, int] | None = None,
        *,
        tip: TopicIdPartition = TIP,
        size: int | None = None,
        txn_idx_empty: bool = True,
        state: RemoteLogSegmentState = STARTED,
    ) -> RemoteLogSegmentMetadata:
        """Metadata for a fresh upload of ``[start, end]``; one epoch 0 unless ``epochs``."""
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
            start_offset=start,
            end_offset=end,
            max_timestamp_ms=end,
            broker_id=1,
            event_timestamp_ms=next(self._clock),
            segment_size_in_bytes=end - start + 1 if size is None else size,
            segment_leader_epochs=epochs if epochs is not None else {0: start},
            state=state,
            txn_idx_empty=txn_idx_empty,
        )

    def update(
        self,
        metadata: RemoteLogSegmentMetadata,
        state: RemoteLogSegmentState,
        custom_metadata: CustomMetadata | None = None,
    ) -> RemoteLogSegmentMetadataUpdate:
        return RemoteLogSegmentMetadataUpdate(
            remote_log_segment_id=metadata.remote_log_segment_id,
            event_timestamp_ms=next(self._clock),
            custom_metadata=custom_metadata,
            state=state,
            broker_id=2,
        )

    def add(
        self,
        start: int,
        end: int,
        epochs: Mapping[int, int] | None = None,
        *,
        tip: TopicIdPartition = TIP,
        size: int | None = None,
        txn_idx_empty: bool = True,
    ) -> RemoteLogSegmentMetadata:
        """Record a COPY_SEGMENT_STARTED upload and return its metadata."""
        metadata = self.new(start, end, epochs, tip=tip, size=size, txn_idx_empty=txn_idx_empty)
        self.rlmm.add_remote_log_segment_metadata(metadata)
        return metadata

    def move(
        self, metadata: RemoteLogSegmentMetadata, *states: RemoteLogSegmentState
    ) -> RemoteLogSegmentMetadata:
        """Apply updates to ``states`` in order; return the metadata as the manager now has it."""
        for state in states:
            update = self.update(metadata, state)
            self.rlmm.update_remote_log_segment_metadata(update)
            metadata = metadata.create_with_updates(update)
        return metadata

    def upload(
        self,
        start: int,
        end: int,
        epochs: Mapping[int, int] | None = None,
        *,
        tip: TopicIdPartition = TIP,
        size: int | None = None,
        txn_idx_empty: bool = True,
    ) -> RemoteLogSegmentMetadata:
        """A complete upload: COPY_SEGMENT_STARTED then COPY_SEGMENT_FINISHED."""
        added = self.add(start, end, epochs, tip=tip, size=size, txn_idx_empty=txn_idx_empty)
        return self.move(added, FINISHED)
