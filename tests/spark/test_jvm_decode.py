"""The JVM reader's decoder against the Python reader's: the same bytes give the same rows.

``io.tierlog.spark.read.DumpRange`` prints what a ``RangeReader`` decodes from a planned range,
and every test compares that with ``decode.decode_segment`` on the same bytes: every column and
codec, projections, bounds, transactions, corruption, and the three sources (a file, a ranged
HTTP GET, and compressed and encrypted chunks). One JVM serves the whole module; no Spark
session is started.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    Compression,
    ControlType,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    iter_batches,
    set_max_timestamp,
)
from tierlog_spark.decode import SCHEMA, decode_segment

from tests.spark.segments import (
    INTERLEAVED,
    P_ABORTS,
    T0,
    Spec,
    marker,
    record_batch,
    spec,
    transactional,
)

COLUMNS = SCHEMA.names


# --- the JVM --------------------------------------------------------------------------------


class Dumper:
    """One ``DumpRange -`` process: a request per range, its rows or its error back."""

    def __init__(self, jar: Path, jars_dir: Path, scratch: Path) -> None:
        self.scratch = scratch
        self.count = 0
        self.log = open(scratch / "jvm.log", "wb")  # noqa: SIM115 - closed in close()
        self.command = [
            "java",
            "-cp",
            f"{jar}{os.pathsep}{jars_dir / '*'}",
            "io.tierlog.spark.read.DumpRange",
        ]
        self.process = subprocess.Popen(
            [*self.command, "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def run_once(
        self, range_: dict[str, Any], columns: list[str]
    ) -> subprocess.CompletedProcess[str]:
        """``DumpRange`` run on its own, as a command."""
        request = self.scratch / "once.json"
        request.write_text(json.dumps(range_))
        command = [*self.command, str(request), ",".join(columns)]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    def dump(
        self, range_: dict[str, Any], columns: list[str], batch_rows: int
    ) -> tuple[list[dict[str, Any]], str | None]:
        self.count += 1
        request = self.scratch / f"range-{self.count}.json"
        output = self.scratch / f"rows-{self.count}.jsonl"
        request.write_text(json.dumps(range_))
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{request}\t{','.join(columns)}\t{batch_rows}\t{output}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer == "done\n", f"DumpRange died: {(self.scratch / 'jvm.log').read_text()}"
        error_file = Path(f"{output}.error")
        error = error_file.read_text() if error_file.exists() else None
        rows = [json.loads(line) for line in output.read_text().splitlines()]
        return rows, error

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.process.stdout.close()
        self.log.close()


@pytest.fixture(scope="module")
def dumper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dumper]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    from tierlog_spark.jvm.build import JarBuildError, build_jar, pyspark_jars_dir

    try:
        jar = build_jar()
    except JarBuildError as err:
        pytest.skip(f"the JVM reader's jar cannot be built: {err}")
    dumper = Dumper(jar, pyspark_jars_dir(), tmp_path_factory.mktemp("dump"))
    yield dumper
    dumper.close()


# --- ranges and the rows Python decodes -----------------------------------------------------


def _range(source: dict[str, Any], **bounds: Any) -> dict[str, Any]:
    return {
        "topic": "orders",
        "partition": 3,
        "segmentId": "seg-7",
        "firstOffset": bounds.get("start_offset", 0),
        "lastOffset": bounds.get("end_offset"),
        "minTimestamp": bounds.get("min_timestamp"),
        "maxTimestamp": bounds.get("max_timestamp"),
        "readCommitted": bounds.get("read_committed", False),
        "aborted": [list(pair) for pair in bounds.get("aborted", ())],
        "source": source,
    }


def _file_source(tmp_path: Path, data: bytes, prefix: bytes = b"") -> dict[str, Any]:
    """``data`` in a file after ``prefix``, as a file source of exactly ``data``'s bytes."""
    path = tmp_path / f"segment-{len(list(tmp_path.iterdir()))}.log"
    path.write_bytes(prefix + data + b"trailing bytes outside the range")
    return {"kind": "file", "path": str(path), "start": len(prefix), "end": len(prefix) + len(data)}


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode()


