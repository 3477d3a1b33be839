"""Real request frames, recorded from real Kafka clients through a small TCP proxy.

A fuzzer that starts from what clients actually send reaches far deeper than one that starts
from random bytes: most mutations of a real frame still decode, so they exercise the handlers,
not only the frame reader. The proxy sits between the clients and one listener and records
every client-to-broker frame; the broker advertises the proxy's address (``advertised.listeners``)
so that every connection a client opens, not only the bootstrap one, passes through it.

kafka-python is a dependency of tierlog and always records; confluent-kafka and aiokafka record
too where they are installed (``installed_clients``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

import attrs
from kafka import KafkaProducer
from tierlog.cluster import EmbeddedCluster

from .acked import read_back

#: The clients that can record here, in the order they run.
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")
#: Records each client produces with each compression codec it tries.
RECORDS_PER_RUN = 40


@attrs.frozen
class Frame:
    """One request as it crossed the wire, without its 4-byte size prefix."""

    client: str
    data: bytes

    @property
    def api_key(self) -> int:
        return int.from_bytes(self.data[0:2], "big", signed=True)

    @property
    def api_version(self) -> int:
        return int.from_bytes(self.data[2:4], "big", signed=True)


class RecordingProxy:
    """Forwards TCP connections on 127.0.0.1 (port 0) to ``upstream`` and records every request
    frame the clients send. ``client`` names whoever is connecting now, for the record."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.client = "unknown"
        self.frames: list[Frame] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._start(self._accept)

    def _start(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            assert self.upstream is not None, "set upstream before clients connect"
            try:
                out = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                conn.close()
                continue
            out.settimeout(None)
            with self._lock:
                if self._closed:
                    conn.close()
                    out.close()
                    return
                self._sockets += [conn, out]
            self._start(self._pump, conn, out, self.client)
            self._start(self._pump, out, conn, None)

    def _pump(self, source: socket.socket, sink: socket.socket, client: str | None) -> None:
        """Copies ``source`` to ``sink``; when ``client`` is set, records the frames."""
        pending = bytearray()
        try:
            while chunk := source.recv(1 << 16):
                sink.sendall(chunk)
                if client is None:
                    continue
                pending += chunk
                while len(pending) >= 4:
                    (size,) = struct.unpack_from(">i", pending)
                    if len(pending) < 4 + size:
                        break
                    with self._lock:
                        self.frames.append(Frame(client, bytes(pending[4 : 4 + size])))
                    del pending[: 4 + size]
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def recorded(self) -> list[Frame]:
        with self._lock:
            return list(self.frames)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = [self._server, *self._sockets]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in list(self._threads):
            thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def installed_clients() -> tuple[str, ...]:
    """The clients of :data:`CLIENTS` importable here (kafka-python always is)."""
    modules = {
        "kafka-python": "kafka",
        "confluent-kafka": "confluent_kafka",
        "aiokafka": "aiokafka",
    }
    return tuple(c for c in CLIENTS if importlib.util.find_spec(modules[c]) is not None)


@contextlib.contextmanager
def recording(
    make_listening: Callable[..., EmbeddedCluster],
) -> Iterator[tuple[EmbeddedCluster, RecordingProxy]]:
    """A one-broker cluster that advertises a recording proxy in front of its listener."""
    with RecordingProxy() as proxy:
        cluster = make_listening(
            advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}",
            group_initial_rebalance_delay_ms=0,
        )
        bound = cluster.listener(0).bound[0]
        proxy.upstream = (bound.host, bound.port)
        yield cluster, proxy


def record_client_frames(proxy: RecordingProxy, topic: str) -> list[Frame]:
    """Every installed client produces to ``topic`` (which must exist, with 2 partitions) with
    each codec and reads its records back with ``assign()``, then as a member of a consumer
    group that commits and that an admin client lists, describes and deletes; the frames they
    sent."""
    address = f"127.0.0.1:{proxy.port}"
    runs = {
        "kafka-python": _kafka_python,
        "confluent-kafka": _confluent,
        "aiokafka": _aiokafka,
    }
    groups = {"kafka-python": _kafka_python_group, "confluent-kafka": _confluent_group}
    for client in installed_clients():
        proxy.client = client
        runs[client](address, topic)
        if client in groups:
            groups[client](address, topic)
    return proxy.recorded()


