"""The JVM side of ``format("tierlog")``: lookup, reader choice, schema, pushdown and planning.

The planner here is a small Py4J callback answering with hand-made plans, so that what the JVM
asks and does with the answers can be checked exactly; the rows of a JVM read are compared with
what ``decode_segment`` gives for the same bytes. Reads the JVM hands to the Python source run
against a real tiered broker.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tierlog.records import Compression, RecordBatchBuilder, TimestampType
from tierlog_spark.decode import SCHEMA

from tests.spark.tiered import Record, TieredCluster, tiered_cluster

pytest.importorskip("tierlog_fsspec")
#: Each test here chooses its reader itself.
pytestmark = pytest.mark.one_reader

READER_KEY = "spark.tierlog.reader"
PLANNER_INTERFACE = "io.tierlog.spark.Planner"
COLUMNS = SCHEMA.names
T0 = 1_700_000_000_000

Answer = Callable[[dict[str, Any]], dict[str, Any]]


class RecordingPlanner:
    """A planner the JVM calls through Py4J: records every request and answers with the
    functions a test sets (by default: the JVM may read, nothing is pushed, nothing planned)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.on_check: Answer = lambda request: {"reader": "jvm", "why": "test planner"}
        self.on_push: Answer = lambda request: {"rest": list(range(len(request["filters"])))}
        self.on_plan: Answer = lambda request: {"tasks": []}

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [request for name, request in self.requests if name == method]

    def _answer(self, method: str, request: str, answer: Answer) -> str:
        parsed = json.loads(request)
        self.requests.append((method, parsed))
        return json.dumps(answer(parsed))

    def check(self, request: str) -> str:
        return self._answer("check", request, self.on_check)

    def push(self, request: str) -> str:
        return self._answer("push", request, self.on_push)

    def plan(self, request: str) -> str:
        return self._answer("plan", request, self.on_plan)

    class Java:
        implements = [PLANNER_INTERFACE]


@pytest.fixture
def jvm_spark(spark: Any) -> Iterator[Any]:
    """The shared session, which carries the jar and registers the Python source beside the
    JVM provider; tests here install their own planner, so the real one is put back after."""
    from tierlog_spark.jvm.bridge import install, installed

    from tests.spark.conftest import require_jvm_reader

    require_jvm_reader(spark)
    yield spark
    if not installed(spark):
        install(spark)


def _bridge(spark: Any) -> Any:
    return spark.sparkContext._jvm.io.tierlog.spark.PlannerBridge


@pytest.fixture
def planner(jvm_spark: Any) -> Iterator[RecordingPlanner]:
    """A recording planner installed in the JVM for one test."""
    recording = RecordingPlanner()
    bridge = _bridge(jvm_spark)
    bridge.install(recording)
    jvm_spark.conf.unset(READER_KEY)
    try:
        yield recording
    finally:
        bridge.uninstall()
        jvm_spark.conf.unset(READER_KEY)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredCluster]:
    """A broker with a topic whose records are tiered, for the reads the JVM hands to Python."""
    with tiered_cluster(tmp_path_factory.mktemp("jvm-provider")) as cluster:
        cluster.create("orders", 1)
        cluster.produce("orders", 0, batches=12)
        cluster.wait_tiered("orders", 0)
        yield cluster


def _tiered_options(reader: Any, tiered: TieredCluster) -> Any:
    for key, value in tiered.settings.items():
        reader = reader.option(f"tierlog.{key}", value)
    return reader.option("log.dirs", str(tiered.log_dir)).option("topics", "orders")


def _records(rows: list[Any]) -> list[Record]:
    return sorted((row.topic, row.partition, row.offset, bytes(row.value), row.ts) for row in rows)


def _read_tiered(spark: Any, tiered: TieredCluster) -> list[Record]:
    df = _tiered_options(spark.read.format("tierlog"), tiered).load()
    return _records(
        df.selectExpr(
            "topic", "partition", "offset", "value", "unix_millis(timestamp) AS ts"
        ).collect()
    )


