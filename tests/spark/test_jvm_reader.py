"""The JVM reader against the Python reader: the same rows for the same query, every column.

Tiered data is made once per module by real clusters: one tiering plain segments to
``file://`` (every codec, headers, null keys and values, LogAppendTime, transactions committed
and aborted, a compacted upload with offset gaps, records left local for ``includeLocal``), one
whose partition changed leaders mid tiering, one tiering chunked segments compressed and
encrypted by the fsspec plugin, and two tiering to S3 (moto's server, read by the JVM through
presigned ranges): plain, and chunked and encrypted. Every query runs with
``spark.tierlog.reader`` = python, then jvm, and the sorted rows must be equal (and not empty).

The planner the JVM asks is also checked on its own, JSON in and out, without Spark: the bytes
and bounds its tasks name decode, in Python, to exactly the rows the Python reader returns.
"""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.model import (
    TopicIdPartition,
)
from tierlog.records import Compression, RecordBatchBuilder, iter_batches
from tierlog.server import protocol as p
from tierlog_spark.decode import SCHEMA

from tests.server.conftest import Client
from tests.spark.conftest import jvm_reader_buildable, require_jvm_reader
from tests.spark.test_datasource import _Producer, _wait_tiered
from tests.spark.tiered import spark_settings, upload_again

pytest.importorskip("tierlog_fsspec")

#: Every test here runs both readers itself.
pytestmark = pytest.mark.one_reader

MIXED, APPEND, TXNS, GAPS, SEALED, MOVED = "mixed", "appended", "txns", "gaps", "sealed", "moved"
CODECS = list(Compression)
BUCKET = "tierlog-jvm"
READER_CONF = "spark.tierlog.reader"
COLUMNS = tuple(SCHEMA.names)


@attrs.frozen
class Tiered:
    """Where a cluster left its data: the runtime settings and the broker's log dir."""

    settings: dict[str, str]
    log_dir: Path

    def options(self, **extra: str) -> dict[str, str]:
        options = {f"tierlog.{key}": value for key, value in self.settings.items()}
        options["log.dirs"] = str(self.log_dir)
        options.update(extra)
        return options


# --- tiered data ------------------------------------------------------------------------------


def _compacted(data: bytes) -> bytes:
    """``data``'s batches as Kafka's cleaner leaves them: every other record gone (the last of
    each batch kept), base offsets and sequences as they were."""
    out = bytearray()
    for batch in iter_batches(data):
        if batch.is_control:
            out += batch.raw
            continue
        records = list(batch.records())
        builder = RecordBatchBuilder(
            batch.compression,
            base_offset=batch.base_offset,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            is_transactional=batch.is_transactional,
            timestamp_type=batch.timestamp_type,
            partition_leader_epoch=batch.partition_leader_epoch,
        )
        for index, record in enumerate(records):
            if index % 2 == 1 or index == len(records) - 1:
                builder.append(
                    record.timestamp, record.key, record.value, record.headers, offset=record.offset
                )
        out += builder.build()
    return bytes(out)


def _upload_compacted(cluster: EmbeddedCluster, tip: TopicIdPartition, work: Path) -> None:
    """Uploads a compacted copy of a tiered segment under a new id, superseding it, as a copy
    task retried after compaction would."""
    upload_again(cluster, tip, work, rewrite=_compacted)


def _transactions(producer: _Producer, client: Client, topic: str) -> None:
    """Committed, aborted, an abort several segments later, and one still open at the end."""
    producer.send(topic, 0, 3)
    producer.send(topic, 0, 3, producer_id=1000, compression=Compression.ZSTD)
    assert client.end_transaction(topic, 0, 1000, commit=True) == p.NONE
    producer.send(topic, 0, 3, producer_id=2000, compression=Compression.GZIP)
    assert client.end_transaction(topic, 0, 2000, commit=False) == p.NONE
    producer.send(topic, 0, 4, producer_id=3000)
    for _ in range(8):
        producer.send(topic, 0, 3)
    producer.send(topic, 0, 2, producer_id=3000)
    assert client.end_transaction(topic, 0, 3000, commit=False) == p.NONE
    for _ in range(8):
        producer.send(topic, 0, 3)
    producer.send(topic, 0, 3, producer_id=5000)  # open: neither marker nor records tiered


