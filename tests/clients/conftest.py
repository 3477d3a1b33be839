"""Real Kafka clients (confluent-kafka, kafka-python, aiokafka) against listening clusters.

Each library is wrapped in the same small synchronous shape, so one test body runs with all
three: a producer that sends :class:`Record` s and returns them as :class:`Stored` at the offsets
the broker acknowledged, and a consumer that is assigned partitions at a :data:`Start` and reads
until chosen end offsets. Any error a library hands the application (a confluent message error, an
exception from kafka-python's or aiokafka's poll) fails the read: these tests assert that a client
sees none. The aiokafka wrappers drive their client on an :class:`asyncio.Runner` of their own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
import kafka
import pytest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.model import TopicPartition
from tierlog.records import RecordBatch, iter_batches
from tierlog.server import protocol as p
from tierlog.server.partition import Partition

from tests.remote.conftest import tiered_settings
from tests.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
aiokafka = pytest.importorskip("aiokafka")

LOOPBACK_ANY_PORT = "PLAINTEXT://127.0.0.1:0"
LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


# --- records ------------------------------------------------------------------------------


@attrs.frozen
class Record:
    """What a producer sends; ``timestamp`` is always explicit so reads can compare it too."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


@attrs.frozen(order=True)
class Stored:
    """A record at its offset, as acknowledged to a producer or read by a consumer."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int

    @classmethod
    def of(cls, topic: str, record: Record, offset: int) -> Stored:
        return cls(
            topic,
            record.partition,
            offset,
            record.key,
            record.value,
            record.headers,
            record.timestamp,
        )


#: A topic's partition: (topic, partition).
TP = tuple[str, int]


def on(topic: str, per_partition: Mapping[int, Any]) -> dict[TP, Any]:
    """``{partition: x}`` of one topic as ``{(topic, partition): x}``."""
    return {(topic, partition): x for partition, x in per_partition.items()}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def make_records(
    count: int, partitions: int = 1, *, tag: str = "r", start_ms: int | None = None
) -> list[Record]:
    """``count`` records spread round-robin over ``partitions``, timestamps one ms apart.

    Keys, values and header values hold every byte value, some keys and values are null, header
    keys are not all ASCII: whatever a codec or the broker could mangle shows up in a comparison.
    Values repeat themselves, so that every codec shrinks them (librdkafka sends a batch that a
    codec would grow uncompressed).
    """
    start = now_ms() if start_ms is None else start_ms
    records = []
    for n in range(count):
        noise = bytes((n * 7 + i) % 256 for i in range(64 + n % 200))
        key = None if n % 13 == 5 else f"{tag}-key-{n}".encode() + noise[:8]
        # Clients refuse a record with neither key nor value.
        null_value = n % 17 == 3 and key is not None
        value = None if null_value else f"{tag}-value-{n}:".encode() + noise * 3
        headers: tuple[tuple[str, bytes], ...] = ()
        if n % 3:
            headers = (("seq", b"%d" % n), ("bytes", noise[:16]), ("empty", b""))
        if n % 5 == 1:
            headers += (("clé-ü", "värde".encode()),)
        records.append(Record(n % partitions, key, value, headers, start + n))
    return records


def by_partition(stored: Iterable[Stored]) -> dict[TP, list[Stored]]:
    """Per partition, in the order given (not re-sorted: order is what is being checked)."""
    grouped: dict[TP, list[Stored]] = {}
    for item in stored:
        grouped.setdefault((item.topic, item.partition), []).append(item)
    return grouped


def assert_same_records(received: Iterable[Stored], expected: Iterable[Stored]) -> None:
    """Byte-exact and in per-partition offset order; no record missing, none extra."""
    got, want = by_partition(received), by_partition(sorted(expected))
    assert sorted(got) == sorted(want), "partitions read differ from those produced"
    for (topic, partition), records in want.items():
        where = f"{topic}-{partition}"
        offsets = [r.offset for r in got[topic, partition]]
        assert offsets == [r.offset for r in records], f"{where}: offsets"
        for read, sent in zip(got[topic, partition], records, strict=True):
            assert read == sent, f"{where} offset {sent.offset}"


def end_offsets(stored: Iterable[Stored]) -> dict[TP, int]:
    """Per partition, one past the highest offset: where a read of all of them ends."""
    ends: dict[TP, int] = {}
    for item in stored:
        tp = (item.topic, item.partition)
        ends[tp] = max(ends.get(tp, 0), item.offset + 1)
    return ends


# --- starts -------------------------------------------------------------------------------


EARLIEST = "earliest"
LATEST = "latest"


@attrs.frozen
class At:
    """Start at the first offset whose timestamp is at or after ``timestamp`` (ms)."""

    timestamp: int


Start = int | str | At


# --- the common shape ---------------------------------------------------------------------


class ClientProducer(Protocol):
    def send(self, topic: str, records: Iterable[Record]) -> list[Stored]: ...

    def close(self) -> None: ...


class ClientConsumer(Protocol):
    def assign(self, starts: Mapping[TP, Start]) -> None:
        """Exactly these partitions, each from its start."""

    def positions(self) -> dict[TP, int]:
        """Where each partition's reading starts, once the client has resolved it."""

    def read(self, until: Mapping[TP, int], timeout: float = 60.0) -> list[Stored]:
        """Everything from the positions on, until each partition reaches its end offset."""

    def read_for(self, seconds: float) -> list[Stored]:
        """Whatever arrives in ``seconds``."""

    def close(self) -> None: ...