def _scan_description(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


# --- lookup ------------------------------------------------------------------------------------


def test_format_tierlog_is_the_jvm_provider_with_the_python_sources_schema(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    from tierlog_spark.datasource import spark_schema

    df = jvm_spark.read.format("tierlog").option("topics", "orders").option("minTasks", "3").load()

    assert df.schema == spark_schema()
    assert df.collect() == []
    assert "TierlogScan" in _scan_description(df)
    (check,) = planner.calls("check")
    assert check == {"options": {"topics": "orders", "minTasks": "3"}}
    (plan,) = planner.calls("plan")
    assert plan == {
        "options": {"topics": "orders", "minTasks": "3"},
        "filters": [],
        "columns": COLUMNS,
    }


def test_the_provider_class_is_registered_under_the_short_name(jvm_spark: Any) -> None:
    jvm = jvm_spark.sparkContext._jvm
    provider = jvm.io.tierlog.spark.TierlogProvider()
    assert provider.shortName() == "tierlog"
    found = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
        "tierlog",
        jvm_spark._jsparkSession.sessionState().conf(),
    )
    assert found.getName() == "io.tierlog.spark.TierlogProvider"


# --- reader choice -----------------------------------------------------------------------------


def test_reader_python_hands_the_read_to_the_python_source(
    jvm_spark: Any, planner: RecordingPlanner, tiered: TieredCluster
) -> None:
    jvm_spark.conf.set(READER_KEY, "python")
    assert _read_tiered(jvm_spark, tiered) == tiered.tiered_records("orders", 0)
    assert planner.requests == []


def test_auto_hands_the_read_to_python_when_the_planner_says_the_jvm_cannot(
    jvm_spark: Any, planner: RecordingPlanner, tiered: TieredCluster
) -> None:
    planner.on_check = lambda request: {"reader": "python", "why": "no locate hook"}
    assert _read_tiered(jvm_spark, tiered) == tiered.tiered_records("orders", 0)
    assert [name for name, _ in planner.requests] == ["check"]


def test_reader_jvm_fails_naming_why_the_jvm_cannot_read(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    planner.on_check = lambda request: {"reader": "python", "why": "the storage has no locate hook"}
    jvm_spark.conf.set(READER_KEY, "jvm")
    df = jvm_spark.read.format("tierlog").option("topics", "orders").load()
    with pytest.raises(
        Exception,
        match=r"spark\.tierlog\.reader is 'jvm', but the JVM reader cannot "
        "read this: the storage has no locate hook",
    ):
        df.collect()


def test_without_a_planner_auto_reads_through_python_and_jvm_fails(
    jvm_spark: Any, planner: RecordingPlanner, tiered: TieredCluster
) -> None:
    _bridge(jvm_spark).uninstall()
    assert _read_tiered(jvm_spark, tiered) == tiered.tiered_records("orders", 0)
    jvm_spark.conf.set(READER_KEY, "jvm")
    with pytest.raises(Exception, match="no tierlog planner is installed"):
        jvm_spark.read.format("tierlog").option("topics", "orders").load().collect()


def test_a_bad_reader_setting_names_the_key_and_the_values_it_takes(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    from pyspark.errors import IllegalArgumentException

    jvm_spark.conf.set(READER_KEY, "fast")
    df = jvm_spark.read.format("tierlog").option("topics", "orders").load()
    with pytest.raises(
        IllegalArgumentException,
        match=r"spark\.tierlog\.reader is 'fast', not one of auto, jvm, python",
    ):
        df.collect()


# --- schema ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        "",
        "offset BIGINT, size INT",
        "offset INT",
        "headers ARRAY<STRING>",
        "value BINARY, offset BIGINT, value BINARY",
    ],
)
def test_a_user_schema_that_is_no_projection_fails_as_with_the_python_source(
    jvm_spark: Any, planner: RecordingPlanner, schema: str
) -> None:
    from pyspark.errors import IllegalArgumentException
    from pyspark.sql.types import StructType
    from tierlog_spark.datasource import _check_schema

    struct = StructType.fromDDL(schema) if schema else StructType([])
    with pytest.raises(Exception) as python_error:
        _check_schema(struct)
    with pytest.raises(IllegalArgumentException) as jvm_error:
        jvm_spark.read.format("tierlog").schema(struct).option("topics", "orders").load()
    assert str(python_error.value) in str(jvm_error.value)


def test_a_user_schema_picks_and_orders_the_columns_planned(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    schema = "value BINARY, offset BIGINT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    df = jvm_spark.read.format("tierlog").schema(schema).option("topics", "orders").load()

    assert df.columns == ["value", "offset", "headers"]
    assert df.collect() == []
    assert planner.calls("plan")[0]["columns"] == ["value", "offset", "headers"]


def test_only_the_columns_a_query_uses_are_planned(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    df = jvm_spark.read.format("tierlog").option("topics", "orders").load()

    assert df.select("value", "offset").collect() == []
    assert df.selectExpr("headers.key").collect() == []
    assert df.count() == 0
    columns = [request["columns"] for request in planner.calls("plan")]
    assert columns == [["offset", "value"], ["headers"], []]


# --- pushdown ----------------------------------------------------------------------------------


def test_filters_go_to_the_planner_which_keeps_what_it_applies(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    from pyspark.sql import functions as F

    # The planner applies the filters on partition and offset; Spark keeps the others.
    planner.on_push = lambda request: {
        "rest": [
            i
            for i, f in enumerate(request["filters"])
            if f.get("column") not in ("partition", "offset")
        ]
    }
    moment = datetime.datetime(2024, 3, 1, 12, 0, 0, 250_001, tzinfo=datetime.UTC)
    df = (
        jvm_spark.read.format("tierlog")
        .option("topics", "orders")
        .load()
        .where(F.col("offset") >= 5)
        .where(F.col("partition").isin(0, 2))
        .where(F.col("timestamp") < F.lit(moment))
        .where(~F.col("topic").startswith("ord"))
        .where(F.col("key") == F.lit(b"k"))
        .select("value")
    )
    assert df.collect() == []

    (push,) = planner.calls("push")
    sent = push["filters"]
    assert {"op": "GreaterThanOrEqual", "column": "offset", "value": 5} in sent
    assert {"op": "In", "column": "partition", "values": [0, 2]} in sent
    micros = (moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)) // datetime.timedelta(
        microseconds=1
    )
    assert {"op": "LessThan", "column": "timestamp", "value": {"timestamp_us": micros}} in sent
    assert {
        "op": "Not",
        "child": {"op": "StringStartsWith", "column": "topic", "value": "ord"},
    } in sent
    # A binary value has no JSON form: that filter stays with Spark, unasked.
    assert not [f for f in sent if f.get("column") == "key" and f["op"] == "EqualTo"]

    (plan,) = planner.calls("plan")
    applied = [f for f in sent if f.get("column") in ("partition", "offset")]
    assert sorted(map(json.dumps, plan["filters"])) == sorted(map(json.dumps, applied))
    # What Spark keeps it still evaluates, so its columns are read; the planner's are not.
    assert set(plan["columns"]) == {"timestamp", "topic", "key", "value"}
    description = _scan_description(df)
    assert "PushedFilters: [GreaterThanOrEqual(offset,5), In(partition, [0,2])]" in description


def test_without_filters_the_planner_is_not_asked_to_push(
    jvm_spark: Any, planner: RecordingPlanner
) -> None:
    df = jvm_spark.read.format("tierlog").option("topics", "orders").load()
    assert df.where("value IS NULL OR offset > 3").collect() == []
    assert planner.calls("push") == []
    assert planner.calls("plan")[0]["filters"] == []


# --- planner errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["check", "push", "plan"])
def test_an_option_error_of_the_planner_reaches_the_user_as_is(
    jvm_spark: Any, planner: RecordingPlanner, method: str
) -> None:
    from pyspark.errors import IllegalArgumentException

    message = "option 'startingoffset': 'soon' is not an integer"
    error = {"error": {"type": "TierlogOptionError", "message": message}}
    setattr(planner, f"on_{method}", lambda request: error)
    df = jvm_spark.read.format("tierlog").option("topics", "orders").load().where("offset > 1")
    with pytest.raises(IllegalArgumentException, match=message):
        df.collect()


def test_other_planner_errors_keep_their_message(jvm_spark: Any, planner: RecordingPlanner) -> None:
    message = "remote log metadata in /data/logs is unreadable: bad magic"
    planner.on_plan = lambda request: {"error": {"type": "TierlogError", "message": message}}
    df = jvm_spark.read.format("tierlog").option("topics", "orders").load()
    with pytest.raises(Exception, match=message):
        df.collect()


# --- streams -----------------------------------------------------------------------------------


def test_a_stream_is_read_by_the_python_source(
    jvm_spark: Any, planner: RecordingPlanner, tiered: TieredCluster, tmp_path: Path
) -> None:
    rows: list[Any] = []
    stream = _tiered_options(jvm_spark.readStream.format("tierlog"), tiered).load()
    query = (
        stream.selectExpr("topic", "partition", "offset", "value", "unix_millis(timestamp) AS ts")
        .writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    assert _records(rows) == tiered.tiered_records("orders", 0)
    assert planner.calls("push") == planner.calls("plan") == []


# --- JVM reads ---------------------------------------------------------------------------------


def _segment(path: Path) -> bytes:
    """Batches with keys, headers, nulls, codecs and a LogAppendTime batch, written to ``path``."""
    data = bytearray()
    offset = 0
    for n, codec in enumerate([Compression.NONE, Compression.GZIP, Compression.ZSTD] * 2):
        builder = RecordBatchBuilder(
            codec,
            base_offset=offset,
            partition_leader_epoch=n // 2,
            timestamp_type=TimestampType.LOG_APPEND_TIME if n == 4 else TimestampType.CREATE_TIME,
        )
        for i in range(7):
            headers = [("h", b"%d" % i), ("none", None)] if i % 2 else []
            key = None if i % 3 == 0 else b"key-%d" % i
            value = None if i == 5 else b"value-%d-%d" % (n, i) * (i + 1)
            builder.append(T0 + offset * 10, key, value, headers)
            offset += 1
        data += builder.build()
    path.write_bytes(data)
    return bytes(data)


def _range(path: Path, size: int, first: int, last: int) -> dict[str, Any]:
    return {
        "topic": "orders",
        "partition": 4,
        "segmentId": "local:00000000000000000000",
        "firstOffset": first,
        "lastOffset": last,
        "minTimestamp": None,
        "maxTimestamp": None,
        "readCommitted": False,
        "aborted": [],
        "source": {"kind": "file", "path": str(path), "start": 0, "end": size, "alsoTry": []},
    }


def _normal(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with bytes for binary values and header pairs as tuples, to compare."""

    def plain(value: Any) -> Any:
        return bytes(value) if isinstance(value, bytes | bytearray) else value

    row = {name: plain(value) for name, value in row.items()}
    row["headers"] = [(h["key"], plain(h["value"])) for h in row["headers"]]
    return row


def _expected(data: bytes, first: int, last: int) -> list[dict[str, Any]]:
    from tierlog_spark.decode import decode_segment

    batches = decode_segment(
        data,
        topic="orders",
        partition=4,
        segment_id="local:00000000000000000000",
        start_offset=first,
        end_offset=last,
    )
    table = pa.Table.from_batches(list(batches))
    table = table.set_column(3, "timestamp", table.column("timestamp").cast(pa.int64()))
    return [_normal(row) for row in table.to_pylist()]


def test_a_jvm_read_returns_the_rows_the_python_decoder_gives(
    jvm_spark: Any, planner: RecordingPlanner, tmp_path: Path
) -> None:
    path = tmp_path / "00000000000000000000.log"
    data = _segment(path)
    # Two tasks: one reads two ranges of the segment in turn, the other a third.
    tasks = [
        {"ranges": [_range(path, len(data), 0, 9), _range(path, len(data), 10, 19)]},
        {"ranges": [_range(path, len(data), 20, 41)]},
    ]
    planner.on_plan = lambda request: {"tasks": tasks}
    jvm_spark.conf.set("spark.tierlog.jvm.batchRows", "5")
    try:
        df = jvm_spark.read.format("tierlog").option("topics", "orders").load()
        millis = [c if c != "timestamp" else "unix_millis(timestamp) AS timestamp" for c in COLUMNS]
        rows = [_normal(row.asDict(recursive=True)) for row in df.selectExpr(*millis).collect()]
        # No column at all: batches of row counts only.
        count = df.count()
        # Filters the planner leaves to Spark are evaluated on the decoded columns.
        null_keys = sorted(row.offset for row in df.where("key IS NULL").select("offset").collect())
    finally:
        jvm_spark.conf.unset("spark.tierlog.jvm.batchRows")

    expected = _expected(data, 0, 41)
    assert len(rows) == count == 42
    assert sorted(rows, key=lambda row: row["offset"]) == expected
    assert null_keys == [row["offset"] for row in expected if row["key"] is None]
    assert planner.calls("plan")[-1]["columns"] == ["offset", "key"]
