"""``spark.readStream.format("tierlog")``: micro-batches of newly tiered records, exactly once.

One broker keeps running for the module, tiering to ``file://``; each test has its own topics
and checkpoints, tiers more records between runs and restarts its query from the same
checkpoint with ``Trigger.AvailableNow``, as a scheduled job would.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    Uuid,
)
from tierlog.records import RecordBatchBuilder
from tierlog.server import protocol as p
from tierlog_spark.metadata_source import load_remote_log_metadata
from tierlog_spark.planning import SegmentRange, plan_reads

from tests.server.conftest import T0
from tests.spark.tiered import Record, TieredCluster, tiered_cluster
from tests.waiting import wait_until

pytest.importorskip("tierlog_fsspec")

#: A record as a micro-batch delivered it, with the id of the segment it was read from.
Delivered = tuple[str, int, int, bytes, int, str]


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredCluster]:
    with tiered_cluster(tmp_path_factory.mktemp("stream")) as cluster:
        yield cluster


def _stream(spark: Any, tiered: TieredCluster, topics: str, **options: str) -> Any:
    reader = spark.readStream.format("tierlog")
    for key, value in tiered.settings.items():
        reader = reader.option(f"tierlog.{key}", value)
    reader = reader.option("log.dirs", str(tiered.log_dir)).option("topics", topics)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run(df: Any, checkpoint: Path) -> list[list[Delivered]]:
    """Runs the query until it has read what is tiered; the records of every micro-batch."""
    batches: list[list[Delivered]] = []

    def collect(batch: Any, batch_id: int) -> None:
        rows = batch.selectExpr(
            "topic", "partition", "offset", "value", "unix_millis(timestamp)", "segment_id"
        ).collect()
        batches.append(sorted((r[0], r[1], r[2], bytes(r[3]), r[4], r[5]) for r in rows))

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def _records(batches: list[list[Delivered]]) -> list[Record]:
    return sorted(row[:5] for batch in batches for row in batch)  # type: ignore[misc]


def _tiered(tiered: TieredCluster, topic: str, partitions: int = 1) -> list[Record]:
    return sorted(r for n in range(partitions) for r in tiered.tiered_records(topic, n))


def _earliest_remote(tiered: TieredCluster, topic: str) -> int:
    plan = plan_reads(load_remote_log_metadata([tiered.log_dir], topics=[topic]))
    return min((planned.first_offset for planned in plan), default=-1)


def _first_remote_end(tiered: TieredCluster, topic: str) -> int:
    """The last offset of the earliest remote range (-1 if none)."""
    plan = plan_reads(load_remote_log_metadata([tiered.log_dir], topics=[topic]))
    return min(plan, key=lambda planned: planned.first_offset).last_offset if plan else -1


# --- reading and resuming -----------------------------------------------------------------


def test_a_stream_reads_each_tiered_record_once_and_resumes_from_its_checkpoint(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("clicks", 2)
    for partition in range(2):
        tiered.produce("clicks", partition, 10)
    first = _tiered(tiered, "clicks", 2)
    topics = "clicks,signups"  # signups is created between the runs
    read = _records(_run(_stream(spark, tiered, topics), tmp_path / "checkpoint"))
    assert read == first
    assert len(read) == len(set(read))

    tiered.produce("clicks", 1, 8)
    tiered.create("signups", 1)
    tiered.produce("signups", 0, 8)
    second = sorted(_tiered(tiered, "clicks", 2) + _tiered(tiered, "signups"))
    assert len(second) > len(first)
    again = _records(_run(_stream(spark, tiered, topics), tmp_path / "checkpoint"))
    assert again == [r for r in second if r not in first]
    assert {r[0] for r in again} == {"clicks", "signups"}

    assert _run(_stream(spark, tiered, topics), tmp_path / "checkpoint") == []


def test_starting_offsets_latest_skips_what_is_tiered_already(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("views", 1)
    tiered.produce("views", 0, 8)
    old = _tiered(tiered, "views")
    assert old
    df = _stream(spark, tiered, "views", startingOffsets="latest")
    assert _records(_run(df, tmp_path / "checkpoint")) == []

    tiered.produce("views", 0, 8)
    new = [r for r in _tiered(tiered, "views") if r not in old]
    assert new
    assert _records(_run(df, tmp_path / "checkpoint")) == new


def test_starting_offsets_as_json_start_each_listed_partition_there(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("carts", 2)
    for partition in range(2):
        tiered.produce("carts", partition, 8)
    expected = _tiered(tiered, "carts", 2)
    cut = [r for r in expected if r[1] == 0][10][2]
    starting = json.dumps({"carts": {"0": cut}})  # partition 1 is not listed: earliest
    df = _stream(spark, tiered, "carts", startingOffsets=starting)
    read = _records(_run(df, tmp_path / "checkpoint"))
    assert read == [r for r in expected if r[1] == 1 or r[2] >= cut]


# --- admission control --------------------------------------------------------------------


def test_max_segments_per_trigger_reads_the_backlog_a_segment_at_a_time(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("orders", 2)
    for partition in range(2):
        tiered.produce("orders", partition, 9)
    expected = _tiered(tiered, "orders", 2)
    df = _stream(spark, tiered, "orders", maxSegmentsPerTrigger="1")
    batches = _run(df, tmp_path / "checkpoint")
    segments = [{row[5] for row in batch} for batch in batches]
    assert all(len(ids) == 1 for ids in segments)
    assert len(batches) == len({row[5] for batch in batches for row in batch}) > 2
    assert _records(batches) == expected
    assert {batch[0][1] for batch in batches[:2]} == {0, 1}, "partitions take turns"


def test_max_records_per_trigger_caps_every_micro_batch(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("payments", 2)
    for partition in range(2):
        tiered.produce("payments", partition, 7)
    expected = _tiered(tiered, "payments", 2)
    df = _stream(spark, tiered, "payments", maxRecordsPerTrigger="7")
    batches = _run(df, tmp_path / "checkpoint")
    assert all(0 < len(batch) <= 7 for batch in batches)
    assert len(batches) == math.ceil(len(expected) / 7)
    assert _records(batches) == expected

    both = {"maxSegmentsPerTrigger": "2", "maxRecordsPerTrigger": "10"}
    batches = _run(_stream(spark, tiered, "payments", **both), tmp_path / "both")
    assert all(0 < len(batch) <= 10 for batch in batches)
    assert all(len({row[5] for row in batch}) <= 2 for batch in batches)
    assert _records(batches) == expected


def _ranges(topic: str, *spans: tuple[int, int]) -> list[SegmentRange]:
    tip = TopicIdPartition.of(Uuid.random(), topic, 0)
    return [
        SegmentRange(
            RemoteLogSegmentMetadata(
                RemoteLogSegmentId.generate_new(tip), first, last, 0, 0, 0, 100, {0: first}
            ),
            first,
            last,
        )
        for first, last in spans
    ]


def test_capped_micro_batches_take_whole_prefixes_longest_backlog_first() -> None:
    from tierlog_spark.streaming import _admit

    pending = {
        "a/0": _ranges("a", (0, 9)),
        "b/0": _ranges("b", (5, 9), (10, 19), (20, 29)),
    }
    assert _admit(pending, None, None) == {"a/0": 10, "b/0": 30}
    assert _admit(pending, 1, None) == {"b/0": 10}
    assert _admit(pending, 3, None) == {"a/0": 10, "b/0": 20}
    assert _admit(pending, None, 12) == {"a/0": 7, "b/0": 10}
    assert _admit(pending, 2, 100) == {"a/0": 10, "b/0": 10}
    assert _admit({"a/0": []}, 1, 1) == {}


# --- transactions -------------------------------------------------------------------------


def _transaction(
    tiered: TieredCluster, topic: str, producer_id: int, count: int, *, commit: bool
) -> list[Record]:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    values = []
    for i in range(count):
        timestamp = T0 + producer_id + i
        value = b"txn-%d-%d" % (producer_id, i)
        builder.append(timestamp, b"k", value)
        values.append((value, timestamp))
    response = tiered.client.produce(topic, 0, builder.build())
    assert response.error_code == p.NONE, response
    assert tiered.client.end_transaction(topic, 0, producer_id, commit=commit) == p.NONE
    return [
        (topic, 0, response.base_offset + i, value, timestamp)
        for i, (value, timestamp) in enumerate(values)
    ]


def test_read_committed_drops_aborted_transactions(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("ledger", 1)
    tiered.produce("ledger", 0, 2)
    aborted = _transaction(tiered, "ledger", 7000, 4, commit=False)
    tiered.produce("ledger", 0, 3)
    committed = _transaction(tiered, "ledger", 8000, 3, commit=True)
    tiered.produce("ledger", 0, 8)
    plain = _tiered(tiered, "ledger")
    end = plain[-1][2]
    assert all(r[2] < end for r in aborted + committed)

    df = _stream(spark, tiered, "ledger", **{"isolation.level": "read_committed"})
    assert _records(_run(df, tmp_path / "committed")) == sorted(plain + committed)
    everything = _records(_run(_stream(spark, tiered, "ledger"), tmp_path / "uncommitted"))
    assert everything == sorted(plain + committed + aborted)


# --- data loss ----------------------------------------------------------------------------


def test_offsets_deleted_before_they_were_read_fail_the_query_unless_told_otherwise(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    tiered.create("trimmed", 1)
    tiered.produce("trimmed", 0, 6)
    first = _tiered(tiered, "trimmed")
    strict, lenient = tmp_path / "strict", tmp_path / "lenient"
    assert _records(_run(_stream(spark, tiered, "trimmed"), strict)) == first
    df = _stream(spark, tiered, "trimmed", failOnDataLoss="false")
    assert _records(_run(df, lenient)) == first

    tiered.produce("trimmed", 0, 18)
    new = [r for r in _tiered(tiered, "trimmed") if r not in first]
    resume = first[-1][2] + 1
    cut = new[len(new) // 2][2]
    request = p.DeleteRecordsRequest(
        [p.DeleteRecordsTopic("trimmed", [p.DeleteRecordsPartition(0, cut)])]
    )
    response = tiered.client.transport.send(tiered.client.leader("trimmed"), request)
    assert response.topics[0].partitions[0].error_code == p.NONE
    # Segments are deleted one at a time: wait for all of those wholly below the cut.
    wait_until(
        lambda: _first_remote_end(tiered, "trimmed") >= cut, "remote segments deleted", timeout=60
    )
    earliest = _earliest_remote(tiered, "trimmed")

    with pytest.raises(Exception, match=rf"trimmed/0: offsets {resume} to {earliest - 1} were"):
        _run(_stream(spark, tiered, "trimmed"), strict)
    assert _records(_run(df, lenient)) == [r for r in new if r[2] >= earliest]


# --- options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxSegmentsPerTrigger": "0"}, "option 'maxsegmentspertrigger' is 0"),
        ({"maxRecordsPerTrigger": "many"}, "option 'maxrecordspertrigger': 'many' is not"),
        ({"startingOffsets": "newest"}, "option 'startingoffsets' is 'newest'"),
        ({"startingOffsets": '{"other": {"0": 1}}'}, "names topic 'other'"),
        ({"failOnDataLoss": "maybe"}, "option 'failondataloss' is 'maybe'"),
        ({"startingOffset": "5"}, "option 'startingoffset' is for batch reads"),
        ({"maxOffsetsPerTrigger": "5"}, "unknown tierlog option 'maxoffsetspertrigger'"),
    ],
)
def test_a_bad_option_fails_the_query_naming_the_option(
    spark: Any, tiered: TieredCluster, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _run(_stream(spark, tiered, "clicks", **options), tmp_path / "checkpoint")


def test_a_batch_read_refuses_stream_options(spark: Any, tiered: TieredCluster) -> None:
    reader = spark.read.format("tierlog").option("topics", "clicks")
    for key, value in tiered.settings.items():
        reader = reader.option(f"tierlog.{key}", value)
    with pytest.raises(Exception, match=r"it is an option of spark\.readStream"):
        reader.option("maxSegmentsPerTrigger", "1").load().collect()


def test_every_option_is_in_the_user_guide() -> None:
    from tierlog_spark.options import OPTIONS, STREAM_OPTIONS

    guide = (Path(__file__).resolve().parents[2] / "docs" / "tiered-storage.md").read_text()
    documented = {name.lower() for name in re.findall(r"`([A-Za-z.]+)`", guide)}
    assert set(OPTIONS) | set(STREAM_OPTIONS) <= documented