class _Reads:
    """The read loops, over a library's ``_poll``; ``_pending`` holds records polled early."""

    name = ""
    _pending: list[Stored]

    def _poll(self, seconds: float) -> list[Stored]:
        raise NotImplementedError

    def read(self, until: Mapping[TP, int], timeout: float = 60.0) -> list[Stored]:
        received, self._pending = self._pending, []
        deadline = time.monotonic() + timeout
        while True:
            ends = end_offsets(received)
            if all(ends.get(tp, -1) >= end for tp, end in until.items()):
                return received
            if time.monotonic() > deadline:
                progress = ", ".join(
                    f"{t}-{p}: {ends.get((t, p), 'nothing')}/{end}"
                    for (t, p), end in sorted(until.items())
                )
                raise AssertionError(f"{self.name} read timed out at {progress}")
            received += self._poll(0.2)

    def read_for(self, seconds: float) -> list[Stored]:
        received, self._pending = self._pending, []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            received += self._poll(0.1)
        return received


def _headers(headers: Iterable[tuple[str, bytes]] | None) -> tuple[tuple[str, bytes], ...]:
    return tuple((key, bytes(value)) for key, value in headers or ())


def _from_record(tp: Any, m: Any) -> Stored:
    """A kafka-python or aiokafka ConsumerRecord."""
    return Stored(
        tp.topic, tp.partition, m.offset, m.key, m.value, _headers(m.headers), m.timestamp
    )


def _compression(name: str) -> str | None:
    return None if name == "none" else name


# --- confluent-kafka ----------------------------------------------------------------------


class ConfluentProducer:
    def __init__(self, bootstrap: str, *, compression: str, idempotence: bool) -> None:
        self._producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": idempotence,
                "compression.type": compression,
                "linger.ms": 5,
            }
        )

    def send(self, topic: str, records: Iterable[Record]) -> list[Stored]:
        sent = list(records)
        acked: list[Stored | None] = [None] * len(sent)
        errors: list[str] = []

        def delivered(n: int, record: Record) -> Callable[[Any, Any], None]:
            def report(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"record {n}: {err}")
                else:
                    assert msg.partition() == record.partition
                    acked[n] = Stored.of(topic, record, msg.offset())

            return report

        for n, record in enumerate(sent):
            while True:
                try:
                    self._producer.produce(
                        topic,
                        key=record.key,
                        value=record.value,
                        partition=record.partition,
                        headers=list(record.headers),
                        timestamp=record.timestamp,
                        on_delivery=delivered(n, record),
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)
            self._producer.poll(0)
        assert self._producer.flush(30) == 0, "confluent-kafka: records left undelivered"
        assert errors == []
        return [a for a in acked if a is not None]

    def close(self) -> None:
        self._producer.close()


