"""Option ``includeLocal``: the records not tiered yet, read from the local segments after the
tiered ones, up to the high watermark.

One cluster is set up for the module and read once while it runs (no high watermark checkpointed
yet: the last complete batches bound the read); it is then stopped, so the log dirs hold what a
stopped broker leaves (its high watermark checkpointed). Topic ``plain`` has its rolled
segments tiered and records in the active segment; in topic ``txns`` an open transaction stops
tiering, so several local segments follow the tiered ones, holding a committed, an aborted and
the open transaction. Cases that change the files (a lower high watermark, no checkpoint, a batch
half written, a lagging replica, no partition directory) work on copies of the log dir.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog.log.partition_log import HIGH_WATERMARK_CHECKPOINT
from tierlog.model import TopicPartition
from tierlog.records import RecordBatchBuilder
from tierlog.server import protocol as p
from tierlog_spark.local_segments import LocalRange, plan_local_reads
from tierlog_spark.metadata_source import load_remote_log_metadata
from tierlog_spark.planning import Bounds, plan_reads

from tests.server.conftest import T0
from tests.waiting import wait_until

from .tiered import TieredCluster, tiered_cluster

pytest.importorskip("tierlog_fsspec")

PLAIN, TXNS = "plain", "txns"
ABORTED, OPEN, COMMITTED = 2000, 3000, 4000
#: A record as compared here: (topic, partition, offset, value).
Row = tuple[str, int, int, bytes]


@attrs.define
class Scenario:
    settings: dict[str, str]
    log_dir: Path
    #: Every data record produced, with its producer id (-1 outside transactions).
    produced: dict[Row, int]
    #: The first offset not tiered, per (topic, partition).
    tiered_end: dict[tuple[str, int], int]
    #: Base offsets of the local segments, per (topic, partition).
    local_segments: dict[tuple[str, int], list[int]]
    #: The first offset of the transaction left open.
    open_offset: int
    #: What a read with ``includeLocal`` returned while the broker was running.
    live_rows: list[Row]

    def rows(self, topic: str, *, tiered_only: bool = False) -> list[Row]:
        return sorted(
            row
            for row in self.produced
            if row[0] == topic and (not tiered_only or row[2] < self.tiered_end[row[0], row[1]])
        )


def _send(tc: TieredCluster, produced: dict[Row, int], topic: str, producer_id: int = -1) -> int:
    """One batch of 3 records (transactional for a producer id); returns its base offset."""
    sequence = sum(1 for row, pid in produced.items() if pid == producer_id >= 0)
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence if producer_id >= 0 else -1,
        is_transactional=producer_id >= 0,
    )
    values = []
    for _ in range(3):
        tick = next(tc.clock)
        value = b"value-%d-" % tick + bytes(48)
        builder.append(T0 + tick * 1000, b"k", value)
        values.append(value)
    response = tc.client.produce(topic, 0, builder.build())
    assert response.error_code == p.NONE, response
    for i, value in enumerate(values):
        produced[topic, 0, response.base_offset + i, value] = producer_id
    return int(response.base_offset)


def _wait_tiered_below(tc: TieredCluster, topic: str, offset: int) -> int:
    """Waits until the rolled segments wholly below ``offset`` are tiered; the first offset
    not tiered."""
    plog = tc.cluster.broker(0).partition(TopicPartition(topic, 0)).log  # type: ignore[union-attr]

    def settled() -> bool:
        holding = max(s.base_offset for s in plog.segments() if s.base_offset <= offset)
        return (
            plog.local_log_start_offset == holding
            and plog.highest_offset_in_remote_storage == holding - 1
        )

    wait_until(settled, f"{topic} tiered below {offset}", timeout=60)
    return int(plog.local_log_start_offset)


@pytest.fixture(scope="module")
def scenario(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    root = tmp_path_factory.mktemp("local")
    produced: dict[Row, int] = {}
    with tiered_cluster(root) as tc:
        tc.create(PLAIN, 2)
        tc.create(TXNS, 1)
        for partition in range(2):
            tc.produce(PLAIN, partition, 10)
            tc.wait_tiered(PLAIN, partition)
            tc.produce(PLAIN, partition, 1)  # lands in the active segment, never tiered
        tiered_end = {(PLAIN, n): tc.wait_tiered(PLAIN, n) for n in range(2)}
        for records in tc.produced.values():
            for topic, partition, offset, value, _ in records:
                produced[topic, partition, offset, value] = -1

        for _ in range(6):
            _send(tc, produced, TXNS)
        tc.wait_tiered(TXNS, 0)
        _send(tc, produced, TXNS, COMMITTED)
        assert tc.client.end_transaction(TXNS, 0, COMMITTED, commit=True) == p.NONE
        aborted_offset = _send(tc, produced, TXNS, ABORTED)
        open_offset = _send(tc, produced, TXNS, OPEN)
        assert tc.client.end_transaction(TXNS, 0, ABORTED, commit=False) == p.NONE
        for _ in range(8):
            _send(tc, produced, TXNS)
        tiered_end[TXNS, 0] = _wait_tiered_below(tc, TXNS, open_offset)
        assert tiered_end[TXNS, 0] <= aborted_offset  # the aborted transaction is local

        local_segments = {}
        for topic, partition in tiered_end:
            replica = tc.cluster.broker(0).partition(TopicPartition(topic, partition))
            assert replica is not None
            local_segments[topic, partition] = [s.base_offset for s in replica.log.segments()]
        assert len(local_segments[TXNS, 0]) > 1
        live = Scenario(
            tc.settings, tc.log_dir, produced, tiered_end, local_segments, open_offset, []
        )
        live.live_rows = _rows(
            _reader(spark, live, topics=f"{PLAIN},{TXNS}", includeLocal="true").load()
        )
    yield live


def _reader(spark: Any, scenario: Scenario, log_dirs: Any = None, **options: str) -> Any:
    reader = spark.read.format("tierlog")
    for key, value in scenario.settings.items():
        reader = reader.option(f"tierlog.{key}", value)
    dirs = [scenario.log_dir] if log_dirs is None else log_dirs
    reader = reader.option("log.dirs", ",".join(str(d) for d in dirs))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _rows(df: Any) -> list[Row]:
    return sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())


def _plan(log_dir: Path, topic: str) -> list[LocalRange]:
    remote = plan_reads(load_remote_log_metadata([log_dir], topics=[topic]))
    return plan_local_reads(
        [log_dir],
        remote,
        topics=[topic],
        partitions=None,
        bounds=Bounds(),
        read_committed=False,
        max_bytes=1 << 20,
    )


def _copy_log_dir(scenario: Scenario, target: Path) -> Path:
    shutil.copytree(scenario.log_dir, target)
    return target


# --- reading across the tiers -------------------------------------------------------------


def test_every_record_up_to_the_high_watermark_is_read_once(spark: Any, scenario: Scenario) -> None:
    df = _reader(spark, scenario, topics=f"{PLAIN},{TXNS}", includeLocal="true").load()
    rows = df.select("topic", "partition", "offset", "value", "segment_id").collect()

    assert sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in rows) == sorted(
        scenario.produced
    )
    for r in rows:
        local = r.offset >= scenario.tiered_end[r.topic, r.partition]
        assert r.segment_id.startswith("local:") == local, r
        if local:
            base = int(r.segment_id.removeprefix("local:"))
            assert base in scenario.local_segments[r.topic, r.partition]
            assert base <= r.offset
    for (topic, partition), bases in scenario.local_segments.items():
        active = f"local:{bases[-1]}"
        assert any(
            r.segment_id == active for r in rows if (r.topic, r.partition) == (topic, partition)
        )


def test_the_log_dirs_of_a_running_broker_give_the_same_records(scenario: Scenario) -> None:
    assert scenario.live_rows == sorted(scenario.produced)


def test_without_the_option_only_tiered_records_are_read(spark: Any, scenario: Scenario) -> None:
    assert _rows(_reader(spark, scenario, topics=PLAIN).load()) == scenario.rows(
        PLAIN, tiered_only=True
    )
    off = _reader(spark, scenario, topics=PLAIN, includeLocal="false").load()
    assert _rows(off) == scenario.rows(PLAIN, tiered_only=True)


def test_offset_bounds_in_the_local_part(spark: Any, scenario: Scenario) -> None:
    tiered_end = scenario.tiered_end[TXNS, 0]
    first, end = tiered_end + 2, tiered_end + 12
    expected = [r for r in scenario.rows(TXNS) if first <= r[2] < end]
    assert expected

    bounded = _reader(
        spark,
        scenario,
        topics=TXNS,
        includeLocal="true",
        startingOffset=str(first),
        endingOffset=str(end),
    ).load()
    assert _rows(bounded) == expected

    filtered = _reader(spark, scenario, topics=TXNS, includeLocal="true").load()
    filtered = filtered.filter((filtered["offset"] >= first) & (filtered["offset"] < end))
    assert _rows(filtered) == expected

    both_tiers = [r for r in scenario.rows(TXNS) if tiered_end - 4 <= r[2] < end]
    straddling = _reader(
        spark,
        scenario,
        topics=TXNS,
        includeLocal="true",
        startingOffset=str(tiered_end - 4),
        endingOffset=str(end),
    ).load()
    assert _rows(straddling) == both_tiers


def test_small_tasks_split_local_segments_without_losing_a_record(
    spark: Any, scenario: Scenario
) -> None:
    reader = _reader(spark, scenario, topics=TXNS, includeLocal="true", maxBytesPerTask="200")
    assert _rows(reader.load()) == scenario.rows(TXNS)


# --- transactions -------------------------------------------------------------------------


def test_read_committed_stops_at_the_open_transaction_and_drops_the_aborted_one(
    spark: Any, scenario: Scenario
) -> None:
    committed = _reader(
        spark, scenario, topics=TXNS, includeLocal="true", **{"isolation.level": "read_committed"}
    ).load()
    expected = [
        row
        for row in scenario.rows(TXNS)
        if row[2] < scenario.open_offset and scenario.produced[row] != ABORTED
    ]
    rows = _rows(committed)
    assert rows == expected
    assert any(scenario.produced[row] == COMMITTED for row in rows)
    assert any(row[2] >= scenario.tiered_end[TXNS, 0] for row in rows)


# --- what the log dirs hold ---------------------------------------------------------------


def _write_high_watermark(partition_dir: Path, topic: str, partition: int, offset: int) -> None:
    text = f"0\n1\n{topic} {partition} {offset}\n"
    (partition_dir / HIGH_WATERMARK_CHECKPOINT).write_text(text)


def test_reading_stops_at_the_checkpointed_high_watermark(
    spark: Any, scenario: Scenario, tmp_path: Path
) -> None:
    logs = _copy_log_dir(scenario, tmp_path / "logs")
    high_watermark = scenario.tiered_end[TXNS, 0] + 5
    _write_high_watermark(logs / f"{TXNS}-0", TXNS, 0, high_watermark)

    df = _reader(spark, scenario, [logs], topics=TXNS, includeLocal="true").load()
    assert _rows(df) == [r for r in scenario.rows(TXNS) if r[2] < high_watermark]


def test_without_a_high_watermark_whole_batches_are_read_and_a_torn_tail_is_not(
    spark: Any, scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logs = _copy_log_dir(scenario, tmp_path / "logs")
    partition_dir = logs / f"{PLAIN}-0"
    (partition_dir / HIGH_WATERMARK_CHECKPOINT).unlink()
    active = partition_dir / f"{scenario.local_segments[PLAIN, 0][-1]:020d}.log"
    first_batch = active.read_bytes()[: 12 + int.from_bytes(active.read_bytes()[8:12], "big")]
    with active.open("ab") as file:  # a batch a broker is still writing
        file.write(first_batch[: len(first_batch) // 2])

    df = _reader(spark, scenario, [logs], topics=PLAIN, includeLocal="true").load()
    assert _rows(df) == scenario.rows(PLAIN)

    # Spark plans in a Python worker: the warning is checked on a plan made here.
    with caplog.at_level(logging.WARNING, logger="tierlog_spark.local_segments"):
        ranges = _plan(logs, PLAIN)
    assert "no high watermark checkpointed for plain-0" in caplog.text
    assert max(r.last_offset for r in ranges if r.partition == 0) == max(
        r[2] for r in scenario.rows(PLAIN) if r[1] == 0
    )


def test_the_replica_reaching_furthest_is_read(
    spark: Any, scenario: Scenario, tmp_path: Path
) -> None:
    leader = _copy_log_dir(scenario, tmp_path / "leader")
    follower = _copy_log_dir(scenario, tmp_path / "follower")
    partition_dir = follower / f"{TXNS}-0"
    bases = scenario.local_segments[TXNS, 0]
    for base in bases[1:]:  # the follower has only the first local segment
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            (partition_dir / f"{base:020d}{suffix}").unlink(missing_ok=True)
    _write_high_watermark(partition_dir, TXNS, 0, bases[1])

    for order in ([follower, leader], [leader, follower]):
        df = _reader(spark, scenario, order, topics=TXNS, includeLocal="true").load()
        assert _rows(df) == scenario.rows(TXNS)


def test_a_partition_without_a_local_directory_reads_only_remote(
    spark: Any, scenario: Scenario, tmp_path: Path
) -> None:
    logs = _copy_log_dir(scenario, tmp_path / "logs")
    shutil.rmtree(logs / f"{PLAIN}-1")

    df = _reader(spark, scenario, [logs], topics=PLAIN, includeLocal="true").load()
    expected = [
        r for r in scenario.rows(PLAIN) if r[1] == 0 or r[2] < scenario.tiered_end[PLAIN, 1]
    ]
    assert _rows(df) == expected


def test_include_local_must_be_true_or_false(spark: Any, scenario: Scenario) -> None:
    with pytest.raises(Exception, match="includelocal"):
        _reader(spark, scenario, topics=PLAIN, includeLocal="yes").load().collect()


def test_a_gap_after_the_tiered_offsets_is_logged_and_the_rest_read(
    spark: Any, scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logs = _copy_log_dir(scenario, tmp_path / "logs")
    first, second = scenario.local_segments[TXNS, 0][:2]
    for path in (logs / f"{TXNS}-0").glob(f"{first:020d}.*"):
        path.unlink()

    df = _reader(spark, scenario, [logs], topics=TXNS, includeLocal="true").load()
    assert _rows(df) == [r for r in scenario.rows(TXNS) if not first <= r[2] < second]

    with caplog.at_level(logging.WARNING, logger="tierlog_spark.local_segments"):
        _plan(logs, TXNS)
    assert f"offsets {first}..{second - 1} are in neither" in caplog.text
