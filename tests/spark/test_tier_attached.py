"""``tier_attached``: the tier job in a process of its own, beside brokers in processes of theirs.

Two brokers run as ``tierlog run`` processes on a one-node ZooKeeper, tiering through the fsspec
plugin to a bucket directory. Their copy task interval is long, so after its first (empty) run
on a new leadership a broker's copy task leaves the backlog to the job. The job, in this test's
process, is given the leader's config: it tiers what that broker leads. Leadership then moves
to the other broker, whose copy task runs at once and must go on exactly where the job stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tierlog.client import Admin
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.log import files
from tierlog.model import RemoteLogSegmentState, TopicPartition
from tierlog.remote.copy_slot import CopySlot
from tierlog.server import protocol as p
from tierlog.testing.processes import ProcessCluster, wait_until
from tierlog.wire.network_transport import NetworkTransport
from tierlog_spark.cli import spark_group
from tierlog_spark.metadata_source import load_remote_log_metadata
from tierlog_spark.tier import TierError, TierResult, tier_attached

from tests.cluster.conftest import tiered_settings
from tests.coordination.conftest import started_ensemble

pytestmark = pytest.mark.one_reader

pytest.importorskip("tierlog_fsspec")
confluent_kafka = pytest.importorskip("confluent_kafka")
kafka_admin = pytest.importorskip("confluent_kafka.admin")

TOPIC = "backlog"
TP = TopicPartition(TOPIC, 0)
#: Records produced before any test: many 1 KiB segments for the job to tier.
BACKLOG = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    root = tmp_path_factory.mktemp("attached")
    bucket = root / "bucket"
    bucket.mkdir()
    zk: ZooKeeperEnsemble = started_ensemble(root / "zookeeper", 1)
    settings = {
        **tiered_settings(bucket),
        "remote.log.manager.task.interval.ms": 600_000,
        "rlmm.config.remote.log.metadata.topic.replication.factor": 2,
        "offsets.topic.replication.factor": 2,
    }
    try:
        with ProcessCluster(root / "brokers", zk.connect_string, 2, settings=settings) as running:
            running.bucket = bucket  # type: ignore[attr-defined]
            admin = kafka_admin.AdminClient({"bootstrap.servers": running.bootstrap_servers()})
            topic = kafka_admin.NewTopic(
                TOPIC, 1, 2, config={"segment.bytes": "1024", "remote.storage.enable": "true"}
            )
            admin.create_topics([topic])[TOPIC].result(30)
            wait_until(lambda: running.leader(TOPIC, 0) >= 0, 30, "a leader")
            wait_until(
                lambda: _copy_task_ran(running, running.leader(TOPIC, 0)),
                60,
                "the leader's first copy run (its next is ten minutes later)",
            )
            _produce(running, BACKLOG)
            yield running
    finally:
        zk.stop()


def _copy_task_ran(cluster: ProcessCluster, broker_id: int) -> bool:
    """Whether ``broker_id``'s copy task ran for the topic with its metadata loaded: it has
    then published the topic's copy lag."""
    series = (
        cluster.broker(broker_id)
        .metrics()
        .get("tierlog_brokertopicmetrics_remotecopylagsegments", [])
    )
    return any(labels.get("topic") == TOPIC for labels, _value in series)


def _held_slot(directory: Path) -> CopySlot:
    """The slot, held by this process as another job would hold it."""
    slot = CopySlot.try_acquire(directory)
    assert slot is not None
    return slot


def _produce(cluster: ProcessCluster, count: int, start: int = 0) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 0}
    )
    for n in range(start, start + count):
        producer.produce(TOPIC, b"value-%06d-" % n + bytes(60), b"k", partition=0)
        if n % 8 == 7:
            producer.flush(30)
    assert producer.flush(30) == 0


def _partition_dir(cluster: ProcessCluster, broker_id: int) -> Path:
    return cluster.broker(broker_id).log_dir / files.log_dir_name(TP)


def _segments(cluster: ProcessCluster) -> list[Any]:
    """Every remote segment of the topic, as broker 0's replica of the metadata topic has it
    (both brokers hold every metadata partition)."""
    caches = load_remote_log_metadata([cluster.broker(0).log_dir], topics=[TOPIC])
    return sorted(
        (s for cache in caches.values() for s in cache.list_all_remote_log_segments()),
        key=lambda s: s.start_offset,
    )


def _finished(cluster: ProcessCluster) -> list[Any]:
    return [s for s in _segments(cluster) if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]


def _uploads(cluster: ProcessCluster) -> set[str]:
    """The segment ids with a log segment object in the bucket."""
    bucket: Path = cluster.bucket  # type: ignore[attr-defined]
    return {path.stem[21:] for path in bucket.rglob("*.log")}


def _rolled_end(cluster: ProcessCluster, broker_id: int) -> int:
    bases = sorted(
        files.offset_from_file_name(p.name)
        for p in _partition_dir(cluster, broker_id).iterdir()
        if files.is_segment_file(p.name, files.LOG_SUFFIX)
    )
    return bases[-1]