def _python_rows(data: bytes, columns: list[str], **bounds: Any) -> list[dict[str, Any]]:
    """``decode_segment``'s rows in DumpRange's JSON shapes, projected to ``columns``."""
    batches = list(decode_segment(data, topic="orders", partition=3, segment_id="seg-7", **bounds))
    table = pa.Table.from_batches(batches, schema=SCHEMA)
    table = table.set_column(3, "timestamp", table.column("timestamp").cast(pa.int64()))
    rows = []
    for row in table.to_pylist():
        row["timestamp"] *= 1000
        row["key"] = _b64(row["key"])
        row["value"] = _b64(row["value"])
        row["headers"] = [[h["key"], _b64(h["value"])] for h in row["headers"]]
        rows.append({name: row[name] for name in columns})
    return rows


def _check(
    dumper: Dumper,
    source: dict[str, Any],
    data: bytes,
    *,
    columns: list[str] = COLUMNS,
    batch_rows: int = 4096,
    **bounds: Any,
) -> list[dict[str, Any]]:
    """The JVM's rows of ``source`` (which holds ``data``), asserted equal to Python's."""
    rows, error = dumper.dump(_range(source, **bounds), columns, batch_rows)
    assert error is None
    assert rows == _python_rows(data, columns, **bounds)
    assert [list(row) for row in rows] == [columns] * len(rows)
    return rows


def _python_error(data: bytes, **bounds: Any) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        list(decode_segment(data, topic="orders", partition=3, segment_id="seg-7", **bounds))
    return info.value


@pytest.fixture(params=list(Compression), ids=lambda c: c.name.lower())
def codec(request: pytest.FixtureRequest) -> Compression:
    codec: Compression = request.param
    return codec


def _three_batches(codec: Compression = Compression.NONE) -> bytes:
    return b"".join(
        record_batch([spec(i) for i in range(base, base + 10)], codec, base_offset=base)
        for base in (0, 10, 20)
    )


# --- every column, every codec --------------------------------------------------------------


def _every_kind_of_batch(codec: Compression) -> bytes:
    return b"".join(
        [
            record_batch(
                [spec(i) for i in range(40)],
                codec,
                base_offset=100,
                producer_id=42,
                producer_epoch=3,
                base_sequence=(1 << 31) - 10,  # the sequence wraps inside the batch
                partition_leader_epoch=5,
            ),
            record_batch([spec(i) for i in range(40, 70)], codec, base_offset=140),
            record_batch(
                [spec(i) for i in range(70, 75)],
                codec,
                base_offset=170,
                producer_id=9,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
                partition_leader_epoch=6,
            ),
            build_control_batch(
                ControlType.COMMIT, producer_id=9, producer_epoch=0, timestamp=T0, base_offset=175
            ),
            record_batch(
                [(T0, b"k", b"x" * 70_000, [("big", b"y" * 5000)])], codec, base_offset=176
            ),
        ]
    )


@pytest.mark.parametrize("batch_rows", [7, 4096])
def test_every_column_matches_python(
    dumper: Dumper, tmp_path: Path, codec: Compression, batch_rows: int
) -> None:
    data = _every_kind_of_batch(codec)
    rows = _check(dumper, _file_source(tmp_path, data, b"x" * 1000), data, batch_rows=batch_rows)
    assert [r["offset"] for r in rows] == [*range(100, 175), 176]
    assert {r["sequence"] for r in rows[:40]} >= {(1 << 31) - 1, 0}
    assert rows[1]["headers"] == [
        ["trace-id", _b64(b"00000001")],
        ["nullable", None],
        ["ünïcode", ""],
    ]


def test_log_append_time_gives_every_record_the_batch_timestamp(
    dumper: Dumper, tmp_path: Path, codec: Compression
) -> None:
    append_time = bytearray(record_batch([spec(i) for i in range(5, 9)], codec, base_offset=5))
    set_max_timestamp(append_time, T0 + 12345, timestamp_type=TimestampType.LOG_APPEND_TIME)
    data = record_batch([spec(i) for i in range(5)], codec) + bytes(append_time)
    rows = _check(dumper, _file_source(tmp_path, data), data, batch_rows=3)
    assert [r["timestamp_type"] for r in rows] == ["CreateTime"] * 5 + ["LogAppendTime"] * 4
    assert [r["timestamp"] for r in rows[5:]] == [(T0 + 12345) * 1000] * 4


