"""Bad input on the listener, case by case: what Kafka answers, one log line, and nothing else.

A frame the broker cannot read as a request (a size over ``socket.request.max.bytes`` or below
zero, a truncated or undecodable frame, an unknown API key, an unserved version, a null where
the schema allows none) closes its connection, as Kafka's socket server does. A request that
decodes but carries bad data or a bad value (a corrupt record batch, an illegal topic name, a
negative partition index or size) gets Kafka's error code for it. Either way the broker logs
one line naming the problem and the peer, and nothing else happens: a healthy client on other
connections keeps producing and reading back throughout, no partition but the one named
changes, and the records acknowledged before the abuse are all still there.

Values a well-behaved client also sends get Kafka's answer and no line: an offset outside the
log (a consumer after retention), a partition past the last (a client whose metadata is newer
than the broker's), timestamps at the edges of ListOffsets, a negative or endless fetch wait.

Where tierlog's code differs from Kafka's, the test says so: an illegal topic name in Produce,
Fetch or ListOffsets is INVALID_TOPIC_EXCEPTION (Kafka answers UNKNOWN_TOPIC_OR_PARTITION, as
for any topic it does not have), and a batch length shorter than the batch is INVALID_RECORD
(the bytes after it are not a batch; Kafka finds the CRC wrong first).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.record import MemoryRecords, MemoryRecordsBuilder
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.records.batch import crc32c
from tierlog.wire import APIS

from .acked import produce_acked
from .raw import RawClient, fetch_request, produce_request

MAX_REQUEST_BYTES = 1 << 20
#: Caps a fetch's ``max_wait_ms``: a hostile long poll is answered after this.
REQUEST_TIMEOUT_MS = 2000
KEPT_PARTITIONS = 3

# Kafka's error codes.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INVALID_RECORD = 87


class HealthyClient:
    """A kafka-python producer and consumer on connections of their own, producing a record
    and reading it back, over and over, in a thread: what no abuse may stop."""

    def __init__(self, cluster: EmbeddedCluster, topic: str) -> None:
        self.topic = topic
        self.round_trips = 0
        self.failure: BaseException | None = None
        self._progress = threading.Condition()
        self._stop = threading.Event()
        self._producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, acks="all", enable_idempotence=False
        )
        self._consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
        )
        self._consumer.assign([TopicPartition(topic, 0)])
        self._thread = threading.Thread(target=self._run, name="healthy-client", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                value = b"round trip %d" % self.round_trips
                self._producer.send(self.topic, value=value, partition=0).get(timeout=20)
                while value not in self._read():
                    if self._stop.is_set():
                        return
                with self._progress:
                    self.round_trips += 1
                    self._progress.notify_all()
                self._stop.wait(0.01)
        except BaseException as err:
            with self._progress:
                self.failure = err
                self._progress.notify_all()

    def _read(self) -> list[bytes]:
        polled = self._consumer.poll(timeout_ms=200)
        return [record.value for records in polled.values() for record in records]

    def assert_serving(self) -> None:
        """Two more round trips from now: the abuse left this client's connections working."""
        with self._progress:
            target = self.round_trips + 2
            served = self._progress.wait_for(
                lambda: self.round_trips >= target or self.failure is not None, timeout=30
            )
        assert self.failure is None, f"the healthy client failed: {self.failure!r}"
        assert served, f"the healthy client stalled at {self.round_trips} round trips"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._producer.close()
        self._consumer.close()


