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

This module keeps the broker's state, its hosted replicas and the entry points; the startup
and shutdown steps are in ``broker_lifecycle.py``, which handler answers which request in
``dispatch.py``, each request is answered by its own module (``produce.py``,
``fetch_request.py``, ``list_offsets.py``, ``metadata.py``, ``hosting.py`` for LeaderAndIsr and
StopReplica, ...), and the periodic tasks run from ``background_tasks.py``.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..config import BrokerConfig, TopicConfig, resolve_topic_config
from ..errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from ..groups import GroupCoordinator
from ..groups.lag import ConsumerLagMetrics
from ..groups.protocol import GroupRequest
from ..host import PluginHost
from ..log import DirectoryLock, LogConfig, PartitionLog, files
from ..log.cleaner import LogCleaner
from ..model import TopicPartition, Uuid
from ..remote import RemoteLogManager
from . import broker_lifecycle as lifecycle
from . import protocol as p
from .alter_partition_manager import AlterPartitionManager
from .background_tasks import BackgroundTasks
from .controller import Controller
from .controller_view import ControllerView
from .delayed_list_offsets import DelayedRemoteListOffsets
from .delayed_produce import DelayedProduce
from .dispatch import dispatch
from .error_responses import error_message, error_response
from .fetch import DelayedFetch, DelayedRemoteFetch
from .image import ClusterImage, IsrChange, PartitionRegistration, TopicImage
from .partition import Partition, write_partition_metadata
from .produce import produce
from .producer_ids import ProducerIdManager
from .purgatory import DelayedOperationPurgatory
from .replica_fetcher import ReplicaFetcherManager
from .topics import validate_topic_name

log = logging.getLogger(__name__)


class BrokerState(enum.Enum):
    """Where a broker is in its life; a broker object goes through these once."""

    NOT_RUNNING = "not running"
    STARTING = "starting"
    RECOVERING_LOGS = "recovering logs"
    SERVING = "serving"
    SHUTTING_DOWN = "shutting down"
    STOPPED = "stopped"