def first_of_each_kind(frames: list[Frame], count: int = 4) -> list[Frame]:
    """The first ``count`` frames each client sent of each API version, in the order sent.

    How many frames a client sends depends on timing (a consumer polls until its records
    come); which kinds it sends first, and in what order, does not: the same clients give the
    same seeds, apart from what the clients take from the clock (record timestamps, and so
    CRCs).
    """
    seen: Counter[tuple[str, int, int]] = Counter()
    chosen = []
    for frame in frames:
        kind = (frame.client, frame.api_key, frame.api_version)
        seen[kind] += 1
        if seen[kind] <= count:
            chosen.append(frame)
    return chosen


def _values(client: str, codec: str) -> list[bytes]:
    prefix = b"%s %s record " % (client.encode(), codec.encode())
    return [b"%s%d " % (prefix, n) * 3 for n in range(RECORDS_PER_RUN)]


def _kafka_python(address: str, topic: str) -> None:
    expected: list[bytes] = []
    for codec, acks in (("none", "all"), ("gzip", 1), ("lz4", 0), ("zstd", "all")):
        producer = KafkaProducer(
            bootstrap_servers=address,
            acks=acks,
            enable_idempotence=False,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
        )
        values = _values("kafka-python", codec)
        for n, value in enumerate(values):
            producer.send(topic, key=b"%d" % n, value=value, partition=n % 2)
        producer.flush()
        producer.close()
        expected += values
    got: set[bytes] = set()
    for _ in range(20):  # the acks=0 records may still be on their way
        read = read_back(address, topic, 2)
        got = {value for values in read.values() for value in values if value in set(expected)}
        if got == set(expected):
            break
    assert got == set(expected), "kafka-python did not read back what it produced"


def _kafka_python_group(address: str, topic: str) -> None:
    """The classic protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
    OffsetFetch, LeaveGroup) and the group admin APIs."""
    from kafka import KafkaAdminClient, KafkaConsumer

    group = "frames-kafka-python"
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=address,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
        heartbeat_interval_ms=200,
    )
    read = 0
    for _ in consumer:
        read += 1
        if read == 10:
            break
    time.sleep(1)  # the background thread heartbeats meanwhile
    consumer.commit()
    consumer.close()
    assert read == 10, "kafka-python read nothing as a group member"
    admin = KafkaAdminClient(bootstrap_servers=address)
    try:
        assert group in {listed["group_id"] for listed in admin.list_groups()}
        admin.describe_groups([group])
        assert admin.list_group_offsets(group), "the group committed nothing"
        admin.delete_groups([group])
    finally:
        admin.close()


