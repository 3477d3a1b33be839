"""Real clients and the checks the failure tests share: a producer and a consumer group that run
through a whole scenario, reading a partition back, the remote segments, and whether the gauges
of every broker process agree with what ZooKeeper says.

The producer and the consumer are confluent-kafka (librdkafka), as a user's would be; nothing
here reaches inside a broker.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import attrs
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoNodeError
from tierlog.coordination import paths
from tierlog.metadata.serde import decode_event
from tierlog.model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)
from tierlog.testing.processes import ProcessCluster, wait_until

#: librdkafka's own log lines go to logging (pytest shows them for a failing test only).
CLIENT_LOG = logging.getLogger("librdkafka")

#: librdkafka retries a produce for this long before it gives up on a record: longer than any
#: outage a scenario causes, so a record is either acknowledged or still being retried.
DELIVERY_TIMEOUT_MS = 180_000


def create_topic(
    cluster: ProcessCluster,
    name: str,
    partitions: int,
    *,
    replication_factor: int = 3,
    **config: object,
) -> None:
    """Creates a topic through a real admin client and waits until every partition has a
    leader in ZooKeeper."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers(), "logger": CLIENT_LOG})
    configs = {k: str(v) for k, v in config.items()}
    topic = NewTopic(name, partitions, replication_factor, config=configs)
    for future in admin.create_topics([topic], request_timeout=60).values():
        future.result(timeout=90)
    wait_until(
        lambda: all(cluster.leader(name, p) >= 0 for p in range(partitions)),
        60,
        f"leaders for every partition of {name}",
    )


def elect_preferred_leaders(cluster: ProcessCluster, topic: str, partitions: int) -> None:
    """Makes each partition's first replica its leader (ElectLeaders, as
    ``kafka-leader-election --election-type preferred``) and waits until ZooKeeper says so."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers(), "logger": CLIENT_LOG})
    wanted = [KafkaTopicPartition(topic, p) for p in range(partitions)]
    admin.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout=60)
    views = [v for v in zookeeper_partitions(cluster) if v.topic == topic]
    preferred = {v.partition: v.replicas[0] for v in views}
    wait_until(
        lambda: all(cluster.leader(topic, p) == b for p, b in preferred.items()),
        60,
        f"the preferred leaders of {topic}",
    )


@attrs.frozen
class Ack:
    partition: int
    #: None when librdkafka acknowledged the record implicitly: a request failed with its fate
    #: unknown (the leader died), and a later one of the same idempotent producer succeeded,
    #: which the broker only accepts in sequence, so the earlier records are in the log but
    #: their offsets were never reported.
    offset: int | None
    value: str
    at: float


class BackgroundProducer:
    """Produces numbered values with acks=all and idempotence, from a thread, until stopped;
    remembers every acknowledgement with the partition, offset and time it came back."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        rate_per_s: float,
        value_size: int,
        idempotent: bool = True,
        delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS,
        label: str = "v",
    ) -> None:
        self.topic = topic
        self.label = label
        self.idempotent = idempotent
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "logger": CLIENT_LOG,
                "acks": "all",
                "enable.idempotence": idempotent,
                "linger.ms": 5,
                "message.timeout.ms": delivery_timeout_ms,
                "socket.timeout.ms": 10_000,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 2000,
            }
        )
        self._interval_s = 1.0 / rate_per_s
        self._padding = "x" * value_size
        self._lock = threading.Lock()
        self.acks: list[Ack] = []
        self.failures: list[str] = []
        self.sent = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stopping.is_set():
            value = f"{self.label}{self.sent:09d}-{self._padding}"
            try:
                self._producer.produce(self.topic, value.encode(), on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0)
            next_at += self._interval_s
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                next_at = time.monotonic()

    def _delivered(self, err: KafkaError | None, message: object) -> None:
        at = time.monotonic()
        with self._lock:
            if err is not None:
                self.failures.append(str(err))
                return
            partition, offset, value = message.partition(), message.offset(), message.value()  # type: ignore[attr-defined]
            self.acks.append(Ack(partition, offset, value.decode(), at))

    def acked(self) -> list[Ack]:
        with self._lock:
            return list(self.acks)

    def count(self, partition: int | None = None) -> int:
        with self._lock:
            return sum(1 for a in self.acks if partition is None or a.partition == partition)

    def wait_acks(self, more: int, timeout_s: float, partition: int | None = None) -> None:
        """Waits until ``more`` records beyond the current count are acknowledged."""
        target = self.count(partition) + more
        wait_until(
            lambda: self.count(partition) >= target,
            timeout_s,
            f"{more} more acknowledged records" + ("" if partition is None else f" on {partition}"),
        )

    def first_ack_after(self, moment: float, partition: int) -> float | None:
        with self._lock:
            times = [a.at for a in self.acks if a.partition == partition and a.at > moment]
        return min(times) if times else None

    def stop(self, timeout_s: float = 120.0) -> int:
        """Stops producing and waits for every record in flight; returns how many are left."""
        self._stopping.set()
        self._thread.join(timeout=10)
        left: int = self._producer.flush(timeout_s)
        return left


