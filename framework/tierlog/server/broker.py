"""A broker node: hosts partition replicas in its log dirs and answers the client requests.

Startup goes through explicit states, observable with :meth:`Broker.add_state_listener`:
``NOT_RUNNING -> STARTING`` (log dirs locked, dynamic configs applied, plugins configured and
their metrics registered) ``-> RECOVERING_LOGS`` (every partition directory opened, torn tails
recovered) ``-> SERVING`` (requests accepted; the controller hands out leadership; then the
plugins' broker-ready callback fires, once) ``-> SHUTTING_DOWN -> STOPPED`` (log dirs unlocked).

Every handler answers with per-partition error codes, as Kafka does: one bad partition never
fails the others, and a request that is wrong for a partition changes nothing there.

Replication: a broker follows the partitions it does not lead with its
:class:`~tierlog.server.replica_fetcher.ReplicaFetcherManager`, started and stopped by
LeaderAndIsr and StopReplica. As leader it records each follower fetch, proposes ISR changes
to the controller (followers that caught up join; those that have not caught up for
``replica.lag.time.max.ms`` leave, checked every half of that), and answers acks=all produces
once the high watermark passes what they appended.
"""

from __future__ import annotations

import enum
import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path

import attrs

from ..config import BrokerConfig, TopicConfig, resolve_topic_config
from ..errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    KafkaStorageError,
    LeaderNotAvailableError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    RemoteStorageNotReadyError,
    RemoteStorageQueueFullError,
    ReplicaNotAvailableError,
    RequestTimedOutError,
    StaleControllerEpochError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from ..host import PluginHost
from ..log import (
    AppendOrigin,
    DirectoryLock,
    LogConfig,
    PartitionLog,
    TimestampAndOffset,
    files,
)
from ..model import ZERO_UUID, TopicPartition, Uuid
from ..records import ControlType, build_control_batch
from ..records.validation import check_produce_partition_data
from ..remote import CACHE_DIR_NAME, SCRATCH_DIR_NAME, RemoteFetchResult, RemoteLogManager
from . import configs as config_ops
from . import protocol as p
from .controller import Controller
from .delayed_list_offsets import (
    DelayedRemoteListOffsets,
    PendingRemoteLookup,
    with_list_offsets_results,
)
from .delayed_produce import DelayedProduce, PendingAck
from .error_responses import error_response, txn_marker_error
from .fetch import (
    DelayedFetch,
    DelayedRemoteFetch,
    FetchOutcome,
    ResolvedFetchTopic,
    partition_data,
    read_partitions,
    with_partition_results,
)
from .image import ClusterImage, TopicImage
from .internal_topics import check_client_append, check_client_delete_records, is_internal
from .partition import (
    IsrChange,
    Partition,
    ReplicaRole,
    read_partition_metadata,
    write_partition_metadata,
)
from .purgatory import DelayedOperationPurgatory
from .replica_fetcher import InitialFetchState, ReplicaFetcherManager
from .request_validation import (
    check_controller_epoch,
    check_fetch_request,
    check_fetching_replica,
    check_isolation_level,
    check_leader_and_isr_state,
    check_records_deletable,
    check_replica_state,
    check_txn_marker,
    fetch_partition_error,
    topic_id_of,
)
from .topics import validate_topic_name

log = logging.getLogger(__name__)

NOT_READY_CODE = RemoteStorageNotReadyError.wire_fallback_code
"""What a partition whose remote metadata is still loading answers (REPLICA_NOT_AVAILABLE):
Kafka never gave KIP-1007's error a code, and every client already retries this one."""

#: How long a clean stop lets uploads under way finish before it hands leadership over.
COPY_DRAIN_TIMEOUT_S = 30.0

BROKER_HOST = "in-process"
"""The host an embedded broker reports in Metadata; a network front end reports its own."""


class BrokerState(enum.Enum):
    """Where a broker is in its life; a broker object goes through these once."""

    NOT_RUNNING = "not running"
    STARTING = "starting"
    RECOVERING_LOGS = "recovering logs"
    SERVING = "serving"
    SHUTTING_DOWN = "shutting down"
    STOPPED = "stopped"


StateListener = Callable[["Broker", BrokerState], None]


def _message(err: BaseException) -> str:
    return str(err) or type(err).__name__


def _record_errors(err: BaseException) -> list[p.BatchIndexAndErrorMessage]:
    """The records a refused batch was refused for, as a produce answer lists them."""
    if not isinstance(err, TierlogError):
        return []
    return [p.BatchIndexAndErrorMessage(e.batch_index, e.message) for e in err.record_errors]


