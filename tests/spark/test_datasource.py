"""The ``tierlog`` data source against a real tiered runtime, read back through Spark.

One cluster is set up for the whole module (the fsspec plugin on ``file://``, the topic-based
metadata manager): records with keys, headers and every compression codec, committed and aborted
transactions (one aborted across segments), and a segment uploaded a second time so the first
upload is superseded. Once everything but the active segments is tiered the cluster is stopped,
so Spark reads what the brokers left on disk and in remote storage, with no broker running.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.model import (
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    TopicPartition,
)
from tierlog.records import Compression, RecordBatchBuilder
from tierlog.server import protocol as p
from tierlog_spark.metadata_source import load_remote_log_metadata
from tierlog_spark.planning import SegmentRange, plan_reads

from tests.server.conftest import T0, Client
from tests.spark.tiered import spark_settings, upload_again
from tests.waiting import wait_until

pytest.importorskip("tierlog_fsspec")

ORDERS, TXNS = "orders", "txns"
ORDERS_PARTITIONS = 3
#: A ``minTasks`` above the number of segments: every segment range is a task of its own.
UNPACKED = "100000"
CODECS = list(Compression)
Row = tuple[str, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@attrs.define
class Scenario:
    settings: dict[str, str]
    log_dir: Path
    #: Every data record produced, by (topic, partition, offset), with its producer id.
    produced: dict[tuple[str, int, int], tuple[Row, int]]
    #: The first offset still local (not tiered) per (topic, partition).
    tiered_end: dict[tuple[str, int], int]
    aborted_producers: frozenset[int]
    #: The re-upload that superseded an earlier one, and the upload it superseded.
    reupload: RemoteLogSegmentMetadata
    superseded: RemoteLogSegmentMetadata
    #: The plan made from the metadata files while the broker was still running.
    live_plan: list[SegmentRange]

    def expected(self, *, committed: bool = False) -> list[Row]:
        return sorted(
            row
            for (topic, partition, offset), (row, producer) in self.produced.items()
            if offset < self.tiered_end[topic, partition]
            and not (committed and producer in self.aborted_producers)
        )


class _Producer:
    """Produces batches through the protocol and remembers every record it wrote."""

    def __init__(self, client: Client, produced: dict[Any, Any]) -> None:
        self.client = client
        self.produced = produced
        self.clock = itertools.count()
        self.sequences: dict[int, int] = {}

    def send(
        self,
        topic: str,
        partition: int,
        count: int,
        *,
        compression: Compression = Compression.NONE,
        producer_id: int = -1,
        headers: bool = False,
    ) -> None:
        sequence = self.sequences.get(producer_id, 0)
        builder = RecordBatchBuilder(
            compression,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=sequence if producer_id >= 0 else -1,
            is_transactional=producer_id >= 0,
        )
        records = []
        for i in range(count):
            tick = next(self.clock)
            key = None if tick % 5 == 0 else b"key-%d" % (tick % 7)
            value = None if tick % 11 == 3 else b"value-%d-" % tick + bytes(range(64))
            record_headers: tuple[tuple[str, bytes | None], ...] = ()
            if headers and i % 2 == 0:
                record_headers = (("trace", b"%d" % tick), ("empty", None))
            timestamp = T0 + tick * 10
            builder.append(timestamp, key, value, record_headers)
            records.append((timestamp, key, value, record_headers))
        self.sequences[producer_id] = sequence + count
        response = self.client.produce(topic, partition, builder.build())
        assert response.error_code == p.NONE, response
        for i, (timestamp, key, value, record_headers) in enumerate(records):
            offset = response.base_offset + i
            row = (topic, partition, offset, key, value, record_headers, timestamp)
            self.produced[topic, partition, offset] = (row, producer_id)


def _produce(client: Client) -> dict[Any, Any]:
    produced: dict[Any, Any] = {}
    producer = _Producer(client, produced)
    for partition in range(ORDERS_PARTITIONS):
        for n in range(24):
            producer.send(
                ORDERS,
                partition,
                3 + n % 4,
                compression=CODECS[n % len(CODECS)],
                headers=n % 3 == 0,
            )
    producer.send(TXNS, 0, 3)
    producer.send(TXNS, 0, 3, producer_id=1000)
    assert client.end_transaction(TXNS, 0, 1000, commit=True) == p.NONE
    producer.send(TXNS, 0, 3, producer_id=2000, compression=Compression.GZIP)
    assert client.end_transaction(TXNS, 0, 2000, commit=False) == p.NONE
    producer.send(TXNS, 0, 4, producer_id=3000)  # aborted several segments later
    for _ in range(12):
        producer.send(TXNS, 0, 3)
    producer.send(TXNS, 0, 2, producer_id=3000)
    assert client.end_transaction(TXNS, 0, 3000, commit=False) == p.NONE
    producer.send(TXNS, 0, 2, producer_id=4000)
    assert client.end_transaction(TXNS, 0, 4000, commit=True) == p.NONE
    for _ in range(12):
        producer.send(TXNS, 0, 3)
    producer.send(TXNS, 0, 3, producer_id=5000)  # its ABORT marker is never tiered
    for _ in range(8):
        producer.send(TXNS, 0, 3)
    assert client.end_transaction(TXNS, 0, 5000, commit=False) == p.NONE
    return produced


def _wait_tiered(cluster: EmbeddedCluster, topic: str, partition: int) -> int:
    """Waits until every rolled segment is tiered and deleted locally; the first local offset."""
    replica = cluster.broker(0).partition(TopicPartition(topic, partition))
    assert replica is not None
    plog = replica.log

    def settled() -> bool:
        active = plog.segments()[-1].base_offset
        return (
            plog.local_log_start_offset == active
            and plog.highest_offset_in_remote_storage == active - 1
        )

    wait_until(settled, f"{topic}-{partition} tiered", timeout=60)
    return int(plog.local_log_start_offset)


def _upload_again(
    cluster: EmbeddedCluster, tip: TopicIdPartition, work: Path
) -> tuple[RemoteLogSegmentMetadata, RemoteLogSegmentMetadata]:
    """Uploads a copy of a tiered segment under a new id, as a retried copy task would; the
    metadata then serves the new upload for those offsets."""
    new, old = upload_again(cluster, tip, work)
    host = cluster.broker(0).plugin_host
    assert host is not None
    served = host.metadata.remote_log_segment_metadata(
        tip, old.segment_leader_epochs[0][0], old.start_offset
    )
    assert served is not None and served.remote_log_segment_id == new.remote_log_segment_id
    return new, old


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    root = tmp_path_factory.mktemp("tiered")
    settings = spark_settings(root)
    cluster = EmbeddedCluster(1, root / "data", settings)
    with cluster:
        client = Client(cluster)
        tiered = {"remote_storage_enable": "true", "local_retention_bytes": "1"}
        client.create(
            ORDERS, ORDERS_PARTITIONS, segment_bytes="2048", index_interval_bytes="256", **tiered
        )
        client.create(TXNS, 1, segment_bytes="1024", **tiered)
        produced = _produce(client)
        tiered_end = {(ORDERS, n): _wait_tiered(cluster, ORDERS, n) for n in range(3)}
        tiered_end[TXNS, 0] = _wait_tiered(cluster, TXNS, 0)
        image = cluster.controller.image().topic(ORDERS)
        assert image is not None
        tip = TopicIdPartition.of(image.topic_id, ORDERS, 0)
        reupload, superseded = _upload_again(cluster, tip, root / "copy")
        log_dir = root / "data" / "broker-0" / "logs"
        live_plan = plan_reads(load_remote_log_metadata([log_dir], num_partitions=3))
    yield Scenario(
        settings,
        root / "data" / "broker-0" / "logs",
        produced,
        tiered_end,
        frozenset({2000, 3000, 5000}),
        reupload,
        superseded,
        live_plan,
    )


def _reader(spark: Any, scenario: Scenario, **options: str) -> Any:
    reader = spark.read.format("tierlog")
    for key, value in scenario.settings.items():
        reader = reader.option(f"tierlog.{key}", value)
    reader = reader.option("log.dirs", str(scenario.log_dir))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _rows(df: Any) -> list[Row]:
    rows = []
    for r in df.collect():
        headers = tuple(
            (h["key"], None if h["value"] is None else bytes(h["value"])) for h in r.headers
        )
        rows.append(
            (
                r.topic,
                r.partition,
                r.offset,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                headers,
                int(r.timestamp.timestamp() * 1000 + 0.5),
            )
        )
    return sorted(rows)


# --- reading everything -------------------------------------------------------------------


def test_every_tiered_record_is_read_once_with_every_field(spark: Any, scenario: Scenario) -> None:
    df = _reader(spark, scenario, topics=f"{ORDERS},{TXNS}").load()
    rows = _rows(df)
    expected = scenario.expected()
    assert len(rows) == len(set(rows)), "no record is read twice"
    assert rows == expected
    assert all(end > 0 for end in scenario.tiered_end.values())


def test_a_superseded_upload_is_not_read(spark: Any, scenario: Scenario) -> None:
    old, new = scenario.superseded, scenario.reupload
    df = _reader(spark, scenario, topics=ORDERS, partitions="0").load()
    ids = {
        r.segment_id
        for r in df.where(f"offset between {old.start_offset} and {old.end_offset}").collect()
    }
    assert ids == {str(new.remote_log_segment_id.id)}
    offsets = [r.offset for r in df.select("offset").collect()]
    assert len(offsets) == len(set(offsets))


def test_metadata_files_of_a_running_broker_give_the_same_plan(scenario: Scenario) -> None:
    after = plan_reads(load_remote_log_metadata([scenario.log_dir], num_partitions=3))
    assert after == scenario.live_plan
    covered: dict[tuple[str, int], list[int]] = {}
    for planned in after:
        tip = planned.topic_id_partition
        offsets = covered.setdefault((tip.topic, tip.partition), [])
        offsets.extend(range(planned.first_offset, planned.last_offset + 1))
    assert set(covered) == set(scenario.tiered_end)
    for key, offsets in covered.items():
        assert offsets == list(range(offsets[0], scenario.tiered_end[key])), key


def test_schema_is_the_decoders(spark: Any, scenario: Scenario) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema
    from tierlog_spark.decode import SCHEMA

    df = _reader(spark, scenario, topics=TXNS).load()
    assert df.schema == from_arrow_schema(SCHEMA)


def test_a_schema_naming_some_columns_reads_just_those(spark: Any, scenario: Scenario) -> None:
    df = (
        _reader(spark, scenario, topics=ORDERS)
        .schema(
            "value binary, offset long, partition int, "
            "headers array<struct<key:string,value:binary>>"
        )
        .load()
    )
    assert df.columns == ["value", "offset", "partition", "headers"]
    rows = sorted(
        (
            r.partition,
            r.offset,
            None if r.value is None else bytes(r.value),
            tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r.headers),
        )
        for r in df.collect()
    )
    expected = sorted(
        (partition, offset, value, headers)
        for topic, partition, offset, _, value, headers, _ in scenario.expected()
        if topic == ORDERS
    )
    assert rows == expected


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("offset long, size int", "has no column 'size'"),
        ("offset int", "column 'offset' of the tierlog source is bigint, not int"),
        ("offset long, offset long", "names column 'offset' twice"),
    ],
)
def test_a_schema_with_unknown_or_mistyped_columns_is_refused(
    spark: Any, scenario: Scenario, schema: str, message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _reader(spark, scenario, topics=ORDERS).schema(schema).load().collect()


@pytest.mark.parametrize("min_tasks", ["1", "2"])
def test_small_segments_are_packed_into_fewer_tasks_reading_the_same_records(
    spark: Any, scenario: Scenario, min_tasks: str
) -> None:
    segments = _reader(spark, scenario, topics=ORDERS, minTasks=UNPACKED).load()
    packed = _reader(spark, scenario, topics=ORDERS, minTasks=min_tasks).load()
    tasks, ranges = packed.rdd.getNumPartitions(), segments.rdd.getNumPartitions()
    assert int(min_tasks) <= tasks < ranges
    assert _rows(packed) == [row for row in scenario.expected() if row[0] == ORDERS]


# --- transactions -------------------------------------------------------------------------


def test_read_committed_drops_aborted_transactions(spark: Any, scenario: Scenario) -> None:
    committed = _reader(spark, scenario, topics=TXNS, **{"isolation.level": "read_committed"})
    expected = [row for row in scenario.expected(committed=True) if row[0] == TXNS]
    assert _rows(committed.load()) == expected
    everything = [row for row in scenario.expected() if row[0] == TXNS]
    assert len(everything) > len(expected)
    assert _rows(_reader(spark, scenario, topics=TXNS).load()) == everything


# --- options and pushdown -----------------------------------------------------------------


def test_offset_and_timestamp_options_bound_the_read(spark: Any, scenario: Scenario) -> None:
    expected = [row for row in scenario.expected() if row[0] == ORDERS and row[1] == 2]
    low, high = expected[10][2], expected[-10][2]
    df = _reader(
        spark,
        scenario,
        topics=ORDERS,
        partitions="2",
        startingOffset=str(low),
        endingOffset=str(high),
    ).load()
    assert _rows(df) == [row for row in expected if low <= row[2] < high]
    since, until = expected[5][6], expected[40][6]
    df = _reader(
        spark,
        scenario,
        topics=ORDERS,
        partitions="2",
        startingTimestamp=str(since),
        endingTimestamp=str(until),
    ).load()
    assert _rows(df) == [row for row in expected if since <= row[6] < until]


def test_filters_are_pushed_down_so_fewer_segments_are_read(spark: Any, scenario: Scenario) -> None:
    # One task per segment range (no packing), so tasks count the segments read.
    everything = _reader(spark, scenario, topics=f"{ORDERS},{TXNS}", minTasks=UNPACKED).load()
    all_tasks = everything.rdd.getNumPartitions()
    one_partition = everything.where(f"topic = '{ORDERS}' and partition = 1")
    partition_tasks = one_partition.rdd.getNumPartitions()
    assert 1 < partition_tasks < all_tasks / 3

    expected = [row for row in scenario.expected() if row[0] == ORDERS and row[1] == 1]
    cut = expected[len(expected) // 2][2]
    tail = one_partition.where(f"offset >= {cut}")
    assert tail.rdd.getNumPartitions() < partition_tasks
    assert _rows(tail) == [row for row in expected if row[2] >= cut]

    moment = expected[len(expected) // 2][6]
    from datetime import UTC, datetime

    since = datetime.fromtimestamp(moment / 1000, UTC)
    recent = one_partition.where(everything.timestamp >= since)
    assert recent.rdd.getNumPartitions() < partition_tasks
    assert _rows(recent) == [row for row in expected if row[6] >= moment]

    exact = everything.where(f"topic = '{ORDERS}' and partition in (0, 2) and offset = {cut}")
    assert exact.rdd.getNumPartitions() == 2
    assert sorted(r.partition for r in exact.collect()) == [0, 2]


def test_big_segments_are_split_into_tasks_along_their_offset_index(
    spark: Any, scenario: Scenario
) -> None:
    expected = [row for row in scenario.expected() if row[0] == ORDERS]
    whole = _reader(spark, scenario, topics=ORDERS, minTasks=UNPACKED).load()
    split = _reader(spark, scenario, topics=ORDERS, maxBytesPerTask="700").load()
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert _rows(split) == expected
    low, high = expected[7][2], expected[-9][2]
    bounded = split.where(f"partition = 0 and offset >= {low} and offset <= {high}")
    assert _rows(bounded) == [row for row in expected if row[1] == 0 and low <= row[2] <= high]


def test_a_config_file_supplies_the_runtime_settings(
    spark: Any, scenario: Scenario, tmp_path: Path
) -> None:
    config = tmp_path / "runtime.properties"
    config.write_text(
        "".join(f"{key}={value}\n" for key, value in scenario.settings.items())
        + f"log.dirs={scenario.log_dir}\n"
    )
    df = spark.read.format("tierlog").option("config", str(config)).option("topics", TXNS).load()
    assert _rows(df) == [row for row in scenario.expected() if row[0] == TXNS]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option 'topics' is required"),
        ({"topics": ORDERS, "startingOffset": "ten"}, "'startingoffset': 'ten' is not an integer"),
        ({"topics": ORDERS, "partitions": "0,,1"}, "option 'partitions'"),
        ({"topics": ORDERS, "isolation.level": "serializable"}, "option 'isolation.level'"),
        ({"topics": ORDERS, "startingOffsets": "1"}, "unknown tierlog option 'startingoffsets'"),
        ({"topics": ORDERS, "rlmm.num.partitions": "0"}, "'rlmm.num.partitions' is 0"),
    ],
)
def test_bad_options_name_the_option(
    spark: Any, scenario: Scenario, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _reader(spark, scenario, **options).load().collect()


def test_remote_storage_must_be_configured(spark: Any) -> None:
    with pytest.raises(Exception, match="must enable remote storage"):
        spark.read.format("tierlog").option("topics", ORDERS).load().collect()


def test_a_wrong_metadata_partition_count_is_reported(spark: Any, scenario: Scenario) -> None:
    with pytest.raises(Exception, match=r"rlmm\.num\.partitions"):
        _reader(spark, scenario, topics=ORDERS, **{"rlmm.num.partitions": "2"}).load().collect()


def test_an_unknown_topic_reads_nothing(spark: Any, scenario: Scenario) -> None:
    assert _reader(spark, scenario, topics="nope").load().count() == 0