def _covered(segments: list[Any]) -> list[int]:
    return [o for s in segments for o in range(s.start_offset, s.end_offset + 1)]


def test_the_job_refuses_a_partition_whose_slot_another_process_holds(
    spark: Any, cluster: ProcessCluster
) -> None:
    lead = cluster.leader(TOPIC, 0)
    config = cluster.broker(lead).config_path
    with _held_slot(_partition_dir(cluster, lead)):
        with pytest.raises(TierError, match=r"backlog-0: its copy slot .* is held by another"):
            tier_attached(spark, config, [TOPIC], slot_timeout_s=0.5)
        args = ["tier", "--config", str(config), "--topics", TOPIC, "--ready-timeout-ms", "500"]
        refused = CliRunner().invoke(spark_group, args)
        assert refused.exit_code == 1
        assert "backlog-0: its copy slot" in refused.output, refused.output
    assert _segments(cluster) == [], "nothing was tiered"


def test_the_job_tiers_the_backlog_once_and_the_next_leader_goes_on_from_there(
    spark: Any, cluster: ProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    lead = cluster.leader(TOPIC, 0)
    other = 1 - lead
    config = cluster.broker(lead).config_path
    backlog_end = _rolled_end(cluster, lead)
    assert backlog_end > 40, "a backlog of many rolled segments"

    result = tier_attached(spark, config, [TOPIC])
    assert result.failed == {}
    finished = wait_until(
        lambda: (f := _finished(cluster)) and f[-1].end_offset == backlog_end - 1 and f,
        30,
        "the job's metadata in broker 0's replica of the metadata topic",
    )
    assert result.segments == len(finished) > 1
    assert _covered(finished) == list(range(backlog_end)), "no offset twice, none left out"
    assert {s.broker_id for s in finished} == {lead}
    ids = {s.remote_log_segment_id.id for s in finished}
    assert {str(i) for i in ids} <= _uploads(cluster)
    assert len(_uploads(cluster)) == len(ids), "no object without finished metadata"

    again = CliRunner().invoke(spark_group, ["tier", "--config", str(config), "--topics", TOPIC])
    assert again.exit_code == 0, again.output
    assert again.output.endswith("tiered 0 segments\n"), "the cluster was attached, not started"

    # The next run finds the slot held, then the leadership moved: it stops, uploading nothing.
    caplog.set_level(logging.INFO, logger="tierlog_spark.attached")
    _produce(cluster, 80, start=BACKLOG)
    outcome: list[TierResult | BaseException] = []
    with _held_slot(_partition_dir(cluster, lead)):

        def run() -> None:
            try:
                outcome.append(tier_attached(spark, config, [TOPIC], slot_timeout_s=120))
            except BaseException as err:
                outcome.append(err)

        job = threading.Thread(target=run)
        job.start()
        wait_until(lambda: "waiting for its copy slot" in caplog.text, 60, "the job to wait")
        _move_leadership_to(cluster, other)
    job.join(180)
    assert not job.is_alive()
    (stopped,) = outcome
    assert isinstance(stopped, TierResult), stopped
    assert stopped.segments == 0
    (why,) = stopped.failed.values()
    assert "backlog-0" in str(next(iter(stopped.failed))) and "leadership changed" in why

    # The other broker's copy task runs on its new leadership and starts where the job stopped.
    end = _rolled_end(cluster, other)
    assert end > backlog_end
    segments = wait_until(
        lambda: (f := _finished(cluster)) and f[-1].end_offset == end - 1 and f,
        60,
        "the new leader to tier the segments rolled since",
    )
    assert _covered(segments) == list(range(end)), "no offset twice, none left out"
    assert {s.broker_id for s in segments if s.start_offset >= backlog_end} == {other}
    assert all(s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for s in _segments(cluster))
    assert len(_uploads(cluster)) == len(segments)


def _move_leadership_to(cluster: ProcessCluster, broker_id: int) -> None:
    """Puts ``broker_id`` first among the replicas and elects the preferred leader, as an
    operator would; returns once every broker's metadata names the new leader."""
    transport = NetworkTransport(
        lambda b: ("127.0.0.1", cluster.broker(b).port), lambda: (0, 1), client_id="test"
    )
    try:
        with Admin(transport) as admin:
            admin.alter_partition_reassignments({TP: [broker_id, 1 - broker_id]})
            wait_until(
                lambda: not admin.list_partition_reassignments(), 30, "the reassignment to end"
            )
            assert admin.elect_leaders(p.ElectionType.PREFERRED, [TP]) == {TP: None}

        def everyone_knows() -> bool:
            request = p.MetadataRequest([p.MetadataRequestTopic(TOPIC)])
            for b in (0, 1):
                (topic,) = transport.send(b, request).topics
                if topic.partitions[0].leader_id != broker_id:
                    return False
            return True

        wait_until(everyone_knows, 30, f"every broker to see broker {broker_id} lead")
    finally:
        transport.close()