StateListener = Callable[["Broker", BrokerState], None]


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
        controller: ControllerView,
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
        #: Sends the ISR changes of the partitions led here; None until started.
        self.alter_partition_manager: AlterPartitionManager | None = None
        self._remote_fetch_purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] | None = None
        self._remote_list_offsets_purgatory: (
            DelayedOperationPurgatory[DelayedRemoteListOffsets] | None
        ) = None
        self.remote_log_manager: RemoteLogManager | None = None
        #: Consumer groups and their offsets (``tierlog.groups``); None until started.
        self.group_coordinator: GroupCoordinator | None = None
        #: Lag per group and partition as metrics (``tierlog.groups.lag``); None until started.
        self.consumer_lag: ConsumerLagMetrics | None = None
        self._tasks = BackgroundTasks(self)
        #: Compacts the hosted logs whose cleanup.policy includes compact; None until started.
        self.log_cleaner: LogCleaner | None = None
        #: This broker's block of producer ids, refilled from the controller (KIP-730).
        self.producer_id_manager = ProducerIdManager(
            self.broker_id, controller.allocate_producer_ids
        )
        self._unsubscribe: list[Callable[[], None]] = []
        #: Whether brokers of a multi-process cluster may reach this one: the inter-broker APIs
        #: (LeaderAndIsr, UpdateMetadata, AlterPartition...) are served only then.
        self.inter_broker_enabled = False
        #: The controller running in this broker's process while it holds the controller role
        #: of a multi-process cluster; None otherwise (AlterPartition is then NOT_CONTROLLER).
        self.active_controller: Controller | None = None
        #: Takes the controller's UpdateMetadata pushes in a multi-process cluster; None in an
        #: embedded one, whose brokers read the in-process controller's image.
        self.metadata_receiver: Callable[[Any], Any] | None = None
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

    @property
    def produce_purgatory(self) -> DelayedOperationPurgatory[DelayedProduce] | None:
        """Where acks=all produces wait for the ISR; None until the broker has started."""
        return self._produce_purgatory

    @property
    def remote_fetch_purgatory(self) -> DelayedOperationPurgatory[DelayedRemoteFetch] | None:
        """Where fetches wait for remote reads; None without remote storage."""
        return self._remote_fetch_purgatory

    @property
    def remote_list_offsets_purgatory(
        self,
    ) -> DelayedOperationPurgatory[DelayedRemoteListOffsets] | None:
        """Where ListOffsets waits for remote lookups; None without remote storage."""
        return self._remote_list_offsets_purgatory

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
            lifecycle.lock_log_dirs(self)
            lifecycle.apply_stored_broker_configs(self)
            self.plugin_host = PluginHost.create(self.config, extra_plugins=self._extra_plugins)
            self.plugin_host.start()
            self._set_state(BrokerState.RECOVERING_LOGS)
            lifecycle.recover_logs(self)
            lifecycle.start_services(self, self.plugin_host)
            self._set_state(BrokerState.SERVING)
            registered = True
            self.controller.register_broker(self.broker_id)
            self.plugin_host.broker_ready(self)
        except BaseException:
            lifecycle.shutdown(self, clean=True, register=registered)
            raise

    def stop(self, *, clean: bool = True) -> None:
        """Stops serving, hands leadership back, closes logs and plugins.

        ``clean=False`` stands for a crash: the logs are closed without their clean-shutdown
        marker, so the next start recovers them as after a power loss.
        """
        if self._state in (BrokerState.NOT_RUNNING, BrokerState.STOPPED):
            return
        lifecycle.shutdown(self, clean=clean, register=True)

    def topic_config(self, topic: TopicImage | None) -> TopicConfig:
        """A topic's configs as they apply here: its overrides over this broker's values."""
        overrides = {} if topic is None else topic.configs
        return resolve_topic_config(overrides, self.config)

    def _topic_switch(self, topic: str, key: str) -> bool:
        """A boolean topic config as currently set (for the remote log manager)."""
        return bool(self.topic_config(self.controller.image().topic(topic)).get(key))

    def _log_config(self, topic: TopicImage | None) -> LogConfig:
        return LogConfig.from_topic_config(self.topic_config(topic))

    def opening_log_config(self, topic: str) -> LogConfig:
        """The configs a log of ``topic`` opens with: the image's, or the stored ones while the
        image does not have the topic (a broker of a multi-process cluster opens its logs
        before any image reached it). A tiered log opened as untiered would take its first
        local offset for its log start."""
        found = self.controller.image().topic(topic)
        if found is not None:
            overrides = found.configs
        else:
            overrides = self.controller.stored_topic_configs(topic) or {}
        return LogConfig.from_topic_config(resolve_topic_config(overrides, self.config))

    # --- ISR and retention (run periodically by BackgroundTasks) --------------------------

    def shrink_isrs(self) -> None:
        """Proposes dropping, on every partition led here, the followers that fell behind."""
        max_lag = self.config.get_int("replica.lag.time.max.ms")
        for partition in self.hosted_replicas():
            try:
                change = partition.isr_shrink_proposal(max_lag)
                if change is not None:
                    self.alter_isr(partition, change)
            except Exception:
                log.exception("ISR check of %s failed", partition.topic_partition)

    def alter_isr(self, partition: Partition, change: IsrChange) -> None:
        """Queues an ISR change for the controller (never under the replica's lock)."""
        if self.alter_partition_manager is None:  # not started
            partition.complete_isr_change(change, None, -1)
            return
        self.alter_partition_manager.submit(partition, change)

    def _complete_isr_change(
        self, partition: Partition, change: IsrChange, answer: PartitionRegistration | TierlogError
    ) -> None:
        """Applies the controller's answer to an ISR change this broker asked for."""
        tp = partition.topic_partition
        if isinstance(answer, TierlogError):
            log.info("broker %d: ISR change of %s refused: %s", self.broker_id, tp, answer)
            partition.complete_isr_change(change, None, -1)
            return
        if partition.complete_isr_change(change, answer.isr, answer.partition_epoch):
            self.on_append(tp)
        else:
            self.wake_produce(tp)

    def check_retention(self) -> int:
        """Applies retention (and due flushes) to every hosted log once; returns segments deleted.

        The background task calls it every ``log.retention.check.interval.ms``.
        """
        deleted = 0
        for partition in self.hosted_replicas():
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

    def hosted_replicas(self) -> list[Partition]:
        """A snapshot of the hosted replicas, for work that must not hold the broker's lock."""
        with self._lock:
            return list(self._partitions.values())

    def detach_partition(self, tp: TopicPartition) -> Partition | None:
        """Stops hosting ``tp``; the caller closes or deletes the replica returned."""
        with self._lock:
            return self._partitions.pop(tp, None)

    def get_or_create_partition(self, tp: TopicPartition, topic_id: Uuid) -> Partition:
        """The replica of ``tp`` hosted here, created in the least used log dir if needed."""
        with self._lock:
            existing = self._partitions.get(tp)
            if existing is not None:
                if existing.topic_id in (None, topic_id):
                    return existing
                # A directory left from an older topic of the same name.
                del self._partitions[tp]
                existing.delete()
            log_dir = self._least_used_log_dir()
            directory = log_dir / files.log_dir_name(tp)
            partition_log = PartitionLog.open(
                directory, self.opening_log_config(tp.topic), topic_partition=tp
            )
            write_partition_metadata(directory, topic_id)
            created = Partition(partition_log, topic_id, self.broker_id)
            self._partitions[tp] = created
            return created

    def _least_used_log_dir(self) -> Path:
        if len(self.log_dirs) == 1:  # the usual case: no need to count thousands of replicas
            return self.log_dirs[0]
        counts = {d: 0 for d in self.log_dirs}
        for partition in self._partitions.values():
            parent = partition.directory.parent
            if parent in counts:
                counts[parent] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def leader_partition(
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

    # --- wakeups --------------------------------------------------------------------------

    def on_append(self, tp: TopicPartition) -> None:
        """New data (or a new high watermark, or a role change) on ``tp``: wake the fetches
        and the acks=all produces waiting for it."""
        purgatory = self._fetch_purgatory
        if purgatory is not None:
            purgatory.check_and_complete(tp)
        self.wake_produce(tp)

    def wake_produce(self, tp: TopicPartition) -> None:
        """The ISR of ``tp`` changed: acks=all produces waiting on it may now complete."""
        purgatory = self._produce_purgatory
        if purgatory is not None:
            purgatory.check_and_complete(tp)

    # --- dispatch -------------------------------------------------------------------------

    def handle(self, request: p.Request | GroupRequest) -> p.Response:
        """Answers one request. Content errors come back as error codes, never as exceptions:
        what a handler did not expect is logged and answered UNKNOWN_SERVER_ERROR (the group
        coordinator answers its own requests' errors)."""
        if not self.serving:
            raise BrokerNotAvailableError(f"broker {self.broker_id} is {self._state.value}")
        if not isinstance(request, p.Request | GroupRequest):
            raise InvalidRequestError(f"broker {self.broker_id} cannot handle {request!r}")
        try:
            return dispatch(self, request)
        except Exception as err:
            if isinstance(request, GroupRequest):
                raise
            log.exception("broker %d: %s failed", self.broker_id, type(request).__name__)
            return error_response(request, error_code_of(err), error_message(err))

    def handle_internal_produce(self, request: p.ProduceRequest) -> p.ProduceResponse:
        """A produce from the runtime's own writers, the only one that may append to internal
        topics (see :meth:`Transport.send_internal`)."""
        if not self.serving:
            raise BrokerNotAvailableError(f"broker {self.broker_id} is {self._state.value}")
        return produce(self, request, internal_topics_allowed=True)
