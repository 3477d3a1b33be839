"""One broker of a running multi-process cluster, as the tier job sees it from another process.

The job runs on the broker's machine with the broker's config: it tiers the partitions that
broker leads, reading their rolled segments, leader-epoch checkpoint and producer snapshots
from the broker's log dirs (files the broker no longer changes once a segment has rolled), and
learns from the cluster over the Kafka protocol what the files do not say: who leads at which
epoch, the last stable offset and log start offset, the topic's tiering switches. Brokers are
found through the ZooKeeper registrations of ``zookeeper.connect``.

Metadata goes through a metadata manager of the job's own, attached to the cluster
(``TopicBasedRemoteLogMetadataManager.attach``), which publishes to ``__remote_log_metadata``
and consumes it as a broker's does; it is configured from the broker's config but keeps its
checkpoint in a scratch dir, never in the broker's log dir.

Exclusivity with the broker's copy task is the partition's copy slot (``tierlog.remote.
copy_slot``): a file lock the job holds for its whole run, and a hand-back note it keeps up to
date so that the broker takes its tiered offset from the metadata, once that shows the job's
uploads, when it copies again.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from kazoo.client import KazooClient
from tierlog.client import Admin, ConfigResource
from tierlog.config import BrokerConfig, load_sources
from tierlog.coordination.client import zookeeper_client
from tierlog.coordination.registration import endpoints_of, registered_brokers
from tierlog.errors import TierlogError
from tierlog.host import PluginHost
from tierlog.log import LeaderEpochCache, LeaderEpochCheckpointFile, UploadableSegment, files
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
)
from tierlog.plugins import ROLE_METADATA
from tierlog.records import LOG_OVERHEAD, read_batch_fields
from tierlog.remote.copy import find_highest_remote_offset, now_ms
from tierlog.remote.copy_slot import CopySlot, HandBack
from tierlog.remote.quota import RateQuota
from tierlog.server import protocol as p
from tierlog.server.partition import read_partition_metadata
from tierlog.wire.network_transport import NetworkTransport

__all__ = ["AttachedBroker", "AttachedPartition", "SlotUnavailableError"]

log = logging.getLogger(__name__)

#: How long to wait for the job's metadata manager to reach the topic and load a partition.
METADATA_TIMEOUT_S = 60.0


class SlotUnavailableError(TierlogError):
    """A partition's copy slot could not be taken; the message names the partition."""


@attrs.define(eq=False)
class TopicSwitches:
    """The topic's tiering switches, as the log config carries them in a broker."""

    remote_storage_enable: bool
    remote_log_copy_disable: bool


@attrs.define(eq=False)
class LocalLogView:
    """A led partition's log as its files and the leader describe it: what the copy protocol
    reads of a ``PartitionLog``, for rolled segments only."""

    topic_partition: TopicPartition
    directory: Path
    config: TopicSwitches
    leader_epoch_cache: LeaderEpochCache
    log_start_offset: int
    last_stable_offset: int
    highest_offset_in_remote_storage: int = -1
    closed: bool = False

    def segments_eligible_for_upload(self) -> list[UploadableSegment]:
        """Rolled segments below the last stable offset and above the tiered offset."""
        bases = sorted(
            files.offset_from_file_name(path.name)
            for path in self.directory.iterdir()
            if files.is_segment_file(path.name, files.LOG_SUFFIX)
        )
        found = []
        for base, next_base in itertools.pairwise(bases):
            end = next_base - 1
            if next_base > self.last_stable_offset:
                break
            log_path = files.segment_file(self.directory, base, files.LOG_SUFFIX)
            size = log_path.stat().st_size
            if end <= self.highest_offset_in_remote_storage or size == 0:
                continue
            txn = files.segment_file(self.directory, base, files.TXN_INDEX_SUFFIX)
            snapshot = self.directory / (files.offset_prefix(next_base) + files.SNAPSHOT_SUFFIX)
            found.append(
                UploadableSegment(
                    base_offset=base,
                    end_offset=end,
                    size_in_bytes=size,
                    max_timestamp=_max_timestamp(log_path, size),
                    log_path=log_path,
                    offset_index_path=files.segment_file(self.directory, base, files.INDEX_SUFFIX),
                    time_index_path=files.segment_file(
                        self.directory, base, files.TIME_INDEX_SUFFIX
                    ),
                    txn_index_path=txn if txn.exists() and txn.stat().st_size > 0 else None,
                    producer_snapshot=snapshot if snapshot.exists() else None,
                    leader_epochs=tuple(self.leader_epoch_cache.entries_in_range(base, end)),
                )
            )
        return found


def _max_timestamp(log_path: Path, size: int) -> int:
    """The newest batch timestamp of a rolled segment (-1: none), from its batch headers."""
    best = p.NO_TIMESTAMP
    with log_path.open("rb") as f:
        data = memoryview(f.read(size))
    position = 0
    while position + LOG_OVERHEAD < size:
        fields = read_batch_fields(data, position)
        best = max(best, fields[8])
        position += LOG_OVERHEAD + fields[1]
    return best


