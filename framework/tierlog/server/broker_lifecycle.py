"""The broker's startup and shutdown steps, in the order they must run.

Kafka's ``BrokerServer.startup`` and ``shutdown``. Apart from ``broker.py`` because the order is
the point: log dirs are locked before anything (plugins included) touches them, logs are
recovered before any component that reads them exists, and the broker registers, and plugins
hear broker-ready, only once every component serves; shutdown undoes it in reverse, drains
uploads while leadership is still held, and closes every log even when one fails.
"""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING

from ..errors import KafkaStorageError, TierlogError
from ..groups import GroupCoordinator
from ..groups.lag import ConsumerLagMetrics
from ..host import PluginHost
from ..log import DirectoryLock, PartitionLog, files
from ..log.cleaner import CleanerSettings, LogCleaner
from ..remote import CACHE_DIR_NAME, SCRATCH_DIR_NAME, RemoteLogManager
from . import configs as config_ops
from .alter_partition_manager import AlterPartitionManager
from .partition import Partition, read_partition_metadata
from .purgatory import DelayedOperationPurgatory
from .replica_fetcher import ReplicaFetcherManager
from .replica_metrics import register_replica_metrics

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

#: How long a clean stop lets uploads under way finish before it hands leadership over.
COPY_DRAIN_TIMEOUT_S = 30.0


def lock_log_dirs(broker: Broker) -> None:
    """Creates and locks every log dir: one broker per directory, before anyone writes there."""
    for directory in broker.log_dirs:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KafkaStorageError(f"cannot create log dir {directory}: {err}") from err
        broker._log_dir_locks.append(DirectoryLock.acquire(directory))


def apply_stored_broker_configs(broker: Broker) -> None:
    """Dynamic broker configs stored by the controller, applied over the static ones; a stored
    set that no longer validates is ignored with a warning, so a bad value cannot stop a start."""
    stored = broker.controller.broker_configs(broker.broker_id)
    if not stored:
        return
    try:
        update = config_ops.validated_broker_update(broker.config, dict(stored))
        broker.config.update(update)
    except TierlogError as err:
        log.warning("broker %d: ignoring stored dynamic configs: %s", broker.broker_id, err)


def recover_logs(broker: Broker) -> None:
    """Opens every partition directory (recovering torn tails); finishes deletions that a stop
    interrupted and skips what is not a partition. Each log opens with its topic's configs
    (``Broker.opening_log_config``)."""
    for log_dir in broker.log_dirs:
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
            config = broker.opening_log_config(tp.topic)
            partition_log = PartitionLog.open(path, config, topic_partition=tp)
            broker._partitions[tp] = Partition(
                partition_log, read_partition_metadata(path), broker.broker_id
            )


def start_services(broker: Broker, plugin_host: PluginHost) -> None:
    """The components that serve requests and run in the background, once logs are open."""
    broker_id = broker.broker_id
    broker._fetch_purgatory = DelayedOperationPurgatory(f"Fetch-{broker_id}")
    broker._produce_purgatory = DelayedOperationPurgatory(f"Produce-{broker_id}")
    broker.replica_fetcher_manager = ReplicaFetcherManager(
        broker_id,
        broker.config,
        broker.controller.transport,
        broker.partition,
        plugin_host.metrics,
    )
    if broker.config.get_bool("remote.log.storage.system.enable"):
        broker._remote_fetch_purgatory = DelayedOperationPurgatory(f"RemoteFetch-{broker_id}")
        broker._remote_list_offsets_purgatory = DelayedOperationPurgatory(
            f"RemoteListOffsets-{broker_id}"
        )
        broker.remote_log_manager = RemoteLogManager(
            broker.config, plugin_host, broker_id, broker.log_dirs[0], broker._topic_switch
        )
        broker.replica_fetcher_manager.remote_log_manager = broker.remote_log_manager
    broker.alter_partition_manager = AlterPartitionManager(
        broker_id, broker.controller, broker._complete_isr_change
    )
    broker.alter_partition_manager.start()
    register_replica_metrics(broker, plugin_host.metrics)
    broker.group_coordinator = GroupCoordinator(broker)
    broker.consumer_lag = ConsumerLagMetrics(broker.group_coordinator, plugin_host.metrics)
    broker.consumer_lag.start()
    broker._tasks.start()
    start_log_cleaner(broker, plugin_host)
    broker._unsubscribe.append(broker.controller.subscribe(broker._on_metadata))
    dynamic = [k.name for k in broker.config.definition if k.dynamic]
    broker._unsubscribe.append(
        broker.config.add_listener(dynamic, lambda *_: broker._refresh_topic_configs())
    )


def start_log_cleaner(broker: Broker, plugin_host: PluginHost) -> None:
    """Starts the cleaner threads; a new ``log.cleaner.threads`` restarts them."""
    config = broker.config
    cleaner = broker.log_cleaner = LogCleaner(
        lambda: CleanerSettings.from_broker(config),
        lambda: [partition.log for partition in broker.hosted_replicas()],
        metrics=plugin_host.metrics,
        log_dirs=broker.log_dirs,
        name=f"kafka-log-cleaner-thread-{broker.broker_id}",
    )
    cleaner.start()
    broker._unsubscribe.append(
        config.add_listener("log.cleaner.threads", lambda *_: cleaner.reconfigure())
    )


def shutdown(broker: Broker, *, clean: bool, register: bool) -> None:
    """Stops what started, in reverse; ``clean=False`` leaves the logs to be recovered as after
    a crash. The first error closing a log is raised once everything is closed."""
    from .broker import BrokerState

    if broker.remote_log_manager is not None:
        # While leaderships are still ours and metadata can still be published.
        broker.remote_log_manager.stop_copying(COPY_DRAIN_TIMEOUT_S if clean else 0.0)
    broker._set_state(BrokerState.SHUTTING_DOWN)
    if broker.consumer_lag is not None:
        broker.consumer_lag.close()
    if broker.group_coordinator is not None:
        broker.group_coordinator.shutdown()
    for remove in broker._unsubscribe:
        remove()
    broker._unsubscribe.clear()
    if register:
        broker.controller.unregister_broker(broker.broker_id)
    if broker.replica_fetcher_manager is not None:
        broker.replica_fetcher_manager.shutdown()
    with broker._lock:
        for partition in broker._partitions.values():
            partition.make_offline()
    broker._tasks.stop()
    if broker.alter_partition_manager is not None:
        broker.alter_partition_manager.stop()
    if broker.log_cleaner is not None:
        broker.log_cleaner.close()
    for purgatory in (
        broker._produce_purgatory,
        broker._fetch_purgatory,
        broker._remote_fetch_purgatory,
        broker._remote_list_offsets_purgatory,
    ):
        if purgatory is not None:
            purgatory.shutdown()
    if broker.remote_log_manager is not None:
        broker.remote_log_manager.close()
    with broker._lock:
        partitions = list(broker._partitions.values())
        broker._partitions.clear()
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
        if broker.plugin_host is not None:
            broker.plugin_host.close()
    finally:
        for lock in reversed(broker._log_dir_locks):
            lock.release()
        broker._log_dir_locks.clear()
    broker._set_state(BrokerState.STOPPED)
    if errors:
        raise errors[0]