class ConfluentConsumer(_Reads):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, **config: object) -> None:
        settings: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            # assign() needs no group, but librdkafka insists on a group.id being set.
            "group.id": "tierlog-clients-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # An offset out of range is an error here, never a silent jump.
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 100,
            "statistics.interval.ms": 50,
            "stats_cb": self._on_stats,
        }
        settings.update(config)
        self._stats: list[dict[str, Any]] = []
        self._consumer = confluent_kafka.Consumer(settings)
        self._assigned: list[TP] = []
        self._pending = []

    def _on_stats(self, stats: str) -> None:
        self._stats = [*self._stats[-1:], json.loads(stats)]

    def _partition_stats(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """The partition in the last two statistics emitted."""
        return [
            emitted.get("topics", {}).get(topic, {}).get("partitions", {}).get(str(partition), {})
            for emitted in self._stats
        ]

    def assign(self, starts: Mapping[TP, Start]) -> None:
        partitions = []
        for (topic, partition), start in starts.items():
            if start == EARLIEST:
                offset = confluent_kafka.OFFSET_BEGINNING
            elif start == LATEST:
                offset = confluent_kafka.OFFSET_END
            elif isinstance(start, At):
                (found,) = self._consumer.offsets_for_times(
                    [confluent_kafka.TopicPartition(topic, partition, start.timestamp)], 30
                )
                assert found.error is None and found.offset >= 0, found
                offset = found.offset
            else:
                assert isinstance(start, int)
                offset = start
            partitions.append(confluent_kafka.TopicPartition(topic, partition, offset))
        self._consumer.assign(partitions)
        self._assigned = list(starts)

    def positions(self) -> dict[TP, int]:
        """librdkafka's ``position()`` stays unset until the application has a message, so
        this reads its statistics: a partition with a message already polled starts there; one
        fetching (``fetch_state`` active) with nothing fetched yet starts at ``next_offset``.
        That offset is only set once the first fetch is built, a moment after the state turns
        active, so two emissions in a row must agree on it.
        """

        def resolved() -> dict[TP, int] | None:
            for message in self._consumer.consume(100, 0.05):
                self._pending.append(self._stored(message))
            starts = {}
            for topic, partition in self._assigned:
                polled = [
                    m.offset for m in self._pending if (m.topic, m.partition) == (topic, partition)
                ]
                last_two = self._partition_stats(topic, partition)
                settled = len(last_two) == 2 and all(
                    s.get("fetch_state") == "active"
                    and s.get("fetchq_cnt") == 0
                    and s.get("next_offset") == last_two[0].get("next_offset")
                    for s in last_two
                )
                if polled:
                    starts[topic, partition] = min(polled)
                elif settled:
                    starts[topic, partition] = last_two[-1]["next_offset"]
                else:
                    return None
            return starts

        result: dict[TP, int] = wait_until(resolved, "confluent-kafka resolving its positions")
        return result

    def _stored(self, message: Any) -> Stored:
        if message.error() is not None:
            raise AssertionError(f"confluent-kafka consumer error: {message.error()}")
        kind, timestamp = message.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_CREATE_TIME
        return Stored(
            message.topic(),
            message.partition(),
            message.offset(),
            message.key(),
            message.value(),
            _headers(message.headers()),
            timestamp,
        )

    def _poll(self, seconds: float) -> list[Stored]:
        return [self._stored(m) for m in self._consumer.consume(1000, seconds)]

    def close(self) -> None:
        self._consumer.close()


# --- kafka-python -------------------------------------------------------------------------


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, *, compression: str, idempotence: bool) -> None:
        self._producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=idempotence,
            compression_type=_compression(compression),
            linger_ms=5,
        )

    def send(self, topic: str, records: Iterable[Record]) -> list[Stored]:
        sent = list(records)
        futures = [
            self._producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in sent
        ]
        self._producer.flush(30)
        acked = []
        for record, future in zip(sent, futures, strict=True):
            metadata = future.get(timeout=30)
            assert metadata.partition == record.partition
            acked.append(Stored.of(topic, record, metadata.offset))
        return acked

    def close(self) -> None:
        self._producer.close(timeout=10)