@attrs.define(eq=False)
class _Replica:
    """Stands for the broker's ``Partition``: the copy protocol reads ``partition.log``."""

    log: LocalLogView


@attrs.define(eq=False)
class AttachedPartition:
    """A partition the job tiers: its task state, as ``PartitionTasks`` has it in a broker."""

    topic_id_partition: TopicIdPartition
    partition: _Replica
    leader_epoch: int
    slot: CopySlot | None = None
    leader: bool = True
    initialized: bool = True
    #: Why the job stopped on this partition, once it has.
    stopped: str | None = None

    @property
    def directory(self) -> Path:
        return self.partition.log.directory

    def hand_back(self, tiered_end: int, finishing_end: int | None = None) -> None:
        HandBack(self.leader_epoch, tiered_end, finishing_end).write(self.directory)


class AttachedBroker:
    """The broker whose config the job was given, and the cluster it belongs to; see the module
    doc. Offers what the tier job uses of a broker's ``RemoteLogManager``."""

    def __init__(self, config_file: Path, scratch_dir: Path) -> None:
        raw = load_sources(config_file, os.environ)
        self.config = BrokerConfig.from_mapping(raw)
        if not self.config.get_str("zookeeper.connect"):
            raise ValueError(f"{config_file} has no zookeeper.connect: not a cluster node's config")
        if not self.config.get_bool("remote.log.storage.system.enable"):
            raise ValueError(f"{config_file}: remote.log.storage.system.enable is not true")
        self.broker_id = self.config.get_int("broker.id")
        self.log_dirs = [Path(d) for d in self.config.get_list("log.dirs")]
        #: The broker's settings, for the storage plugin in Spark's Python workers.
        self.settings = {key: str(value) for key, value in raw.items()}
        self.scratch_dir = scratch_dir
        scratch_dir.mkdir(parents=True, exist_ok=True)
        self._own = BrokerConfig.from_mapping({**raw, "log.dirs": str(scratch_dir)})
        self.copy_quota = RateQuota(
            self.config.get_int("remote.log.manager.copy.max.bytes.per.second"),
            self.config.get_int("remote.log.manager.copy.quota.window.num"),
            self.config.get_int("remote.log.manager.copy.quota.window.size.seconds"),
        )
        self.custom_metadata_max_bytes = self.config.get_int(
            "remote.log.metadata.custom.metadata.max.bytes"
        )
        self.stop_event = threading.Event()
        self.segments_being_copied: set[RemoteLogSegmentId] = set()
        self._zk: KazooClient | None = None
        self._addresses: dict[int, tuple[str, int]] = {}
        self._transport: NetworkTransport | None = None
        self._host: PluginHost | None = None
        self._admin: Admin | None = None

    # --- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Reaches the cluster and starts the job's metadata manager."""
        try:
            self._zk = zookeeper_client(self.config)
            self._transport = NetworkTransport(
                self._resolve,
                self._node_ids,
                client_id=f"tierlog-spark-tier-{self.broker_id}",
            )
            self._admin = Admin(self._transport)
            host = self._host = PluginHost.create(self._own)
            host.start()
            provider = host.plugin_manager.get_plugin(host.chosen[ROLE_METADATA])
            attach = getattr(provider, "attach", None)
            if attach is None:
                raise ValueError(
                    f"the remote log metadata manager {host.chosen[ROLE_METADATA]!r} cannot be "
                    "used from outside a broker: run the tier job in the runtime instead"
                )
            attach(self._transport, METADATA_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.stop_event.set()
        if self._host is not None:
            self._host.close()
        if self._transport is not None:
            self._transport.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._host = self._transport = self._zk = None

    def __enter__(self) -> AttachedBroker:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _node_ids(self) -> tuple[int, ...]:
        self._refresh_addresses()
        return tuple(sorted(self._addresses))

    def _resolve(self, broker_id: int) -> tuple[str, int] | None:
        if broker_id not in self._addresses:
            self._refresh_addresses()
        return self._addresses.get(broker_id)

    def _refresh_addresses(self) -> None:
        assert self._zk is not None
        found = {}
        for broker_id, info in registered_brokers(self._zk).items():
            endpoints = endpoints_of(info)
            if endpoints:
                found[broker_id] = (endpoints[0].host, endpoints[0].port)
        self._addresses = found

    # --- what the job reads of the cluster ------------------------------------------------

    @property
    def metadata(self) -> Any:
        assert self._host is not None
        return self._host.metadata

    @property
    def storage(self) -> Any:
        assert self._host is not None
        return self._host.storage

    @property
    def admin(self) -> Admin:
        assert self._admin is not None
        return self._admin

    def led_partitions(self, topics: Sequence[str]) -> list[AttachedPartition]:
        """The partitions of ``topics`` this broker leads now, with their local logs."""
        described = self.admin.describe_topics(topics)
        configs = self.admin.describe_configs([ConfigResource.topic(t) for t in topics])
        led: list[AttachedPartition] = []
        for topic in topics:
            info = described[topic]
            entries = configs[ConfigResource.topic(topic)]
            switches = TopicSwitches(
                _flag(entries, "remote.storage.enable"), _flag(entries, "remote.log.copy.disable")
            )
            for part in info.partitions:
                if part.leader != self.broker_id:
                    continue
                tp = TopicPartition(topic, part.partition)
                directory = self._directory(tp)
                if read_partition_metadata(directory) != info.topic_id:
                    raise ValueError(f"{tp}: {directory} holds another topic of the same name")
                view = LocalLogView(tp, directory, switches, LeaderEpochCache(), -1, -1)
                tip = TopicIdPartition(info.topic_id, tp)
                led.append(AttachedPartition(tip, _Replica(view), part.leader_epoch))
        return led

    def _directory(self, tp: TopicPartition) -> Path:
        for log_dir in self.log_dirs:
            candidate = log_dir / files.log_dir_name(tp)
            if candidate.is_dir():
                return candidate
        dirs = ", ".join(str(d) for d in self.log_dirs)
        raise ValueError(f"{tp}: no directory in log.dirs ({dirs}); is this broker's machine?")

    def refresh(self, part: AttachedPartition) -> None:
        """Reads the partition's epochs from its checkpoint and its offsets from the leader."""
        view = part.partition.log
        checkpoint = LeaderEpochCheckpointFile.in_directory(view.directory)
        view.leader_epoch_cache = LeaderEpochCache(entries=checkpoint.read())
        tp = view.topic_partition
        start = self.admin.list_offsets({tp: p.OffsetSpec.EARLIEST})
        stable = self.admin.list_offsets(
            {tp: p.OffsetSpec.LATEST}, isolation_level=p.IsolationLevel.READ_COMMITTED
        )
        view.log_start_offset = start[tp].offset
        view.last_stable_offset = stable[tp].offset

    def leadership_change(self, part: AttachedPartition) -> str | None:
        """Why the job may no longer upload for ``part`` (None: it still may): as the copy task
        of a deposed leader, it must not upload what the next leader will."""
        tp = part.topic_id_partition.topic_partition
        try:
            info = self.admin.describe_topics([tp.topic])[tp.topic]
        except TierlogError as err:
            return f"cannot tell who leads it: {err}"
        (now,) = [q for q in info.partitions if q.partition == tp.partition]
        if now.leader != self.broker_id or now.leader_epoch != part.leader_epoch:
            return (
                f"its leadership changed (broker {self.broker_id} led it at epoch "
                f"{part.leader_epoch}; now broker {now.leader} leads it at epoch "
                f"{now.leader_epoch})"
            )
        return None

    def uploads_allowed(self, part: AttachedPartition) -> bool:
        if part.stopped is None:
            part.stopped = self.leadership_change(part)
        return part.stopped is None and not self.stop_event.is_set()

    @contextmanager
    def copy_slot(self, part: AttachedPartition, timeout_s: float) -> Iterator[AttachedPartition]:
        """Holds the partition's copy slot, with a hand-back note from the start: until the
        job's last FINISHED is known, the broker must take its tiered offset from metadata."""
        tip = part.topic_id_partition
        slot = CopySlot.try_acquire(part.directory)
        if slot is None:
            log.info("%s: waiting for its copy slot, held by another process", tip.topic_partition)
            slot = CopySlot.acquire(part.directory, timeout_s)
        if slot is None:
            raise SlotUnavailableError(
                f"{tip.topic_partition}: its copy slot ({part.directory}) is held by another "
                f"process (the broker's copy task or another tier job) for more than "
                f"{timeout_s:.0f} s"
            )
        with slot:
            part.slot = slot
            deadline = time.monotonic() + METADATA_TIMEOUT_S
            self.metadata.on_partition_leadership_changes(frozenset({tip}), frozenset())
            while not self.metadata.is_ready(tip):
                if time.monotonic() > deadline:
                    raise SlotUnavailableError(
                        f"{tip.topic_partition}: its remote log metadata did not load in "
                        f"{METADATA_TIMEOUT_S:.0f} s"
                    )
                time.sleep(0.05)
            self.refresh(part)
            view = part.partition.log
            view.highest_offset_in_remote_storage = find_highest_remote_offset(
                self,  # type: ignore[arg-type]
                view,  # type: ignore[arg-type]
                tip,
            )
            part.hand_back(view.highest_offset_in_remote_storage)
            try:
                yield part
            finally:
                part.slot = None

    def delete_remote_segment(
        self, segment: RemoteLogSegmentMetadata, *, count: bool = True
    ) -> None:
        """DELETE_SEGMENT_STARTED, delete the objects, DELETE_SEGMENT_FINISHED."""
        del count  # the job keeps no metrics
        if segment.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            self._update(segment, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        self.storage.delete_log_segment_data(segment)
        self._update(segment, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)

    def _update(self, segment: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> None:
        self.metadata.update_remote_log_segment_metadata(
            segment.update_to(state, self.broker_id, now_ms())
        )


def _flag(entries: Mapping[str, p.DescribeConfigsResourceResult], name: str) -> bool:
    entry = entries.get(name)
    return entry is not None and (entry.value or "").lower() == "true"
