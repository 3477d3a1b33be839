"""A produced batch is decoded record by record before anything of it reaches the log.

Every bad batch below passes the length and CRC checks (it is forged with a correct CRC), so
only the deep checks can refuse it. Each test produces valid records before and after the bad
batch and checks, through the broker's produce API: the error code and record errors of the
answer, that the log end and high watermark did not move, and that a consumer reading from
offset 0 gets exactly the valid records, at contiguous offsets.
"""

from __future__ import annotations

import random
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from tierlog.client import Consumer, ConsumerRecord
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    TierlogError,
)
from tierlog.model import TopicPartition
from tierlog.records import (
    Compression,
    ControlType,
    TimestampType,
    build_control_batch,
    iter_batches,
)
from tierlog.records.batch import TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK
from tierlog.records.varint import encode_unsigned
from tierlog.server import protocol as p

from .conftest import T0, Client, batch
from .forge import forge, record, records, refix

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
CODECS = [c for c in Compression if c is not Compression.NONE]


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """One cluster for the module; every test writes to a topic of its own."""
    with EmbeddedCluster(1, tmp_path_factory.mktemp("validation") / "data") as running:
        yield running


@attrs.define
class Topic:
    """One single-partition topic, and the checks every refusal must pass."""

    cluster: EmbeddedCluster
    client: Client
    name: str
    #: Values of the valid records produced so far, in order.
    produced: list[bytes] = attrs.field(factory=list)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.name, 0)

    def ends(self) -> tuple[int, int]:
        """The leader's log end offset and high watermark."""
        replica = self.cluster.broker(self.client.leader(self.name)).partition(self.tp)
        assert replica is not None
        return replica.log.log_end_offset, replica.high_watermark

    def produce(self, data: bytes) -> p.PartitionProduceResponse:
        return self.client.produce(self.name, 0, data, acks=1)

    def produce_valid(self, count: int, tag: str) -> None:
        answer = self.produce(batch(count, tag=tag))
        assert answer.error_code == p.NONE, answer.error_message
        self.produced += [f"{tag}-{i}".encode() for i in range(count)]

    def refused(
        self, bad: bytes, error: type[TierlogError], reason: str | None = None
    ) -> p.PartitionProduceResponse:
        """Produces valid records, ``bad``, valid records again; checks the refusal and that
        nothing of ``bad`` was kept. Returns the answer to ``bad``."""
        self.produce_valid(2, f"before{len(self.produced)}")
        ends = self.ends()
        answer = self.produce(bad)
        assert answer.error_code == error.code, answer
        assert answer.base_offset == -1
        assert answer.error_message
        if reason is not None:
            assert re.search(reason, answer.error_message), answer.error_message
        assert self.ends() == ends
        self.produce_valid(2, f"after{len(self.produced)}")
        self.assert_consumable()
        return answer

    def assert_consumable(self) -> None:
        received = consume_from_start(self.cluster, self.tp, len(self.produced))
        assert [r.offset for r in received] == list(range(len(self.produced)))
        assert [(r.value or b"").rstrip(b".") for r in received] == self.produced


def consume_from_start(
    cluster: EmbeddedCluster, tp: TopicPartition, count: int
) -> list[ConsumerRecord]:
    """What a consumer starting at the earliest offset reads, up to the log end."""
    config = {"auto.offset.reset": "earliest", "retry.backoff.ms": 10}
    received: list[ConsumerRecord] = []
    with Consumer(cluster.transport, config) as consumer:
        consumer.assign([tp])
        for _ in range(200):
            if len(received) >= count:
                break
            received.extend(consumer.poll(timeout_ms=50))
        received.extend(consumer.poll(timeout_ms=0))
    return received


@pytest.fixture
def make_topic(
    shared_cluster: EmbeddedCluster, request: pytest.FixtureRequest
) -> Callable[..., Topic]:
    """Creates this test's topic (with topic configs as keyword arguments, ``_`` for ``.``)."""
    client = Client(shared_cluster)
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:180]
    made: list[str] = []

    def make(**configs: str) -> Topic:
        name = f"{base}-{len(made)}"
        made.append(name)
        client.create(name, **configs)
        return Topic(shared_cluster, client, name)

    return make


@pytest.fixture
def topic(make_topic: Callable[..., Topic]) -> Topic:
    return make_topic()


def record_errors(answer: p.PartitionProduceResponse) -> list[tuple[int, str]]:
    return [(e.batch_index, e.batch_index_error_message or "") for e in answer.record_errors]


# --- framing: CORRUPT_MESSAGE ----------------------------------------------------------------