#: kafka-python's and aiokafka's consumer settings for assign() without a group.
PYTHON_ASSIGN_ONLY: dict[str, object] = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "none",
    "fetch_max_wait_ms": 100,
}


class KafkaPythonConsumer(_Reads):
    name = "kafka-python"

    def __init__(self, bootstrap: str, **config: object) -> None:
        settings: dict[str, object] = {**PYTHON_ASSIGN_ONLY, "bootstrap_servers": bootstrap}
        settings.update(config)
        self._consumer = kafka.KafkaConsumer(**settings)
        self._pending = []

    def assign(self, starts: Mapping[TP, Start]) -> None:
        self._consumer.assign([kafka.TopicPartition(*tp) for tp in starts])
        for (topic, partition), start in starts.items():
            tp = kafka.TopicPartition(topic, partition)
            if start == EARLIEST:
                self._consumer.seek_to_beginning(tp)
            elif start == LATEST:
                self._consumer.seek_to_end(tp)
            elif isinstance(start, At):
                found = self._consumer.offsets_for_times({tp: start.timestamp}, timeout_ms=30_000)
                assert found[tp] is not None, found
                self._consumer.seek(tp, found[tp].offset)
            else:
                assert isinstance(start, int)
                self._consumer.seek(tp, start)

    def positions(self) -> dict[TP, int]:
        return {
            (tp.topic, tp.partition): self._consumer.position(tp, timeout_ms=30_000)
            for tp in self._consumer.assignment()
        }

    def _poll(self, seconds: float) -> list[Stored]:
        batches = self._consumer.poll(timeout_ms=int(seconds * 1000))
        return [_from_record(tp, m) for tp, messages in batches.items() for m in messages]

    def close(self) -> None:
        self._consumer.close()


# --- aiokafka -----------------------------------------------------------------------------


class AioKafkaProducer:
    def __init__(self, bootstrap: str, *, compression: str, idempotence: bool) -> None:
        self._runner = asyncio.Runner()

        async def start() -> Any:
            producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                acks="all",
                enable_idempotence=idempotence,
                compression_type=_compression(compression),
                linger_ms=5,
            )
            await producer.start()
            return producer

        self._producer = self._runner.run(start())

    def send(self, topic: str, records: Iterable[Record]) -> list[Stored]:
        sent = list(records)

        async def send_all() -> list[Any]:
            futures = [
                await self._producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
                for r in sent
            ]
            return list(await asyncio.wait_for(asyncio.gather(*futures), 30))

        acked = []
        for record, metadata in zip(sent, self._runner.run(send_all()), strict=True):
            assert metadata.partition == record.partition
            acked.append(Stored.of(topic, record, metadata.offset))
        return acked

    def close(self) -> None:
        try:
            self._runner.run(self._producer.stop())
        finally:
            self._runner.close()