class GroupConsumer:
    """A member of a consumer group that consumes and commits from a thread until stopped,
    going on through leader and coordinator changes; remembers what it consumed."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.group = group
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "logger": CLIENT_LOG,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1000,
                "topic.metadata.refresh.interval.ms": 2000,
                "socket.timeout.ms": 10_000,
                "reconnect.backoff.max.ms": 500,
            }
        )
        self._consumer.subscribe([topic])
        self._lock = threading.Lock()
        self.consumed: list[tuple[int, int, str]] = []
        self.commits = 0
        self.commit_errors: list[str] = []
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-consumer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            batch = self._consumer.consume(500, timeout=0.5)
            got = []
            for message in batch:
                if message.error() is not None:
                    self.errors.append(str(message.error()))
                    continue
                got.append((message.partition(), message.offset(), message.value().decode()))
            if not got:
                continue
            with self._lock:
                self.consumed.extend(got)
            try:
                self._consumer.commit(asynchronous=False)
                self.commits += 1
            except KafkaException as err:
                self.commit_errors.append(str(err))

    def values(self) -> set[str]:
        with self._lock:
            return {value for _, _, value in self.consumed}

    def count(self) -> int:
        with self._lock:
            return len(self.consumed)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)
        self._consumer.close()


def watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    """(log start, high watermark), asked again while the answer is a retriable error (e.g. a
    bootstrap connection replaced by the address the broker advertises)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                KafkaTopicPartition(topic, partition), timeout=30
            )
            return int(low), int(high)
        except KafkaException as err:
            if time.monotonic() > deadline:
                metadata = consumer.list_topics(topic, timeout=10)
                seen = {
                    p: (m.leader, m.isrs, m.error)
                    for p, m in metadata.topics[topic].partitions.items()
                }
                raise AssertionError(
                    f"watermarks of {topic}-{partition}: {err}; the client knows brokers "
                    f"{sorted(metadata.brokers)} (from {metadata.orig_broker_id}), {seen}"
                ) from err
            CLIENT_LOG.info("watermarks of %s-%d: %s; asking again", topic, partition, err)
            time.sleep(0.5)