def test_records_with_many_headers_and_long_varints(dumper: Dumper, tmp_path: Path) -> None:
    specs: list[Spec] = [
        (T0, b"k" * 70, b"v" * 20_000, [("h" * 200, b"x" * 9000)]),
        (-1, None, b"", [(f"h{i}", bytes([i])) for i in range(100)]),
        (T0 + (1 << 40), b"", None, []),
        (0, b"\x00", b"\xff" * 64, [("", None)] * 3),
    ]
    data = record_batch(
        specs, base_offset=1 << 40, producer_id=1 << 50, producer_epoch=32767, base_sequence=5
    )
    rows = _check(dumper, _file_source(tmp_path, data), data)
    assert len(rows) == 4


def _recompressed(batch: bytes, codec: Compression, section: bytes) -> bytes:
    """``batch`` (uncompressed) with its records section replaced by ``section``, compressed
    with ``codec`` in a framing the core's codecs did not write, and its CRC recomputed."""
    header = bytearray(batch[:61])
    header[8:12] = (49 + len(section)).to_bytes(4, "big")
    attributes = int.from_bytes(header[21:23], "big") | int(codec)
    header[21:23] = attributes.to_bytes(2, "big")
    return _restamped(header + section)


def _framings() -> list[tuple[str, Compression, Any]]:
    import gzip
    import zlib

    import cramjam
    import lz4.frame
    import zstandard

    def gzip_members(plain: bytes) -> bytes:
        half = len(plain) // 2
        return gzip.compress(plain[:half]) + zlib.compress(plain[half:], wbits=31)

    def zstd_frames(plain: bytes) -> bytes:
        half = len(plain) // 2
        skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
        compressor = zstandard.ZstdCompressor(write_content_size=False)
        return zstandard.compress(plain[:half]) + skippable + compressor.compress(plain[half:])

    def lz4_checked(plain: bytes) -> bytes:
        return bytes(
            lz4.frame.compress(
                plain,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=True,
                block_checksum=True,
                store_size=True,
            )
        )

    return [
        ("gzip-members", Compression.GZIP, gzip_members),
        ("snappy-raw", Compression.SNAPPY, lambda plain: bytes(cramjam.snappy.compress_raw(plain))),
        ("lz4-checksums", Compression.LZ4, lz4_checked),
        ("zstd-frames", Compression.ZSTD, zstd_frames),
    ]


def test_every_framing_the_python_reader_accepts(dumper: Dumper, tmp_path: Path) -> None:
    specs = [spec(i) for i in range(300)]
    plain = record_batch(specs, base_offset=0, producer_id=3, producer_epoch=0, base_sequence=0)
    for name, codec, compress in _framings():
        data = _recompressed(plain, codec, compress(plain[61:]))
        assert next(iter_batches(data)).compression == codec
        rows = _check(dumper, _file_source(tmp_path, data), data, batch_rows=64)
        assert len(rows) == 300, name


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD], ids=["gzip", "zstd"])
def test_a_records_section_decompressing_past_the_cap_is_refused(
    dumper: Dumper, tmp_path: Path, codec: Compression
) -> None:
    from tierlog.records import DEFAULT_MAX_DECOMPRESSED_SIZE, compress

    plain = record_batch([spec(1)])
    bomb = compress(codec, bytes(DEFAULT_MAX_DECOMPRESSED_SIZE + 1000))
    data = _recompressed(plain, codec, bomb)
    error = _jvm_error(dumper, _file_source(tmp_path, data))
    assert error == str(_python_error(data))
    assert f"decompresses to more than {DEFAULT_MAX_DECOMPRESSED_SIZE} bytes" in error


# --- projections ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "columns",
    [
        ["offset"],
        ["value", "offset"],
        ["headers"],
        ["segment_id", "topic", "partition"],
        ["timestamp_type", "key", "is_transactional", "producer_epoch"],
        list(reversed(COLUMNS)),
    ],
    ids=lambda columns: "-".join(columns),
)
def test_projections_give_the_columns_asked_for(
    dumper: Dumper, tmp_path: Path, columns: list[str]
) -> None:
    data = _every_kind_of_batch(Compression.LZ4)
    rows = _check(
        dumper, _file_source(tmp_path, data), data, columns=columns, batch_rows=16, start_offset=120
    )
    assert len(rows) == 56