class AioKafkaConsumer(_Reads):
    name = "aiokafka"

    def __init__(self, bootstrap: str, **config: object) -> None:
        settings: dict[str, object] = {**PYTHON_ASSIGN_ONLY, "bootstrap_servers": bootstrap}
        settings.update(config)
        self._runner = asyncio.Runner()

        async def start() -> Any:
            consumer = aiokafka.AIOKafkaConsumer(**settings)
            await consumer.start()
            return consumer

        self._consumer = self._runner.run(start())
        self._pending = []

    def assign(self, starts: Mapping[TP, Start]) -> None:
        consumer = self._consumer

        async def assign() -> None:
            consumer.assign([aiokafka.TopicPartition(*tp) for tp in starts])
            for (topic, partition), start in starts.items():
                tp = aiokafka.TopicPartition(topic, partition)
                # Each waits for the reset, up to request_timeout_ms; False if not done.
                if start == EARLIEST:
                    assert await consumer.seek_to_beginning(tp), f"{tp}: no earliest offset"
                elif start == LATEST:
                    assert await consumer.seek_to_end(tp), f"{tp}: no latest offset"
                elif isinstance(start, At):
                    found = await consumer.offsets_for_times({tp: start.timestamp})
                    assert found[tp] is not None, found
                    consumer.seek(tp, found[tp].offset)
                else:
                    assert isinstance(start, int)
                    consumer.seek(tp, start)

        self._runner.run(assign())

    def positions(self) -> dict[TP, int]:
        consumer = self._consumer

        async def positions() -> dict[TP, int]:
            return {
                (tp.topic, tp.partition): await consumer.position(tp)
                for tp in consumer.assignment()
            }

        result: dict[TP, int] = self._runner.run(asyncio.wait_for(positions(), 30))
        return result

    def _poll(self, seconds: float) -> list[Stored]:
        batches = self._runner.run(self._consumer.getmany(timeout_ms=int(seconds * 1000)))
        return [_from_record(tp, m) for tp, messages in batches.items() for m in messages]

    def close(self) -> None:
        try:
            self._runner.run(self._consumer.stop())
        finally:
            self._runner.close()


# --- by library name ----------------------------------------------------------------------

_PRODUCERS: dict[str, Callable[..., ClientProducer]] = {
    "confluent-kafka": ConfluentProducer,
    "kafka-python": KafkaPythonProducer,
    "aiokafka": AioKafkaProducer,
}
_CONSUMERS: dict[str, Callable[..., ClientConsumer]] = {
    "confluent-kafka": ConfluentConsumer,
    "kafka-python": KafkaPythonConsumer,
    "aiokafka": AioKafkaConsumer,
}


def produce(
    library: str,
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    *,
    compression: str = "none",
    idempotence: bool = False,
) -> list[Stored]:
    """Sends every record with ``library``'s producer (acks=all); returns them as acknowledged."""
    producer = _PRODUCERS[library](bootstrap, compression=compression, idempotence=idempotence)
    try:
        return producer.send(topic, records)
    finally:
        producer.close()


OpenConsumer = Callable[..., ClientConsumer]


@pytest.fixture(autouse=True)
def _no_member_outlives_its_test() -> Iterator[None]:
    """A group member a failed test left polling would go on retrying once the cluster is
    gone, and its leaked sockets would fail whichever test the garbage collector runs in."""
    yield
    from .groups_members import stop_running_members

    stop_running_members()


@pytest.fixture
def open_consumer() -> Iterator[OpenConsumer]:
    """``open_consumer(library, bootstrap, **config)``: a consumer closed at the end of the test
    (config keys are the library's own)."""
    opened: list[ClientConsumer] = []

    def open_(library: str, bootstrap: str, **config: object) -> ClientConsumer:
        consumer = _CONSUMERS[library](bootstrap, **config)
        opened.append(consumer)
        return consumer

    yield open_
    for consumer in reversed(opened):
        consumer.close()


def consume(
    library: str, bootstrap: str, starts: Mapping[TP, Start], until: Mapping[TP, int]
) -> list[Stored]:
    """One consumer of ``library``: assigned at ``starts``, read until ``until``, closed."""
    consumer = _CONSUMERS[library](bootstrap)
    try:
        consumer.assign(starts)
        return consumer.read(until)
    finally:
        consumer.close()


# --- clusters -----------------------------------------------------------------------------


_topic_names = itertools.count()


def unique_topic(prefix: str = "t") -> str:
    """Test topics on a shared cluster never collide."""
    return f"{prefix}-{next(_topic_names)}"


def create_topic(
    cluster: EmbeddedCluster,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: Mapping[str, object] | None = None,
) -> None:
    """Through tierlog's in-process admin; returns once every partition has a leader."""
    topic = NewTopic(
        name,
        partitions,
        replication_factor,
        configs={key: str(value) for key, value in (configs or {}).items()},
    )
    with Admin(cluster.transport) as admin:
        admin.create_topics([topic])

    def led() -> bool:
        return all(leader_of(cluster, name, p) is not None for p in range(partitions))

    wait_until(led, f"every partition of {name} to have a leader")


