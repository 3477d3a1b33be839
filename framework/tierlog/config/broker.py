"""Broker configuration: every key a tierlog broker reads, with Kafka's names and defaults.

Names, types, defaults and dynamic flags follow Kafka (``KafkaConfig``, ``RemoteLogManagerConfig``)
so that a Kafka operator's ``server.properties`` means the same thing here. Where tierlog differs
it is on purpose and said in the key's doc: plugins are chosen by name, not by Java class
(``remote.log.storage.manager.name``, with Kafka's ``...class.name`` kept as a synonym), and the
JVM class-path keys do not exist.

Broker-level defaults of topic configs (``log.retention.ms``, ``log.segment.bytes``...) are
static here; change a single topic dynamically through its topic configuration instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..errors import InvalidConfigError
from .definition import (
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigRule,
    ConfigType,
    Importance,
)
from .validators import any_of, at_least, between, list_of, non_empty, one_of

BOOLEAN, INT, LONG, DOUBLE, STRING, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

#: Smallest segment that can hold one record (Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``).
MIN_SEGMENT_BYTES: Final = 14
#: Every key under this prefix belongs to the plugin named by its second component.
PLUGIN_PREFIX: Final = "plugin."
CLEANUP_POLICIES: Final = ("compact", "delete")
TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

#: Java's ``Double.MAX_VALUE``: Kafka's "no limit" for a rate.
DOUBLE_MAX: Final = 1.7976931348623157e308
_MS_PER_MINUTE: Final = 60_000
_MS_PER_HOUR: Final = 3_600_000

_GENERAL_KEYS: Final = (
    ConfigKey(
        "broker.id",
        INT,
        0,
        validator=at_least(0),
        importance=HIGH,
        doc="Identifier of this broker, unique in the cluster.",
    ),
    ConfigKey(
        "cluster.id",
        STRING,
        None,
        importance=HIGH,
        doc="Identifier of the cluster this broker belongs to; null lets the runtime choose.",
    ),
    ConfigKey(
        "log.dirs",
        LIST,
        ("/tmp/tierlog-logs",),
        validator=non_empty(),
        importance=HIGH,
        synonyms=("log.dir",),
        doc="Directories holding the local partition logs; partitions are spread across them.",
    ),
    ConfigKey(
        "request.timeout.ms",
        INT,
        30000,
        validator=at_least(1),
        doc="Longest time a request may wait inside the broker before it is answered.",
    ),
    ConfigKey(
        "num.partitions",
        INT,
        1,
        validator=at_least(1),
        doc="Partition count of topics created without an explicit count.",
    ),
    ConfigKey(
        "default.replication.factor",
        INT,
        1,
        validator=at_least(1),
        doc="Replication factor of topics created without an explicit one.",
    ),
    ConfigKey(
        "max.partitions.per.request",
        INT,
        10_000,
        validator=at_least(1),
        doc="Most partitions one CreateTopics request may create over all its topics (a topic "
        "created on first use counts as a request of its own); a topic that would pass it is "
        "refused with POLICY_VIOLATION before anything is allocated. Kafka has no such key, but "
        "its KRaft controller refuses any single operation that would write more than 10000 "
        "metadata records (QuorumController.MAX_RECORDS_PER_USER_OP) with the same error; "
        "tierlog makes that bound a setting and counts partitions.",
    ),
    ConfigKey(
        "max.partitions",
        INT,
        100_000,
        validator=at_least(1),
        doc="Most partitions the cluster may hold, internal topics included; a topic that would "
        "pass it is refused with POLICY_VIOLATION. The name is KIP-578's, which Kafka never "
        "adopted (it has no cap); tierlog sets one because every replica is a directory of "
        "open files on its broker, and all brokers of an embedded cluster share one process. "
        "Raise it for larger clusters.",
    ),
    ConfigKey(
        "min.insync.replicas",
        INT,
        1,
        validator=at_least(1),
        importance=HIGH,
        doc="Replicas that must acknowledge an acks=all write for it to succeed.",
    ),
    ConfigKey(
        "num.replica.fetchers",
        INT,
        1,
        validator=at_least(1),
        doc="Fetcher threads per source broker that replicate partitions to this one.",
    ),
    ConfigKey(
        "replica.lag.time.max.ms",
        LONG,
        30000,
        validator=at_least(1),
        doc="A follower that has not caught up for this long is removed from the ISR.",
    ),
    ConfigKey(
        "replica.high.watermark.checkpoint.interval.ms",
        LONG,
        5000,
        validator=at_least(1),
        doc="How often every replica's high watermark is saved to replication-offset-checkpoint.",
    ),
    ConfigKey(
        "replica.fetch.wait.max.ms",
        INT,
        500,
        validator=at_least(0),
        doc="Longest time a follower fetch waits for data; at most replica.lag.time.max.ms.",
    ),
    ConfigKey(
        "replica.fetch.max.bytes",
        INT,
        1048576,
        validator=at_least(0),
        doc="Bytes a follower fetch asks for per partition (one larger batch is still returned).",
    ),
    ConfigKey(
        "replica.fetch.response.max.bytes",
        INT,
        10485760,
        validator=at_least(0),
        doc="Bytes a whole follower fetch response may hold.",
    ),
    ConfigKey(
        "fetch.max.bytes",
        INT,
        57671680,
        validator=at_least(1024),
        doc="Bytes a whole consumer fetch response may hold, whatever the request's max_bytes "
        "(one larger batch is still returned).",
    ),
    ConfigKey(
        "replica.fetch.backoff.ms",
        INT,
        1000,
        validator=at_least(0),
        doc="Pause of a fetcher after a partition fetch error.",
    ),
    ConfigKey(
        "unclean.leader.election.enable",
        BOOLEAN,
        False,
        doc="Let an out-of-sync replica become leader when no in-sync one is left (loses data).",
    ),
    ConfigKey(
        "auto.leader.rebalance.enable",
        BOOLEAN,
        True,
        doc="Let the controller hand leadership back to each partition's preferred replica "
        "(the first of its assignment) when a broker leads too few of its own.",
    ),
    ConfigKey(
        "leader.imbalance.check.interval.seconds",
        LONG,
        300,
        validator=at_least(1),
        doc="How often the controller checks the leader imbalance.",
    ),
    ConfigKey(
        "leader.imbalance.per.broker.percentage",
        INT,
        10,
        validator=between(0, 100),
        doc="Share (percent) of a broker's preferred partitions it may not lead before the "
        "controller elects it again.",
    ),
    ConfigKey(
        "auto.create.topics.enable",
        BOOLEAN,
        True,
        doc="Create a topic on first use by a producer or consumer.",
    ),
    ConfigKey(
        "message.max.bytes",
        INT,
        1048588,
        validator=at_least(0),
        importance=HIGH,
        doc="Largest record batch the broker accepts.",
    ),
    ConfigKey(
        "log.segment.bytes",
        INT,
        1073741824,
        validator=at_least(MIN_SEGMENT_BYTES),
        importance=HIGH,
        doc="Size at which the active segment is rolled; only rolled segments are tiered.",
    ),
    ConfigKey(
        "log.roll.ms",
        LONG,
        None,
        validator=at_least(1),
        doc="Age at which the active segment is rolled; null means use log.roll.hours.",
    ),
    ConfigKey(
        "log.roll.hours",
        INT,
        168,
        validator=at_least(1),
        doc="Age in hours at which the active segment is rolled, unless log.roll.ms is set.",
    ),
    ConfigKey(
        "log.retention.ms",
        LONG,
        None,
        validator=at_least(-1),
        importance=HIGH,
        doc="How long data is kept (local plus remote); -1 keeps it forever. "
        "Wins over log.retention.minutes and log.retention.hours.",
    ),
    ConfigKey(
        "log.retention.minutes",
        INT,
        None,
        validator=at_least(-1),
        doc="Retention in minutes, used when log.retention.ms is null.",
    ),
    ConfigKey(
        "log.retention.hours",
        INT,
        168,
        validator=at_least(-1),
        importance=HIGH,
        doc="Retention in hours, used when log.retention.ms and log.retention.minutes are null.",
    ),
    ConfigKey(
        "log.retention.bytes",
        LONG,
        -1,
        validator=at_least(-1),
        importance=HIGH,
        doc="Size a partition (local plus remote) may reach before old segments go; -1 = no limit.",
    ),
    ConfigKey(
        "log.index.interval.bytes",
        INT,
        4096,
        validator=at_least(0),
        doc="Bytes of records between two offset-index entries.",
    ),
    ConfigKey(
        "log.index.size.max.bytes",
        INT,
        10485760,
        validator=at_least(4),
        doc="Largest offset or time index; a full index rolls the segment.",
    ),
    ConfigKey(
        "log.flush.interval.messages",
        LONG,
        LONG_MAX,
        validator=at_least(1),
        doc="Records appended before the log is forced to disk; replication is the usual guard.",
    ),
    ConfigKey(
        "log.flush.interval.ms",
        LONG,
        None,
        validator=at_least(0),
        doc="Longest time a record stays unflushed; null leaves flushing to the OS.",
    ),
    ConfigKey(
        "log.retention.check.interval.ms",
        LONG,
        300000,
        validator=at_least(1),
        doc="How often local logs are checked for segments to delete.",
    ),
    ConfigKey(
        "log.segment.delete.delay.ms",
        LONG,
        60000,
        validator=at_least(0),
        doc="Delay between marking a local segment deleted and removing its files.",
    ),
    ConfigKey(
        "log.cleanup.policy",
        LIST,
        ("delete",),
        validator=list_of(one_of(*CLEANUP_POLICIES)),
        doc="Default cleanup policy of topics: delete old segments, or compact by key.",
    ),
    ConfigKey(
        "log.message.timestamp.type",
        STRING,
        "CreateTime",
        validator=one_of(*TIMESTAMP_TYPES),
        doc="Whether record timestamps are the producer's or the broker's append time.",
    ),
    ConfigKey(
        "log.message.timestamp.before.max.ms",
        LONG,
        LONG_MAX,
        validator=at_least(0),
        doc="How far in the past a produced record's CreateTime may be (KIP-937).",
    ),
    ConfigKey(
        "log.message.timestamp.after.max.ms",
        LONG,
        3_600_000,
        validator=at_least(0),
        doc="How far in the future a produced record's CreateTime may be (KIP-937; one hour "
        "since Kafka 4.0).",
    ),
    ConfigKey(
        "compression.type",
        STRING,
        "producer",
        validator=one_of(*COMPRESSION_TYPES),
        importance=HIGH,
        doc="Codec of stored batches; 'producer' keeps whatever the producer used.",
    ),
    ConfigKey(
        "log.local.retention.ms",
        LONG,
        -2,
        validator=at_least(-2),
        doc="How long tiered data is also kept locally; -2 means log.retention.ms.",
    ),
    ConfigKey(
        "log.local.retention.bytes",
        LONG,
        -2,
        validator=at_least(-2),
        doc="Local size of a tiered partition before local segments go; -2 means "
        "log.retention.bytes.",
    ),
    ConfigKey(
        "plugins.disabled",
        LIST,
        (),
        doc="Names of installed plugins that must not be loaded.",
    ),
)

_REMOTE_KEYS: Final = (
    ConfigKey(
        "remote.log.storage.system.enable",
        BOOLEAN,
        False,
        importance=HIGH,
        doc="Master switch for tiered storage on this broker; starts the remote log manager.",
    ),
    ConfigKey(
        "remote.log.storage.manager.name",
        STRING,
        None,
        synonyms=("remote.log.storage.manager.class.name",),
        importance=HIGH,
        doc="Plugin name of the remote storage manager; null picks the only installed one.",
    ),
    ConfigKey(
        "remote.log.storage.manager.impl.prefix",
        STRING,
        "rsm.config.",
        validator=non_empty(),
        doc="Prefix of the keys handed, without it, to the remote storage manager.",
    ),
    ConfigKey(
        "remote.log.metadata.manager.name",
        STRING,
        "topic",
        synonyms=("remote.log.metadata.manager.class.name",),
        importance=HIGH,
        doc=(
            "Plugin name of the remote log metadata manager: the built-in topic-based "
            "manager (topic, the default, as in Kafka), the built-in in-process manager "
            "(memory, for tests) or an installed plugin."
        ),
    ),
    ConfigKey(
        "remote.log.metadata.manager.impl.prefix",
        STRING,
        "rlmm.config.",
        validator=non_empty(),
        doc="Prefix of the keys handed, without it, to the remote log metadata manager.",
    ),
    ConfigKey(
        "remote.log.metadata.manager.listener.name",
        STRING,
        None,
        doc="Listener the metadata manager's clients use to reach the local broker.",
    ),
    ConfigKey(
        "remote.log.metadata.custom.metadata.max.bytes",
        INT,
        128,
        validator=at_least(0),
        doc="Largest custom metadata a storage plugin may attach to a remote segment.",
    ),
    ConfigKey(
        "remote.log.index.file.cache.total.size.bytes",
        LONG,
        1073741824,
        validator=at_least(1),
        dynamic=True,
        doc="Disk space of the cache of remote segment indexes; resized on update.",
    ),
    ConfigKey(
        "remote.log.manager.thread.pool.size",
        INT,
        10,
        validator=at_least(1),
        doc="Follower task threads, and the size of the copier and expiration pools left at -1. "
        "Deprecated in Kafka.",
    ),
    ConfigKey(
        "remote.log.manager.copier.thread.pool.size",
        INT,
        -1,
        validator=any_of(one_of(-1), at_least(1)),
        doc="Threads copying segments to remote storage; -1 means "
        "remote.log.manager.thread.pool.size.",
    ),
    ConfigKey(
        "remote.log.manager.expiration.thread.pool.size",
        INT,
        -1,
        validator=any_of(one_of(-1), at_least(1)),
        doc="Threads deleting expired remote segments; -1 means "
        "remote.log.manager.thread.pool.size.",
    ),
    ConfigKey(
        "remote.log.manager.task.interval.ms",
        LONG,
        30000,
        validator=at_least(1),
        doc="Period of the copy, expiration and follower tasks of each partition.",
    ),
    ConfigKey(
        "remote.log.manager.task.retry.backoff.ms",
        LONG,
        500,
        validator=at_least(1),
        importance=LOW,
        doc="Initial backoff of a failed remote log manager task.",
    ),
    ConfigKey(
        "remote.log.manager.task.retry.backoff.max.ms",
        LONG,
        30000,
        validator=at_least(1),
        importance=LOW,
        doc="Largest backoff of a failed remote log manager task.",
    ),
    ConfigKey(
        "remote.log.manager.task.retry.jitter",
        DOUBLE,
        0.2,
        validator=between(0.0, 0.5),
        importance=LOW,
        doc="Random fraction added to or removed from each task backoff.",
    ),
    ConfigKey(
        "remote.log.reader.threads",
        INT,
        10,
        validator=at_least(1),
        doc="Threads reading remote segments for fetches.",
    ),
    ConfigKey(
        "remote.log.reader.max.pending.tasks",
        INT,
        100,
        validator=at_least(1),
        doc="Remote reads that may queue for a reader thread; beyond it fetches fail, retriably.",
    ),
    ConfigKey(
        "remote.log.manager.copy.max.bytes.per.second",
        LONG,
        LONG_MAX,
        validator=at_least(1),
        dynamic=True,
        doc="Upload rate limit of this broker across all partitions.",
    ),
    ConfigKey(
        "remote.log.manager.copy.quota.window.num",
        INT,
        11,
        validator=at_least(1),
        importance=LOW,
        doc="Samples kept to measure the upload rate.",
    ),
    ConfigKey(
        "remote.log.manager.copy.quota.window.size.seconds",
        INT,
        1,
        validator=at_least(1),
        importance=LOW,
        doc="Length of one upload-rate sample.",
    ),
    ConfigKey(
        "remote.log.manager.fetch.max.bytes.per.second",
        LONG,
        LONG_MAX,
        validator=at_least(1),
        dynamic=True,
        doc="Remote read rate limit of this broker across all partitions.",
    ),
    ConfigKey(
        "remote.log.manager.fetch.quota.window.num",
        INT,
        11,
        validator=at_least(1),
        importance=LOW,
        doc="Samples kept to measure the remote read rate.",
    ),
    ConfigKey(
        "remote.log.manager.fetch.quota.window.size.seconds",
        INT,
        1,
        validator=at_least(1),
        importance=LOW,
        doc="Length of one remote-read-rate sample.",
    ),
    ConfigKey(
        "remote.fetch.max.wait.ms",
        INT,
        500,
        validator=at_least(1),
        dynamic=True,
        synonyms=("fetch.remote.max.wait.ms",),
        doc="Longest time a fetch that needs remote data waits for it (KIP-1018); "
        "below request.timeout.ms.",
    ),
    ConfigKey(
        "remote.list.offsets.request.timeout.ms",
        LONG,
        30000,
        validator=at_least(1),
        dynamic=True,
        doc="Longest time a list-offsets request that needs remote data waits for it (KIP-1075).",
    ),
)


def _int(values: Mapping[str, object], name: str) -> int:
    value = values[name]
    if not isinstance(value, int):
        raise TypeError(f"{name} is {value!r}, not an integer")
    return value


def _optional_int(values: Mapping[str, object], name: str) -> int | None:
    return None if values[name] is None else _int(values, name)


def effective_log_retention_ms(values: Mapping[str, object]) -> int:
    """Retention in ms from ``log.retention.ms`` > ``.minutes`` > ``.hours``; -1 = unlimited."""
    millis = _optional_int(values, "log.retention.ms")
    if millis is None:
        minutes = _optional_int(values, "log.retention.minutes")
        if minutes is not None:
            millis = minutes * _MS_PER_MINUTE
        else:
            millis = _int(values, "log.retention.hours") * _MS_PER_HOUR
    return -1 if millis < 0 else millis


def effective_log_roll_ms(values: Mapping[str, object]) -> int:
    """Segment age limit in ms: ``log.roll.ms``, else ``log.roll.hours``."""
    millis = _optional_int(values, "log.roll.ms")
    return millis if millis is not None else _int(values, "log.roll.hours") * _MS_PER_HOUR


def effective_log_flush_interval_ms(values: Mapping[str, object]) -> int:
    """Flush interval in ms; unset means never forced (Kafka's scheduler default, Long.MAX)."""
    millis = _optional_int(values, "log.flush.interval.ms")
    return LONG_MAX if millis is None else millis


def effective_copier_thread_pool_size(values: Mapping[str, object]) -> int:
    """Copier threads, falling back to ``remote.log.manager.thread.pool.size`` for -1."""
    size = _int(values, "remote.log.manager.copier.thread.pool.size")
    return size if size != -1 else _int(values, "remote.log.manager.thread.pool.size")


def effective_expiration_thread_pool_size(values: Mapping[str, object]) -> int:
    """Expiration threads, falling back to ``remote.log.manager.thread.pool.size`` for -1."""
    size = _int(values, "remote.log.manager.expiration.thread.pool.size")
    return size if size != -1 else _int(values, "remote.log.manager.thread.pool.size")


def check_local_retention(local_key: str, local: int, total_key: str, total: int) -> None:
    """Local retention of tiered data must fit inside total retention (-2 inherits the total).

    Shared by the broker defaults and by topics, which apply the same rule to their own keys.
    """
    if local == -2 or total == -1:
        return
    if local == -1:
        raise InvalidConfigError(
            f"{local_key} = -1 is only allowed when {total_key} is -1 (it is {total}); "
            f"use -2 to keep local data as long as {total_key}",
            key=local_key,
            value=local,
        )
    if local > total:
        raise InvalidConfigError(
            f"{local_key} = {local} must not be above {total_key} ({total})",
            key=local_key,
            value=local,
        )


def _remote_fetch_wait_below_request_timeout(values: Mapping[str, object]) -> None:
    wait = _int(values, "remote.fetch.max.wait.ms")
    timeout = _int(values, "request.timeout.ms")
    if wait >= timeout:
        raise InvalidConfigError(
            f"remote.fetch.max.wait.ms = {wait} must be below request.timeout.ms ({timeout})",
            key="remote.fetch.max.wait.ms",
            value=wait,
        )


def _replica_fetch_wait_within_lag(values: Mapping[str, object]) -> None:
    wait = _int(values, "replica.fetch.wait.max.ms")
    lag = _int(values, "replica.lag.time.max.ms")
    if wait > lag:
        raise InvalidConfigError(
            f"replica.fetch.wait.max.ms = {wait} must not be above replica.lag.time.max.ms "
            f"({lag}), or followers would keep dropping out of the ISR",
            key="replica.fetch.wait.max.ms",
            value=wait,
        )


def _local_retention_within_total(values: Mapping[str, object]) -> None:
    check_local_retention(
        "log.local.retention.ms",
        _int(values, "log.local.retention.ms"),
        "log.retention.ms",
        effective_log_retention_ms(values),
    )
    check_local_retention(
        "log.local.retention.bytes",
        _int(values, "log.local.retention.bytes"),
        "log.retention.bytes",
        _int(values, "log.retention.bytes"),
    )


def _distinct_plugin_prefixes(values: Mapping[str, object]) -> None:
    storage = values["remote.log.storage.manager.impl.prefix"]
    metadata = values["remote.log.metadata.manager.impl.prefix"]
    if storage == metadata:
        raise InvalidConfigError(
            f"remote.log.metadata.manager.impl.prefix = {metadata!r} must differ from "
            "remote.log.storage.manager.impl.prefix, or both plugins would get the same keys",
            key="remote.log.metadata.manager.impl.prefix",
            value=metadata,
        )


BROKER_RULES: Final = (
    ConfigRule(
        "remote.fetch.max.wait.ms is below request.timeout.ms",
        ("remote.fetch.max.wait.ms", "request.timeout.ms"),
        _remote_fetch_wait_below_request_timeout,
    ),
    ConfigRule(
        "replica.fetch.wait.max.ms is at most replica.lag.time.max.ms",
        ("replica.fetch.wait.max.ms", "replica.lag.time.max.ms"),
        _replica_fetch_wait_within_lag,
    ),
    ConfigRule(
        "log.local.retention.* is -2, or at most log.retention.* (-1 only if that is -1)",
        (
            "log.local.retention.ms",
            "log.retention.ms",
            "log.local.retention.bytes",
            "log.retention.bytes",
        ),
        _local_retention_within_total,
    ),
    ConfigRule(
        "the storage and metadata manager prefixes differ",
        ("remote.log.storage.manager.impl.prefix", "remote.log.metadata.manager.impl.prefix"),
        _distinct_plugin_prefixes,
    ),
)

#: Brokers in separate processes (``tierlog.coordination``): Kafka's ZooKeeper-mode keys.
_ZOOKEEPER_KEYS: Final = (
    ConfigKey(
        "zookeeper.connect",
        STRING,
        None,
        importance=HIGH,
        doc="The ZooKeeper ensemble coordinating brokers that run as separate processes, as "
        "host:port[,host:port...][/chroot]; every node tierlog writes sits under the chroot, "
        "which is created if missing. Null runs the embedded mode: every broker in one process, "
        "the controller's state in a file, no ZooKeeper.",
    ),
    ConfigKey(
        "zookeeper.session.timeout.ms",
        INT,
        18000,
        validator=at_least(1),
        importance=HIGH,
        doc="A broker that stays silent to ZooKeeper this long loses its session: its "
        "registration vanishes, the controller moves its leaderships, and it registers again "
        "with a new broker epoch once it is back. The server bounds it (tickTime 2 to 20 times, "
        "unless its minSessionTimeout and maxSessionTimeout say otherwise).",
    ),
    ConfigKey(
        "zookeeper.connection.timeout.ms",
        INT,
        None,
        validator=at_least(1),
        importance=HIGH,
        doc="Longest wait for a connection to ZooKeeper when the broker starts; null means "
        "zookeeper.session.timeout.ms.",
    ),
)


def effective_zookeeper_connection_timeout_ms(values: Mapping[str, object]) -> int:
    """``zookeeper.connection.timeout.ms``, else the session timeout (Kafka's null default)."""
    millis = _optional_int(values, "zookeeper.connection.timeout.ms")
    return millis if millis is not None else _int(values, "zookeeper.session.timeout.ms")


#: The network front end (``tierlog.wire``): Kafka's socket-server keys and defaults.
_NETWORK_KEYS: Final = (
    ConfigKey(
        "listeners",
        LIST,
        ("PLAINTEXT://127.0.0.1:9092",),
        importance=HIGH,
        doc="Where the broker accepts Kafka clients, as NAME://host:port. Port 0 picks a free "
        "port; an empty host means every interface. Unlike Kafka (PLAINTEXT://:9092) the "
        "default binds the loopback address only. An embedded cluster of N brokers gives broker "
        "i the port plus i (port 0 stays 0).",
    ),
    ConfigKey(
        "advertised.listeners",
        LIST,
        None,
        importance=HIGH,
        doc="What Metadata tells clients to connect to, per listener name; null advertises "
        "the bound address of each of listeners.",
    ),
    ConfigKey(
        "listener.security.protocol.map",
        STRING,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        doc="Listener name to security protocol. tierlog serves PLAINTEXT only; a listener "
        "mapped to another protocol is a configuration error.",
    ),
    ConfigKey(
        "socket.request.max.bytes",
        INT,
        104857600,
        validator=at_least(1),
        doc="Largest request frame accepted; a bigger one closes the connection.",
    ),
    ConfigKey(
        "connections.max.idle.ms",
        LONG,
        600000,
        validator=at_least(1),
        doc="A connection with no request for this long is closed.",
    ),
    ConfigKey(
        "max.connections",
        INT,
        2147483647,
        validator=at_least(0),
        doc="Most connections a broker accepts at once; more are closed on accept.",
    ),
    ConfigKey(
        "max.connections.per.ip",
        INT,
        2147483647,
        validator=at_least(0),
        doc="Most connections a broker accepts at once from one address.",
    ),
    ConfigKey(
        "queued.max.requests",
        INT,
        500,
        validator=at_least(1),
        doc="Most requests read and not yet handed to their handler, over all connections "
        "(Kafka's request queue); a connection whose next request finds none free waits to "
        "read it. A request waiting in the broker (a long poll) holds none.",
    ),
    ConfigKey(
        "metrics.prometheus.port",
        INT,
        None,
        validator=between(0, 65535),
        doc="When set, `tierlog run` serves every broker's metrics at /metrics on this port "
        "of 127.0.0.1 (0 picks a free port), each series labelled with its broker's id "
        '(broker="0").',
    ),
)


#: The log cleaner (Kafka's ``CleanerConfig``): how it runs, and the broker defaults of the
#: compaction topic configs. How it runs is dynamic: the cleaner reads these every round, and a
#: change of ``log.cleaner.threads`` restarts it with the new count, as Kafka does.
_CLEANER_KEYS: Final = (
    ConfigKey(
        "log.cleaner.enable",
        BOOLEAN,
        True,
        doc="Run the log cleaner, which compacts topics whose cleanup.policy includes compact.",
    ),
    ConfigKey(
        "log.cleaner.threads",
        INT,
        1,
        validator=at_least(0),
        dynamic=True,
        doc="Threads cleaning logs; each cleans one partition at a time.",
    ),
    ConfigKey(
        "log.cleaner.io.max.bytes.per.second",
        DOUBLE,
        DOUBLE_MAX,
        validator=at_least(0.0),
        dynamic=True,
        doc="Cap on the cleaner's reads plus writes, over all its threads.",
    ),
    ConfigKey(
        "log.cleaner.dedupe.buffer.size",
        LONG,
        134217728,
        validator=at_least(0),
        dynamic=True,
        doc="Memory for the key-to-offset maps of all cleaner threads, counted at 24 bytes "
        "a key as Kafka counts it; a round covers as many dirty segments as its map can hold.",
    ),
    ConfigKey(
        "log.cleaner.io.buffer.load.factor",
        DOUBLE,
        0.9,
        validator=between(0.0, 1.0),
        dynamic=True,
        doc="How full a cleaner thread's key-to-offset map may get.",
    ),
    ConfigKey(
        "log.cleaner.io.buffer.size",
        INT,
        524288,
        validator=at_least(0),
        dynamic=True,
        doc="Bytes a cleaner thread writes to a cleaned segment at a time.",
    ),
    ConfigKey(
        "log.cleaner.backoff.ms",
        LONG,
        15000,
        validator=at_least(0),
        dynamic=True,
        doc="How long a cleaner thread sleeps when no log needs cleaning.",
    ),
    ConfigKey(
        "log.cleaner.min.cleanable.ratio",
        DOUBLE,
        0.5,
        validator=between(0.0, 1.0),
        doc="Default min.cleanable.dirty.ratio of topics.",
    ),
    ConfigKey(
        "log.cleaner.delete.retention.ms",
        LONG,
        86400000,
        validator=at_least(0),
        doc="Default delete.retention.ms of topics.",
    ),
    ConfigKey(
        "log.cleaner.min.compaction.lag.ms",
        LONG,
        0,
        validator=at_least(0),
        doc="Default min.compaction.lag.ms of topics.",
    ),
    ConfigKey(
        "log.cleaner.max.compaction.lag.ms",
        LONG,
        LONG_MAX,
        validator=at_least(1),
        doc="Default max.compaction.lag.ms of topics.",
    ),
)


#: The group coordinator (``tierlog.groups``) and ``__consumer_offsets``: Kafka's keys and defaults.
_GROUP_KEYS: Final = (
    ConfigKey(
        "group.initial.rebalance.delay.ms",
        INT,
        3000,
        validator=at_least(0),
        doc="How long the first rebalance of an empty group waits for more members, extended "
        "by as much again while members keep joining, up to the rebalance timeout.",
    ),
    ConfigKey(
        "group.min.session.timeout.ms",
        INT,
        6000,
        validator=at_least(0),
        doc="Shortest session timeout a member may ask for; shorter is INVALID_SESSION_TIMEOUT.",
    ),
    ConfigKey(
        "group.max.session.timeout.ms",
        INT,
        1800000,
        validator=at_least(0),
        doc="Longest session timeout a member may ask for; longer is INVALID_SESSION_TIMEOUT.",
    ),
    ConfigKey(
        "group.max.size",
        INT,
        2147483647,
        validator=at_least(1),
        doc="Most members a classic group may have; one more gets GROUP_MAX_SIZE_REACHED.",
    ),
    ConfigKey(
        "offsets.topic.num.partitions",
        INT,
        50,
        validator=at_least(1),
        importance=HIGH,
        doc="Partitions of __consumer_offsets, fixed when it is created: a group's partition "
        "(and so its coordinator) is the hash of its id modulo this count.",
    ),
    ConfigKey(
        "offsets.topic.replication.factor",
        INT,
        3,
        validator=at_least(1),
        importance=HIGH,
        doc="Replication factor of __consumer_offsets; unlike Kafka, a smaller cluster creates "
        "it with one replica per live broker instead of failing.",
    ),
    ConfigKey(
        "offsets.topic.segment.bytes",
        INT,
        104857600,
        validator=at_least(MIN_SEGMENT_BYTES),
        doc="Segment size of __consumer_offsets, kept small so compaction and loading are fast.",
    ),
    ConfigKey(
        "offsets.load.buffer.size",
        INT,
        5242880,
        validator=at_least(1),
        importance=LOW,
        doc="Bytes read at a time while a new coordinator loads its partition.",
    ),
    ConfigKey(
        "offsets.commit.timeout.ms",
        INT,
        5000,
        validator=at_least(1),
        doc="Longest wait for a write to __consumer_offsets to reach every in-sync replica.",
    ),
    ConfigKey(
        "offsets.retention.minutes",
        INT,
        10080,
        validator=at_least(1),
        importance=HIGH,
        doc="How long a group's offsets outlive its last member (or, for a topic no member "
        "subscribes to any more, their commit).",
    ),
    ConfigKey(
        "offsets.retention.check.interval.ms",
        LONG,
        600000,
        validator=at_least(1),
        doc="How often expired offsets and empty groups are removed.",
    ),
    ConfigKey(
        "offset.metadata.max.bytes",
        INT,
        4096,
        validator=at_least(0),
        doc="Longest metadata string a commit may carry; longer is OFFSET_METADATA_TOO_LARGE.",
    ),
)


#: The consumer group protocol (KIP-848): Kafka 4's ``group.consumer.*`` keys and defaults.
GROUP_REBALANCE_PROTOCOLS: Final = ("classic", "consumer")
CONSUMER_GROUP_ASSIGNORS: Final = ("uniform", "range")

_CONSUMER_GROUP_KEYS: Final = (
    ConfigKey(
        "group.coordinator.rebalance.protocols",
        LIST,
        GROUP_REBALANCE_PROTOCOLS,
        validator=list_of(one_of(*GROUP_REBALANCE_PROTOCOLS)),
        doc="The group protocols the coordinator serves; classic must be among them. Without "
        "consumer, ConsumerGroupHeartbeat and ConsumerGroupDescribe are not advertised and "
        "consumers configured with group.protocol=consumer cannot join.",
    ),
    ConfigKey(
        "group.consumer.heartbeat.interval.ms",
        INT,
        5000,
        validator=at_least(1),
        doc="How often a consumer-protocol member is told to send a heartbeat; below "
        "group.consumer.session.timeout.ms.",
    ),
    ConfigKey(
        "group.consumer.min.heartbeat.interval.ms",
        INT,
        5000,
        validator=at_least(1),
        importance=LOW,
        doc="Smallest group.consumer.heartbeat.interval.ms allowed.",
    ),
    ConfigKey(
        "group.consumer.max.heartbeat.interval.ms",
        INT,
        15000,
        validator=at_least(1),
        importance=LOW,
        doc="Largest group.consumer.heartbeat.interval.ms allowed.",
    ),
    ConfigKey(
        "group.consumer.session.timeout.ms",
        INT,
        45000,
        validator=at_least(1),
        doc="A consumer-protocol member that sends no heartbeat for this long is removed from "
        "its group, and its partitions go to the others.",
    ),
    ConfigKey(
        "group.consumer.min.session.timeout.ms",
        INT,
        45000,
        validator=at_least(1),
        importance=LOW,
        doc="Smallest group.consumer.session.timeout.ms allowed.",
    ),
    ConfigKey(
        "group.consumer.max.session.timeout.ms",
        INT,
        60000,
        validator=at_least(1),
        importance=LOW,
        doc="Largest group.consumer.session.timeout.ms allowed.",
    ),
    ConfigKey(
        "group.consumer.assignors",
        LIST,
        CONSUMER_GROUP_ASSIGNORS,
        validator=list_of(one_of(*CONSUMER_GROUP_ASSIGNORS)),
        doc="The server-side assignors consumer-protocol members may ask for by name "
        "(group.remote.assignor); the first is used when none is asked for. Kafka also takes "
        "Java class names here; tierlog has only its built-in uniform and range.",
    ),
    ConfigKey(
        "group.consumer.max.size",
        INT,
        2147483647,
        validator=at_least(1),
        doc="Most members a consumer-protocol group may have; one more is refused with "
        "GROUP_MAX_SIZE_REACHED.",
    ),
)


def _consumer_group_timeouts_in_bounds(values: Mapping[str, object]) -> None:
    for name in ("heartbeat.interval.ms", "session.timeout.ms"):
        value = _int(values, f"group.consumer.{name}")
        low = _int(values, f"group.consumer.min.{name}")
        high = _int(values, f"group.consumer.max.{name}")
        if not low <= value <= high:
            raise InvalidConfigError(
                f"group.consumer.{name} = {value} must lie between group.consumer.min.{name} "
                f"({low}) and group.consumer.max.{name} ({high})",
                key=f"group.consumer.{name}",
                value=value,
            )
    heartbeat = _int(values, "group.consumer.heartbeat.interval.ms")
    session = _int(values, "group.consumer.session.timeout.ms")
    if heartbeat >= session:
        raise InvalidConfigError(
            f"group.consumer.heartbeat.interval.ms = {heartbeat} must be below "
            f"group.consumer.session.timeout.ms ({session})",
            key="group.consumer.heartbeat.interval.ms",
            value=heartbeat,
        )


def _classic_protocol_served(values: Mapping[str, object]) -> None:
    protocols = values["group.coordinator.rebalance.protocols"]
    assert isinstance(protocols, (list, tuple))
    if "classic" not in protocols:
        raise InvalidConfigError(
            f"group.coordinator.rebalance.protocols = {','.join(protocols)} must include classic",
            key="group.coordinator.rebalance.protocols",
            value=protocols,
        )


CONSUMER_GROUP_RULES: Final = (
    ConfigRule(
        "group.consumer.* heartbeat interval and session timeout within their bounds, the "
        "interval below the timeout",
        (
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        _consumer_group_timeouts_in_bounds,
    ),
    ConfigRule(
        "group.coordinator.rebalance.protocols includes classic",
        ("group.coordinator.rebalance.protocols",),
        _classic_protocol_served,
    ),
)


#: Every broker key; ``rsm.config.``, ``rlmm.config.`` and ``plugin.<name>.`` keys go to plugins.
BROKER_CONFIG: Final = ConfigDef(
    keys=_GENERAL_KEYS
    + _NETWORK_KEYS
    + _ZOOKEEPER_KEYS
    + _REMOTE_KEYS
    + _CLEANER_KEYS
    + _GROUP_KEYS
    + _CONSUMER_GROUP_KEYS,
    rules=BROKER_RULES + CONSUMER_GROUP_RULES,
    raw_prefixes=(PLUGIN_PREFIX,),
    prefix_keys=(
        "remote.log.storage.manager.impl.prefix",
        "remote.log.metadata.manager.impl.prefix",
    ),
)