# --- bounds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end"), [(0, None), (3, None), (10, 19), (5, 24), (29, 29), (30, None), (0, 0)]
)
def test_offset_bounds(
    dumper: Dumper, tmp_path: Path, codec: Compression, start: int, end: int | None
) -> None:
    data = _three_batches(codec)
    rows = _check(
        dumper, _file_source(tmp_path, data), data, start_offset=start, end_offset=end, batch_rows=4
    )
    assert [r["offset"] for r in rows] == list(range(start, (29 if end is None else end) + 1))


@pytest.mark.parametrize(("low", "high"), [(None, T0), (T0, None), (T0 - 100, T0 + 100)])
def test_timestamp_bounds(
    dumper: Dumper, tmp_path: Path, codec: Compression, low: int | None, high: int | None
) -> None:
    data = _three_batches(codec)
    rows = _check(dumper, _file_source(tmp_path, data), data, min_timestamp=low, max_timestamp=high)
    assert 0 < len(rows) < 30


def test_log_append_time_batches_past_the_bounds_are_skipped(
    dumper: Dumper, tmp_path: Path
) -> None:
    late = bytearray(record_batch([spec(i) for i in range(10, 20)], base_offset=10))
    set_max_timestamp(late, T0 + 10_000, timestamp_type=TimestampType.LOG_APPEND_TIME)
    data = record_batch([spec(i) for i in range(10)]) + bytes(late)
    rows = _check(dumper, _file_source(tmp_path, data), data, max_timestamp=T0 + 5000)
    assert [r["offset"] for r in rows] == list(range(10))


def test_gaps_in_offsets(dumper: Dumper, tmp_path: Path, codec: Compression) -> None:
    """Compacted batches: offsets missing inside batches and between them."""
    data = b""
    for base in (0, 100, 200):
        builder = RecordBatchBuilder(codec, base_offset=base)
        for delta in (0, 3, 4, 17, 60):
            builder.append(T0 + delta, b"k%d" % delta, b"v", [], offset=base + delta)
        data += builder.build()
    rows = _check(
        dumper, _file_source(tmp_path, data), data, start_offset=4, end_offset=203, batch_rows=2
    )
    assert [r["offset"] for r in rows] == [4, 17, 60, 100, 103, 104, 117, 160, 200, 203]


# --- transactions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read_committed", "aborted", "start", "expected"),
    [
        (True, [(P_ABORTS, 3)], 0, [0, 1, 2, 6, 7, 12, 13, 15, 16]),
        (False, [(P_ABORTS, 3)], 0, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16]),
        (True, [], 0, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16]),
        (True, [(P_ABORTS, 3)], 12, [12, 13, 15, 16]),  # the ABORT marker lies before the range
        (True, [(P_ABORTS, 3)], 4, [6, 7, 12, 13, 15, 16]),
    ],
)
def test_transactions(
    dumper: Dumper,
    tmp_path: Path,
    read_committed: bool,
    aborted: list[tuple[int, int]],
    start: int,
    expected: list[int],
) -> None:
    rows = _check(
        dumper,
        _file_source(tmp_path, INTERLEAVED),
        INTERLEAVED,
        read_committed=read_committed,
        aborted=aborted,
        start_offset=start,
        batch_rows=3,
    )
    assert [r["offset"] for r in rows] == expected


def test_an_aborted_transaction_begun_in_an_earlier_segment(dumper: Dumper, tmp_path: Path) -> None:
    data = b"".join(
        [
            transactional(P_ABORTS, 50, 2, 7),
            marker(ControlType.ABORT, P_ABORTS, 52),
            transactional(P_ABORTS, 53, 1, 9),
            marker(ControlType.COMMIT, P_ABORTS, 54),
        ]
    )
    rows = _check(
        dumper,
        _file_source(tmp_path, data),
        data,
        read_committed=True,
        aborted=[(P_ABORTS, 40)],
    )
    assert [r["offset"] for r in rows] == [53]