def leader_of(cluster: EmbeddedCluster, topic: str, partition: int) -> int | None:
    image = cluster.controller.image().topic(topic)
    if image is None:
        return None
    leader: int = image.partitions[partition].leader
    return leader if leader >= 0 else None


def replica(cluster: EmbeddedCluster, topic: str, partition: int) -> Partition:
    """The leader's replica of a partition (its log says what is local)."""
    leader = leader_of(cluster, topic, partition)
    assert leader is not None
    found = cluster.broker(leader).partition(TopicPartition(topic, partition))
    assert found is not None
    return found


def listening(
    data_dir: Path,
    size: int = 1,
    *,
    remote_dir: Path | None = None,
    plugins: Mapping[str, object] | None = None,
    **config: object,
) -> EmbeddedCluster:
    """A cluster (not started) whose brokers listen on loopback port 0; tiered to
    ``remote_dir`` through the fsspec plugin when given."""
    settings: dict[str, object] = {"listeners": LOOPBACK_ANY_PORT}
    if remote_dir is not None:
        settings.update(tiered_settings(remote_dir))
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    return EmbeddedCluster(size, data_dir, settings, extra_plugins=plugins, listen=True)


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """One listening broker for a module's tests, each on topics of its own."""
    with listening(tmp_path_factory.mktemp("shared")) as cluster:
        yield cluster


#: A tiered topic's configs: small segments, and local copies of tiered segments deleted soon.
TIERED_TOPIC: dict[str, object] = {
    "remote.storage.enable": "true",
    "segment.bytes": 16 * 1024,
    "local.retention.bytes": 1,
}


def stored_batches(cluster: EmbeddedCluster, topic: str, partition: int) -> list[RecordBatch]:
    """The batches a partition's leader holds locally, as stored (read in-process)."""
    leader = leader_of(cluster, topic, partition)
    assert leader is not None
    request = p.FetchRequest(
        [p.FetchTopic(topic, [p.FetchPartition(partition, 0, 64 << 20)])],
        max_wait_ms=0,
        max_bytes=64 << 20,
    )
    (answer,) = cluster.transport.send(leader, request).responses[0].partitions
    assert answer.error_code == p.NONE
    return list(iter_batches(answer.records))


def fill(cluster: EmbeddedCluster, topic: str, records: list[Record]) -> list[Stored]:
    """Sends ``records`` with confluent-kafka, 20 at a time: many small batches, so a topic with
    small segments rolls many of them."""
    producer = ConfluentProducer(cluster.bootstrap_servers, compression="none", idempotence=False)
    acked: list[Stored] = []
    try:
        for chunk in range(0, len(records), 20):
            acked += producer.send(topic, records[chunk : chunk + 20])
    finally:
        producer.close()
    return acked


def wait_offloaded(cluster: EmbeddedCluster, topic: str, partitions: int) -> dict[int, int]:
    """Waits until only each partition's active segment is local (every other segment tiered,
    its local copy deleted); returns each partition's local log start offset."""

    def local_starts() -> dict[int, int] | None:
        logs = [replica(cluster, topic, p).log for p in range(partitions)]
        if any(len(log.segments()) > 1 or log.local_log_start_offset == 0 for log in logs):
            return None
        return {p: log.local_log_start_offset for p, log in enumerate(logs)}

    result: dict[int, int] = wait_until(local_starts, f"{topic}: local copies deleted", 60)
    return result


def meter_count(
    cluster: EmbeddedCluster, broker_id: int, group: str, name: str, **tags: str
) -> int:
    """A broker meter's count, summed over every tag combination that includes ``tags``
    (RequestsPerSec for request=Fetch sums every version)."""
    total = 0
    for value in cluster.metrics(broker_id, group, name, **tags).values():
        assert isinstance(value, dict), f"{group}/{name} is not a meter"
        total += int(value["count"])
    return total