class Abused:
    """A listening broker, the records acknowledged before any abuse, and a healthy client."""

    def __init__(self, cluster: EmbeddedCluster, data_dir: Path) -> None:
        self.cluster = cluster
        self.data_dir = data_dir
        Admin(cluster.transport).create_topics(
            [
                NewTopic("kept", KEPT_PARTITIONS, 1),
                NewTopic("abused", 2, 1),
                NewTopic("healthy", 1, 1),
            ]
        )
        self.kept = produce_acked(cluster, "kept", KEPT_PARTITIONS, 90)
        self.healthy = HealthyClient(cluster, "healthy")

    def raw(self) -> RawClient:
        return RawClient.to(self.cluster)

    def socket(self) -> socket.socket:
        endpoint = self.cluster.listener(0).bound[0]
        return socket.create_connection((endpoint.host, endpoint.port), timeout=20)

    def assert_unharmed(self) -> None:
        """The healthy client still works, and every acknowledged record is where it was."""
        self.healthy.assert_serving()
        with self.raw() as raw:
            for partition in range(KEPT_PARTITIONS):
                assert _values(raw, "kept", partition) == self.kept[partition]
            assert _end_offset(raw, "abused", 0) == 0  # no bad request appended anything


@pytest.fixture(scope="module")
def abused(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Abused]:
    data = tmp_path_factory.mktemp("abused")
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "socket.request.max.bytes": MAX_REQUEST_BYTES,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
    }
    with EmbeddedCluster(1, data, config, listen=True) as cluster:
        target = Abused(cluster, data)
        yield target
        target.healthy.close()


