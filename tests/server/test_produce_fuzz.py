"""Damaged batches, produced by the hundred thousand, never make a partition unreadable.

Valid batches are damaged at random: bytes flipped, cut or added, header fields (counts,
offsets, timestamps, attributes, producer fields) changed, records laid out with one field
wrong. Most keep a correct length and CRC, so the produce path's deep checks are what must
catch them. They go to one partition through ``Broker.handle`` in process, interleaved with
valid batches; then the partition is fetched from offset 0 to its end, and every batch in it is
decoded fully. Whatever produce accepted must be readable at contiguous offsets, and every valid
batch must be there, unchanged, at the offset its answer gave.

CI runs a fixed seed (``CI`` set, as for the hypothesis profile in ``tests/conftest.py``);
elsewhere each run draws a new one, named in any failure and replayed with
``PRODUCE_FUZZ_SEED``.
"""

from __future__ import annotations

import collections
import os
import random
import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import CorruptRecordError
from tierlog.records import Compression, RecordBatchBuilder, iter_batches
from tierlog.server import protocol as p

from .conftest import T0, Client
from .forge import forge, record

#: Damaged batches produced per run (valid ones come on top).
MUTATED = 100_000
#: One valid batch after every this many damaged ones.
VALID_EVERY = 10
CI_SEED = 20_240_611
TOPIC = "fuzz"

_INT64 = (">q", -(1 << 63), (1 << 63) - 1)
_INT32 = (">i", -(1 << 31), (1 << 31) - 1)
_INT16 = (">h", -(1 << 15), (1 << 15) - 1)
_INT8 = (">b", -128, 127)
#: Header fields a mutation may change: offset in the batch and format.
_FIELDS = {
    "base_offset": (0, _INT64),
    "partition_leader_epoch": (12, _INT32),
    "magic": (16, _INT8),
    "attributes": (21, _INT16),
    "last_offset_delta": (23, _INT32),
    "base_timestamp": (27, _INT64),
    "max_timestamp": (35, _INT64),
    "producer_id": (43, _INT64),
    "producer_epoch": (51, _INT16),
    "base_sequence": (53, _INT32),
    "records_count": (57, _INT32),
}
_COUNTS = ("last_offset_delta", "records_count")


def _seed() -> int:
    if "PRODUCE_FUZZ_SEED" in os.environ:
        return int(os.environ["PRODUCE_FUZZ_SEED"])
    if os.environ.get("CI"):
        return CI_SEED
    return random.SystemRandom().randrange(1 << 32)


def _fix(data: bytearray, *, length: bool = True, crc: bool = True) -> bytes:
    if length and len(data) >= 12:
        struct.pack_into(">i", data, 8, len(data) - 12)
    if crc and len(data) >= 21:
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def _field_value(rng: random.Random, name: str, current: int, kind: tuple[str, int, int]) -> int:
    _, low, high = kind
    if name == "attributes":
        return current ^ (1 << rng.randrange(8))
    if name in ("base_timestamp", "max_timestamp"):
        return rng.choice([current + rng.randint(-10, 10), current + 7_200_000, -1, 0, low, high])
    choices = [current - 1, current + 1, 0, -1, 1_000_000, rng.randint(low, high)]
    return max(low, min(high, rng.choice(choices)))


def _structured(rng: random.Random) -> bytes:
    """A batch laid out record by record, with one field of one record (or the count) wrong."""
    count = rng.randint(1, 5)
    wrong = rng.randrange(count)
    defect = rng.randrange(8)
    parts = []
    for i in range(count):
        value = b"s" * rng.randint(0, 30)
        if i != wrong or defect > 5:
            parts.append(record(i, timestamp_delta=i, value=value))
        elif defect == 0:
            adjust = rng.choice([-3, -2, -1, 1, 2, 3, 200])
            parts.append(record(i, timestamp_delta=i, value=value, length_adjust=adjust))
        elif defect == 1:
            key_length = rng.choice([-9, -2, 2, 50])
            parts.append(record(i, timestamp_delta=i, value=value, key_length=key_length))
        elif defect == 2:
            parts.append(record(rng.choice([i - 1, i + 1, i + 100, -1]), value=value))
        elif defect == 3:
            delta = rng.choice([7_200_000, -(1 << 40), 1 << 62])
            parts.append(record(i, timestamp_delta=delta, value=value))
        elif defect == 4:
            headers = [(rng.randbytes(3), b"h")]
            parts.append(record(i, timestamp_delta=i, value=value, headers=headers))
        else:
            parts.append(record(i, timestamp_delta=i, key=None, value=value))
    section = b"".join(parts)
    if defect == 6:
        section += rng.randbytes(rng.randint(1, 4))
    elif defect == 7:
        section = section[: -rng.randint(1, 3)]
    declared = count + (rng.choice([-1, 1]) if rng.random() < 0.2 else 0)
    codec = rng.choice(list(Compression)) if rng.random() < 0.3 else Compression.NONE
    return forge(section, declared, compression=codec, max_timestamp_from=range(count))