# --- corruption -----------------------------------------------------------------------------


def _jvm_error(dumper: Dumper, source: dict[str, Any], **bounds: Any) -> str:
    rows, error = dumper.dump(_range(source, **bounds), COLUMNS, 4096)
    assert error is not None, f"no error; {len(rows)} rows"
    return error


def test_a_flipped_byte_fails_the_crc_naming_segment_and_position(
    dumper: Dumper, tmp_path: Path, codec: Compression
) -> None:
    data = bytearray(_three_batches(codec))
    second = list(iter_batches(bytes(data)))[1].position
    data[second + 30] ^= 0x01  # the base timestamp, which the CRC covers
    error = _jvm_error(dumper, _file_source(tmp_path, bytes(data), b"z" * 100))
    assert error == str(_python_error(bytes(data)))
    assert error.startswith(f"corrupt record batch at byte {second}: segment seg-7: CRC mismatch")


@pytest.mark.parametrize("cut", [1, 30, 61, 100])
def test_a_truncated_range_is_corrupt(dumper: Dumper, tmp_path: Path, cut: int) -> None:
    data = _three_batches()[:-cut]
    error = _jvm_error(dumper, _file_source(tmp_path, data))
    assert error == str(_python_error(data))


def _restamped(data: bytearray, position: int = 0) -> bytes:
    """``data`` with the CRC of the batch at ``position`` recomputed over its damage."""
    header = next(iter_batches(bytes(data[position:]), validate=False))
    set_max_timestamp(
        data,
        header.max_timestamp,
        timestamp_type=header.timestamp_type,
        position=position,
        check_crc=False,
    )
    return bytes(data)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (4, 0x7E),  # a key length past the record
        (0, 0x02),  # a record length of 1
        (5, 0xFF),  # a key length varint running on
    ],
)
def test_garbage_records_under_a_valid_crc_name_their_position(
    dumper: Dumper, tmp_path: Path, where: int, value: int
) -> None:
    first = record_batch([spec(i) for i in range(5)])
    damaged = bytearray(record_batch([spec(i) for i in range(5)], base_offset=5))
    damaged[61 + where] = value
    data = first + _restamped(damaged)
    python = _python_error(data)
    error = _jvm_error(dumper, _file_source(tmp_path, data))
    assert error.startswith(f"corrupt record batch at byte {python.position}: segment seg-7: ")
    assert python.position is not None and python.position >= len(first)


def test_a_header_key_that_is_not_utf8_is_corrupt(dumper: Dumper, tmp_path: Path) -> None:
    data = bytearray(record_batch([(T0, b"k", b"v", [("ab", b"x")])]))
    data[data.index(b"ab")] = 0xC3  # a lead byte followed by an ASCII byte
    data = bytearray(_restamped(data))
    error = _jvm_error(dumper, _file_source(tmp_path, bytes(data)))
    assert error == str(_python_error(bytes(data)))
    assert "not valid UTF-8" in error


_UTF8_EDGES = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED]
_UTF8_EDGES += [0xEF, 0xF0, 0xF4, 0xF5, 0xFF]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.sampled_from(_UTF8_EDGES), min_size=4, max_size=4))
def test_header_keys_are_utf8_exactly_when_python_says_so(
    dumper: Dumper, tmp_path: Path, key: list[int]
) -> None:
    data = bytearray(record_batch([(T0, b"k", b"v", [("\x01\x02\x03\x04", b"x")])]))
    at = data.index(b"\x01\x02\x03\x04")
    data[at : at + 4] = bytes(key)
    damaged = _restamped(data)
    path = tmp_path / "keys.log"
    path.write_bytes(damaged)
    source = {"kind": "file", "path": str(path), "start": 0, "end": len(damaged)}
    rows, error = dumper.dump(_range(source), ["headers"], 10)
    try:
        expected = _python_rows(damaged, ["headers"])
    except CorruptRecordError as err:
        assert error == str(err)
    else:
        assert error is None
        assert rows == expected


