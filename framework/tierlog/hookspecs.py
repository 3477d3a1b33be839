"""The tierlog plugin SPI: every hook a plugin can implement, in one module, top to bottom.

Plugins are found through the entry point group ``tierlog``. The entry point names a module, or a
class that the runtime instantiates once per runtime (so each broker of an embedded cluster gets
its own state). Implementations are marked with ``tierlog.hookimpl`` and are called with keyword
arguments only; an implementation may accept fewer arguments than its spec.

Hooks come in four groups:

* **Lifecycle** — ``tierlog_configure``, ``tierlog_register_metrics``, ``tierlog_on_broker_ready``
  (the BrokerReadyCallback) and ``tierlog_close``. The runtime calls these plugin by plugin, in a
  fixed order: configure for every plugin, then metrics registration for every plugin, then
  broker-ready once the runtime serves requests, then close in reverse order. If a configure or
  a metrics registration raises, no later phase runs for anyone, the plugins already configured
  are closed, and the error names the plugin. Close reaches every plugin even when one raises.
* **RemoteStorageManager** — copy, fetch and delete segment data, and optionally say where a
  segment's bytes are stored. One provider per runtime, chosen by its plugin name in
  ``remote.log.storage.manager.name``.
* **RemoteLogMetadataManager** — the authoritative record of remote segments and their states.
  One provider per runtime, chosen by name in ``remote.log.metadata.manager.name``.
* **Extensions** — configuration declarations and CLI commands.

A plugin that implements any role hook (without ``wrapper=True``) is a provider of that role and
must implement all of the role's required hooks. Providers that are not chosen stay dormant: they
are neither configured nor called. Other plugins may wrap role hooks with new-style wrappers
(``@hookimpl(wrapper=True)``) to add caching, tracing or fault injection; a wrapper sees the
provider's result or exception. Role hooks are ``firstresult``: their value is the provider's
return value (after any wrappers).

Errors: storage hooks raise ``tierlog.errors.RemoteStorageError`` (or a subclass) with the backend
error chained; a missing object raises ``RemoteResourceNotFoundError``; a transient failure may
raise ``RetriableRemoteStorageError``. Metadata lookups raise ``RemoteStorageNotReadyError`` (a
retriable remote storage error) only while a partition this broker holds is loading, and
``RemoteResourceNotFoundError`` for a partition the manager does not know.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

import pluggy

from . import PROJECT_NAME

if TYPE_CHECKING:
    import click

    from .config import ConfigDef
    from .locations import SegmentLocation
    from .metrics import MetricsView
    from .model import (
        CustomMetadata,
        IndexType,
        LogSegmentData,
        RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate,
        RemotePartitionDeleteMetadata,
        TopicIdPartition,
    )
    from .plugins import PluginContext

hookspec = pluggy.HookspecMarker(PROJECT_NAME)


# ---------------------------------------------------------------------------------------------
# Lifecycle hooks: called for each plugin separately, in the order described above.
# ---------------------------------------------------------------------------------------------


@hookspec
def tierlog_configure(config: Mapping[str, Any], context: PluginContext) -> None:
    """Prepare the plugin from its own configuration slice. Do no remote I/O here.

    Called once per runtime, before any other hook of the plugin, in plugin registration order.

    :param config: only this plugin's keys, prefix stripped: ``plugin.<name>.*`` for every
        plugin, plus ``rsm.config.*`` for the chosen storage manager and ``rlmm.config.*`` for the
        chosen metadata manager (the prefixes are ``remote.log.storage.manager.impl.prefix`` and
        ``remote.log.metadata.manager.impl.prefix``). Values are parsed and validated against the
        plugin's ``tierlog_config_definitions`` when it declares them, raw strings otherwise.
        The mapping is a ``dict`` whose repr shows only the declared values that are not secret
        (the rest print as ``[hidden]``), so logging it is safe; a copy into a plain ``dict``
        is not.
    :param context: who is running the plugin: plugin name, roles, broker id, cluster id, log dirs.
    :raises tierlog.errors.InvalidConfigError: naming the key, for a bad or missing setting.
        Any exception stops the runtime's start-up; plugins configured before this one are closed.
    """


@hookspec
def tierlog_register_metrics(metrics: MetricsView) -> None:
    """Create the plugin's metrics (KIP-877: after configure, before broker-ready).

    :param metrics: a view of the runtime's registry that tags every metric with this plugin's
        name and roles, and removes them all when the plugin is closed.
    """


@hookspec
def tierlog_on_broker_ready(broker: Any) -> None:
    """BrokerReadyCallback (KIP-1197): the runtime now serves requests.

    Called once, after every plugin is configured and has registered its metrics. Start work that
    needs the runtime itself here, not in configure: the built-in topic-based metadata manager
    starts reading its internal topic from this broker now, and starts its initialization retry
    budget now. Exceptions are logged with the plugin name and do not stop the runtime.

    :param broker: the broker that now serves requests (``tierlog.server.Broker``).
    """


@hookspec
def tierlog_close() -> None:
    """Release everything the plugin holds. Called once, in reverse configure order.

    Called for every configured plugin even when another plugin's close raised.
    """


# ---------------------------------------------------------------------------------------------
# RemoteStorageManager: one provider per runtime, chosen by name.
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def tierlog_copy_log_segment_data(
    remote_log_segment_metadata: RemoteLogSegmentMetadata, log_segment_data: LogSegmentData
) -> CustomMetadata | None:
    """Upload a rolled segment and all its auxiliary data.

    Called by the leader's copy task after COPY_SEGMENT_STARTED was recorded, and before
    COPY_SEGMENT_FINISHED. Copying the same segment id again overwrites what is there: it is not
    an error. The upload should become visible atomically (for example, a manifest written last),
    so a half-finished upload is never served.

    :param remote_log_segment_metadata: the segment, in state COPY_SEGMENT_STARTED, with a fresh
        segment id (a re-upload of the same offsets always gets a new id).
    :param log_segment_data: local paths of the ``.log``, offset index, time index, optional
        transaction index and producer snapshot, plus the leader-epoch checkpoint bytes.
    :return: optional custom metadata (at most ``remote.log.metadata.custom.metadata.max.bytes``,
        default 128) stored with COPY_SEGMENT_FINISHED and handed back with the metadata in every
        later call, e.g. where the objects live.
    :raises tierlog.errors.RemoteStorageError: the upload failed; the runtime records no
        FINISHED state. What was written is deleted at once when the failure is final; after a
        retriable failure (or a crash) the segment stays COPY_SEGMENT_STARTED, referenced, until
        retention deletes it, as in Kafka.
    """


@hookspec(firstresult=True)
def tierlog_fetch_log_segment(
    remote_log_segment_metadata: RemoteLogSegmentMetadata,
    start_position: int,
    end_position: int | None,
) -> BinaryIO:
    """Open the segment's ``.log`` bytes from ``start_position``.

    :param start_position: byte position in the segment file, inclusive, ``>= 0``.
    :param end_position: last byte position, inclusive, or None for the end of the segment; a
        value past the end is cut to the end.
    :return: a readable binary stream; the caller closes it.
    :raises tierlog.errors.RemoteResourceNotFoundError: the segment is not (or not fully) there.
    :raises tierlog.errors.RemoteStorageError: any other failure.
    """


@hookspec(firstresult=True)
def tierlog_locate_log_segment(
    remote_log_segment_metadata: RemoteLogSegmentMetadata,
    start_position: int,
    end_position: int | None,
    expires_in_s: int,
) -> SegmentLocation | None:
    """Where the bytes ``tierlog_fetch_log_segment`` would return for this range are stored, so
    a reader that cannot call the plugin (Spark's JVM reader, on its executors) reads them itself.

    Optional: a provider without it, or one that returns None, is read through
    ``tierlog_fetch_log_segment`` only. Return None when the objects cannot be reached from
    elsewhere (an in-memory filesystem, a store without signed URLs).

    :param start_position: byte position in the segment file, inclusive, ``>= 0``, as for
        ``tierlog_fetch_log_segment``.
    :param end_position: last byte position, inclusive, or None for the end of the segment; a
        value past the end is cut to the end, as for ``tierlog_fetch_log_segment``.
    :param expires_in_s: how long URLs in the answer must stay valid (signed URLs), in seconds.
    :return: a ``tierlog.locations.SegmentLocation`` whose ``start`` is ``start_position`` and
        whose ``end`` is **exclusive** (the last byte position plus one, cut to the segment's
        size): either one object holding the segment's bytes as they are, or the stored chunks
        (compression, nonce, associated data, CRC-32C) that decode to them, with the data key
        when they are encrypted. ``tierlog.location_reader.read_location`` must give exactly the
        bytes a fetch gives. The unwrapped data key travels with the location: Spark ships it
        to the executors inside the task, as it ships the plugin's settings (the key ring
        itself) to them for the Python reader.
    :raises tierlog.errors.RemoteResourceNotFoundError: the segment is not (or not fully) there.
    :raises tierlog.errors.RemoteStorageError: any other failure, including a start position
        past the end, as for ``tierlog_fetch_log_segment``.
    """


@hookspec(firstresult=True)
def tierlog_fetch_index(
    remote_log_segment_metadata: RemoteLogSegmentMetadata, index_type: IndexType
) -> BinaryIO:
    """Open one auxiliary file of the segment (offset, time, producer snapshot, txn, epochs).

    :return: a readable binary stream of the whole file; the caller closes it.
    :raises tierlog.errors.RemoteResourceNotFoundError: that index does not exist, which is normal
        for a transaction index of a segment without aborted transactions.
    :raises tierlog.errors.RemoteStorageError: any other failure.
    """


@hookspec(firstresult=True)
def tierlog_delete_log_segment_data(
    remote_log_segment_metadata: RemoteLogSegmentMetadata,
) -> None:
    """Delete every object of the segment, including a partial upload.

    Idempotent: deleting what is already gone succeeds (no RemoteResourceNotFoundError).

    :raises tierlog.errors.RemoteStorageError: the delete failed and will be retried.
    """


# ---------------------------------------------------------------------------------------------
# RemoteLogMetadataManager: one provider per runtime, chosen by name.
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def tierlog_add_remote_log_segment_metadata(
    remote_log_segment_metadata: RemoteLogSegmentMetadata,
) -> None:
    """Record a new segment upload. Returns once this broker's own lookups see it.

    The partition need not be assigned to this broker yet: a shared manager (the topic-based
    one) stores the event anyway, and whichever broker is assigned the partition later sees it.

    :param remote_log_segment_metadata: must be in state COPY_SEGMENT_STARTED.
    :raises tierlog.errors.InvalidStateTransitionError: for any other state.
    :raises tierlog.errors.RemoteStorageError: the metadata could not be stored.
    """


@hookspec(firstresult=True)
def tierlog_update_remote_log_segment_metadata(
    remote_log_segment_metadata_update: RemoteLogSegmentMetadataUpdate,
) -> None:
    """Move an existing segment to COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED or
    DELETE_SEGMENT_FINISHED. Returns once this broker's own lookups see it.

    :raises tierlog.errors.RemoteResourceNotFoundError: the segment id is unknown.
    :raises tierlog.errors.InvalidStateTransitionError: the state machine forbids the move.
    """


@hookspec(firstresult=True)
def tierlog_remote_log_segment_metadata(
    topic_id_partition: TopicIdPartition, epoch_for_offset: int, offset: int
) -> RemoteLogSegmentMetadata | None:
    """The COPY_SEGMENT_FINISHED segment holding ``offset`` in leader epoch ``epoch_for_offset``.

    Segments in any other state are never returned, so readers never see a partial upload.

    :return: the segment's metadata, or None if no finished segment holds that offset for that
        epoch.
    :raises tierlog.errors.RemoteStorageNotReadyError: the partition's metadata is still loading.
    :raises tierlog.errors.RemoteResourceNotFoundError: the manager does not know the partition.
    """


@hookspec(firstresult=True)
def tierlog_highest_offset_for_epoch(
    topic_id_partition: TopicIdPartition, leader_epoch: int
) -> int | None:
    """The highest offset tiered (COPY_SEGMENT_FINISHED) for ``leader_epoch``, or None.

    It only grows: deleting segments does not lower it. The copy task resumes after it.

    :raises tierlog.errors.RemoteStorageNotReadyError: the partition's metadata is still loading.
    :raises tierlog.errors.RemoteResourceNotFoundError: the manager does not know the partition.
    """


@hookspec(firstresult=True)
def tierlog_put_remote_partition_delete_metadata(
    remote_partition_delete_metadata: RemotePartitionDeleteMetadata,
) -> None:
    """Record a step of deleting a partition's remote data (MARKED → STARTED → FINISHED).

    FINISHED drops everything the manager holds for the partition: from then on, lookups of its
    segments and its size raise RemoteResourceNotFoundError (not an empty answer), as Kafka's do.

    :raises tierlog.errors.InvalidStateTransitionError: the state machine forbids the step.
    """


@hookspec(firstresult=True)
def tierlog_list_remote_log_segments(
    topic_id_partition: TopicIdPartition, leader_epoch: int | None
) -> Iterator[RemoteLogSegmentMetadata]:
    """Segments of the partition in COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED or
    DELETE_SEGMENT_STARTED, including unreferenced ones (failed or superseded uploads), so the
    expiration task can clean them.

    :param leader_epoch: None for every segment of the partition (in no particular order); an
        epoch for the segments containing it, sorted by start offset.
    :raises tierlog.errors.RemoteStorageNotReadyError: the metadata of a partition this broker
        holds is still loading (retriable).
    :raises tierlog.errors.RemoteResourceNotFoundError: the manager does not know the partition
        (never added nor assigned, stopped, or deleted by DELETE_PARTITION_FINISHED); not
        retriable.
    """


@hookspec(firstresult=True)
def tierlog_on_partition_leadership_changes(
    leader_partitions: frozenset[TopicIdPartition],
    follower_partitions: frozenset[TopicIdPartition],
) -> None:
    """This broker became leader or follower of these tiered partitions: start serving their
    metadata (the topic-based manager subscribes to their metadata partitions)."""


@hookspec(firstresult=True)
def tierlog_on_stop_partitions(partitions: frozenset[TopicIdPartition]) -> None:
    """These partitions moved away from this broker or were deleted: drop their state."""


@hookspec(firstresult=True)
def tierlog_remote_log_size(topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
    """Total ``segment_size_in_bytes`` of the segments listed for ``leader_epoch``.

    Optional: when a provider does not implement it, the runtime sums
    ``tierlog_list_remote_log_segments``.

    :raises tierlog.errors.RemoteStorageNotReadyError: as for listing.
    :raises tierlog.errors.RemoteResourceNotFoundError: as for listing, never 0 for a partition
        the manager does not know.
    """


@hookspec(firstresult=True)
def tierlog_next_segment_with_txn_index(
    topic_id_partition: TopicIdPartition, epoch: int, offset: int
) -> RemoteLogSegmentMetadata | None:
    """The first finished segment of ``epoch`` at or after ``offset`` whose transaction index is
    not empty (read-committed remote fetches collect aborted transactions with it).

    Optional: when a provider does not implement it, the runtime walks
    ``tierlog_remote_log_segment_metadata`` forward.
    """


@hookspec(firstresult=True)
def tierlog_is_ready(topic_id_partition: TopicIdPartition) -> bool:
    """Whether the partition's metadata has finished loading (KIP-1007 readiness).

    While it is False, fetches that need remote data and list-offsets for the partition answer
    RemoteStorageNotReadyError, and copy and expiration skip it.

    Optional: when a provider does not implement it, every partition is ready.
    """


# ---------------------------------------------------------------------------------------------
# Extensions
# ---------------------------------------------------------------------------------------------


@hookspec
def tierlog_config_definitions() -> ConfigDef:
    """Declare the keys of this plugin's configuration slice (relative names, prefix stripped).

    Used to validate the slice before ``tierlog_configure`` (unknown keys, types, ranges are
    rejected with the full key named) and to list the keys in ``tierlog config``. Secrets must be
    declared with the PASSWORD type so they are never printed.
    """


@hookspec
def tierlog_register_cli_commands(cli: click.Group) -> None:
    """Add subcommands to the ``tierlog`` command (e.g. ``tierlog spark ...``).

    Import heavy dependencies inside the commands, not here: every ``tierlog`` invocation calls
    this hook.
    """


#: Hooks a storage provider must implement.
REMOTE_STORAGE_MANAGER_HOOKS = (
    "tierlog_copy_log_segment_data",
    "tierlog_fetch_log_segment",
    "tierlog_fetch_index",
    "tierlog_delete_log_segment_data",
)

#: Storage hooks a provider may leave out (a reader then only fetches through the plugin).
REMOTE_STORAGE_MANAGER_OPTIONAL_HOOKS = ("tierlog_locate_log_segment",)

#: Hooks a metadata provider must implement.
REMOTE_LOG_METADATA_MANAGER_HOOKS = (
    "tierlog_add_remote_log_segment_metadata",
    "tierlog_update_remote_log_segment_metadata",
    "tierlog_remote_log_segment_metadata",
    "tierlog_highest_offset_for_epoch",
    "tierlog_put_remote_partition_delete_metadata",
    "tierlog_list_remote_log_segments",
    "tierlog_on_partition_leadership_changes",
    "tierlog_on_stop_partitions",
)

#: Metadata hooks with a runtime default when the provider leaves them out.
REMOTE_LOG_METADATA_MANAGER_OPTIONAL_HOOKS = (
    "tierlog_remote_log_size",
    "tierlog_next_segment_with_txn_index",
    "tierlog_is_ready",
)

LIFECYCLE_HOOKS = (
    "tierlog_configure",
    "tierlog_register_metrics",
    "tierlog_on_broker_ready",
    "tierlog_close",
)