def _mutate(rng: random.Random, original: bytes) -> bytes:
    data = bytearray(original)
    kind = rng.randrange(7)
    if kind == 0:  # a flipped bit anywhere; the CRC is usually fixed, the length never
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return _fix(data, length=False, crc=rng.random() < 0.7)
    if kind == 1:  # a byte of the records section replaced
        data[rng.randrange(61, len(data))] = rng.randrange(256)
    elif kind == 2:  # cut short
        del data[rng.randrange(1, len(data)) :]
    elif kind == 3:  # extended
        data += rng.randbytes(rng.randint(1, 8))
    elif kind == 4:  # a byte inserted into or deleted from the records section
        position = rng.randrange(61, len(data))
        if rng.random() < 0.5:
            del data[position]
        else:
            data.insert(position, rng.randrange(256))
    elif kind == 5:  # the count or last offset delta changed
        name = rng.choice(_COUNTS)
        offset, kind_format = _FIELDS[name]
        (current,) = struct.unpack_from(kind_format[0], data, offset)
        struct.pack_into(
            kind_format[0], data, offset, _field_value(rng, name, current, kind_format)
        )
    else:  # any other header field changed
        name = rng.choice(list(_FIELDS))
        offset, kind_format = _FIELDS[name]
        (current,) = struct.unpack_from(kind_format[0], data, offset)
        struct.pack_into(
            kind_format[0], data, offset, _field_value(rng, name, current, kind_format)
        )
    return _fix(data)


def _pool(rng: random.Random, size: int) -> list[bytes]:
    """Valid batches of every shape the mutations start from."""
    batches = []
    for _ in range(size):
        builder = RecordBatchBuilder(rng.choice(list(Compression)))
        for i in range(rng.randint(1, 6)):
            key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 8))
            value = None if rng.random() < 0.1 else b"p" * rng.randint(0, 200)
            headers = [("h", b"x")] if rng.random() < 0.2 else []
            builder.append(T0 + i, key, value, headers)
        batches.append(builder.build())
    return batches


def test_damaged_batches_never_make_the_partition_unreadable(tmp_path: Path) -> None:
    seed = _seed()
    rng = random.Random(seed)
    replay = f"seed {seed}; replay with PRODUCE_FUZZ_SEED={seed}"
    pool = _pool(rng, 300)
    with EmbeddedCluster(1, tmp_path / "data") as cluster:
        Client(cluster).create(TOPIC)
        handle: Callable[[p.Request], p.Response] = cluster.broker(0).handle

        def produce(data: bytes) -> p.PartitionProduceResponse:
            request = p.ProduceRequest(
                1, 5000, (p.TopicProduceData(TOPIC, (p.PartitionProduceData(0, data),)),)
            )
            response = handle(request)
            assert isinstance(response, p.ProduceResponse)
            return response.responses[0].partition_responses[0]

        next_offset = 0
        valid: dict[int, list[bytes]] = {}
        outcomes: collections.Counter[str] = collections.Counter()
        for n in range(MUTATED):
            if n % VALID_EVERY == 0:
                builder = RecordBatchBuilder(Compression(n // VALID_EVERY % len(Compression)))
                values = [f"valid-{n}-{i}".encode() for i in range(n % 3 + 1)]
                for value in values:
                    builder.append(T0, b"k", value)
                answer = produce(builder.build())
                assert (answer.error_code, answer.base_offset) == (p.NONE, next_offset), replay
                valid[next_offset] = values
                next_offset += len(values)
            damaged = _structured(rng) if rng.random() < 0.25 else _mutate(rng, rng.choice(pool))
            answer = produce(damaged)
            if answer.error_code == p.NONE:
                outcomes["accepted"] += 1
                # A retried idempotent batch is answered with its first offsets; anything else
                # is appended at the log end and takes exactly the offsets its header declares.
                if answer.base_offset == next_offset:
                    (delta,) = struct.unpack_from(">i", damaged, 23)
                    next_offset += delta + 1
                else:
                    assert answer.base_offset < next_offset, replay
            elif answer.error_code == CorruptRecordError.code and "CRC mismatch" in (
                answer.error_message or ""
            ):
                outcomes["crc"] += 1
            else:
                outcomes[f"refused {answer.error_code}"] += 1

        fetched_values: dict[int, bytes | None] = {}
        offset = 0
        while True:
            request = p.FetchRequest(
                [p.FetchTopic(TOPIC, [p.FetchPartition(0, offset, 1 << 20)])], max_wait_ms=0
            )
            response = handle(request)
            assert isinstance(response, p.FetchResponse)
            partition = response.responses[0].partitions[0]
            assert partition.error_code == p.NONE, replay
            assert partition.high_watermark == next_offset, replay
            if offset == next_offset:
                break
            batches = list(iter_batches(partition.records))
            assert batches, replay
            for batch in batches:
                assert batch.base_offset == offset, f"offset gap at {offset}; {replay}"
                records = list(batch.records())
                assert len(records) == batch.records_count == batch.last_offset_delta + 1, replay
                assert [r.offset for r in records] == list(range(offset, batch.next_offset))
                for r in records:
                    fetched_values[r.offset] = r.value
                offset = batch.next_offset

    for base, values in valid.items():
        served = [fetched_values[base + i] for i in range(len(values))]
        assert served == values, f"valid batch at {base} changed; {replay}"
    # Most damage must have reached the checks behind the CRC, or this tested little.
    refused_deep = sum(v for k, v in outcomes.items() if k.startswith("refused"))
    assert refused_deep > MUTATED // 2, (outcomes, replay)
