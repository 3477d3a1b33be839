"""Scenarios that run a storage plugin inside a real cluster, step by step.

The contracts call hooks one at a time; a scenario proves the plugin also works under the
runtime: segments roll, the remote log manager copies them, consumers read them back from
remote storage, retention and topic deletion remove them, brokers restart on the same data.
Steps chain, as in Kafka's ``TieredStorageTestBuilder``, and each one either acts or waits
for a condition; every storage call goes through a :class:`RecordingStorageManager`, so the
expectations speak about what was uploaded, fetched and deleted::

    with Scenario(tmp_path, settings) as scenario:
        (scenario.create_topic("t", segment_bytes=4096, local_retention_bytes=1)
            .produce("t", 0, values)
            .expect_tiered("t", 0, segments=3)
            .expect_local_deleted("t", 0)
            .consume("t", 0, from_offset=0, expect=values)
            .expect_fetched_from_remote("t", 0)
            .delete_topic("t")
            .expect_remote_empty("t"))

``settings`` choose the storage plugin as a broker configuration does; the scenario adds the
short task intervals that make tiering take milliseconds instead of minutes. With several
brokers and a replicated topic, ``leader_change`` stops the leader (cleanly or as a crash) and
waits for another replica to lead; ``start_broker`` brings the old one back as a follower.

A step that times out says why when the plugin is to blame: the storage hooks that failed
meanwhile (by hook, broker and error) and the errors logged while it waited.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from ..client import Admin, AlterConfig, ConfigResource, Consumer, NewTopic, Producer
from ..cluster import EmbeddedCluster
from ..errors import RemoteStorageNotReadyError, TierlogError
from ..log.partition_log import PartitionLog
from ..model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
    Uuid,
)
from ..server.broker import Broker, BrokerState
from ..server.image import PartitionRegistration
from ..server.partition import Partition
from .recording import COPY, DELETE, FETCH, FETCH_INDEX, RecordingStorageManager, StorageEvent

#: Broker settings that make the remote log manager and retention react within milliseconds.
FAST_TIERING: Mapping[str, object] = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "50",
    "log.retention.check.interval.ms": "50",
}

RECORDER = "scenario-recorder"

#: The hook each kind of recorded storage call went through.
HOOKS: Mapping[str, str] = {
    COPY: "tierlog_copy_log_segment_data",
    FETCH: "tierlog_fetch_log_segment",
    FETCH_INDEX: "tierlog_fetch_index",
    DELETE: "tierlog_delete_log_segment_data",
}


class _LoggedErrors(logging.Handler):
    """The last warnings and errors logged anywhere in the process while a scenario runs."""

    def __init__(self, keep: int = 200) -> None:
        super().__init__(logging.WARNING)
        self.records: collections.deque[logging.LogRecord] = collections.deque(maxlen=keep)
        self.count = 0
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            self.records.append(record)
            self.count += 1

    def since(self, count: int) -> list[logging.LogRecord]:
        """Records logged after the first ``count`` (those still kept)."""
        with self._guard:
            kept = list(self.records)
            return kept[-(self.count - count) :] if self.count > count else []


class ScenarioError(AssertionError):
    """A step's expectation did not hold (within the scenario's timeout)."""


class Scenario:
    """A running cluster and the history of its storage calls; every step returns ``self``.

    The cluster starts on the first step (or on ``start``); ``close`` (or leaving the ``with``
    block) stops it. ``extra_plugins`` are registered next to the recorder, for a storage
    plugin that is not installed as a distribution.
    """

    def __init__(
        self,
        data_dir: Path,
        settings: Mapping[str, object],
        *,
        brokers: int = 1,
        extra_plugins: Mapping[str, object] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.timeout_s = timeout_s
        self.recorder = RecordingStorageManager()
        self._settings = {**FAST_TIERING, **settings}
        # One recording wrapper per broker, so each event says which broker made the call.
        self._plugins = {**(extra_plugins or {}), RECORDER: self.recorder.per_broker()}
        self._logged = _LoggedErrors()
        self._brokers = brokers
        self._cluster: EmbeddedCluster | None = None
        self._topic_ids: dict[str, Uuid] = {}
        self._consume_mark = 0
        self._values: dict[TopicPartition, list[bytes]] = {}

    # --- running ------------------------------------------------------------------------------

    @property
    def cluster(self) -> EmbeddedCluster:
        if self._cluster is None:
            self.start()
        assert self._cluster is not None
        return self._cluster

    def start(self) -> Self:
        if self._cluster is None:
            logging.getLogger().addHandler(self._logged)
            cluster = EmbeddedCluster(
                self._brokers,
                self.data_dir / "cluster",
                self._settings,
                extra_plugins=self._plugins,
            )
            cluster.start()
            self._cluster = cluster
        return self

    def close(self) -> None:
        cluster, self._cluster = self._cluster, None
        try:
            if cluster is not None:
                cluster.stop()
        finally:
            logging.getLogger().removeHandler(self._logged)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- topics and records -------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        segment_bytes: int | None = None,
        tiered: bool = True,
        **configs: object,
    ) -> Self:
        """Creates ``topic``; ``configs`` are topic keys with underscores for dots."""
        wanted = {key.replace("_", "."): str(value) for key, value in configs.items()}
        wanted["remote.storage.enable"] = str(tiered).lower()
        if segment_bytes is not None:
            wanted["segment.bytes"] = str(segment_bytes)
        with self._admin() as admin:
            admin.create_topics([NewTopic(topic, partitions, replication_factor, configs=wanted)])
        self._wait(
            lambda: all(self._replica_or_none(topic, p) for p in range(partitions)),
            f"every partition of {topic} has a leader",
        )
        topic_id = self._replica(topic, 0)[1]
        self._topic_ids[topic] = topic_id
        return self

    def produce(
        self,
        topic: str,
        partition: int,
        values: Sequence[bytes],
        *,
        timestamps: Sequence[int] | None = None,
    ) -> Self:
        """Sends ``values`` to one partition and waits until every one is acknowledged;
        ``timestamps`` (ms, one per value) are the records' create times."""
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(f"{len(values)} values but {len(timestamps)} timestamps")
        stamps = [None] * len(values) if timestamps is None else list(timestamps)
        # Small batches, so small segments roll at predictable points.
        settings = {"acks": "all", "linger.ms": 0, "batch.size": 1024}
        with Producer(self.cluster.transport, settings) as producer:
            futures = [
                producer.send(topic, value, partition=partition, timestamp=stamp)
                for value, stamp in zip(values, stamps, strict=True)
            ]
            for future in futures:
                future.result(timeout=self.timeout_s)
        self._values.setdefault(TopicPartition(topic, partition), []).extend(values)
        return self

    def consume(
        self,
        topic: str,
        partition: int,
        *,
        from_offset: int = 0,
        expect: Sequence[bytes] | None = None,
    ) -> Self:
        """Reads from ``from_offset`` and checks the values against ``expect``.

        Without ``expect`` the values produced by this scenario from that offset on are
        expected. The storage calls made from here on are what
        :meth:`expect_fetched_from_remote` looks at.
        """
        if expect is None:
            expect = self._values.get(TopicPartition(topic, partition), [])[from_offset:]
        self._consume_mark = len(self.recorder.events)
        logged_before = self._logged.count
        tp = TopicPartition(topic, partition)
        got: list[bytes | None] = []
        deadline = time.monotonic() + self.timeout_s

        def why() -> str:
            return _diagnosis(
                self.recorder.events[self._consume_mark :], self._logged.since(logged_before)
            )

        with Consumer(self.cluster.transport, {"auto.offset.reset": "none"}) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, from_offset)
            while len(got) < len(expect) and time.monotonic() < deadline:
                try:
                    got.extend(record.value for record in consumer.poll(timeout_ms=200))
                except TierlogError as err:
                    raise ScenarioError(
                        f"consuming {topic}-{partition} from {from_offset} failed after "
                        f"{len(got)} records: {type(err).__name__}: {err}" + why()
                    ) from err
        if got[: len(expect)] != list(expect):
            raise ScenarioError(
                f"consuming {topic}-{partition} from {from_offset}: got {len(got)} records "
                f"{_preview(got)}, expected {len(expect)} {_preview(list(expect))}" + why()
            )
        return self

    def delete_records(self, topic: str, partition: int, before_offset: int) -> Self:
        """Deletes the records below ``before_offset`` (DeleteRecords): the log start moves
        there and the remote segments wholly below it become retention's to delete."""
        tp = TopicPartition(topic, partition)
        with self._admin() as admin:
            admin.delete_records({tp: before_offset})
        return self

    def delete_topic(self, topic: str) -> Self:
        with self._admin() as admin:
            admin.delete_topics([topic])
        return self

    def alter_topic(self, topic: str, **configs: object) -> Self:
        """Changes topic configs at runtime; keys use underscores for dots, None removes one."""
        changes = [
            AlterConfig(key.replace("_", "."), None if value is None else str(value))
            for key, value in configs.items()
        ]
        with self._admin() as admin:
            admin.alter_configs({ConfigResource.topic(topic): changes})
        return self

    def with_retention(
        self,
        topic: str,
        *,
        ms: int | None = None,
        bytes: int | None = None,
        local_ms: int | None = None,
        local_bytes: int | None = None,
    ) -> Self:
        """Sets the total (``retention.*``) and local (``local.retention.*``) retention."""
        configs = {
            "retention.ms": ms,
            "retention.bytes": bytes,
            "local.retention.ms": local_ms,
            "local.retention.bytes": local_bytes,
        }
        return self.alter_topic(topic, **{k: v for k, v in configs.items() if v is not None})

    # --- switching tiering (KIP-405, KIP-950) -------------------------------------------------

    def enable_tiering(self, topic: str) -> Self:
        return self.alter_topic(
            topic, remote_storage_enable="true", remote_log_copy_disable="false"
        )

    def disable_copy(self, topic: str) -> Self:
        """Stops new uploads; what is remote stays readable and under retention."""
        return self.alter_topic(topic, remote_log_copy_disable="true")

    def disable_tiering(self, topic: str) -> Self:
        """Turns tiering off and deletes the remote data (``remote.log.delete.on.disable``)."""
        return self.alter_topic(
            topic, remote_storage_enable="false", remote_log_delete_on_disable="true"
        )

    # --- brokers ------------------------------------------------------------------------------

    def restart_broker(self, broker_id: int = 0, *, clean: bool = True) -> Self:
        """Stops and starts one broker on the same data; ``clean=False`` as after a crash."""
        self.cluster.restart_broker(broker_id, clean=clean)
        return self

    def stop_broker(self, broker_id: int, *, clean: bool = True) -> Self:
        """Stops one broker; ``clean=False`` leaves its logs to be recovered, as a crash does."""
        self.cluster.stop_broker(broker_id, clean=clean)
        return self

    def start_broker(self, broker_id: int) -> Self:
        """Starts a stopped broker again on its data; it rejoins as a follower or a leader."""
        self.cluster.start_broker(broker_id)
        return self

    def leader(self, topic: str, partition: int) -> int:
        """The broker the controller has chosen to lead the partition (-1: none)."""
        return self._registration(topic, partition).leader

    def leader_change(self, topic: str, partition: int, *, clean: bool = True) -> Self:
        """Stops the current leader (``clean=False``: as a crash) and waits until another
        replica leads and serves; start the old leader again with :meth:`start_broker`."""
        old = self.leader(topic, partition)
        if old < 0:
            raise ScenarioError(f"no broker leads {topic}-{partition}")
        self.stop_broker(old, clean=clean)
        self._wait(
            lambda: self._serving_leader(topic, partition) not in (None, old),
            f"a replica other than broker {old} leads {topic}-{partition}",
        )
        return self

    # --- expectations -------------------------------------------------------------------------

    def expect_tiered(self, topic: str, partition: int, *, segments: int | None = None) -> Self:
        """Waits until the partition's segments are in remote storage.

        ``segments=N`` waits for at least N uploaded segments; without it, for every rolled
        segment (all but the active one). Both are checked in the recorded copies and in the
        remote log metadata.
        """

        def done() -> bool:
            finished = self.remote_segments(topic, partition)
            copied = {e.segment_id for e in self._events(topic, partition, COPY) if e.succeeded}
            if segments is not None:
                return len(finished) >= segments and len(copied) >= segments
            log = self._log(topic, partition)
            active = log.segments()[-1].base_offset
            return active > 0 and log.highest_offset_in_remote_storage == active - 1

        what = f"{segments} segments" if segments is not None else "every rolled segment"
        self._wait(done, f"{what} of {topic}-{partition} tiered")
        return self

    def expect_local_deleted(self, topic: str, partition: int) -> Self:
        """Waits until local copies of tiered segments are gone (``local.retention.*``)."""
        self._wait(
            lambda: (
                self._log(topic, partition).local_log_start_offset
                > self._log(topic, partition).log_start_offset
            ),
            f"local segments of {topic}-{partition} deleted after tiering",
        )
        return self

    def expect_fetched_from_remote(
        self, topic: str, partition: int, *, segments: int | None = None
    ) -> Self:
        """Checks that the last ``consume`` read from remote storage (``segments``: at least
        that many distinct segments)."""
        since = self.recorder.events[self._consume_mark :]
        fetched = {e.segment_id for e in self._of(since, topic, partition, FETCH) if e.succeeded}
        wanted = 1 if segments is None else segments
        if len(fetched) < wanted:
            raise ScenarioError(
                f"the last consume of {topic}-{partition} fetched {len(fetched)} remote "
                f"segments, expected at least {wanted}"
            )
        return self

    def expect_not_fetched_from_remote(self, topic: str, partition: int) -> Self:
        since = self.recorder.events[self._consume_mark :]
        fetched = self._of(since, topic, partition, FETCH)
        if fetched:
            raise ScenarioError(
                f"the last consume of {topic}-{partition} fetched {len(fetched)} times from "
                "remote storage, expected local reads only"
            )
        return self

    def expect_remote_deleted(
        self, topic: str, partition: int, *, segments: int | None = None
    ) -> Self:
        """Waits until remote segments were deleted: at least ``segments``, or, without it,
        every one uploaded so far."""

        def done() -> bool:
            deleted = self._deleted(topic, partition)
            if segments is not None:
                return len(deleted) >= segments
            return self._copied(topic, partition) <= deleted and not self.remote_segments(
                topic, partition
            )

        what = f"{segments} remote segments" if segments is not None else "every remote segment"
        self._wait(done, f"{what} of {topic}-{partition} deleted")
        return self

    def expect_leader(self, topic: str, partition: int, broker_id: int) -> Self:
        """Waits until ``broker_id`` leads the partition and serves it as its leader."""
        self._wait(
            lambda: self._serving_leader(topic, partition) == broker_id,
            f"broker {broker_id} leads {topic}-{partition}",
        )
        return self

    def expect_in_isr(self, topic: str, partition: int, broker_id: int) -> Self:
        """Waits until ``broker_id`` is back in the partition's ISR (caught up with the leader)."""
        self._wait(
            lambda: broker_id in self._registration(topic, partition).isr,
            f"broker {broker_id} in the ISR of {topic}-{partition}",
        )
        return self

    def expect_caught_up(self, topic: str, partition: int, broker_id: int) -> Self:
        """Waits until ``broker_id`` is in the ISR and its log ends where the leader's does."""
        self.expect_in_isr(topic, partition, broker_id)

        def caught_up() -> bool:
            replica = self.cluster.broker(broker_id).partition(TopicPartition(topic, partition))
            leader = self._log(topic, partition)
            return replica is not None and replica.log.log_end_offset == leader.log_end_offset

        self._wait(caught_up, f"broker {broker_id} has the log end of {topic}-{partition}")
        return self

    def expect_list_offsets(
        self,
        topic: str,
        partition: int,
        spec: int,
        offset: int,
        *,
        leader_epoch: int | None = None,
    ) -> Self:
        """Waits until ListOffsets answers ``offset`` (and ``leader_epoch``, when given) for
        ``spec``: an :class:`~tierlog.server.protocol.OffsetSpec` or a timestamp in ms.

        It waits because a new leader answers some specs (``LATEST_TIERED``) only once its
        remote log metadata is loaded.
        """
        tp = TopicPartition(topic, partition)
        seen: list[object] = []

        def answered() -> bool:
            with self._admin() as admin:
                listed = admin.list_offsets({tp: spec})[tp]
            seen[:] = [listed]
            return listed.offset == offset and (
                leader_epoch is None or listed.leader_epoch == leader_epoch
            )

        try:
            self._wait(answered, f"ListOffsets({spec}) of {topic}-{partition} answers {offset}")
        except ScenarioError as err:
            raise ScenarioError(f"{err}; the last answer: {seen[0] if seen else None}") from None
        return self

    def expect_log_start_offset(self, topic: str, partition: int, *, at_least: int) -> Self:
        self._wait(
            lambda: self._log(topic, partition).log_start_offset >= at_least,
            f"the log start offset of {topic}-{partition} reaches {at_least}",
        )
        return self

    def expect_no_new_copies(self, topic: str, partition: int, *, for_s: float = 0.5) -> Self:
        """Checks that nothing of the partition is uploaded for ``for_s`` seconds."""
        before = len(self._events(topic, partition, COPY))
        broker = self._replica(topic, partition)[2]
        if broker.remote_log_manager is not None:
            broker.remote_log_manager.wake()
        time.sleep(for_s)
        after = len(self._events(topic, partition, COPY))
        if after != before:
            raise ScenarioError(f"{after - before} segments of {topic}-{partition} uploaded")
        return self

    def settle(self, *, for_s: float = 1.0) -> Self:
        """Waits until no storage call was made for ``for_s`` seconds: the remote log manager
        has finished what the last steps started (retention deleting down to its limit)."""
        count, quiet_since = len(self.recorder.events), time.monotonic()

        def quiet() -> bool:
            nonlocal count, quiet_since
            now_count = len(self.recorder.events)
            if now_count != count:
                count, quiet_since = now_count, time.monotonic()
            return time.monotonic() - quiet_since >= for_s

        self._wait(quiet, f"no storage call for {for_s}s")
        return self

    def expect_remote_empty(self, topic: str | None = None) -> Self:
        """Waits until every segment uploaded (of ``topic``, or of any topic) was deleted."""

        def done() -> bool:
            copies = {e.segment_id for e in self._scoped(topic, COPY) if e.succeeded}
            deletes = {e.segment_id for e in self._scoped(topic, DELETE) if e.succeeded}
            return copies <= deletes

        self._wait(done, f"remote storage of {topic or 'every topic'} emptied")
        return self

    def wait_until(self, condition: Callable[[], object], what: str) -> Self:
        """Waits for a condition of the test's own (``what`` names it in the timeout error)."""
        self._wait(condition, what)
        return self

    # --- what the scenario sees ---------------------------------------------------------------

    def log(self, topic: str, partition: int, broker_id: int | None = None) -> PartitionLog:
        """A replica's local log: the leader's, or ``broker_id``'s."""
        if broker_id is None:
            return self._log(topic, partition)
        replica = self.cluster.broker(broker_id).partition(TopicPartition(topic, partition))
        if replica is None:
            raise ScenarioError(f"broker {broker_id} holds no replica of {topic}-{partition}")
        return replica.log

    def remote_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """The partition's finished uploads as the remote log metadata lists them."""
        replica = self._replica_or_none(topic, partition)
        if replica is None:
            return []
        _, topic_id, broker = replica
        if broker.plugin_host is None:
            return []
        tip = TopicIdPartition(topic_id, TopicPartition(topic, partition))
        try:
            listed = list(broker.plugin_host.metadata.list_remote_log_segments(tip))
        except RemoteStorageNotReadyError:
            return []
        return [s for s in listed if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]

    def events(self, topic: str, partition: int, kind: str) -> list[StorageEvent]:
        """The recorded storage calls of one kind for one partition, in call order."""
        return self._events(topic, partition, kind)

    def _events(self, topic: str, partition: int, kind: str) -> list[StorageEvent]:
        return self._of(self.recorder.events, topic, partition, kind)

    def _of(
        self, events: Sequence[StorageEvent], topic: str, partition: int, kind: str
    ) -> list[StorageEvent]:
        topic_id = self._topic_ids.get(topic)
        return [
            e
            for e in events
            if e.kind == kind
            and e.segment_id.topic_id_partition.topic_id == topic_id
            and e.segment_id.topic_id_partition.partition == partition
        ]

    def _scoped(self, topic: str | None, kind: str) -> list[StorageEvent]:
        events = self.recorder.of(kind)
        if topic is None:
            return events
        topic_id = self._topic_ids.get(topic)
        return [e for e in events if e.segment_id.topic_id_partition.topic_id == topic_id]

    def _copied(self, topic: str, partition: int) -> set[object]:
        return {e.segment_id for e in self._events(topic, partition, COPY) if e.succeeded}

    def _deleted(self, topic: str, partition: int) -> set[object]:
        return {e.segment_id for e in self._events(topic, partition, DELETE) if e.succeeded}

    def _admin(self) -> Admin:
        return Admin(self.cluster.transport)

    def _replica_or_none(self, topic: str, partition: int) -> tuple[Partition, Uuid, Broker] | None:
        try:
            leader = self._serving_leader(topic, partition)
        except ScenarioError:
            return None
        if leader is None:
            return None
        broker = self.cluster.broker(leader)
        replica = broker.partition(TopicPartition(topic, partition))
        if replica is None or replica.topic_id is None:
            return None
        return replica, replica.topic_id, broker

    def _replica(self, topic: str, partition: int) -> tuple[Partition, Uuid, Broker]:
        found = self._replica_or_none(topic, partition)
        if found is None:
            raise ScenarioError(f"no broker leads {topic}-{partition}")
        return found

    def _registration(self, topic: str, partition: int) -> PartitionRegistration:
        topic_image = self.cluster.controller.image().topic(topic)
        registration = None if topic_image is None else topic_image.partition(partition)
        if registration is None:
            raise ScenarioError(f"no partition {topic}-{partition}")
        return registration

    def _serving_leader(self, topic: str, partition: int) -> int | None:
        """The broker that leads the partition in the controller's image and acts on it."""
        leader = self.leader(topic, partition)
        if leader < 0:
            return None
        try:
            broker = self.cluster.broker(leader)
        except KeyError:
            return None
        replica = broker.partition(TopicPartition(topic, partition))
        if broker.state is not BrokerState.SERVING or replica is None or not replica.is_leader:
            return None
        return leader

    def _log(self, topic: str, partition: int) -> PartitionLog:
        return self._replica(topic, partition)[0].log

    def _wait(self, condition: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        events_before, logged_before = len(self.recorder.events), self._logged.count
        while True:
            try:
                if condition():
                    return
            except ScenarioError:
                pass
            if time.monotonic() > deadline:
                raise ScenarioError(
                    f"timed out after {self.timeout_s}s waiting until {what}"
                    + _diagnosis(
                        self.recorder.events[events_before:], self._logged.since(logged_before)
                    )
                )
            time.sleep(0.02)


def _diagnosis(events: Sequence[StorageEvent], logged: Sequence[logging.LogRecord]) -> str:
    """What the plugin did wrong while a step waited: failed hooks, then logged errors."""
    lines = []
    failed: dict[tuple[str, int | None], list[StorageEvent]] = {}
    for event in events:
        if not event.succeeded:
            failed.setdefault((event.kind, event.broker_id), []).append(event)
    for (kind, broker_id), failures in failed.items():
        last = failures[-1]
        where = "" if broker_id is None else f" on broker {broker_id}"
        times = "once" if len(failures) == 1 else f"{len(failures)} times"
        lines.append(
            f"\n  {HOOKS.get(kind, kind)} failed {times}{where}, last: {last.error}: {last.message}"
        )
    if lines:
        lines.insert(0, "\nstorage calls that failed meanwhile:")
    if logged:
        lines.append(f"\nerrors logged meanwhile (last {min(len(logged), 10)} of {len(logged)}):")
        for record in logged[-10:]:
            lines.append(f"\n  {record.levelname} {record.name}: {record.getMessage()}")
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                lines.append(f" ({type(error).__name__}: {error})")
    return "".join(lines)


def _preview(values: Sequence[bytes | None], limit: int = 3) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"
