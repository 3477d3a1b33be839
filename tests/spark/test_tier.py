"""``tier``: a backlog uploaded in parallel leaves the metadata the runtime's copy task would.

Two topics get the same batches while tiering is off. Tiering is then switched on for both;
the runtime's copy task (woken at once) tiers one, the job the other, while the runtime runs.
The broker's task interval is long, so the runtime does not start on the job's topic first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tierlog.client import Admin, AlterConfig, ConfigResource
from tierlog.log import write_empty_snapshot
from tierlog.model import IndexType, RemoteLogSegmentState, TopicPartition
from tierlog.records import RecordBatchBuilder
from tierlog.server import protocol as p
from tierlog_spark.cli import spark_group
from tierlog_spark.metadata_source import load_remote_log_metadata
from tierlog_spark.tier import tier

from tests.server.conftest import T0
from tests.spark.tiered import TieredCluster, tiered_cluster

pytest.importorskip("tierlog_fsspec")

COPIED, BULK = "copied", "bulk"
PARTITIONS = 2


def _produce(tiered: TieredCluster, batches: int) -> None:
    for n in range(batches):
        builder = RecordBatchBuilder()
        for i in range(4):
            builder.append(T0 + n * 4 + i, b"k", b"value-%06d-" % (n * 4 + i) + bytes(40))
        data = builder.build()
        for topic in (COPIED, BULK):
            for partition in range(PARTITIONS):
                response = tiered.client.produce(topic, partition, data)
                assert response.error_code == p.NONE, response


def _enable(tiered: TieredCluster, topic: str) -> None:
    with Admin(tiered.cluster.transport) as admin:
        admin.alter_configs(
            {ConfigResource.topic(topic): [AlterConfig("remote.storage.enable", "true")]}
        )
    plog = _log(tiered, topic, 0)
    deadline = time.monotonic() + 30
    while not plog.config.remote_storage_enable:
        assert time.monotonic() < deadline, "the config change did not arrive"
        time.sleep(0.01)


def _log(tiered: TieredCluster, topic: str, partition: int) -> Any:
    replica = tiered.cluster.broker(0).partition(TopicPartition(topic, partition))
    assert replica is not None
    return replica.log


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredCluster]:
    root = tmp_path_factory.mktemp("tier")
    with tiered_cluster(root, **{"remote.log.manager.task.interval.ms": "600000"}) as cluster:
        for topic in (COPIED, BULK):
            cluster.client.create(
                topic, PARTITIONS, segment_bytes="1024", local_retention_bytes="1"
            )
        _produce(cluster, 30)
        yield cluster


def _segments(tiered: TieredCluster, topic: str) -> list[Any]:
    caches = load_remote_log_metadata([tiered.log_dir], topics=[topic])
    return sorted(
        (s for cache in caches.values() for s in cache.list_all_remote_log_segments()),
        key=lambda s: (s.topic_id_partition.partition, s.start_offset),
    )


def _shape(segment: Any) -> tuple[Any, ...]:
    """What the copy task decides about a segment: all but its ids and event times."""
    return (
        segment.topic_id_partition.partition,
        segment.start_offset,
        segment.end_offset,
        segment.max_timestamp_ms,
        segment.broker_id,
        segment.segment_size_in_bytes,
        segment.segment_leader_epochs,
        segment.state,
        segment.txn_idx_empty,
        segment.custom_metadata is not None,
    )


def test_tier_leaves_the_metadata_the_copy_task_would(spark: Any, tiered: TieredCluster) -> None:
    bulk_log = _log(tiered, BULK, 1)
    rolled = [s for s in bulk_log.segments() if s is not bulk_log.segments()[-1]]
    assert len(rolled) > 4
    missing = rolled[2]
    snapshot = bulk_log.directory / f"{rolled[3].base_offset:020d}.snapshot"
    snapshot.unlink(missing_ok=True)

    _enable(tiered, COPIED)
    tiered.cluster.broker(0).remote_log_manager.wake()
    for partition in range(PARTITIONS):
        tiered.wait_tiered(COPIED, partition)

    _enable(tiered, BULK)
    assert _segments(tiered, BULK) == [], "the runtime has not started on the job's topic"
    result = tier(spark, [tiered.cluster.broker(n) for n in tiered.cluster.broker_ids], [BULK])
    assert result.failed == {}
    ends = {partition: tiered.wait_tiered(BULK, partition) for partition in range(PARTITIONS)}

    copied, bulk = _segments(tiered, COPIED), _segments(tiered, BULK)
    assert [_shape(s) for s in bulk] == [_shape(s) for s in copied]
    assert all(s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for s in bulk)
    assert result.segments == len(bulk)
    for partition in range(PARTITIONS):
        mine = [s for s in bulk if s.topic_id_partition.partition == partition]
        covered = [o for s in mine for o in range(s.start_offset, s.end_offset + 1)]
        assert covered == list(range(ends[partition])), "no offset twice, none left out"
        assert _log(tiered, BULK, partition).highest_offset_in_remote_storage == ends[partition] - 1
    assert not tiered.cluster.broker(0).remote_log_manager.segments_being_copied

    host = tiered.cluster.broker(0).plugin_host
    (uploaded,) = [
        s
        for s in bulk
        if s.topic_id_partition.partition == 1 and s.start_offset == missing.base_offset
    ]
    stream = host.storage.fetch_index(uploaded, IndexType.PRODUCER_SNAPSHOT)
    expected = write_empty_snapshot(Path(tiered.remote.parent), uploaded.end_offset + 1)
    assert stream.read() == expected.read_bytes(), "a missing snapshot is tiered empty"
    stream.close()

    again = tier(spark, [tiered.cluster.broker(n) for n in tiered.cluster.broker_ids], [BULK])
    assert again.segments == 0 and _segments(tiered, BULK) == bulk


def test_the_cli_tiers_a_backlog_in_a_restarted_cluster(tmp_path: Path) -> None:
    with tiered_cluster(tmp_path, **{"remote.log.manager.task.interval.ms": "600000"}) as cluster:
        cluster.client.create("backlog", 1, segment_bytes="1024", local_retention_bytes="1")
        for n in range(20):
            builder = RecordBatchBuilder()
            builder.append(T0 + n, b"k", b"value-%06d-" % n + bytes(40))
            assert cluster.client.produce("backlog", 0, builder.build()).error_code == p.NONE
        with Admin(cluster.cluster.transport) as admin:
            admin.alter_configs(
                {ConfigResource.topic("backlog"): [AlterConfig("remote.storage.enable", "true")]}
            )
        plog = cluster.cluster.broker(0).partition(TopicPartition("backlog", 0)).log
        while not plog.config.remote_storage_enable:
            time.sleep(0.01)
        rolled_end = plog.segments()[-1].base_offset
        settings, log_dir = cluster.settings, cluster.log_dir
    assert load_remote_log_metadata([log_dir], topics=["backlog"]) == {}

    config = tmp_path / "runtime.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    args = ["tier", "--config", str(config), "--topics", "backlog"]
    args += ["--data-dir", str(tmp_path / "data"), "--master", "local[2]"]
    result = CliRunner().invoke(spark_group, args)
    assert result.exit_code == 0, result.output

    (cache,) = load_remote_log_metadata([log_dir], topics=["backlog"]).values()
    segments = sorted(cache.list_all_remote_log_segments(), key=lambda s: s.start_offset)
    assert all(s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for s in segments)
    covered = [o for s in segments for o in range(s.start_offset, s.end_offset + 1)]
    assert covered == list(range(rolled_end)), "every rolled offset tiered once"