class Broker:
    """One broker. Build it, :meth:`start` it, send it requests through a transport.

    The broker reads cluster metadata from ``controller`` and forwards topic and config changes
    to it in-process (as a KRaft broker reads the metadata log and forwards to the quorum); the
    controller reaches the broker back only through the transport (LeaderAndIsr, StopReplica).
    A broker object starts once; a restart is a new object on the same log dirs.
    """

    def __init__(
        self,
        config: BrokerConfig,
        controller: Controller,
        *,
        extra_plugins: Mapping[str, object] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = config.get_int("broker.id")
        self.log_dirs = tuple(Path(d) for d in config.get_list("log.dirs"))
        self.controller = controller
        self.plugin_host: PluginHost | None = None
        self._extra_plugins = extra_plugins
        self._state = BrokerState.NOT_RUNNING
        self._state_listeners: list[StateListener] = []
        self._lock = threading.RLock()
        self._partitions: dict[TopicPartition, Partition] = {}
        self._applied_topic_configs: dict[str, Mapping[str, str]] = {}
        self._fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] | None = None
        self._produce_purgatory: DelayedOperationPurgatory[DelayedProduce] | None = None
        self.replica_fetcher_manager: ReplicaFetcherManager | None = None
        self._isr_thread: threading.Thread | None = None
        self._hw_checkpoint_thread: threading.Thread | None = None
        self._remote_fetch_purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] | None = None
        self._remote_list_offsets_purgatory: (
            DelayedOperationPurgatory[DelayedRemoteListOffsets] | None
        ) = None
        self.remote_log_manager: RemoteLogManager | None = None
        self._stop_tasks = threading.Event()
        self._retention_thread: threading.Thread | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        #: One per log dir, held from start to stop: one broker per directory.
        self._log_dir_locks: list[DirectoryLock] = []

    # --- state ----------------------------------------------------------------------------

    @property
    def state(self) -> BrokerState:
        return self._state

    @property
    def serving(self) -> bool:
        return self._state is BrokerState.SERVING

    @property
    def fetch_purgatory(self) -> DelayedOperationPurgatory[DelayedFetch] | None:
        """Where fetches wait for ``min_bytes``; None until the broker has started."""
        return self._fetch_purgatory

    def add_state_listener(self, listener: StateListener) -> Callable[[], None]:
        """Calls ``listener(broker, new_state)`` on every state change; returns a remover."""
        self._state_listeners.append(listener)
        return lambda: self._state_listeners.remove(listener)

    def _set_state(self, state: BrokerState) -> None:
        log.info("broker %d: %s", self.broker_id, state.value)
        self._state = state
        for listener in list(self._state_listeners):
            try:
                listener(self, state)
            except Exception:
                log.exception("broker state listener %r failed", listener)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Runs the startup sequence; returns once serving. Raises if any step fails."""
        if self._state is not BrokerState.NOT_RUNNING:
            raise RuntimeError(f"broker {self.broker_id} is {self._state.value}; start it once")
        registered = False
        try:
            self._set_state(BrokerState.STARTING)
            for directory in self.log_dirs:
                try:
                    directory.mkdir(parents=True, exist_ok=True)
                except OSError as err:
                    raise KafkaStorageError(f"cannot create log dir {directory}: {err}") from err
                # Before anything reads or writes there, plugins included (their checkpoints).
                self._log_dir_locks.append(DirectoryLock.acquire(directory))
            self._apply_stored_broker_configs()
            self.plugin_host = PluginHost.create(self.config, extra_plugins=self._extra_plugins)
            self.plugin_host.start()
            self._set_state(BrokerState.RECOVERING_LOGS)
            self._recover_logs()
            self._fetch_purgatory = DelayedOperationPurgatory(f"Fetch-{self.broker_id}")
            self._produce_purgatory = DelayedOperationPurgatory(f"Produce-{self.broker_id}")
            self.replica_fetcher_manager = ReplicaFetcherManager(
                self.broker_id,
                self.config,
                self.controller.transport,
                self.partition,
                self.plugin_host.metrics,
            )
            if self.config.get_bool("remote.log.storage.system.enable"):
                self._remote_fetch_purgatory = DelayedOperationPurgatory(
                    f"RemoteFetch-{self.broker_id}"
                )
                self._remote_list_offsets_purgatory = DelayedOperationPurgatory(
                    f"RemoteListOffsets-{self.broker_id}"
                )
                self.remote_log_manager = RemoteLogManager(
                    self.config,
                    self.plugin_host,
                    self.broker_id,
                    self.log_dirs[0],
                    self._topic_switch,
                )
                self.replica_fetcher_manager.remote_log_manager = self.remote_log_manager
            self._start_background_tasks()
            self._unsubscribe.append(self.controller.subscribe(self._on_metadata))
            dynamic = [k.name for k in self.config.definition if k.dynamic]
            self._unsubscribe.append(
                self.config.add_listener(dynamic, lambda *_: self._refresh_topic_configs())
            )
            self._set_state(BrokerState.SERVING)
            registered = True
            self.controller.register_broker(self.broker_id)
            self.plugin_host.broker_ready(self)
        except BaseException:
            self._shutdown(clean=True, register=registered)
            raise

    def stop(self, *, clean: bool = True) -> None:
        """Stops serving, hands leadership back, closes logs and plugins.

        ``clean=False`` stands for a crash: the logs are closed without their clean-shutdown
        marker, so the next start recovers them as after a power loss.
        """
        if self._state in (BrokerState.NOT_RUNNING, BrokerState.STOPPED):
            return
        self._shutdown(clean=clean, register=True)

    def _shutdown(self, *, clean: bool, register: bool) -> None:
        if self.remote_log_manager is not None:
            # While leaderships are still ours and metadata can still be published.
            self.remote_log_manager.stop_copying(COPY_DRAIN_TIMEOUT_S if clean else 0.0)
        self._set_state(BrokerState.SHUTTING_DOWN)
        for remove in self._unsubscribe:
            remove()
        self._unsubscribe.clear()
        if register:
            self.controller.unregister_broker(self.broker_id)
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.shutdown()
        with self._lock:
            for partition in self._partitions.values():
                partition.make_offline()
        self._stop_tasks.set()
        if self._retention_thread is not None:
            self._retention_thread.join()
        for thread in (self._isr_thread, self._hw_checkpoint_thread):
            if thread is not None:
                thread.join()
        if self._produce_purgatory is not None:
            self._produce_purgatory.shutdown()
        if self._fetch_purgatory is not None:
            self._fetch_purgatory.shutdown()
        if self._remote_fetch_purgatory is not None:
            self._remote_fetch_purgatory.shutdown()
        if self._remote_list_offsets_purgatory is not None:
            self._remote_list_offsets_purgatory.shutdown()
        if self.remote_log_manager is not None:
            self.remote_log_manager.close()
        with self._lock:
            partitions = list(self._partitions.values())
            self._partitions.clear()
        errors: list[BaseException] = []
        for partition in partitions:
            try:
                partition.close()
                if not clean:
                    (partition.directory / files.CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
            except Exception as err:
                log.exception("closing %s failed", partition.topic_partition)
                errors.append(err)
        try:
            if self.plugin_host is not None:
                self.plugin_host.close()
        finally:
            for lock in reversed(self._log_dir_locks):
                lock.release()
            self._log_dir_locks.clear()
        self._set_state(BrokerState.STOPPED)
        if errors:
            raise errors[0]

    def _apply_stored_broker_configs(self) -> None:
        stored = self.controller.broker_configs(self.broker_id)
        if not stored:
            return
        try:
            update = config_ops.validated_broker_update(self.config, dict(stored))
            self.config.update(update)
        except TierlogError as err:
            log.warning("broker %d: ignoring stored dynamic configs: %s", self.broker_id, err)

    def _recover_logs(self) -> None:
        image = self.controller.image()
        for log_dir in self.log_dirs:
            for path in sorted(log_dir.iterdir()):
                if not path.is_dir():
                    continue
                if path.name in (CACHE_DIR_NAME, SCRATCH_DIR_NAME):
                    continue  # the remote log manager's own directories
                if path.name.endswith(files.DELETE_DIR_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                try:
                    tp = files.parse_log_dir_name(path.name)
                except ValueError:
                    log.warning("ignoring %s: not a partition directory", path)
                    continue
                topic = image.topic(tp.topic)
                partition_log = PartitionLog.open(path, self._log_config(topic), topic_partition=tp)
                self._partitions[tp] = Partition(
                    partition_log, read_partition_metadata(path), self.broker_id
                )

    def _topic_config(self, topic: TopicImage | None) -> TopicConfig:
        overrides = {} if topic is None else topic.configs
        return resolve_topic_config(overrides, self.config)

    def _topic_switch(self, topic: str, key: str) -> bool:
        """A boolean topic config as currently set (for the remote log manager)."""
        return bool(self._topic_config(self.controller.image().topic(topic)).get(key))

    def _log_config(self, topic: TopicImage | None) -> LogConfig:
        return LogConfig.from_topic_config(self._topic_config(topic))

    # --- background tasks -----------------------------------------------------------------

    def _start_background_tasks(self) -> None:
        self._stop_tasks.clear()
        self._retention_thread = threading.Thread(
            target=self._retention_loop, name=f"log-retention-{self.broker_id}", daemon=True
        )
        self._retention_thread.start()
        self._isr_thread = threading.Thread(
            target=self._isr_expiration_loop, name=f"isr-expiration-{self.broker_id}", daemon=True
        )
        self._isr_thread.start()
        self._hw_checkpoint_thread = threading.Thread(
            target=self._high_watermark_checkpoint_loop,
            name=f"highwatermark-checkpoint-{self.broker_id}",
            daemon=True,
        )
        self._hw_checkpoint_thread.start()

    def _high_watermark_checkpoint_loop(self) -> None:
        """Kafka's highwatermark-checkpoint task: every replica's high watermark, periodically."""
        interval = "replica.high.watermark.checkpoint.interval.ms"
        while not self._stop_tasks.wait(self.config.get_int(interval) / 1000):
            with self._lock:
                partitions = list(self._partitions.values())
            for partition in partitions:
                try:
                    partition.log.checkpoint_high_watermark()
                except Exception as err:
                    log.warning("%s: high watermark checkpoint failed: %s", partition.log, err)

    def _isr_expiration_loop(self) -> None:
        """Kafka's isr-expiration task: every half ``replica.lag.time.max.ms``."""
        while not self._stop_tasks.wait(self.config.get_int("replica.lag.time.max.ms") / 2000):
            self.shrink_isrs()

    def shrink_isrs(self) -> None:
        """Proposes dropping, on every partition led here, the followers that fell behind."""
        max_lag = self.config.get_int("replica.lag.time.max.ms")
        with self._lock:
            partitions = list(self._partitions.values())
        for partition in partitions:
            try:
                change = partition.isr_shrink_proposal(max_lag)
                if change is not None:
                    self._alter_isr(partition, change)
            except Exception:
                log.exception("ISR check of %s failed", partition.topic_partition)

    def _alter_isr(self, partition: Partition, change: IsrChange) -> None:
        """Sends an ISR change to the controller (never under the replica's lock)."""
        tp = partition.topic_partition
        try:
            registration = self.controller.alter_partition(
                tp, self.broker_id, change.leader_epoch, change.partition_epoch, change.isr
            )
        except TierlogError as err:
            log.info("broker %d: ISR change of %s refused: %s", self.broker_id, tp, err)
            partition.complete_isr_change(change, None, -1)
            return
        if partition.complete_isr_change(change, registration.isr, registration.partition_epoch):
            self._on_append(tp)
        else:
            self._wake_produce(tp)

    def _retention_loop(self) -> None:
        while not self._stop_tasks.wait(
            self.config.get_int("log.retention.check.interval.ms") / 1000
        ):
            self.check_retention()

    def check_retention(self) -> int:
        """Applies retention (and due flushes) to every hosted log once; returns segments deleted.

        The background task calls it every ``log.retention.check.interval.ms``.
        """
        deleted = 0
        with self._lock:
            partitions = list(self._partitions.values())
        for partition in partitions:
            try:
                deleted += partition.log.delete_old_segments()
                partition.log.maybe_flush()
            except Exception:
                if partition.log.closed:
                    continue  # stopped or deleted meanwhile
                log.exception("retention check of %s failed", partition.topic_partition)
        return deleted

    # --- metadata changes -----------------------------------------------------------------

    def _on_metadata(self, image: ClusterImage) -> None:
        """Applies changed topic configs to the hosted logs, live."""
        for gone in set(self._applied_topic_configs) - set(image.topics):
            del self._applied_topic_configs[gone]
        changed = []
        for name, topic in image.topics.items():
            if self._applied_topic_configs.get(name) != topic.configs:
                changed.append(topic)
        for topic in changed:
            self._apply_topic_config(topic)

    def _refresh_topic_configs(self) -> None:
        """A dynamic broker config changed: topic values inherited from it may change too."""
        for topic in self.controller.image().topics.values():
            self._apply_topic_config(topic)

    def _apply_topic_config(self, topic: TopicImage) -> None:
        try:
            config = self._log_config(topic)
        except TierlogError as err:
            log.warning("topic %s: cannot apply configs: %s", topic.name, err)
            return
        self._applied_topic_configs[topic.name] = topic.configs
        with self._lock:
            hosted = [pt for tp, pt in self._partitions.items() if tp.topic == topic.name]
        for partition in hosted:
            partition.log.update_config(config)

    # --- replicas -------------------------------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition | None:
        """The replica of ``tp`` this broker hosts, if any."""
        with self._lock:
            return self._partitions.get(tp)

    def hosted_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return sorted(self._partitions)

    def _get_or_create_partition(self, tp: TopicPartition, topic_id: Uuid) -> Partition:
        with self._lock:
            existing = self._partitions.get(tp)
            if existing is not None:
                if existing.topic_id in (None, topic_id):
                    return existing
                # A directory left from an older topic of the same name.
                del self._partitions[tp]
                existing.delete()
            counts = {d: 0 for d in self.log_dirs}
            for partition in self._partitions.values():
                parent = partition.directory.parent
                if parent in counts:
                    counts[parent] += 1
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            directory = log_dir / files.log_dir_name(tp)
            topic = self.controller.image().topic(tp.topic)
            partition_log = PartitionLog.open(
                directory, self._log_config(topic), topic_partition=tp
            )
            write_partition_metadata(directory, topic_id)
            created = Partition(partition_log, topic_id, self.broker_id)
            self._partitions[tp] = created
            return created

    def _leader_partition(
        self, image: ClusterImage, topic: str, index: int, current_leader_epoch: int = -1
    ) -> Partition:
        """The replica this broker leads for ``topic``/``index``, or the error to answer."""
        validate_topic_name(topic, internal_allowed=True)
        registration = image.registration(TopicPartition(topic, index)) if index >= 0 else None
        if registration is None:
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{index}")
        tp = TopicPartition(topic, index)
        partition = self.partition(tp)
        if partition is None:
            if registration.leader == p.NO_LEADER:
                raise LeaderNotAvailableError(f"{tp} has no leader")
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} does not host {tp} (leader: {registration.leader})"
            )
        partition.check_leader(current_leader_epoch)
        return partition

    # --- dispatch -------------------------------------------------------------------------

    def handle(self, request: p.Request) -> p.Response:
        """Answers one request. Content errors come back as error codes, never as exceptions:
        what a handler did not expect is logged and answered UNKNOWN_SERVER_ERROR."""
        if not self.serving:
            raise BrokerNotAvailableError(f"broker {self.broker_id} is {self._state.value}")
        if not isinstance(request, p.Request):
            raise InvalidRequestError(f"broker {self.broker_id} cannot handle {request!r}")
        try:
            return self._dispatch(request)
        except Exception as err:
            log.exception("broker %d: %s failed", self.broker_id, type(request).__name__)
            return error_response(request, error_code_of(err), _message(err))

    def handle_internal_produce(self, request: p.ProduceRequest) -> p.ProduceResponse:
        """A produce from the runtime's own writers, the only one that may append to internal
        topics (see :meth:`Transport.send_internal`)."""
        if not self.serving:
            raise BrokerNotAvailableError(f"broker {self.broker_id} is {self._state.value}")
        return self._produce(request, internal_topics_allowed=True)

    def _dispatch(self, request: p.Request) -> p.Response:
        match request:
            case p.ProduceRequest():
                return self._produce(request)
            case p.FetchRequest():
                return self._fetch(request)
            case p.ListOffsetsRequest():
                return self._list_offsets(request)
            case p.MetadataRequest():
                return self._metadata(request)
            case p.CreateTopicsRequest():
                return self.controller.create_topics(request)
            case p.DeleteTopicsRequest():
                return self.controller.delete_topics(request)
            case p.AlterPartitionReassignmentsRequest():
                return self.controller.alter_partition_reassignments(request)
            case p.ListPartitionReassignmentsRequest():
                return self.controller.list_partition_reassignments(request)
            case p.DeleteRecordsRequest():
                return self._delete_records(request)
            case p.OffsetsForLeaderEpochRequest():
                return self._offsets_for_leader_epoch(request)
            case p.WriteTxnMarkersRequest():
                return self._write_txn_markers(request)
            case p.DescribeConfigsRequest():
                return config_ops.describe_configs(
                    request, self.broker_id, self.config, self.controller
                )
            case p.IncrementalAlterConfigsRequest():
                return config_ops.alter_configs(
                    request, self.broker_id, self.config, self.controller
                )
            case p.LeaderAndIsrRequest():
                return self._leader_and_isr(request)
            case p.StopReplicaRequest():
                return self._stop_replica(request)

    # --- Produce --------------------------------------------------------------------------

    def _produce(
        self, request: p.ProduceRequest, *, internal_topics_allowed: bool = False
    ) -> p.ProduceResponse:
        image = self.controller.image()
        appended: list[TopicPartition] = []
        topics: list[p.TopicProduceResponse] = []
        waits: dict[tuple[int, int], PendingAck] = {}
        for topic in request.topic_data:
            results: list[p.PartitionProduceResponse] = []
            for data in topic.partition_data:
                minimum = 1
                try:
                    if request.acks not in (p.Acks.NONE, p.Acks.LEADER, p.Acks.ALL):
                        raise InvalidRequiredAcksError(
                            f"acks must be 0, 1 or -1, got {request.acks}"
                        )
                    if not internal_topics_allowed:
                        check_client_append(topic.name)
                    partition = self._leader_partition(image, topic.name, data.index)
                    check_produce_partition_data(data.records)
                    if request.acks == p.Acks.ALL:
                        minimum = self._check_min_insync(partition, image)
                    info = partition.append_records_to_leader(data.records)
                    appended.append(partition.topic_partition)
                    if request.acks == p.Acks.ALL:
                        waits[(len(topics), len(results))] = PendingAck(
                            partition, partition.leader_epoch, info.last_offset + 1, minimum
                        )
                    results.append(
                        p.PartitionProduceResponse(
                            data.index,
                            base_offset=info.first_offset,
                            log_append_time_ms=info.log_append_time,
                            log_start_offset=info.log_start_offset,
                        )
                    )
                except Exception as err:
                    results.append(
                        p.PartitionProduceResponse(
                            data.index,
                            error_code=error_code_of(err),
                            record_errors=_record_errors(err),
                            error_message=_message(err),
                        )
                    )
            topics.append(p.TopicProduceResponse(topic.name, results))
        for tp in appended:
            self._on_append(tp)
        if waits:
            self._await_replication(waits, request.timeout_ms)
            for (ti, ri), ack in waits.items():
                if ack.error_code is not None and ack.error_code != p.NONE:
                    answers = list(topics[ti].partition_responses)
                    answers[ri] = attrs.evolve(answers[ri], error_code=ack.error_code)
                    topics[ti] = attrs.evolve(topics[ti], partition_responses=answers)
        if request.acks == p.Acks.NONE:
            return p.ProduceResponse(())
        return p.ProduceResponse(topics)

    def _check_min_insync(self, partition: Partition, image: ClusterImage) -> int:
        """Refuses an acks=all append to a partition with too small an ISR; returns the
        partition's ``min.insync.replicas``."""
        topic = image.topic(partition.topic_partition.topic)
        minimum = self._topic_config(topic)["min.insync.replicas"]
        assert isinstance(minimum, int)
        isr = partition.in_sync_replicas()
        if len(isr) < minimum:
            raise NotEnoughReplicasError(
                f"{partition.topic_partition}: {len(isr)} in-sync replicas, "
                f"min.insync.replicas is {minimum}"
            )
        return minimum

    def _await_replication(self, waits: dict[tuple[int, int], PendingAck], timeout_ms: int) -> None:
        """acks=-1: waits in the produce purgatory until the ISR has the data, at most
        ``timeout_ms``; each wait then holds its partition's error code."""
        purgatory = self._produce_purgatory
        assert purgatory is not None
        pending = list(waits.values())
        delayed = DelayedProduce(timeout_ms, pending)
        keys = {ack.partition.topic_partition for ack in pending}
        purgatory.try_complete_else_watch(delayed, keys)
        delayed.wait()

    def _on_append(self, tp: TopicPartition) -> None:
        """New data (or a new high watermark, or a role change) on ``tp``: wake the fetches
        and the acks=all produces waiting for it."""
        purgatory = self._fetch_purgatory
        if purgatory is not None:
            purgatory.check_and_complete(tp)
        self._wake_produce(tp)

    def _wake_produce(self, tp: TopicPartition) -> None:
        produce = self._produce_purgatory
        if produce is not None:
            produce.check_and_complete(tp)

    # --- Fetch ----------------------------------------------------------------------------

    def _fetch(self, request: p.FetchRequest) -> p.FetchResponse:
        try:
            check_fetch_request(request)
        except TierlogError as err:
            return p.FetchResponse((), error_code=error_code_of(err))
        image = self.controller.image()
        topics = [self._resolve_fetch_topic(image, topic) for topic in request.topics]
        if request.replica_id >= 0:
            self._record_follower_fetch(request.replica_id, topics)

        def lookup(tp: TopicPartition, fetch: p.FetchPartition) -> Partition:
            # The latest image: a parked fetch must see a topic deleted while it waited.
            partition = self._leader_partition(
                self.controller.image(), tp.topic, tp.partition, fetch.current_leader_epoch
            )
            check_fetching_replica(partition, request.replica_id)
            return partition

        rlm = self.remote_log_manager
        outcome = read_partitions(
            request, topics, lookup, None if rlm is None else rlm.in_remote_range
        )
        if outcome.remote_reads:
            return self._remote_fetch(outcome)
        keys = [
            TopicPartition(t.name, f.partition)
            for t in topics
            if t.error_code == p.NONE
            for f in t.partitions
            if fetch_partition_error(f) == p.NONE
        ]
        if (
            request.max_wait_ms <= 0
            or outcome.bytes_read >= request.min_bytes
            or outcome.has_error
            or not keys
        ):
            return outcome.response
        purgatory = self._fetch_purgatory
        assert purgatory is not None
        replica_id = request.replica_id
        delayed = DelayedFetch(
            min(request.max_wait_ms, self.config.get_int("request.timeout.ms")),
            request.min_bytes,
            lambda: read_partitions(request, topics, lookup),
            None
            if replica_id < 0
            else lambda: replica_id not in self.controller.image().live_brokers,
        )
        purgatory.try_complete_else_watch(delayed, keys)
        delayed.wait()
        return delayed.response

    def _record_follower_fetch(self, replica_id: int, topics: list[ResolvedFetchTopic]) -> None:
        """A follower's fetch offset is its log end: track it, move the HW, grow the ISR."""
        for topic in topics:
            if topic.error_code != p.NONE:
                continue
            for fetch in topic.partitions:
                if fetch_partition_error(fetch) != p.NONE:
                    continue
                tp = TopicPartition(topic.name, fetch.partition)
                partition = self.partition(tp)
                if partition is None or not partition.is_leader:
                    continue
                if fetch.current_leader_epoch not in (p.UNKNOWN_EPOCH, partition.leader_epoch):
                    continue
                update = partition.update_follower_fetch_state(replica_id, fetch.fetch_offset)
                if update.isr_change is not None:
                    self._alter_isr(partition, update.isr_change)
                if update.high_watermark_changed:
                    self._on_append(tp)

    def _remote_fetch(self, outcome: FetchOutcome) -> p.FetchResponse:
        """Reads the remote partitions on the reader pool and waits for them, within bounds.

        The wait is ``remote.fetch.max.wait.ms`` (read now, so a change applies to the next
        fetch); a read not done by then is dropped and its partition answered empty.
        """
        rlm = self.remote_log_manager
        purgatory = self._remote_fetch_purgatory
        assert rlm is not None and purgatory is not None
        results: dict[tuple[int, int], p.FetchPartitionData] = {}
        reads = []
        for pending in outcome.remote_reads:
            key = (pending.topic_index, pending.partition_index)
            index = outcome.response.responses[key[0]].partitions[key[1]].partition_index
            if not rlm.is_ready(pending.partition):
                results[key] = p.FetchPartitionData(index, error_code=NOT_READY_CODE)
                continue
            if rlm.fetch_quota.throttle_time_ms() > 0:
                continue  # over the remote fetch quota: answered empty, retried by the client
            try:
                future = rlm.async_read(
                    pending.partition,
                    pending.fetch_offset,
                    pending.max_bytes,
                    min_one_message=pending.min_one_message,
                    committed=pending.committed,
                )
            except RemoteStorageQueueFullError as err:
                log.info("broker %d: %s", self.broker_id, err)
                code = ReplicaNotAvailableError.code
                assert code is not None
                results[key] = p.FetchPartitionData(index, error_code=code)
                continue
            reads.append((key, index, pending, future))
        if reads:
            token = object()
            futures: list[Future[RemoteFetchResult]] = [read[3] for read in reads]
            delayed = DelayedRemoteFetch(
                min(
                    self.config.get_int("remote.fetch.max.wait.ms"),
                    self.config.get_int("request.timeout.ms"),
                ),
                list(futures),  # type: ignore[arg-type]
                rlm.expired_fetches.mark,
            )
            for future in futures:
                future.add_done_callback(lambda _f: purgatory.check_and_complete(token))
            purgatory.try_complete_else_watch(delayed, [token])
            delayed.wait()
            for key, index, pending, future in reads:
                if future.cancelled() or not future.done():
                    continue
                error = future.exception()
                if error is not None:
                    results[key] = p.FetchPartitionData(index, error_code=error_code_of(error))
                else:
                    read = future.result()
                    results[key] = partition_data(
                        index, pending.partition, read.records, read.aborted_transactions
                    )
        return with_partition_results(outcome.response, results)

    def _resolve_fetch_topic(self, image: ClusterImage, topic: p.FetchTopic) -> ResolvedFetchTopic:
        unknown = UnknownTopicOrPartitionError.code or -1
        if topic.topic_id != ZERO_UUID:
            found = image.topic_by_id(topic.topic_id)
            if found is None or (topic.topic and topic.topic != found.name):
                return ResolvedFetchTopic(topic.topic, topic.topic_id, topic.partitions, unknown)
            return ResolvedFetchTopic(found.name, found.topic_id, topic.partitions)
        try:
            validate_topic_name(topic.topic, internal_allowed=True)
        except TierlogError as err:
            return ResolvedFetchTopic(topic.topic, ZERO_UUID, topic.partitions, error_code_of(err))
        found = image.topic(topic.topic)
        if found is None:
            return ResolvedFetchTopic(topic.topic, ZERO_UUID, topic.partitions, unknown)
        return ResolvedFetchTopic(found.name, found.topic_id, topic.partitions)

    # --- ListOffsets ----------------------------------------------------------------------

    def _list_offsets(self, request: p.ListOffsetsRequest) -> p.ListOffsetsResponse:
        image = self.controller.image()
        committed = request.isolation_level == p.IsolationLevel.READ_COMMITTED
        topics = []
        remote: list[PendingRemoteLookup] = []
        for topic_index, topic in enumerate(request.topics):
            results: list[p.ListOffsetsPartitionResponse] = []
            for part in topic.partitions:
                try:
                    check_isolation_level(request.isolation_level)
                    partition = self._leader_partition(
                        image, topic.name, part.partition_index, part.current_leader_epoch
                    )
                    answer = self._offset_for(partition, part, committed, request.replica_id)
                    if answer is None:
                        remote.append(
                            PendingRemoteLookup(
                                topic_index, len(results), topic.name, partition, part
                            )
                        )
                        answer = p.ListOffsetsPartitionResponse(part.partition_index)
                    results.append(answer)
                except Exception as err:
                    results.append(
                        p.ListOffsetsPartitionResponse(
                            part.partition_index, error_code=error_code_of(err)
                        )
                    )
            topics.append(p.ListOffsetsTopicResponse(topic.name, results))
        response = p.ListOffsetsResponse(topics)
        if remote:
            return self._remote_list_offsets(response, remote, committed)
        return response

    def _offset_for(
        self,
        partition: Partition,
        part: p.ListOffsetsPartition,
        committed: bool,
        replica_id: int = p.CONSUMER_REPLICA_ID,
    ) -> p.ListOffsetsPartitionResponse | None:
        """The partition's answer, or None when only a remote lookup can give it."""
        plog = partition.log
        rlm = self.remote_log_manager
        if rlm is not None and plog.config.remote_storage_enable and not rlm.is_ready(partition):
            return p.ListOffsetsPartitionResponse(part.partition_index, error_code=NOT_READY_CODE)
        fetchable = partition.last_stable_offset if committed else partition.high_watermark
        index = part.partition_index
        timestamp = part.timestamp

        def epoch_of(offset: int) -> int:
            epoch = plog.leader_epoch_cache.epoch_for_offset(offset)
            return p.UNKNOWN_EPOCH if epoch is None else epoch

        if timestamp == p.OffsetSpec.LATEST:
            # A follower resetting its fetch position needs the log end, as in Kafka.
            if replica_id >= 0:
                latest = plog.log_end_offset
            elif not partition.high_watermark_known:
                return p.ListOffsetsPartitionResponse(
                    index, error_code=OffsetNotAvailableError.code
                )
            else:
                latest = fetchable
            return p.ListOffsetsPartitionResponse(
                index, offset=latest, leader_epoch=partition.leader_epoch
            )
        if timestamp == p.OffsetSpec.LATEST_TIERED:
            tiered = plog.highest_offset_in_remote_storage
            return p.ListOffsetsPartitionResponse(
                index, offset=tiered, leader_epoch=epoch_of(tiered) if tiered >= 0 else -1
            )
        if rlm is not None and rlm.needs_remote_search(partition, timestamp):
            return None
        return self._timestamp_answer(
            partition, part, plog.offset_for_timestamp(timestamp), committed
        )

    @staticmethod
    def _timestamp_answer(
        partition: Partition,
        part: p.ListOffsetsPartition,
        found: TimestampAndOffset | None,
        committed: bool,
    ) -> p.ListOffsetsPartitionResponse:
        """The answer for a record found by time; nothing past what a consumer may fetch."""
        fetchable = partition.last_stable_offset if committed else partition.high_watermark
        special = part.timestamp in (p.OffsetSpec.EARLIEST, p.OffsetSpec.EARLIEST_LOCAL)
        beyond = found is None or found.offset >= fetchable
        if not special and beyond and not partition.high_watermark_known:
            # Past a stale high watermark "nothing yet" may be a mistake: the client retries.
            return p.ListOffsetsPartitionResponse(
                part.partition_index, error_code=OffsetNotAvailableError.code
            )
        if found is None or (not special and found.offset >= fetchable):
            return p.ListOffsetsPartitionResponse(part.partition_index)
        return p.ListOffsetsPartitionResponse(
            part.partition_index,
            timestamp=found.timestamp,
            offset=found.offset,
            leader_epoch=p.UNKNOWN_EPOCH if found.leader_epoch is None else found.leader_epoch,
        )

    def _remote_list_offsets(
        self,
        response: p.ListOffsetsResponse,
        lookups: list[PendingRemoteLookup],
        committed: bool,
    ) -> p.ListOffsetsResponse:
        """Runs the remote lookups on the reader pool and waits for them, within bounds.

        The wait is ``remote.list.offsets.request.timeout.ms``, read now so a change applies to
        the next request (the request carries no timeout of its own). A lookup not done by then
        answers REQUEST_TIMED_OUT; one that failed answers its error; the others their offsets.
        """
        rlm = self.remote_log_manager
        purgatory = self._remote_list_offsets_purgatory
        assert rlm is not None and purgatory is not None
        results: dict[tuple[int, int], p.ListOffsetsPartitionResponse] = {}
        started: list[tuple[PendingRemoteLookup, Future[TimestampAndOffset | None]]] = []
        for lookup in lookups:
            try:
                future = rlm.async_offset_for_timestamp(lookup.partition, lookup.request.timestamp)
            except RemoteStorageQueueFullError as err:
                log.info("broker %d: %s", self.broker_id, err)
                code = ReplicaNotAvailableError.code
                assert code is not None
                results[lookup.key] = p.ListOffsetsPartitionResponse(
                    lookup.request.partition_index, error_code=code
                )
                continue
            started.append((lookup, future))
        if started:
            token = object()
            delayed = DelayedRemoteListOffsets(
                self.config.get_int("remote.list.offsets.request.timeout.ms"),
                [future for _, future in started],
                rlm.expired_list_offsets.mark,
            )
            for _, future in started:
                future.add_done_callback(lambda _f: purgatory.check_and_complete(token))
            purgatory.try_complete_else_watch(delayed, [token])
            delayed.wait()
            for lookup, future in started:
                results[lookup.key] = self._remote_lookup_answer(lookup, future, committed)
        return with_list_offsets_results(response, results)

    def _remote_lookup_answer(
        self,
        lookup: PendingRemoteLookup,
        future: Future[TimestampAndOffset | None],
        committed: bool,
    ) -> p.ListOffsetsPartitionResponse:
        index = lookup.request.partition_index
        if future.cancelled() or not future.done():
            code = RequestTimedOutError.code
            assert code is not None
            return p.ListOffsetsPartitionResponse(index, error_code=code)
        error = future.exception()
        if error is not None:
            return p.ListOffsetsPartitionResponse(index, error_code=error_code_of(error))
        try:
            # Leadership may have moved while the lookup waited: answer as the request would now.
            partition = self._leader_partition(
                self.controller.image(), lookup.topic, index, lookup.request.current_leader_epoch
            )
        except Exception as err:
            return p.ListOffsetsPartitionResponse(index, error_code=error_code_of(err))
        return self._timestamp_answer(partition, lookup.request, future.result(), committed)

    # --- Metadata -------------------------------------------------------------------------

    def _metadata(self, request: p.MetadataRequest) -> p.MetadataResponse:
        image = self.controller.image()
        results = []
        if request.topics is None:
            results = [self._topic_metadata(image, t) for _, t in sorted(image.topics.items())]
        else:
            for wanted in request.topics:
                results.append(self._requested_topic_metadata(image, request, wanted))
                image = self.controller.image()
        brokers = [p.MetadataResponseBroker(b, BROKER_HOST, 0) for b in sorted(image.live_brokers)]
        return p.MetadataResponse(
            brokers=brokers,
            cluster_id=image.cluster_id,
            controller_id=image.controller_id,
            topics=results,
        )

    def _requested_topic_metadata(
        self, image: ClusterImage, request: p.MetadataRequest, wanted: p.MetadataRequestTopic
    ) -> p.MetadataResponseTopic:
        unknown = UnknownTopicOrPartitionError.code or -1
        if wanted.name is None:
            found = image.topic_by_id(wanted.topic_id)
            if found is None:
                return p.MetadataResponseTopic(None, unknown, wanted.topic_id)
            return self._topic_metadata(image, found)
        try:
            validate_topic_name(wanted.name, internal_allowed=True)
        except TierlogError as err:
            return p.MetadataResponseTopic(wanted.name, error_code_of(err))
        found = image.topic(wanted.name)
        if found is None:
            if (
                request.allow_auto_topic_creation
                and self.config.get_bool("auto.create.topics.enable")
                and not is_internal(wanted.name)
            ):
                try:
                    found = self.controller.create_topic(wanted.name)
                except TierlogError as err:
                    return p.MetadataResponseTopic(wanted.name, error_code_of(err))
                return self._topic_metadata(self.controller.image(), found)
            return p.MetadataResponseTopic(wanted.name, unknown)
        return self._topic_metadata(image, found)

    @staticmethod
    def _topic_metadata(image: ClusterImage, topic: TopicImage) -> p.MetadataResponseTopic:
        partitions = []
        for index, reg in enumerate(topic.partitions):
            partitions.append(
                p.MetadataResponsePartition(
                    index,
                    error_code=(
                        LeaderNotAvailableError.code or -1 if reg.leader == p.NO_LEADER else p.NONE
                    ),
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    replica_nodes=reg.replicas,
                    isr_nodes=reg.isr,
                    offline_replicas=[r for r in reg.replicas if r not in image.live_brokers],
                )
            )
        return p.MetadataResponseTopic(
            topic.name,
            topic_id=topic.topic_id,
            is_internal=is_internal(topic.name),
            partitions=partitions,
        )

    # --- DeleteRecords --------------------------------------------------------------------

    def _delete_records(self, request: p.DeleteRecordsRequest) -> p.DeleteRecordsResponse:
        image = self.controller.image()
        topics = []
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                try:
                    check_client_delete_records(topic.name)
                    partition = self._leader_partition(image, topic.name, part.partition_index)
                    check_records_deletable(partition, self._topic_config(image.topic(topic.name)))
                    offset = part.offset
                    if offset == -1:
                        offset = partition.high_watermark
                    if offset < 0:
                        raise OffsetOutOfRangeError(f"cannot delete records before {offset}")
                    low = partition.log.delete_records(offset)
                    results.append(p.DeleteRecordsPartitionResult(part.partition_index, low))
                except Exception as err:
                    results.append(
                        p.DeleteRecordsPartitionResult(
                            part.partition_index, error_code=error_code_of(err)
                        )
                    )
            topics.append(p.DeleteRecordsTopicResult(topic.name, results))
        return p.DeleteRecordsResponse(topics)

    # --- OffsetsForLeaderEpoch ------------------------------------------------------------

    def _offsets_for_leader_epoch(
        self, request: p.OffsetsForLeaderEpochRequest
    ) -> p.OffsetsForLeaderEpochResponse:
        image = self.controller.image()
        topics = []
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                try:
                    partition = self._leader_partition(
                        image, topic.topic, part.partition, part.current_leader_epoch
                    )
                    epoch, end = partition.log.end_offset_for_epoch(part.leader_epoch)
                    results.append(
                        p.EpochEndOffset(part.partition, leader_epoch=epoch, end_offset=end)
                    )
                except Exception as err:
                    results.append(p.EpochEndOffset(part.partition, error_code=error_code_of(err)))
            topics.append(p.OffsetForLeaderTopicResult(topic.topic, results))
        return p.OffsetsForLeaderEpochResponse(topics)

    # --- WriteTxnMarkers ------------------------------------------------------------------

    def _write_txn_markers(self, request: p.WriteTxnMarkersRequest) -> p.WriteTxnMarkersResponse:
        image = self.controller.image()
        markers = []
        for marker in request.markers:
            try:
                check_txn_marker(marker)
            except InvalidRequestError as err:
                markers.append(txn_marker_error(marker, err.code or -1))
                continue
            control = ControlType.COMMIT if marker.transaction_result else ControlType.ABORT
            records = build_control_batch(
                control,
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                timestamp=int(time.time() * 1000),
                coordinator_epoch=marker.coordinator_epoch,
            )
            topics = []
            for topic in marker.topics:
                results = []
                for index in topic.partition_indexes:
                    try:
                        partition = self._leader_partition(image, topic.name, index)
                        partition.append_records_to_leader(records, AppendOrigin.COORDINATOR)
                        self._on_append(partition.topic_partition)
                        results.append(p.WritableTxnMarkerPartitionResult(index))
                    except Exception as err:
                        results.append(
                            p.WritableTxnMarkerPartitionResult(index, error_code_of(err))
                        )
                topics.append(p.WritableTxnMarkerTopicResult(topic.name, results))
            markers.append(p.WritableTxnMarkerResult(marker.producer_id, topics))
        return p.WriteTxnMarkersResponse(markers)

    # --- controller requests --------------------------------------------------------------

    def _leader_and_isr(self, request: p.LeaderAndIsrRequest) -> p.LeaderAndIsrResponse:
        try:
            check_controller_epoch(request.controller_epoch, self.controller.image())
        except StaleControllerEpochError as err:
            return p.LeaderAndIsrResponse(error_code=err.code or -1)
        topic_ids = dict(request.topic_ids)
        errors = []
        leaders: list[Partition] = []
        followers: list[Partition] = []
        wanted: set[TopicPartition] = set()
        fetchers = self.replica_fetcher_manager
        start_fetching: dict[TopicPartition, InitialFetchState] = {}
        for state in request.partition_states:
            try:
                check_leader_and_isr_state(state)
                topic_id = topic_id_of(state.topic_name, topic_ids)
            except TierlogError as err:
                errors.append(
                    p.LeaderAndIsrPartitionError(
                        state.topic_name, state.partition_index, error_code_of(err)
                    )
                )
                continue
            tp = TopicPartition(state.topic_name, state.partition_index)
            wanted.add(tp)
            code = p.NONE
            try:
                partition = self._get_or_create_partition(tp, topic_id)
                if partition.is_stale_leader_and_isr(state):
                    log.info("broker %d: ignoring stale LeaderAndIsr for %s", self.broker_id, tp)
                elif state.leader == self.broker_id:
                    if fetchers is not None:
                        fetchers.remove_fetcher_for_partitions([tp])
                    partition.make_leader(state, topic_id)
                    leaders.append(partition)
                else:
                    new_leader = (
                        partition.role is not ReplicaRole.FOLLOWER
                        or partition.leader_id != state.leader
                        or partition.leader_epoch != state.leader_epoch
                    )
                    if new_leader and fetchers is not None:
                        fetchers.remove_fetcher_for_partitions([tp])
                    partition.make_follower(state, topic_id)
                    followers.append(partition)
                    if new_leader and state.leader != p.NO_LEADER:
                        start_fetching[tp] = InitialFetchState(
                            state.leader, state.leader_epoch, partition.log.log_end_offset
                        )
            except Exception as err:
                log.exception("broker %d: LeaderAndIsr for %s failed", self.broker_id, tp)
                code = error_code_of(err)
            errors.append(p.LeaderAndIsrPartitionError(tp.topic, tp.partition, code))
            self._on_append(tp)
        if fetchers is not None:
            fetchers.add_fetcher_for_partitions(start_fetching)
            fetchers.shutdown_idle_threads()
        if self.remote_log_manager is not None:
            try:
                self.remote_log_manager.on_leadership_change(leaders, followers)
            except Exception:
                log.exception(
                    "broker %d: remote log manager leadership change failed", self.broker_id
                )
        if request.type == p.LEADER_AND_ISR_FULL:
            with self._lock:
                strays = [tp for tp in self._partitions if tp not in wanted]
            for tp in strays:
                self._remove_partition(tp, delete=True)
        return p.LeaderAndIsrResponse(partition_errors=errors)

    def _stop_replica(self, request: p.StopReplicaRequest) -> p.StopReplicaResponse:
        try:
            check_controller_epoch(request.controller_epoch, self.controller.image())
        except StaleControllerEpochError as err:
            return p.StopReplicaResponse(error_code=err.code or -1)
        errors = []
        for state in request.partition_states:
            code = p.NONE
            try:
                check_replica_state(state.topic_name, state.partition_index)
                tp = TopicPartition(state.topic_name, state.partition_index)
                self._remove_partition(tp, delete=state.delete_partition)
            except Exception as err:
                code = error_code_of(err)
            errors.append(
                p.StopReplicaPartitionError(state.topic_name, state.partition_index, code)
            )
        return p.StopReplicaResponse(partition_errors=errors)

    def _remove_partition(self, tp: TopicPartition, *, delete: bool) -> None:
        with self._lock:
            partition = self._partitions.pop(tp, None)
        if partition is None:
            return
        led, leader = partition.is_leader, partition.leader_id
        # acks=all produces waiting on it fail now (NOT_LEADER_OR_FOLLOWER), not at timeout.
        partition.make_offline()
        fetchers = self.replica_fetcher_manager
        if fetchers is not None:
            fetchers.remove_fetcher_for_partitions([tp])
            fetchers.shutdown_idle_threads()
        rlm = self.remote_log_manager
        if rlm is not None:
            image = self.controller.image()
            topic = image.topic(tp.topic)
            gone = delete and (topic is None or topic.topic_id != partition.topic_id)
            # One broker cleans up remote data: the leader, or without a live leader the
            # lowest-numbered live replica.
            cleaner = led or (
                leader not in image.live_brokers
                and self.broker_id
                == min((r for r in partition.replicas if r in image.live_brokers), default=-1)
            )
            try:
                rlm.stop_partition(partition, delete_remote=gone and cleaner)
            except Exception:
                log.exception("broker %d: removing remote data of %s failed", self.broker_id, tp)
        if delete:
            log.info("broker %d: deleting %s", self.broker_id, partition.directory)
            partition.delete()
        else:
            partition.close()
        self._on_append(tp)