def committed_offsets(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    """What the group has committed, as a new member of it would be told (OffsetFetch)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG, "group.id": group})
    try:
        found = consumer.committed(
            [KafkaTopicPartition(topic, p) for p in range(partitions)], timeout=30
        )
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG, "group.id": "end-offsets"}
    )
    try:
        return {p: watermarks(consumer, topic, p)[1] for p in range(partitions)}
    finally:
        consumer.close()


def read_partition(bootstrap: str, topic: str, partition: int, timeout_s: float = 90) -> dict:
    """Every record of a partition from its log start to its end, offset -> value, read with a
    consumer of no group (remote segments included)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "logger": CLIENT_LOG,
            "group.id": f"read-{topic}-{partition}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    found: dict[int, str] = {}
    try:
        low, high = watermarks(consumer, topic, partition)
        consumer.assign([KafkaTopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        next_offset = low
        while next_offset < high:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read {topic}-{partition} up to {next_offset} of [{low}, {high}) only"
                )
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.retriable():
                    continue
                raise KafkaException(error)
            if message.offset() in found:
                raise AssertionError(f"{topic}-{partition} offset {message.offset()} read twice")
            found[message.offset()] = message.value().decode()
            next_offset = message.offset() + 1
        return found
    finally:
        consumer.close()


def check_acknowledged(
    acks: Iterable[Ack], logs: dict[int, dict[int, str]], *, retried_labels: tuple[str, ...] = ()
) -> None:
    """Every acknowledged value is in the log at the offset it was acknowledged with (anywhere
    in its partition if acknowledged without one), and no value is in the logs twice, but for
    those of producers without idempotence (``retried_labels``), whose retries may write a
    value again, as in Kafka."""
    where: dict[str, list[tuple[int, int]]] = {}
    for partition, log in logs.items():
        for offset, value in log.items():
            where.setdefault(value, []).append((partition, offset))

    def in_log(ack: Ack) -> bool:
        return any(
            partition == ack.partition and ack.offset in (offset, None)
            for partition, offset in where.get(ack.value, ())
        )

    missing = [a for a in acks if not in_log(a)]
    assert not missing, f"{len(missing)} acknowledged record(s) lost or moved, e.g. " + ", ".join(
        f"{a.value[:12]} acked at {a.partition}/{a.offset} but found at "
        f"{where.get(a.value, 'no offset of any partition')}"
        for a in missing[:5]
    )
    seen = Counter(value for log in logs.values() for value in log.values())
    duplicated = [
        value[:12]
        for value, count in seen.items()
        if count > 1 and not value.startswith(retried_labels or ("\0",))
    ]
    assert not duplicated, f"values written more than once: {duplicated[:10]}"


# --- remote segments -----------------------------------------------------------------------------


@attrs.frozen
class RemoteSegment:
    segment_id: str
    partition: int
    start_offset: int
    end_offset: int
    broker_id: int
    state: RemoteLogSegmentState


def remote_segments(bootstrap: str, topic: str) -> list[RemoteSegment]:
    """Every segment of ``topic`` in the remote log metadata, in its latest state, read from
    ``__remote_log_metadata`` with an ordinary consumer."""
    metadata_topic = "__remote_log_metadata"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "logger": CLIENT_LOG,
            "group.id": "read-remote-metadata",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    segments: dict[object, RemoteLogSegmentMetadata] = {}
    states: dict[object, RemoteLogSegmentState] = {}
    try:
        metadata = consumer.list_topics(metadata_topic, timeout=30)
        partitions = list(metadata.topics[metadata_topic].partitions)
        ends = {p: watermarks(consumer, metadata_topic, p)[1] for p in partitions}
        consumer.assign([KafkaTopicPartition(metadata_topic, p, OFFSET_BEGINNING) for p in ends])
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {metadata_topic}: at {positions}, ends {ends}")
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            positions[message.partition()] = message.offset() + 1
            if message.value() is None:
                continue
            event = decode_event(message.value())
            if isinstance(event, RemoteLogSegmentMetadata):
                key = event.remote_log_segment_id
                if key.topic_id_partition.topic_partition.topic == topic:
                    segments[key] = event
                    states.setdefault(key, event.state)
            elif (
                isinstance(event, RemoteLogSegmentMetadataUpdate)
                and event.remote_log_segment_id in segments
            ):
                states[event.remote_log_segment_id] = event.state
    finally:
        consumer.close()
    return [
        RemoteSegment(
            str(key.id),
            key.topic_id_partition.topic_partition.partition,
            segment.start_offset,
            segment.end_offset,
            segment.broker_id,
            states[key],
        )
        for key, segment in segments.items()
    ]


def bucket_manifests(bucket: Path, topic: str) -> dict[str, tuple[int, int]]:
    """The finished uploads (those with a manifest) in the bucket: segment id -> (partition,
    start offset), from the plugin's object names."""
    found = {}
    for manifest in bucket.glob(f"**/{topic}-*/*/*.rsm-manifest"):
        start, segment_id = manifest.name.removesuffix(".rsm-manifest").split("-", 1)
        found[segment_id] = (int(manifest.parent.name), int(start))
    return found


def check_bucket_matches_metadata(bucket: Path, topic: str, segments: list[RemoteSegment]) -> None:
    """Every finished segment has its objects in the bucket, and every upload in the bucket is
    known to the metadata; a second upload of the same range is allowed only as a *dangling*
    one (COPY_SEGMENT_STARTED: its uploader died before finishing it), which Kafka, like
    tierlog, leaves to retention."""
    by_id = {s.segment_id: s for s in segments}
    uploads = bucket_manifests(bucket, topic)
    unknown = sorted(set(uploads) - set(by_id))
    assert not unknown, f"uploads the remote log metadata does not know: {unknown[:5]}"
    for segment in segments:
        if segment.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            assert segment.segment_id in uploads, f"finished segment {segment} has no objects"
    per_range = Counter(
        uploads[i]
        for i, s in by_id.items()
        if i in uploads and s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    )
    twice = [key for key, count in per_range.items() if count > 1]
    assert not twice, f"(partition, start offset) uploaded and finished twice: {twice}"
    for segment_id, key in uploads.items():
        state = by_id[segment_id].state
        assert state in (
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        ), (segment_id, key, state)


def check_no_duplicate_uploads(segments: Iterable[RemoteSegment]) -> int:
    """No range of a partition was tiered twice: finished segments never share a start offset
    nor hold one another, and one leader never tiers an offset twice. Returns how many pairs
    overlap in part: as in Kafka, replicas roll segments at their own offsets, so a new leader's
    first upload may begin below the old leader's last tiered offset."""
    finished = sorted(
        (s for s in segments if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
        key=lambda s: (s.partition, s.start_offset, s.end_offset),
    )
    partial = 0
    for before, after in itertools.pairwise(finished):
        if before.partition != after.partition or after.start_offset > before.end_offset:
            continue
        described = (
            f"partition {before.partition}: finished segments [{before.start_offset}, "
            f"{before.end_offset}] (broker {before.broker_id}) and [{after.start_offset}, "
            f"{after.end_offset}] (broker {after.broker_id})"
        )
        assert after.start_offset != before.start_offset, f"{described} start alike"
        assert after.end_offset > before.end_offset, f"{described}: one holds the other"
        assert after.broker_id != before.broker_id, f"{described}: one leader tiered twice"
        partial += 1
    return partial


# --- what ZooKeeper says, and whether the gauges agree -------------------------------------------


@attrs.frozen
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


def zookeeper_partitions(cluster: ProcessCluster) -> list[PartitionView]:
    """Every partition of every topic, as the controller last wrote it to ZooKeeper."""
    found = []
    zk = cluster.zk
    for topic in sorted(zk.get_children(paths.BROKER_TOPICS)):
        try:
            data, _ = zk.get(f"{paths.BROKER_TOPICS}/{topic}")
        except NoNodeError:
            continue
        assignment = json.loads(data)["partitions"]
        for index, replicas in sorted(assignment.items(), key=lambda kv: int(kv[0])):
            state = cluster.partition_state(topic, int(index))
            if state is None:
                continue
            isr = state["isr"]
            assert isinstance(isr, list)
            found.append(
                PartitionView(
                    topic,
                    int(index),
                    tuple(int(b) for b in replicas),
                    int(str(state["leader"])),
                    int(str(state["leader_epoch"])),
                    tuple(int(b) for b in isr),
                )
            )
    return found


def gauge_disagreements(cluster: ProcessCluster, skip: Iterable[int] = ()) -> list[str]:
    """Where the gauges of the running brokers (but ``skip``) differ from ZooKeeper: under-
    replicated and led partitions per leader, the one active controller, offline partitions,
    and failed fetcher partitions (none should fail)."""
    skipped = set(skip)
    views = zookeeper_partitions(cluster)
    controller = cluster.controller_id()
    registered = cluster.registered()
    wrong = []
    offline_total = 0.0
    for broker in cluster:
        if not broker.running or broker.broker_id in skipped:
            continue
        b = broker.broker_id
        expected = {
            ("ReplicaManager", "UnderReplicatedPartitions"): sum(
                1 for v in views if v.leader == b and len(v.isr) < len(v.replicas)
            ),
            ("ReplicaManager", "LeaderCount"): sum(1 for v in views if v.leader == b),
            ("KafkaController", "ActiveControllerCount"): int(controller == b),
            ("ReplicaFetcherManager", "FailedPartitionsCount"): 0,
        }
        for (group, name), want in expected.items():
            have = broker.metric(group, name)
            if have != want:
                wrong.append(f"broker {b} {name} is {have:g}, ZooKeeper says {want}")
        offline_total += broker.metric("KafkaController", "OfflinePartitionsCount")
    offline = sum(1 for v in views if v.leader < 0 or v.leader not in registered)
    if controller is not None and controller not in skipped and offline_total != offline:
        wrong.append(f"OfflinePartitionsCount is {offline_total:g}, ZooKeeper says {offline}")
    return wrong


def wait_gauges_truthful(cluster: ProcessCluster, what: str, skip: Iterable[int] = ()) -> None:
    """Waits (generously) until every gauge agrees with ZooKeeper; the error says which not."""
    last: list[str] = []

    def agree() -> bool:
        nonlocal last
        last = gauge_disagreements(cluster, skip)
        return not last

    try:
        wait_until(agree, 45, f"gauges to agree with ZooKeeper {what}", interval_s=0.5)
    except TimeoutError as err:
        raise AssertionError(f"{err}: {last}\n{cluster.outputs()}") from None


def wait_fully_replicated(cluster: ProcessCluster, timeout_s: float = 90) -> None:
    """Waits until every partition of every topic has its whole replica set in sync."""
    wait_until(
        lambda: all(set(v.isr) == set(v.replicas) for v in zookeeper_partitions(cluster)),
        timeout_s,
        "every ISR to be the whole replica set",
        interval_s=0.5,
    )