def test_a_byte_after_the_last_record_is_refused(topic: Topic) -> None:
    answer = topic.refused(refix(batch(1) + b"\x00"), CorruptRecordError, "1 bytes left over")
    assert answer.record_errors == ()


def test_a_record_missing_its_last_byte_is_refused(topic: Topic) -> None:
    answer = topic.refused(refix(batch(1)[:-1]), CorruptRecordError, "record 0 of the batch")
    [(index, message)] = record_errors(answer)
    assert index == 0
    assert "overruns" in message


def test_fewer_records_than_the_count_is_refused(topic: Topic) -> None:
    bad = forge(records(2), 3)
    topic.refused(bad, CorruptRecordError, "declares 3 records but its records section holds 2")


def test_more_records_than_the_count_is_refused(topic: Topic) -> None:
    bad = forge(records(2), 1)
    topic.refused(bad, CorruptRecordError, "bytes left over after the 1 records")


@pytest.mark.parametrize(
    ("bad_record", "message"),
    [
        (record(0, length_adjust=1), "disagrees with its fields"),
        (record(0, length_adjust=-1), "overruns its record|disagrees"),
        (record(0, length_adjust=-100), "less than the 6-byte minimum"),
        (record(0, key_length=50), "key length 50 overruns its record"),
        (record(0, key_length=-7), "negative key length -7"),
        (record(0, headers=[(b"\xff\xfe", b"v")]), "not valid UTF-8"),
    ],
    ids=["long", "short", "tiny", "key-overrun", "negative-key", "header-key-not-utf8"],
)
def test_a_record_whose_fields_disagree_with_its_length_is_refused(
    topic: Topic, bad_record: bytes, message: str
) -> None:
    bad = forge(bad_record + record(1, value=b"second"), 2)
    answer = topic.refused(bad, CorruptRecordError, message)
    [(index, reason)] = record_errors(answer)
    assert index == 0
    assert re.search(message, reason)


# --- header rules: INVALID_RECORD ------------------------------------------------------------


def test_a_last_offset_delta_of_a_million_is_refused(topic: Topic) -> None:
    bad = forge(records(1), 1, last_offset_delta=1_000_000)
    answer = topic.refused(bad, InvalidRecordError, "lastOffsetDelta 1000000")
    assert answer.record_errors == ()


def test_a_batch_without_records_is_refused(topic: Topic) -> None:
    topic.refused(forge(b"", 0, last_offset_delta=0), InvalidRecordError, "declares 0 records")


def test_a_control_batch_from_a_client_is_refused(topic: Topic) -> None:
    marker = build_control_batch(ControlType.COMMIT, producer_id=5, producer_epoch=0, timestamp=T0)
    topic.refused(marker, InvalidRecordError, "control records")


def test_a_producer_id_without_a_sequence_is_refused(topic: Topic) -> None:
    bad = forge(records(1), 1, producer_id=5, producer_epoch=0, base_sequence=-1)
    topic.refused(bad, InvalidRecordError, "invalid sequence number -1")


def test_a_transactional_batch_without_a_producer_id_is_refused(topic: Topic) -> None:
    bad = forge(records(1), 1, attributes=TRANSACTIONAL_MASK)
    topic.refused(bad, InvalidRecordError, "carries no producer id")


# --- record rules: INVALID_RECORD with record errors -----------------------------------------


@pytest.mark.parametrize("deltas", [(0, 2), (0, 0), (1, 0)], ids=["gap", "repeat", "swapped"])
def test_offset_deltas_must_be_consecutive_from_zero(topic: Topic, deltas: tuple[int, int]) -> None:
    section = record(deltas[0], value=b"a") + record(deltas[1], value=b"b")
    answer = topic.refused(forge(section, 2), InvalidRecordError, "must be consecutive")
    expected = [i for i, delta in enumerate(deltas) if delta != i]
    assert [index for index, _ in record_errors(answer)] == expected
    assert all("inner record offsets must be consecutive" in m for _, m in record_errors(answer))


def test_a_compacted_topic_refuses_records_without_a_key(make_topic: Callable[..., Topic]) -> None:
    topic = make_topic(cleanup_policy="compact")
    section = record(0, key=b"a") + record(1, key=None) + record(2, key=None)
    answer = topic.refused(forge(section, 3), InvalidRecordError, "without a key")
    assert [index for index, _ in record_errors(answer)] == [1, 2]


# --- timestamps: INVALID_TIMESTAMP ------------------------------------------------------------