def test_corrupt_compressed_records_are_corrupt(dumper: Dumper, tmp_path: Path) -> None:
    for codec in (Compression.GZIP, Compression.ZSTD, Compression.LZ4, Compression.SNAPPY):
        batch = bytearray(record_batch([spec(i) for i in range(20)], codec))
        batch[75:85] = bytes(10)
        data = _restamped(batch)
        _python_error(data)
        error = _jvm_error(dumper, _file_source(tmp_path, data))
        assert error.startswith("corrupt record batch at byte 0: segment seg-7: "), error


def test_batches_outside_the_range_are_skipped_before_their_records_are_read(
    dumper: Dumper, tmp_path: Path
) -> None:
    garbage = bytearray(record_batch([spec(i) for i in range(10)], base_offset=10))
    garbage[61 + 4] = 0x7E
    data = (
        record_batch([spec(i) for i in range(10)])
        + _restamped(garbage)
        + record_batch([spec(0)], base_offset=20)
    )
    source = _file_source(tmp_path, data)
    assert "seg-7" in _jvm_error(dumper, source)
    assert [r["offset"] for r in _check(dumper, source, data, end_offset=9)] == list(range(10))
    assert [r["offset"] for r in _check(dumper, source, data, start_offset=20)] == [20]


def _restamp_all(data: bytearray) -> None:
    """Recomputes the CRC of every whole batch in ``data``, so damage gets past the CRC."""
    position = 0
    while position + 61 <= len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
        end = position + 12 + length
        if length < 49 or end > len(data) or data[position + 16] != 2:
            return
        _restamped(data, position)
        position = end


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_damaged_segments_decode_like_python_or_fail_naming_a_position(
    dumper: Dumper, tmp_path: Path, data: st.DataObject
) -> None:
    codec = data.draw(st.sampled_from([Compression.NONE, Compression.NONE, *Compression]))
    segment = bytearray(
        b"".join(
            record_batch([spec(i) for i in range(base, base + 6)], codec, base_offset=base)
            for base in (0, 6, 12)
        )
    )
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(segment) - 1))
        segment[index] = data.draw(st.integers(0, 255))
    _restamp_all(segment)
    damaged = bytes(segment)
    # Planned ranges always have both offset bounds (without any, decode_segment does not
    # filter rows by offset at all, and keeps a negative offset that damage made).
    bounds = {
        "start_offset": data.draw(st.sampled_from([0, 4, -(1 << 63)])),
        "end_offset": data.draw(st.sampled_from([15, (1 << 63) - 1])),
    }
    path = tmp_path / "damaged.log"
    path.write_bytes(damaged)
    source = {"kind": "file", "path": str(path), "start": 0, "end": len(damaged)}
    try:
        expected = _python_rows(damaged, COLUMNS, **bounds)
    except CorruptRecordError:
        error = _jvm_error(dumper, source, **bounds)
        assert error.startswith("corrupt record batch at byte "), error
        assert ": segment seg-7: " in error
    else:
        rows, error = dumper.dump(_range(source, **bounds), COLUMNS, 5)
        if any(not -(1 << 63) <= row["timestamp"] < 1 << 63 for row in expected):
            # The Python reader's cast to Spark's microseconds fails on these too.
            assert error is not None and "beyond what a Spark timestamp holds" in error
        else:
            assert error is None
            assert rows == expected


def test_dump_range_as_a_command(dumper: Dumper, tmp_path: Path) -> None:
    """One range per run: rows on stdout, or the error on stderr and exit status 1."""
    data = _three_batches()
    columns = ["topic", "segment_id", "partition"]  # no Spark SQL config to load: a fast start
    done = dumper.run_once(_range(_file_source(tmp_path, data)), columns)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows == _python_rows(data, columns)
    assert len(rows) == 30

    missing = {"kind": "file", "path": str(tmp_path / "gone.log"), "start": 0, "end": 10}
    done = dumper.run_once(_range(missing), columns)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip().endswith(
        f"{tmp_path / 'gone.log'} was deleted since the query was planned (or is not reachable "
        "from this executor: local segments need the log dirs under the same path on every "
        "executor)"
    )


# --- the file source ------------------------------------------------------------------------


def test_a_file_truncated_since_planning(dumper: Dumper, tmp_path: Path) -> None:
    data = _three_batches()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data[:500])
    source = {"kind": "file", "path": str(path), "start": 0, "end": len(data)}
    assert _jvm_error(dumper, source) == (
        f"{path} has 500 bytes, fewer than the {len(data)} it had when the query was planned "
        "(truncated since); run the query again"
    )