def _mixed(producer: _Producer, topic: str, batches: int) -> None:
    """Two partitions of batches in every codec, half with headers."""
    for partition in range(2):
        for n in range(batches):
            producer.send(
                topic, partition, 3 + n % 4, compression=CODECS[n % 5], headers=n % 2 == 0
            )


def _s3_settings(endpoint: str, prefix: str) -> dict[str, str]:
    """Runtime settings tiering to a new prefix of a bucket on moto's server."""
    import s3fs

    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
    if not fs.exists(BUCKET):
        fs.mkdir(BUCKET)
    return {
        "rsm.config.url": f"s3://{BUCKET}/{prefix}",
        "rsm.config.storage.endpoint_url": endpoint,
        # Credentials in the settings, not the environment: Spark's Python workers read too.
        "rsm.config.storage.key": "testing",
        "rsm.config.storage.secret": "testing",
    }


TIERED = {"remote_storage_enable": "true", "local_retention_bytes": "1"}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    """Plain segments on ``file://``; see the module doc."""
    root = tmp_path_factory.mktemp("plain")
    settings = spark_settings(root)
    with EmbeddedCluster(1, root / "data", settings) as cluster:
        client = Client(cluster)
        client.create(MIXED, 2, segment_bytes="2048", index_interval_bytes="256", **TIERED)
        client.create(
            APPEND, 1, segment_bytes="1024", message_timestamp_type="LogAppendTime", **TIERED
        )
        client.create(TXNS, 1, segment_bytes="1024", **TIERED)
        client.create(GAPS, 1, segment_bytes="1024", **TIERED)
        producer = _Producer(client, {})
        _mixed(producer, MIXED, 15)
        for n in range(8):
            producer.send(APPEND, 0, 4, compression=CODECS[n % 5], headers=n % 3 == 0)
        _transactions(producer, client, TXNS)
        for n in range(10):
            producer.send(GAPS, 0, 5, compression=CODECS[n % 5], headers=True)
        for topic, partition in ((MIXED, 0), (MIXED, 1), (APPEND, 0), (TXNS, 0), (GAPS, 0)):
            _wait_tiered(cluster, topic, partition)
        image = cluster.controller.image().topic(GAPS)
        assert image is not None
        _upload_compacted(cluster, TopicIdPartition.of(image.topic_id, GAPS, 0), root / "copy")
        for topic, partition in ((MIXED, 0), (TXNS, 0)):
            producer.send(topic, partition, 3)  # stays local, for includeLocal
    return Tiered(settings, root / "data" / "broker-0" / "logs")


@pytest.fixture(scope="module")
def plain_s3(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str) -> Tiered:
    """Plain segments on S3 (moto's server)."""
    root = tmp_path_factory.mktemp("plain-s3")
    settings = spark_settings(root, **_s3_settings(moto_endpoint, "plain"))
    with EmbeddedCluster(1, root / "data", settings) as cluster:
        client = Client(cluster)
        client.create(MIXED, 2, segment_bytes="2048", index_interval_bytes="256", **TIERED)
        _mixed(_Producer(client, {}), MIXED, 12)
        for partition in range(2):
            _wait_tiered(cluster, MIXED, partition)
    return Tiered(settings, root / "data" / "broker-0" / "logs")


def _sealed(root: Path, **extra: str) -> Tiered:
    """Segments the fsspec plugin stored in chunks, zstd-compressed and encrypted."""
    key = base64.b64encode(bytes(range(32))).decode()
    settings = spark_settings(
        root,
        **{
            "rsm.config.chunk.size": "4096",
            "rsm.config.compression": "zstd",
            "rsm.config.encryption.keys": f"ring1:{key}",
            **extra,
        },
    )
    with EmbeddedCluster(1, root / "data", settings) as cluster:
        client = Client(cluster)
        client.create(SEALED, 2, segment_bytes="12000", index_interval_bytes="256", **TIERED)
        producer = _Producer(client, {})
        _mixed(producer, SEALED, 30)
        producer.send(SEALED, 0, 3, producer_id=2000)
        assert client.end_transaction(SEALED, 0, 2000, commit=False) == p.NONE
        for _ in range(30):
            producer.send(SEALED, 0, 3)
        for partition in range(2):
            _wait_tiered(cluster, SEALED, partition)
    return Tiered(settings, root / "data" / "broker-0" / "logs")


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    return _sealed(tmp_path_factory.mktemp("sealed"))