@pytest.fixture
def broker_log(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The broker's log lines at WARNING and above since the test started; each must come
    without a traceback."""
    caplog.set_level(logging.WARNING, logger="tierlog")

    def lines() -> list[str]:
        records = [r for r in caplog.records if r.name.startswith("tierlog")]
        assert all(r.exc_info is None for r in records), "a traceback was logged"
        return [r.getMessage() for r in records if r.levelno >= logging.WARNING]

    return lines


def _one_line(lines: list[str], peer: str, *words: str) -> None:
    assert len(lines) == 1, lines
    assert f"from {peer}" in lines[0], lines[0]
    for word in words:
        assert word in lines[0], lines[0]


def _peer(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


# --- requests -------------------------------------------------------------------------------


def _batch(records: int = 3) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for n in range(records):
        builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"v%d" % n, headers=[])
    builder.close()
    return bytes(builder.buffer())


# --- frames the broker cannot read as requests: the connection closes ------------------------


def _header(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, 1) + b"c"


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _null_topic_name() -> bytes:
    request = produce_request("abused", _batch())
    request.topic_data[0].name = None
    request.API_VERSION = 9
    request.with_header(correlation_id=7, client_id="c")
    return bytes(request.encode(header=True, framed=True))


CLOSING = [
    pytest.param(
        struct.pack(">i", MAX_REQUEST_BYTES + 1),
        ("larger than socket.request.max.bytes",),
        id="over-max-bytes",
    ),
    pytest.param(struct.pack(">i", -1), ("negative size -1",), id="negative-size"),
    pytest.param(
        struct.pack(">i", -(1 << 31)), ("negative size -2147483648",), id="most-negative-size"
    ),
    pytest.param(b"\x00\x00", ("truncated frame size",), id="truncated-size"),
    pytest.param(
        struct.pack(">i", 100) + b"x" * 50, ("truncated frame: 50 of 100 bytes",), id="truncated"
    ),
    pytest.param(_framed(b"\x00\x03\x00"), ("at least 8 bytes, got 3",), id="no-header"),
    pytest.param(
        _framed(_header(0, 9) + b"\xff" * 40), ("cannot decode ProduceRequest v9",), id="garbage"
    ),
    pytest.param(_framed(_header(32000, 0)), ("unknown API key 32000",), id="unknown-key"),
    pytest.param(_framed(_header(-1, 0)), ("unknown API key -1",), id="negative-key"),
    pytest.param(
        _framed(_header(0, 2)), ("Produce v2 is not served (versions 3-11)",), id="old-version"
    ),
    pytest.param(_framed(_header(1, 13)), ("Fetch v13 is not served",), id="new-version"),
    pytest.param(_framed(_header(3, -1)), ("Metadata v-1 is not served",), id="negative-version"),
    pytest.param(
        _null_topic_name(),
        ("non-nullable field ProduceRequest.topic_data.name is null",),
        id="null-topic-name",
    ),
]


@pytest.mark.parametrize(("frame", "words"), CLOSING)
def test_a_frame_that_is_no_request_closes_its_connection_with_one_line(
    abused: Abused, broker_log: Callable[[], list[str]], frame: bytes, words: tuple[str, ...]
) -> None:
    with abused.socket() as sock:
        peer = _peer(sock)
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)  # a truncated frame ends here
        assert _closed_by_broker(sock)
    _one_line(broker_log(), peer, "closing connection", *words)
    abused.assert_unharmed()


def _closed_by_broker(sock: socket.socket) -> bool:
    """Whether the broker closed the connection without answering."""
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:  # closed with our unread bytes still in its buffer
        return True


def test_an_unserved_api_versions_request_is_answered_in_v0_and_logs_nothing(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    """KIP-511: a client newer than the broker asks in its own version and learns the broker's
    from a v0 answer; that is negotiation, not bad input."""
    with abused.socket() as sock:
        sock.sendall(_framed(_header(18, 99, correlation_id=11) + b"\x00"))
        answer = _read_frame(sock)
    response = ApiVersionsResponse.decode(answer, version=0, header=True)
    assert (response.header.correlation_id, response.error_code) == (11, UNSUPPORTED_VERSION)
    assert {a.api_key for a in response.api_keys} == set(APIS)
    assert broker_log() == []
    abused.assert_unharmed()


def _read_frame(sock: socket.socket) -> bytes:
    with sock.makefile("rb") as reader:
        (size,) = struct.unpack(">i", reader.read(4))
        return bytes(reader.read(size))


# --- Produce: corrupt record batches ---------------------------------------------------------


def _with_crc(batch: bytearray) -> bytes:
    """``batch`` with its CRC-32C made right again, so only the change made is wrong."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _flip_crc_covered(batch: bytearray) -> bytes:
    batch[-1] ^= 0x01
    return bytes(batch)


def _magic(value: int) -> Callable[[bytearray], bytes]:
    def change(batch: bytearray) -> bytes:
        batch[16] = value
        return bytes(batch)

    return change


def _batch_length(delta: int | None = None, value: int | None = None) -> Callable[..., bytes]:
    def change(batch: bytearray) -> bytes:
        length = len(batch) - 12 + (delta or 0) if value is None else value
        struct.pack_into(">i", batch, 8, length)
        return bytes(batch)

    return change


def _record_count(value: int) -> Callable[[bytearray], bytes]:
    def change(batch: bytearray) -> bytes:
        struct.pack_into(">i", batch, 57, value)
        return _with_crc(batch)

    return change


CORRUPT = [
    pytest.param(_flip_crc_covered, CORRUPT_MESSAGE, "CRC mismatch", id="crc"),
    pytest.param(_magic(1), INVALID_RECORD, "magic 2 only, not magic 1", id="magic-1"),
    pytest.param(_magic(0), INVALID_RECORD, "magic 2 only, not magic 0", id="magic-0"),
    pytest.param(_magic(3), CORRUPT_MESSAGE, "unsupported magic 3", id="magic-3"),
    pytest.param(_batch_length(delta=10), CORRUPT_MESSAGE, "truncated batch", id="length-long"),
    pytest.param(_batch_length(delta=-5), INVALID_RECORD, "follow the first", id="length-short"),
    pytest.param(_batch_length(value=-1), CORRUPT_MESSAGE, "batch length -1", id="length-neg"),
    pytest.param(
        _batch_length(value=1 << 30), MESSAGE_TOO_LARGE, "max.message.bytes", id="length-huge"
    ),
    pytest.param(_record_count(4), INVALID_RECORD, "declares 4 records", id="count-lies"),
    pytest.param(_record_count(-1), CORRUPT_MESSAGE, "negative record count", id="count-neg"),
    pytest.param(
        lambda batch: bytes(batch[:40]), CORRUPT_MESSAGE, "truncated batch header", id="cut"
    ),
    pytest.param(lambda batch: b"", INVALID_RECORD, "needs a record batch", id="empty"),
    pytest.param(
        lambda batch: bytes(batch) + b"\x00" * 5, INVALID_RECORD, "5 bytes follow", id="trailing"
    ),
]


def _produce(raw: RawClient, topic: str, partition: int, records: bytes, acks: int = -1) -> Any:
    response = raw.call(produce_request(topic, records, partition, acks), 9)
    (answer,) = response.responses[0].partition_responses
    return answer


@pytest.mark.parametrize(("corrupt", "code", "words"), CORRUPT)
def test_a_corrupt_batch_gets_kafkas_code_and_one_line_and_is_not_appended(
    abused: Abused,
    broker_log: Callable[[], list[str]],
    corrupt: Callable[[bytearray], bytes],
    code: int,
    words: str,
) -> None:
    with abused.raw() as raw:
        answer = _produce(raw, "abused", 0, corrupt(bytearray(_batch())))
        peer = _peer(raw.sock)
    assert answer.error_code == code, answer
    _one_line(broker_log(), peer, "refused Produce v9", "abused-0", words)
    abused.assert_unharmed()


def test_acks_other_than_0_1_and_minus_1_get_invalid_required_acks(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    with abused.raw() as raw:
        answer = _produce(raw, "abused", 0, _batch(), acks=5)
        peer = _peer(raw.sock)
    assert answer.error_code == INVALID_REQUIRED_ACKS
    _one_line(broker_log(), peer, "INVALID_REQUIRED_ACKS", "got 5")
    abused.assert_unharmed()


def test_a_corrupt_batch_with_acks_0_closes_the_connection(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    with abused.raw() as raw:
        raw.send(produce_request("abused", _flip_crc_covered(bytearray(_batch())), acks=0), 9)
        peer = _peer(raw.sock)
        raw.sock.settimeout(5)
        with contextlib.suppress(TimeoutError):
            assert _closed_by_broker(raw.sock)
    _one_line(broker_log(), peer, "CORRUPT_MESSAGE")
    abused.assert_unharmed()


# --- hostile topic names ---------------------------------------------------------------------

HOSTILE_NAMES = [
    pytest.param("", id="empty"),
    pytest.param(".", id="dot"),
    pytest.param("..", id="dot-dot"),
    pytest.param("../kept-0", id="parent"),
    pytest.param("a" * 250, id="too-long"),
    pytest.param("x" * 100_000, id="huge"),
    pytest.param("a/b", id="slash"),
    pytest.param("tōpic", id="not-ascii"),
    pytest.param("bad name", id="space"),
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_topic_name_is_refused_everywhere_and_never_reaches_the_disk(
    abused: Abused, broker_log: Callable[[], list[str]], name: str
) -> None:
    before = _directories(abused.data_dir)
    with abused.raw() as raw:
        peer = _peer(raw.sock)
        metadata = raw.call(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=True,
            ),
            12,
        )
        produced = _produce(raw, name, 0, _batch())
        fetched = _fetch(raw, name, 0, 0)
        listed = _list_offsets(raw, name, 0, -1)
    assert [t.error_code for t in metadata.topics] == [INVALID_TOPIC_EXCEPTION]
    # Kafka: UNKNOWN_TOPIC_OR_PARTITION for the three below, as for any topic it lacks.
    assert produced.error_code == INVALID_TOPIC_EXCEPTION
    assert fetched.partitions[0].error_code == INVALID_TOPIC_EXCEPTION
    assert listed.error_code == INVALID_TOPIC_EXCEPTION
    lines = broker_log()
    assert [line.split(" v")[0].split("refused ")[1] for line in lines] == [
        "Metadata",
        "Produce",
        "Fetch",
        "ListOffsets",
    ]
    assert all(f"from {peer}" in line and "INVALID_TOPIC" in line for line in lines)
    assert all(len(line) < 500 for line in lines), "a hostile name is cut short in the log"
    assert _directories(abused.data_dir) == before
    abused.assert_unharmed()


def _directories(data_dir: Path) -> set[Path]:
    """Every directory in the broker's data directory, and beside it (where ``..`` leads)."""
    inside = {p for p in data_dir.rglob("*") if p.is_dir()}
    return inside | {p for p in data_dir.parent.iterdir() if p.is_dir()}


# --- partition indices and offsets -----------------------------------------------------------


def _fetch_request(topic: str, partition: int, offset: int, **sizes: int) -> Any:
    return fetch_request(topic, offset, partition=partition, **{"min_bytes": 0, **sizes})


def _fetch(raw: RawClient, topic: str, partition: int, offset: int, **sizes: int) -> Any:
    """The answer's only topic (or the whole response if the request failed as a whole)."""
    response = raw.call(_fetch_request(topic, partition, offset, **sizes), 12)
    return response if response.error_code != NONE else response.responses[0]


def _list_offsets(raw: RawClient, topic: str, partition: int, timestamp: int) -> Any:
    lo = ListOffsetsRequest
    request = lo(
        replica_id=-1,
        isolation_level=0,
        topics=[
            lo.ListOffsetsTopic(
                name=topic,
                partitions=[
                    lo.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    return raw.call(request, 7).topics[0].partitions[0]


def _values(raw: RawClient, topic: str, partition: int) -> list[bytes]:
    fetched = _fetch(raw, topic, partition, 0)
    records = MemoryRecords(fetched.partitions[0].records)
    values: list[bytes] = []
    while (batch := records.next_batch()) is not None:
        values += [record.value for record in batch]
    return values


def _end_offset(raw: RawClient, topic: str, partition: int) -> int:
    return int(_list_offsets(raw, topic, partition, -1).offset)


@pytest.mark.parametrize("partition", [-1, -(1 << 31)])
def test_a_negative_partition_index_is_unknown_and_logged(
    abused: Abused, broker_log: Callable[[], list[str]], partition: int
) -> None:
    with abused.raw() as raw:
        peer = _peer(raw.sock)
        produced = _produce(raw, "abused", partition, _batch())
        fetched = _fetch(raw, "abused", partition, 0)
        listed = _list_offsets(raw, "abused", partition, -1)
    assert produced.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert fetched.partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert listed.error_code == UNKNOWN_TOPIC_OR_PARTITION
    lines = broker_log()
    assert len(lines) == 3, lines
    assert all(f"from {peer}" in line and f"abused-{partition}" in line for line in lines)
    abused.assert_unharmed()


def test_a_partition_index_past_the_last_is_unknown_and_not_logged(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    """A client whose metadata is newer than the broker's asks for a partition the broker does
    not have yet: an ordinary answer, not worth a line."""
    huge = (1 << 31) - 1
    with abused.raw() as raw:
        assert _produce(raw, "abused", huge, _batch()).error_code == UNKNOWN_TOPIC_OR_PARTITION
        fetched = _fetch(raw, "abused", huge, 0)
        assert fetched.partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert broker_log() == []
    abused.assert_unharmed()


@pytest.mark.parametrize("offset", [-1, -(1 << 63), 1 << 40, (1 << 63) - 1])
def test_a_fetch_offset_outside_the_log_is_out_of_range(
    abused: Abused, broker_log: Callable[[], list[str]], offset: int
) -> None:
    with abused.raw() as raw:
        fetched = _fetch(raw, "kept", 0, offset)
    assert fetched.partitions[0].error_code == OFFSET_OUT_OF_RANGE
    assert fetched.partitions[0].records == b""
    assert broker_log() == []  # what a consumer after retention gets too: not worth a line
    abused.assert_unharmed()


@pytest.mark.parametrize(
    ("timestamp", "offset"),
    [(-6, 0), (-(1 << 63), 0), ((1 << 63) - 1, -1), (-2, 0), (-1, 30)],
    ids=["below-specials", "min", "max", "earliest", "latest"],
)
def test_a_list_offsets_timestamp_at_the_edges_finds_what_kafka_finds(
    abused: Abused, broker_log: Callable[[], list[str]], timestamp: int, offset: int
) -> None:
    """Below -5 is a time like any other (before every record: the first); after every record
    there is no offset (-1)."""
    with abused.raw() as raw:
        listed = _list_offsets(raw, "kept", 0, timestamp)
    assert (listed.error_code, listed.offset) == (NONE, offset)
    assert broker_log() == []
    abused.assert_unharmed()


# --- Fetch: sizes and waits ------------------------------------------------------------------


def test_a_negative_max_bytes_fails_the_whole_fetch(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    with abused.raw() as raw:
        peer = _peer(raw.sock)
        response = _fetch(raw, "kept", 0, 0, max_bytes=-1)
    assert response.error_code == INVALID_REQUEST
    _one_line(broker_log(), peer, "refused Fetch v12", "the request: INVALID_REQUEST")
    abused.assert_unharmed()


def test_a_negative_partition_max_bytes_fails_its_partition(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    with abused.raw() as raw:
        peer = _peer(raw.sock)
        fetched = _fetch(raw, "kept", 0, 0, partition_max_bytes=-(1 << 31))
    assert fetched.partitions[0].error_code == INVALID_REQUEST
    _one_line(broker_log(), peer, "kept-0: INVALID_REQUEST")
    abused.assert_unharmed()


def test_a_huge_max_bytes_reads_what_there_is(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    limit = (1 << 31) - 1
    with abused.raw() as raw:
        fetched = _fetch(raw, "kept", 0, 0, max_bytes=limit, partition_max_bytes=limit)
        assert fetched.partitions[0].error_code == NONE
        assert _values(raw, "kept", 0) == abused.kept[0]
    assert broker_log() == []
    abused.assert_unharmed()


@pytest.mark.parametrize(("max_wait_ms", "min_bytes"), [(-1, 1), (0, -(1 << 31)), (-1, -1)])
def test_a_negative_wait_or_minimum_answers_at_once(
    abused: Abused, broker_log: Callable[[], list[str]], max_wait_ms: int, min_bytes: int
) -> None:
    with abused.raw() as raw:
        end = _end_offset(raw, "kept", 0)
        fetched = _fetch(raw, "kept", 0, end, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
    assert (fetched.partitions[0].error_code, fetched.partitions[0].records) == (NONE, b"")
    assert broker_log() == []
    abused.assert_unharmed()


def test_a_longest_poll_holds_only_its_own_connection_and_ends_at_request_timeout(
    abused: Abused, broker_log: Callable[[], list[str]]
) -> None:
    """max_wait_ms and min_bytes at their largest, at the end of the log: the broker waits at
    most request.timeout.ms, and serves everyone else meanwhile."""
    longest = (1 << 31) - 1
    with abused.raw() as raw, abused.raw() as other:
        end = _end_offset(other, "kept", 0)
        request = _fetch_request(
            "kept",
            0,
            end,
            max_bytes=longest,
            partition_max_bytes=longest,
            max_wait_ms=longest,
            min_bytes=longest,
        )
        raw.send(request, 12)
        abused.healthy.assert_serving()
        assert _values(other, "kept", 1) == abused.kept[1]
        response = FetchResponse.decode(raw.read_frame(), version=12, header=True)
    assert (response.header.correlation_id, response.error_code) == (1, NONE)
    (partition,) = response.responses[0].partitions
    assert (partition.error_code, partition.records) == (NONE, b"")
    assert broker_log() == []
    abused.assert_unharmed()