def _confluent_group(address: str, topic: str) -> None:
    """The consumer protocol (ConsumerGroupHeartbeat) and ConsumerGroupDescribe."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    group = "frames-confluent"
    consumer = Consumer(
        {
            "bootstrap.servers": address,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    read = 0
    for _ in range(100):
        for message in consumer.consume(num_messages=100, timeout=0.1):
            read += message.error() is None
        if read:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    assert read, "confluent-kafka read nothing as a group member"
    admin = AdminClient({"bootstrap.servers": address})
    admin.describe_consumer_groups([group])[group].result(timeout=10)


def _confluent(address: str, topic: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
    from confluent_kafka import TopicPartition as Tp

    expected: set[bytes] = set()
    for codec in ("none", "snappy", "lz4"):
        producer = Producer(
            {
                "bootstrap.servers": address,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 5,
            }
        )
        values = _values("confluent-kafka", codec)
        for n, value in enumerate(values):
            producer.produce(topic, key=b"%d" % n, value=value, partition=n % 2)
        assert producer.flush(10) == 0
        expected.update(values)
    consumer = Consumer(
        {
            "bootstrap.servers": address,
            "group.id": "frames",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([Tp(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
    got: set[bytes] = set()
    for _ in range(50):
        for message in consumer.consume(num_messages=1000, timeout=0.1):
            if message.error() is None and message.value() in expected:
                got.add(message.value())
        if got == expected:
            break
    consumer.close()
    assert got == expected, "confluent-kafka did not read back what it produced"


def _aiokafka(address: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as Tp

    async def run() -> None:
        expected: set[bytes] = set()
        for codec in ("none", "gzip"):
            producer = AIOKafkaProducer(
                bootstrap_servers=address,
                acks="all",
                enable_idempotence=False,
                compression_type=None if codec == "none" else codec,
            )
            await producer.start()
            values = _values("aiokafka", codec)
            try:
                for n, value in enumerate(values):
                    await producer.send(topic, key=b"%d" % n, value=value, partition=n % 2)
                await producer.flush()
            finally:
                await producer.stop()
            expected.update(values)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=address, group_id=None, auto_offset_reset="earliest"
        )
        await consumer.start()
        got: set[bytes] = set()
        try:
            consumer.assign([Tp(topic, 0), Tp(topic, 1)])
            for _ in range(50):
                batches = await consumer.getmany(timeout_ms=100)
                got.update(m.value for ms in batches.values() for m in ms if m.value in expected)
                if got == expected:
                    break
        finally:
            await consumer.stop()
        assert got == expected, "aiokafka did not read back what it produced"

    asyncio.run(run())


#: The controller epoch of the controller requests seeded: older than any real controller's, and
#: no single bit flip makes it current (see ``inter_broker_frames``).
STALE_CONTROLLER_EPOCH = -(1 << 31)


def inter_broker_frames(topic: str = "inter-broker") -> list[Frame]:
    """One request of each inter-broker API at the version served, as brokers send them.

    No Kafka client sends these, so they are made here. LeaderAndIsr and StopReplica come from
    a stale controller: a current one does what it says (a full LeaderAndIsr removes every
    replica it does not list, as DeleteTopics would), which is no bug; fuzzing them still
    exercises their decoding and conversion, and the broker must refuse them whole.
    """
    from tierlog.model import Uuid
    from tierlog.server import protocol as p
    from tierlog.server.image import ClusterImage, PartitionRegistration, TopicImage
    from tierlog.server.update_metadata import update_metadata_request
    from tierlog.wire.codec import MESSAGES, to_wire
    from tierlog.wire.endpoints import Endpoint
    from tierlog.wire.inter_broker_apis import leader_and_isr_to_wire, stop_replica_to_wire

    topic_id = Uuid(bytes(range(1, 17)))
    stale = STALE_CONTROLLER_EPOCH
    state = p.LeaderAndIsrPartitionState(topic, 0, 0, 1, [0, 1], 2, [0, 1, 2], adding_replicas=[2])
    image = ClusterImage(
        "fuzz-cluster",
        0,
        1,
        frozenset({0, 1}),
        {
            topic: TopicImage(
                topic, topic_id, (PartitionRegistration((0, 1), (0,), 0, 1, 2),), {"a": "b"}
            )
        },
        {"": {"log.retention.ms": "1000"}},
    )
    messages = [
        leader_and_isr_to_wire(
            p.LeaderAndIsrRequest(0, stale, [state], [(topic, topic_id)], [0]),
            7,
            leader_address=lambda _: ("127.0.0.1", 9092),
        ),
        stop_replica_to_wire(
            p.StopReplicaRequest(0, stale, [p.StopReplicaPartitionState(topic, 0, 1, True)]), 4
        ),
        to_wire(
            update_metadata_request(image, {0: [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]}),
            MESSAGES[6][0][8],
        ),
        to_wire(p.ControlledShutdownRequest(1, 5), MESSAGES[7][0][3]),
        to_wire(
            p.AlterPartitionRequest(
                0,
                [
                    p.AlterPartitionTopicData(
                        topic_id,
                        [p.AlterPartitionPartitionData(0, 1, [p.BrokerState(0, 5)], 2)],
                    )
                ],
                5,
            ),
            MESSAGES[56][0][3],
        ),
        to_wire(p.AllocateProducerIdsRequest(1, 5), MESSAGES[67][0][0]),
    ]
    versions = (7, 4, 8, 3, 3, 0)
    frames = []
    for correlation_id, (message, version) in enumerate(zip(messages, versions, strict=True)):
        message.API_VERSION = version
        message.with_header(correlation_id=correlation_id, client_id="broker-0")
        frames.append(Frame("tierlog-broker", bytes(message.encode(header=True))))
    return frames