@pytest.fixture(scope="module")
def sealed_s3(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str) -> Tiered:
    return _sealed(tmp_path_factory.mktemp("sealed-s3"), **_s3_settings(moto_endpoint, "sealed"))


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    """A partition whose leader was killed mid tiering; the new leader tiered the rest."""
    from tierlog.testing import Scenario

    root = tmp_path_factory.mktemp("moved")
    settings = spark_settings(
        root, **{"replica.fetch.backoff.ms": "50", "replica.fetch.wait.max.ms": "100"}
    )
    values = [b"first-%05d-" % n + bytes(80) for n in range(120)]
    with Scenario(root / "scenario", settings, brokers=2, timeout_s=60.0) as scenario:
        scenario.create_topic(
            MOVED, replication_factor=2, segment_bytes=2048, local_retention_bytes=1
        )
        scenario.produce(MOVED, 0, values).expect_tiered(MOVED, 0)
        old = scenario.leader(MOVED, 0)
        scenario.leader_change(MOVED, 0, clean=False)
        survivor = scenario.leader(MOVED, 0)
        scenario.produce(MOVED, 0, [v.replace(b"first", b"later") for v in values])
        scenario.expect_tiered(MOVED, 0)
        scenario.start_broker(old).expect_caught_up(MOVED, 0, old)
        log_dir = Path(scenario.cluster.broker_config(survivor).get_list("log.dirs")[0])
    return Tiered(settings, log_dir)


# --- the planner, JSON in and out -------------------------------------------------------------


def _planner() -> Any:
    from tierlog_spark.jvm.bridge import Planner

    return Planner()


def _ask(method: str, request: dict[str, Any]) -> dict[str, Any]:
    """One call as the JVM makes it: a JSON string in, a JSON string out."""
    answer = json.loads(getattr(_planner(), method)(json.dumps(request)))
    assert isinstance(answer, dict)
    return answer