def test_a_create_time_more_than_an_hour_ahead_is_refused_by_default(topic: Topic) -> None:
    # Any time in the past is fine by default, and so is no timestamp at all.
    for stamp, tag in ((0, "epoch"), (-1, "unset")):
        accepted = topic.produce(forge(records(1, tag=tag), 1, base_timestamp=stamp))
        assert accepted.error_code == p.NONE, accepted.error_message
        topic.produced.append(f"{tag}-0".encode())
    section = record(0, timestamp_delta=0) + record(1, timestamp_delta=2 * HOUR_MS)
    bad = forge(section, 2, max_timestamp_from=(0, 2 * HOUR_MS))

    answer = topic.refused(bad, InvalidTimestampError, "invalid timestamps")

    [(index, message)] = record_errors(answer)
    assert index == 1
    assert f"timestamp {T0 + 2 * HOUR_MS} is out of range" in message
    fetched = topic.client.fetch(topic.name)
    assert [r.timestamp for b in iter_batches(fetched.records) for r in b.records()][:2] == [0, -1]


def test_message_timestamp_after_max_ms_bounds_the_future(
    make_topic: Callable[..., Topic],
) -> None:
    topic = make_topic(message_timestamp_after_max_ms=str(60_000))
    bad = forge(records(1), 1, base_timestamp=T0 + 10 * 60_000)
    answer = topic.refused(bad, InvalidTimestampError)
    assert [index for index, _ in record_errors(answer)] == [0]


def test_message_timestamp_before_max_ms_bounds_the_past(
    make_topic: Callable[..., Topic],
) -> None:
    topic = make_topic(message_timestamp_before_max_ms=str(HOUR_MS))
    bad = forge(records(3), 3, base_timestamp=T0 - DAY_MS, max_timestamp_from=(0, 1, 2))
    answer = topic.refused(bad, InvalidTimestampError, "out of range")
    assert [index for index, _ in record_errors(answer)] == [0, 1, 2]


def test_a_producer_may_not_claim_log_append_time(topic: Topic) -> None:
    bad = forge(records(2), 2, attributes=TIMESTAMP_TYPE_MASK, max_timestamp_from=(0, 1))
    answer = topic.refused(bad, InvalidTimestampError, "LogAppendTime")
    assert [index for index, _ in record_errors(answer)] == [0, 1]


def test_log_append_time_topics_take_any_create_time_but_only_stamp_their_own(
    make_topic: Callable[..., Topic],
) -> None:
    topic = make_topic(message_timestamp_type="LogAppendTime")
    claimed = forge(records(1), 1, attributes=TIMESTAMP_TYPE_MASK)
    far = forge(records(2), 2, base_timestamp=T0 + 30 * DAY_MS, max_timestamp_from=(0, 1))

    refused = topic.produce(claimed)
    answer = topic.produce(far)

    assert refused.error_code == InvalidTimestampError.code

    assert answer.error_code == p.NONE, answer.error_message
    assert answer.log_append_time_ms >= T0
    [stored] = list(iter_batches(topic.client.fetch(topic.name).records))
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert stored.max_timestamp == answer.log_append_time_ms
    assert [r.timestamp for r in stored.records()] == [answer.log_append_time_ms] * 2


def test_a_max_timestamp_the_records_disagree_with_is_corrected(topic: Topic) -> None:
    wrong = forge(records(3), 3, max_timestamp=T0 + 50_000)
    answer = topic.produce(wrong)

    assert answer.error_code == p.NONE, answer.error_message
    [stored] = list(iter_batches(topic.client.fetch(topic.name).records))
    assert stored.max_timestamp == T0 + 2
    assert stored.compute_crc() == stored.crc
    latest = topic.client.list_offset(topic.name, p.OffsetSpec.MAX_TIMESTAMP)
    assert (latest.offset, latest.timestamp) == (2, T0 + 2)


# --- compressed batches -------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_compressed_records_are_checked_like_uncompressed_ones(
    topic: Topic, codec: Compression
) -> None:
    good = forge(records(3, tag="packed"), 3, compression=codec, max_timestamp_from=(0, 1, 2))
    assert topic.produce(good).error_code == p.NONE
    topic.produced += [f"packed-{i}".encode() for i in range(3)]

    extra = forge(records(2) + b"\x00", 2, compression=codec, max_timestamp_from=(0, 1))
    topic.refused(extra, CorruptRecordError, "1 bytes left over")
    long_record = record(0, length_adjust=1) + record(1)
    answer = topic.refused(
        forge(long_record, 2, compression=codec), CorruptRecordError, "decompressed batch"
    )
    assert [index for index, _ in record_errors(answer)] == [0]
    gap = record(0) + record(5)
    answer = topic.refused(forge(gap, 2, compression=codec), InvalidRecordError, "consecutive")
    assert [index for index, _ in record_errors(answer)] == [1]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_a_compressed_section_that_does_not_decompress_is_refused(
    topic: Topic, codec: Compression
) -> None:
    good = forge(records(20), 20, compression=codec)
    topic.refused(refix(good[:-5]), CorruptRecordError)