def test_a_deleted_file_is_read_under_its_other_name_or_reported(
    dumper: Dumper, tmp_path: Path
) -> None:
    data = _three_batches()
    path = tmp_path / "00000000000000000000.log"
    deleted = tmp_path / "00000000000000000000.log.deleted"
    source = {
        "kind": "file",
        "path": str(path),
        "start": 0,
        "end": len(data),
        "alsoTry": [str(deleted)],
    }
    deleted.write_bytes(data)
    assert len(_check(dumper, source, data)) == 30
    deleted.unlink()
    assert _jvm_error(dumper, source).startswith(f"{path} was deleted since the query was planned")


# --- the chunked source ---------------------------------------------------------------------


def _chunked_source(
    tmp_path: Path,
    segment: bytes,
    start: int,
    end: int,
    *,
    chunk_size: int = 1500,
    url: str | None = None,
) -> tuple[dict[str, Any], Path]:
    """``segment`` stored as the fsspec plugin stores it (zstd, AES-256-GCM, CRC-32C per
    chunk), every third chunk left uncompressed, and the source of ``[start, end)``; the stored
    object is read from its file, or from ``url`` if given."""
    from tierlog_fsspec.chunks import DATA_OBJECT, ChunkCodec, checksum

    data_key = bytes(range(32))
    codec = ChunkCodec(b"upload-1", compression_level=3, data_key=data_key)
    stored = bytearray()
    chunks = []
    for index, plain_start in enumerate(range(0, len(segment), chunk_size)):
        plain = segment[plain_start : plain_start + chunk_size]
        body, compressed = codec.encode(DATA_OBJECT, index, plain, compress=index % 3 != 2)
        nonce, aad = codec._nonce_and_aad(DATA_OBJECT, index)
        chunks.append(
            {
                "storedStart": len(stored),
                "storedEnd": len(stored) + len(body),
                "plainStart": plain_start,
                "plainEnd": plain_start + len(plain),
                "compression": "zstd" if compressed else "none",
                "nonce": base64.b64encode(nonce).decode(),
                "aad": base64.b64encode(aad).decode(),
                "crc32c": checksum(body),
            }
        )
        stored += body
    path = tmp_path / "segment.chunks"
    path.write_bytes(stored)
    for chunk in chunks:
        chunk["location"] = (
            {"kind": "file", "path": str(path)}
            if url is None
            else {"kind": "http", "url": url, "headers": {}}
        )
    wanted = [c for c in chunks if c["plainEnd"] > start and c["plainStart"] < end]
    source = {
        "kind": "chunked",
        "start": start,
        "end": end,
        "key": base64.b64encode(data_key).decode(),
        "chunks": wanted,
    }
    return source, path


def test_a_chunked_source_is_checked_decrypted_decompressed_and_cut(
    dumper: Dumper, tmp_path: Path
) -> None:
    pytest.importorskip("cryptography")
    pytest.importorskip("zstandard")
    batches = [
        record_batch([spec(i) for i in range(base, base + 10)], base_offset=base)
        for base in range(0, 100, 10)
    ]
    segment = b"".join(batches)
    start = len(batches[0]) + len(batches[1])
    end = len(segment) - len(batches[-1])
    source, path = _chunked_source(tmp_path, segment, start, end)
    assert source["chunks"][0]["plainStart"] < start < source["chunks"][0]["plainEnd"]
    rows = _check(dumper, source, segment[start:end])
    assert [r["offset"] for r in rows] == list(range(20, 90))

    # A damaged stored chunk fails its CRC; a chunk moved elsewhere fails authentication.
    second = source["chunks"][1]
    stored = bytearray(path.read_bytes())
    stored[second["storedStart"] + 5] ^= 0xFF
    path.write_bytes(stored)
    error = _jvm_error(dumper, source)
    assert error.startswith(f"segment seg-7: chunk 1 ({path}): CRC-32C mismatch"), error
    stored[second["storedStart"] + 5] ^= 0xFF
    path.write_bytes(stored)
    second["crc32c"] = None
    second["aad"] = source["chunks"][2]["aad"]
    error = _jvm_error(dumper, source)
    assert error.startswith(f"segment seg-7: chunk 1 ({path}): failed authentication"), error