def _python_rows(options: dict[str, str], filters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """What the Python reader reads for ``options``, run in this process (no Spark)."""
    from tierlog_spark.datasource import TierlogReader, spark_schema
    from tierlog_spark.options import ReadOptions

    reader = TierlogReader(ReadOptions.from_options(options), spark_schema())
    assert reader.pushFilters(list(filters)) == []
    rows = []
    for partition in reader.partitions():
        for batch in reader.read(partition):
            rows.extend(tuple(row.values()) for row in batch.to_pylist())
    return sorted(rows, key=repr)


def _decoded(tasks: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The rows the JVM reader must return for ``tasks``: each range's bytes decoded in Python
    with the range's bounds."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from tierlog.location_reader import read_location
    from tierlog.locations import SegmentLocation
    from tierlog_spark.datasource import spark_schema
    from tierlog_spark.decode import decode_segment

    target = to_arrow_schema(spark_schema(), timezone="UTC")
    rows = []
    for task in tasks:
        for planned in task["ranges"]:
            source = planned["source"]
            if planned["segmentId"].startswith("local:"):  # a broker's segment file
                with open(source["path"], "rb") as file:
                    file.seek(source["start"])
                    data = file.read(source["end"] - source["start"])
            else:
                data = read_location(SegmentLocation.from_json(source))
            for batch in decode_segment(
                data,
                topic=planned["topic"],
                partition=planned["partition"],
                segment_id=planned["segmentId"],
                start_offset=planned["firstOffset"],
                end_offset=planned["lastOffset"],
                min_timestamp=planned["minTimestamp"],
                max_timestamp=planned["maxTimestamp"],
                aborted=[tuple(txn) for txn in planned["aborted"]],
                read_committed=planned["readCommitted"],
            ):
                rows.extend(
                    tuple(row.values())
                    for row in batch.select(target.names).cast(target).to_pylist()
                )
    return sorted(rows, key=repr)


@pytest.mark.parametrize(
    ("fixture", "extra"),
    [
        ("plain", {"topics": f"{MIXED},{APPEND},{GAPS}"}),
        ("plain", {"topics": TXNS, "isolation.level": "read_committed"}),
        ("plain", {"topics": TXNS, "isolation.level": "read_committed", "includeLocal": "true"}),
        ("plain", {"topics": MIXED, "maxBytesPerTask": "600", "startingOffset": "7"}),
        ("sealed", {"topics": SEALED, "maxBytesPerTask": "900"}),
        ("sealed", {"topics": SEALED, "isolation.level": "read_committed"}),
        pytest.param("plain_s3", {"topics": f"{MIXED},{GAPS}"}, marks=pytest.mark.s3),
        pytest.param(
            "sealed_s3", {"topics": SEALED, "maxBytesPerTask": "900"}, marks=pytest.mark.s3
        ),
    ],
    ids=[
        "plain",
        "committed",
        "committed-local",
        "split",
        "sealed-split",
        "sealed-committed",
        "plain-s3",
        "sealed-s3",
    ],
)
def test_the_planned_tasks_decode_to_the_python_readers_rows(
    request: pytest.FixtureRequest, fixture: str, extra: dict[str, str]
) -> None:
    tiered: Tiered = request.getfixturevalue(fixture)
    options = tiered.options(**extra)
    answer = _ask("plan", {"options": options, "filters": [], "columns": list(COLUMNS)})
    assert "error" not in answer, answer
    expected = _python_rows(options)
    assert expected
    assert _decoded(answer["tasks"]) == expected
    ranges = [r for task in answer["tasks"] for r in task["ranges"]]
    remote = [r["source"] for r in ranges if not r["segmentId"].startswith("local:")]
    where = "http" if fixture.endswith("_s3") else "file"
    if fixture.startswith("sealed"):
        assert {s["kind"] for s in remote} == {"chunked"}
        assert {c["location"]["kind"] for s in remote for c in s["chunks"]} == {where}
        assert all(s["key"] for s in remote)
    else:
        assert {s["kind"] for s in remote} == {where}


def test_read_committed_ranges_carry_the_aborted_transactions_found_on_the_driver(
    plain: Tiered,
) -> None:
    committed = _ask(
        "plan", {"options": plain.options(topics=TXNS, **{"isolation.level": "read_committed"})}
    )
    aborted = {
        txn[0] for task in committed["tasks"] for r in task["ranges"] for txn in r["aborted"]
    }
    assert aborted == {2000, 3000}
    everything = _ask("plan", {"options": plain.options(topics=TXNS)})
    assert all(
        not r["aborted"] and not r["readCommitted"]
        for t in everything["tasks"]
        for r in t["ranges"]
    )


def test_local_ranges_read_the_segment_file_or_its_deleted_rename(plain: Tiered) -> None:
    answer = _ask("plan", {"options": plain.options(topics=MIXED, includeLocal="true")})
    local = [r for t in answer["tasks"] for r in t["ranges"] if r["segmentId"].startswith("local:")]
    assert local
    for planned in local:
        source = planned["source"]
        assert source["kind"] == "file" and Path(source["path"]).is_file()
        assert source["alsoTry"] == [source["path"] + ".deleted"]
        assert 0 <= source["start"] < source["end"] <= Path(source["path"]).stat().st_size


def test_filters_are_pushed_as_the_python_reader_pushes_them(plain: Tiered) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

    options = plain.options(topics=f"{MIXED},{TXNS}")
    rows = _python_rows(plain.options(topics=MIXED))
    moments = sorted(row[3] for row in rows if row[1] == 1 and row[2] >= 4)
    moment_us = int(moments[len(moments) // 2].timestamp() * 1_000_000)
    filters = [
        {"op": "EqualTo", "column": "topic", "value": MIXED},
        {"op": "In", "column": "partition", "values": [1]},
        {"op": "GreaterThanOrEqual", "column": "offset", "value": 4},
        {"op": "LessThan", "column": "timestamp", "value": {"timestamp_us": moment_us}},
        {"op": "IsNotNull", "column": "value"},
        {"op": "Not", "child": {"op": "EqualTo", "column": "offset", "value": 5}},
        {"op": "StringStartsWith", "column": "topic", "value": "mi"},
        {"op": "Between", "column": "offset", "value": 5},
    ]
    pushed = _ask("push", {"options": options, "filters": filters})
    assert pushed == {"rest": [4, 5, 6, 7]}
    answer = _ask("plan", {"options": options, "filters": filters[:4], "columns": ["offset"]})
    moment = datetime.datetime.fromtimestamp(moment_us / 1e6, datetime.UTC)
    expected = _python_rows(
        options,
        [
            EqualTo(("topic",), MIXED),
            In(("partition",), (1,)),
            GreaterThanOrEqual(("offset",), 4),
            LessThan(("timestamp",), moment),
        ],
    )
    assert expected and all(row[1] == 1 and row[2] >= 4 and row[3] < moment for row in expected)
    assert _decoded(answer["tasks"]) == expected


def test_check_says_which_reader_and_why(plain: Tiered, sealed: Tiered) -> None:
    answer = _ask("check", {"options": plain.options(topics=MIXED)})
    assert answer["reader"] == "jvm" and "fsspec" in answer["why"]
    answer = _ask("check", {"options": sealed.options(topics=SEALED)})
    assert answer["reader"] == "jvm", answer
    # A stream's options are the JVM table's too (a stream keeps the Python reader).
    answer = _ask("check", {"options": plain.options(topics=MIXED, maxSegmentsPerTrigger="1")})
    assert answer["reader"] == "jvm"
    # Options nothing accepts are left to the Python source, which names the problem.
    answer = _ask("check", {"options": plain.options(topics=MIXED, startingOffset="ten")})
    assert answer == {"reader": "python", "why": "option 'startingoffset': 'ten' is not an integer"}


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    """Segments tiered to fsspec's ``memory://`` (this process's memory): no path or URL to
    give, so only the plugin, in this process, can read them."""
    root = tmp_path_factory.mktemp("memory")
    settings = spark_settings(root, **{"rsm.config.url": "memory://tierlog-jvm/remote"})
    with EmbeddedCluster(1, root / "data", settings) as cluster:
        client = Client(cluster)
        client.create(MIXED, 1, segment_bytes="1024", **TIERED)
        producer = _Producer(client, {})
        for _ in range(6):
            producer.send(MIXED, 0, 4)
        _wait_tiered(cluster, MIXED, 0)
    return Tiered(settings, root / "data" / "broker-0" / "logs")


def test_storage_without_locations_is_read_by_the_python_reader(in_memory: Tiered) -> None:
    options = in_memory.options(topics=MIXED)
    answer = _ask("check", {"options": options})
    assert answer["reader"] == "python"
    assert "storage plugin 'fsspec' cannot locate the bytes of segment" in answer["why"]
    # Planned anyway (spark.tierlog.reader = jvm does not plan after such an answer):
    error = _ask("plan", {"options": options})["error"]
    assert error["type"] == "SegmentNotLocatedError"
    assert "set spark.tierlog.reader to python" in error["message"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option 'topics' is required"),
        ({"topics": MIXED, "isolation.level": "serializable"}, "option 'isolation.level'"),
        ({"topics": MIXED, "maxSegmentsPerTrigger": "1"}, "it is an option of spark.readStream"),
    ],
)
def test_plan_errors_carry_the_python_readers_message(
    plain: Tiered, options: dict[str, str], message: str
) -> None:
    answer = _ask("plan", {"options": plain.options(**options), "filters": []})
    assert answer["error"]["type"] == "TierlogOptionError"
    assert message in answer["error"]["message"]


def test_malformed_requests_are_answered_with_an_error_not_an_exception() -> None:
    planner = _planner()
    for method in ("check", "push", "plan"):
        for request in ("not json", "[1]", json.dumps({"options": {"topics": 1}})):
            answer = json.loads(getattr(planner, method)(request))
            assert set(answer) == {"error"} and answer["error"]["message"], (method, request)


# --- both readers in Spark --------------------------------------------------------------------


@pytest.fixture
def jvm(spark: Any) -> Iterator[Any]:
    """The shared session, with the JVM reader installed (skipped without a JDK)."""
    require_jvm_reader(spark)
    yield spark
    spark.conf.unset(READER_CONF)


def _plain(value: Any) -> Any:
    """A collected value as a comparable plain value (bytes, tuples)."""
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, list):
        return tuple(_plain(item) for item in value)
    if hasattr(value, "asDict"):
        return tuple(_plain(item) for item in value)
    return value


def _load(spark: Any, reader: str, options: dict[str, str], schema: str | None = None) -> Any:
    spark.conf.set(READER_CONF, reader)
    frame = spark.read.format("tierlog").options(**options)
    if schema is not None:
        frame = frame.schema(schema)
    return frame.load()


def _scan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _collect(spark: Any, reader: str, options: dict[str, str], **query: Any) -> list[Any]:
    df = _load(spark, reader, options, query.get("schema"))
    if query.get("where"):
        df = df.where(query["where"])
    if query.get("select"):
        df = df.select(*query["select"])
    rows = [tuple(_plain(value) for value in row) for row in df.collect()]
    assert ("TierlogScan" in _scan(df)) == (reader == "jvm"), _scan(df)
    return sorted(rows, key=repr)


def _same_rows(spark: Any, options: dict[str, str], **query: Any) -> list[Any]:
    python = _collect(spark, "python", options, **query)
    jvm = _collect(spark, "jvm", options, **query)
    assert python, "the query reads something"
    assert jvm == python
    return python


def test_every_column_of_every_codec_with_headers_and_gaps(jvm: Any, plain: Tiered) -> None:
    rows = _same_rows(jvm, plain.options(topics=f"{MIXED},{APPEND},{GAPS}"))
    assert [r[0] for r in rows].count(APPEND) > 0
    assert {r[4] for r in rows} == {"CreateTime", "LogAppendTime"}
    assert any(r[7] for r in rows) and any(r[5] is None for r in rows)
    gaps = sorted(r[2] for r in rows if r[0] == GAPS)
    assert any(b - a > 1 for a, b in itertools.pairwise(gaps)), "the compacted upload"


def test_projections_in_any_order(jvm: Any, plain: Tiered) -> None:
    options = plain.options(topics=f"{MIXED},{TXNS}")
    _same_rows(jvm, options, select=["value", "offset"])
    _same_rows(jvm, options, select=["headers", "segment_id", "producer_id", "sequence"])
    _same_rows(jvm, options, schema="timestamp timestamp, partition int, key binary")
    counts = [_load(jvm, reader, options).count() for reader in ("python", "jvm")]
    assert counts[0] == counts[1] > 0


def test_transactions_read_committed_and_uncommitted(jvm: Any, plain: Tiered) -> None:
    committed = _same_rows(jvm, plain.options(topics=TXNS, **{"isolation.level": "read_committed"}))
    everything = _same_rows(jvm, plain.options(topics=TXNS))
    assert len(committed) < len(everything)
    assert {r[9] for r in everything} >= {1000, 2000, 3000}
    assert {r[9] for r in committed} & {2000, 3000} == set()


def test_filters_bounds_and_split_tasks(jvm: Any, plain: Tiered) -> None:
    options = plain.options(topics=MIXED, maxBytesPerTask="600")
    _same_rows(jvm, options)
    _same_rows(jvm, options, where="partition = 1 and offset between 5 and 40")
    _same_rows(jvm, options, where="key is null or value is null")
    bounded = plain.options(topics=MIXED, startingOffset="3", endingOffset="30")
    rows = _same_rows(jvm, bounded)
    assert {r[2] for r in rows} <= set(range(3, 30))
    middle = rows[len(rows) // 2][3]
    _same_rows(jvm, bounded, where=f"timestamp >= timestamp'{middle.isoformat()}'")


def test_include_local(jvm: Any, plain: Tiered) -> None:
    rows = _same_rows(jvm, plain.options(topics=f"{MIXED},{TXNS}", includeLocal="true"))
    assert any(r[13].startswith("local:") for r in rows)
    committed = plain.options(
        topics=TXNS, includeLocal="true", **{"isolation.level": "read_committed"}
    )
    _same_rows(jvm, committed)


def test_encrypted_chunked_segments(jvm: Any, sealed: Tiered) -> None:
    _same_rows(jvm, sealed.options(topics=SEALED, maxBytesPerTask="900"))
    _same_rows(jvm, sealed.options(topics=SEALED, **{"isolation.level": "read_committed"}))


@pytest.mark.s3
def test_s3_through_presigned_ranges(jvm: Any, plain_s3: Tiered, sealed_s3: Tiered) -> None:
    _same_rows(jvm, plain_s3.options(topics=f"{MIXED},{GAPS}", maxBytesPerTask="600"))
    _same_rows(jvm, sealed_s3.options(topics=SEALED, **{"isolation.level": "read_committed"}))


def test_leader_changes_mid_tiering(jvm: Any, moved: Tiered) -> None:
    rows = _same_rows(jvm, moved.options(topics=MOVED))
    assert len({r[8] for r in rows}) >= 2, "both leaders' epochs"


# --- reader choice ----------------------------------------------------------------------------


def test_the_python_conf_reads_through_the_python_source(jvm: Any, plain: Tiered) -> None:
    df = _load(jvm, "python", plain.options(topics=GAPS))
    assert df.count() > 0
    assert "TierlogScan" not in _scan(df)


def test_a_bad_reader_conf_is_refused_naming_the_key_and_values(jvm: Any, plain: Tiered) -> None:
    with pytest.raises(Exception, match=r"spark\.tierlog\.reader") as caught:
        _load(jvm, "fastest", plain.options(topics=GAPS)).collect()
    assert all(word in str(caught.value) for word in ("auto", "jvm", "python"))


def test_without_the_planner_reads_fall_back_to_the_python_source(jvm: Any, plain: Tiered) -> None:
    from tierlog_spark.jvm.bridge import install, installed, uninstall

    expected = _collect(jvm, "jvm", plain.options(topics=GAPS))
    uninstall(jvm)
    try:
        assert not installed(jvm)
        assert _collect(jvm, "python", plain.options(topics=GAPS)) == expected
        jvm.conf.set(READER_CONF, "auto")
        df = jvm.read.format("tierlog").options(**plain.options(topics=GAPS)).load()
        assert "TierlogScan" not in _scan(df)
        assert sorted((tuple(_plain(v) for v in r) for r in df.collect()), key=repr) == expected
    finally:
        assert install(jvm)
    assert installed(jvm)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option 'topics' is required"),
        ({"topics": MIXED, "startingOffset": "ten"}, "'startingoffset': 'ten' is not an integer"),
        ({"topics": MIXED, "isolation.level": "serializable"}, "option 'isolation.level'"),
        ({"topics": MIXED, "maxRecordsPerTrigger": "5"}, r"it is an option of spark\.readStream"),
        ({"topics": MIXED, "rlmm.num.partitions": "2"}, r"rlmm\.num\.partitions"),
    ],
)
def test_bad_options_get_the_same_message_from_both_readers(
    jvm: Any, plain: Tiered, options: dict[str, str], message: str
) -> None:
    for reader in ("python", "jvm"):
        with pytest.raises(Exception, match=message):
            _load(jvm, reader, plain.options(**options)).collect()


# --- tierlog spark check ----------------------------------------------------------------------


def test_the_check_command_says_which_reader_reads_a_runtimes_data(
    plain: Tiered, tmp_path: Path
) -> None:
    from tierlog_spark.jvm.build import find_javac

    buildable = jvm_reader_buildable()
    config = tmp_path / "runtime.properties"
    config.write_text(
        "".join(f"{key}={value}\n" for key, value in plain.settings.items())
        + f"log.dirs={plain.log_dir}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    env["PYSPARK_PYTHON"] = sys.executable
    command = [sys.executable, "-m", "tierlog", "spark", "check", "--master", "local[1]"]
    done = subprocess.run(
        [*command, "--config", str(config), "--topics", MIXED],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    if find_javac() is None:
        assert "JDK: none (no javac in JAVA_HOME/bin or on PATH)" in lines
    if not buildable:
        assert any(line.startswith("JVM reader: not installed") for line in lines)
        return
    assert f"JDK: {find_javac()}" in lines
    assert any(line.startswith("JVM reader jar: ") and line.endswith(".jar") for line in lines)
    assert "JVM reader: installed (spark.tierlog.reader = auto)" in lines
    assert any(
        line.startswith(f"reader for {config}: jvm: storage plugin 'fsspec' locates")
        for line in lines
    ), lines


def test_a_users_builder_gets_the_jar_added_to_its_spark_jars() -> None:
    from pyspark.sql import SparkSession
    from tierlog_spark.session import add_jvm_reader, jvm_reader_jar

    jar = jvm_reader_jar()
    builder = add_jvm_reader(SparkSession.builder.config("spark.jars", "/opt/other.jar"))
    expected = "/opt/other.jar" if jar is None else f"/opt/other.jar,{jar}"
    assert builder._options["spark.jars"] == expected
    assert add_jvm_reader(builder)._options["spark.jars"] == expected  # once
    connect = add_jvm_reader(SparkSession.builder.remote("sc://127.0.0.1:1"))
    assert "spark.jars" not in connect._options