#: A topic whose batches take at most 64 KiB decompresses at most 64 times that: 4 MiB.
SMALL_TOPIC = {"max_message_bytes": str(64 * 1024)}
BOMB_SIZE = 8 << 20


def _bomb(codec: Compression) -> bytes:
    """A records section claiming ``BOMB_SIZE`` bytes once decompressed, in a few KiB."""
    if codec is Compression.GZIP:
        packer = zlib.compressobj(wbits=31)
        zeros = bytes(1 << 20)
        return b"".join(packer.compress(zeros) for _ in range(BOMB_SIZE >> 20)) + packer.flush()
    if codec is Compression.ZSTD:
        import zstandard

        stream = zstandard.ZstdCompressor().compressobj()
        zeros = bytes(1 << 20)
        return b"".join(stream.compress(zeros) for _ in range(BOMB_SIZE >> 20)) + stream.flush()
    if codec is Compression.LZ4:
        import lz4.frame

        return bytes(
            lz4.frame.compress(
                bytes(BOMB_SIZE),
                block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    # snappy-java's framing around one raw block whose preamble declares BOMB_SIZE bytes.
    raw = encode_unsigned(BOMB_SIZE) + b"\x00a"
    return b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(raw)) + raw


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_decompression_is_capped_at_64_times_max_message_bytes(
    make_topic: Callable[..., Topic], codec: Compression
) -> None:
    topic = make_topic(**SMALL_TOPIC)
    bomb = _bomb(codec)
    assert len(bomb) < 64 * 1024
    packed = forge(record(0, value=bytes(1 << 20)), 1, compression=codec)
    incompressible = random.Random(0).randbytes(70_000)
    oversized = forge(record(0, value=incompressible), 1, compression=codec)

    topic.refused(oversized, RecordTooLargeError, "max.message.bytes")
    topic.refused(
        forge(b"", 1, compression=codec, payload=bomb),
        CorruptRecordError,
        "decompresses to more than 4194304 bytes",
    )
    accepted = topic.produce(packed)

    assert (accepted.error_code, accepted.base_offset) == (p.NONE, 8), accepted.error_message
    [stored] = list(iter_batches(topic.client.fetch(topic.name, offset=8).records))
    assert [r.value for r in stored.records()] == [bytes(1 << 20)]


# --- what a produce request holds ------------------------------------------------------------


def test_two_batches_for_one_partition_are_refused(topic: Topic) -> None:
    topic.refused(batch(1) + batch(1), InvalidRecordError, "exactly one record batch")


def test_a_base_offset_other_than_zero_is_refused(topic: Topic) -> None:
    bad = forge(records(1), 1, base_offset=7)
    topic.refused(bad, InvalidRecordError, "base offset of a produced batch must be 0")


@pytest.mark.parametrize("magic", [0, 1])
def test_older_message_formats_are_not_produced(topic: Topic, magic: int) -> None:
    topic.refused(forge(records(1), 1, magic=magic), InvalidRecordError, "magic 2 only")


def test_a_bad_partition_leaves_the_others_of_its_request_alone(
    make_topic: Callable[..., Topic],
) -> None:
    topic = make_topic()
    other = make_topic()
    request = p.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            p.TopicProduceData(topic.name, [p.PartitionProduceData(0, refix(batch(1) + b"!"))]),
            p.TopicProduceData(other.name, [p.PartitionProduceData(0, batch(2, tag="kept"))]),
        ],
    )

    response = topic.client.transport.send(topic.client.leader(topic.name), request)

    codes = [t.partition_responses[0].error_code for t in response.responses]
    assert codes == [CorruptRecordError.code, p.NONE]
    assert topic.ends() == (0, 0)
    other.produced = [b"kept-0", b"kept-1"]
    other.assert_consumable()


def test_what_was_refused_stays_out_after_an_unclean_restart(tmp_path: Path) -> None:
    with EmbeddedCluster(1, tmp_path / "data") as cluster:
        topic = Topic(cluster, Client(cluster), "restarted")
        topic.client.create(topic.name)
        topic.refused(refix(batch(1) + b"\x00"), CorruptRecordError)
        topic.refused(forge(records(1), 1, last_offset_delta=1_000_000), InvalidRecordError)

        cluster.restart_broker(0, clean=False)

        assert topic.ends() == (8, 8)
        topic.assert_consumable()