# --- the http source ------------------------------------------------------------------------


class _Objects(BaseHTTPRequestHandler):
    """Serves ``server.objects`` honouring Range (but under ``/whole/``); ``/flaky`` fails
    twice first, ``/busy`` always answers 429 and ``/forbidden`` 403."""

    def do_GET(self) -> None:
        server: Any = self.server
        path = self.path.split("?")[0]
        server.requests.append((path, self.headers.get("Range")))
        if path == "/forbidden":
            self.send_error(403)
            return
        if path == "/busy":
            self.send_error(429)
            return
        if path == "/flaky" and server.failures < 2:
            server.failures += 1
            self.send_error(503)
            return
        body = server.objects.get(path)
        if body is None:
            self.send_error(404)
            return
        if path.startswith("/whole/"):  # a server that ignores Range
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        first, last = self.headers["Range"].removeprefix("bytes=").split("-")
        part = body[int(first) : int(last) + 1]
        self.send_response(206)
        self.send_header("Content-Length", str(len(part)))
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(body)}")
        self.end_headers()
        self.wfile.write(part)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Objects)
    server.objects = {}
    server.requests = []
    server.failures = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_an_http_source_reads_its_range(dumper: Dumper, http_server: Any) -> None:
    data = _three_batches(Compression.SNAPPY)
    http_server.objects["/bucket/segment"] = b"p" * 77 + data + b"after"
    base = f"http://127.0.0.1:{http_server.server_address[1]}"
    source = {
        "kind": "http",
        "url": f"{base}/bucket/segment?X-Amz-Signature=secret",
        "start": 77,
        "end": 77 + len(data),
        "headers": {"x-tierlog-test": "1"},
    }
    assert len(_check(dumper, source, data, batch_rows=8)) == 30
    assert http_server.requests == [("/bucket/segment", f"bytes=77-{76 + len(data)}")]

    http_server.objects["/whole/segment"] = http_server.objects["/bucket/segment"]
    source["url"] = f"{base}/whole/segment"
    assert len(_check(dumper, source, data)) == 30


def test_http_failures_are_retried_or_named(dumper: Dumper, http_server: Any) -> None:
    data = _three_batches()
    http_server.objects["/flaky"] = data
    base = f"http://127.0.0.1:{http_server.server_address[1]}"
    source = {"kind": "http", "url": f"{base}/flaky", "start": 0, "end": len(data), "headers": {}}
    assert len(_check(dumper, source, data)) == 30
    assert [path for path, _ in http_server.requests] == ["/flaky"] * 3

    for path, status in (("/forbidden", "403"), ("/missing", "404")):
        source = {
            "kind": "http",
            "url": f"{base}{path}?X-Amz-Signature=secret",
            "start": 0,
            "end": 10,
            "headers": {},
        }
        error = _jvm_error(dumper, source)
        assert error.startswith(f"GET {base}{path} ") and f"HTTP {status}" in error, error
        assert "secret" not in error

    http_server.requests.clear()
    source = {"kind": "http", "url": f"{base}/busy?s=secret", "start": 0, "end": 10, "headers": {}}
    error = _jvm_error(dumper, source)
    assert error == f"GET {base}/busy failed 4 times; the last failure: HTTP 429"
    assert [path for path, _ in http_server.requests] == ["/busy"] * 4


def test_a_chunked_source_read_over_http(dumper: Dumper, tmp_path: Path, http_server: Any) -> None:
    pytest.importorskip("cryptography")
    pytest.importorskip("zstandard")
    segment = _every_kind_of_batch(Compression.NONE)
    url = f"http://127.0.0.1:{http_server.server_address[1]}/bucket/chunks?sig=1"
    source, path = _chunked_source(tmp_path, segment, 0, len(segment), chunk_size=4096, url=url)
    http_server.objects["/bucket/chunks"] = path.read_bytes()
    assert len(source["chunks"]) > 3
    assert len(_check(dumper, source, segment)) == 76
    assert len(http_server.requests) == 1  # chunks stored back to back: one GET
