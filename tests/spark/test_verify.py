"""``verify``: finished segments present and CRC-valid, orphan uploads found and deleted.

One cluster tiers three topics, then orphans are planted in one of them: the objects of a
segment copied under a new segment id with no metadata, and another copy whose metadata says
only COPY_SEGMENT_STARTED. The cluster is stopped before anything is verified, so the runtime's
own expiration cannot race the tests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from tierlog.records import RecordBatchBuilder
from tierlog_spark.cli import spark_group
from tierlog_spark.metadata_source import load_remote_log_metadata
from tierlog_spark.verify import COPY_NOT_FINISHED, NO_METADATA, scan_segment, verify

from tests.spark.tiered import TieredCluster, tiered_cluster

pytest.importorskip("tierlog_fsspec")

CLEAN, PLANTED, CORRUPT = "clean", "planted", "corrupt"


@attrs.frozen
class Planted:
    tiered: TieredCluster
    no_metadata: Uuid
    copy_started: Uuid


def _copy_objects(remote: Path, segment: RemoteLogSegmentMetadata, new_id: Uuid) -> None:
    """The segment's objects copied under ``new_id``, as an upload that lost its metadata."""
    old_id = str(segment.remote_log_segment_id.id)
    for path in remote.rglob(f"*-{old_id}.*"):
        shutil.copyfile(path, path.with_name(path.name.replace(old_id, str(new_id))))


def _finished(tiered: TieredCluster, topic: str) -> list[RemoteLogSegmentMetadata]:
    caches = load_remote_log_metadata([tiered.log_dir], topics=[topic])
    return sorted(
        (
            s
            for cache in caches.values()
            for s in cache.list_all_remote_log_segments()
            if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ),
        key=lambda s: s.start_offset,
    )


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planted]:
    with tiered_cluster(tmp_path_factory.mktemp("verify")) as tiered:
        for topic in (CLEAN, PLANTED, CORRUPT):
            tiered.create(topic, 1)
            tiered.produce(topic, 0, 10)
            tiered.wait_tiered(topic, 0)
        host = tiered.cluster.broker(0).plugin_host
        rlm = tiered.cluster.broker(0).remote_log_manager
        assert host is not None and rlm is not None
        segment = _finished(tiered, PLANTED)[0]
        no_metadata = Uuid.random()
        _copy_objects(tiered.remote, segment, no_metadata)
        started = attrs.evolve(
            segment,
            remote_log_segment_id=RemoteLogSegmentId(segment.topic_id_partition, Uuid.random()),
            state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
            custom_metadata=None,
            event_timestamp_ms=segment.event_timestamp_ms - 10_000,
        )
        rlm.segments_being_copied.add(started.remote_log_segment_id)
        host.metadata.add_remote_log_segment_metadata(started)
        _copy_objects(tiered.remote, segment, started.remote_log_segment_id.id)
    yield Planted(tiered, no_metadata, started.remote_log_segment_id.id)


def _verify(spark: Any, planted: Planted, topics: list[str], **kwargs: Any) -> Any:
    options = {"log.dirs": str(planted.tiered.log_dir)}
    return verify(spark, planted.tiered.settings, topics=topics, extra_options=options, **kwargs)


def test_a_clean_topic_reports_nothing(spark: Any, planted: Planted) -> None:
    report = _verify(spark, planted, [CLEAN], grace_ms=0)
    assert report.clean
    assert report.checked_segments == len(_finished(planted.tiered, CLEAN)) > 1
    assert report.problems == () and report.orphans == ()
    assert report.to_json()["clean"] is True


def test_planted_orphans_are_found_and_deleted(spark: Any, planted: Planted) -> None:
    young = _verify(spark, planted, [PLANTED])
    assert young.orphans == (), "uploads younger than the grace period may still be under way"

    report = _verify(spark, planted, [PLANTED], grace_ms=0)
    assert report.problems == ()
    reasons = {orphan.segment_id: orphan.reason for orphan in report.orphans}
    assert reasons == {
        str(planted.no_metadata): NO_METADATA,
        str(planted.copy_started): COPY_NOT_FINISHED,
    }
    assert all(len(orphan.objects) > 1 for orphan in report.orphans)
    assert not report.clean

    deleted = _verify(spark, planted, [PLANTED], grace_ms=0, delete_orphans=True)
    assert all(orphan.deleted for orphan in deleted.orphans) and deleted.clean
    for segment_id in (planted.no_metadata, planted.copy_started):
        assert not list(planted.tiered.remote.rglob(f"*{segment_id}*"))
    after = _verify(spark, planted, [PLANTED], grace_ms=0)
    assert after.clean and after.checked_segments == len(_finished(planted.tiered, PLANTED))


def test_a_corrupted_byte_is_reported_with_its_segment(spark: Any, planted: Planted) -> None:
    segment = _finished(planted.tiered, CORRUPT)[1]
    (data,) = planted.tiered.remote.rglob(f"*-{segment.remote_log_segment_id.id}.log")
    content = bytearray(data.read_bytes())
    content[200] ^= 0xFF
    data.write_bytes(bytes(content))

    report = _verify(spark, planted, [CORRUPT], grace_ms=0)
    (problem,) = report.problems
    assert problem.segment_id == str(segment.remote_log_segment_id.id)
    assert (problem.start_offset, problem.end_offset) == (segment.start_offset, segment.end_offset)
    assert problem.problem.startswith("unreadable"), "the plugin's own checksums refuse it"
    assert problem.position is not None and problem.position <= 200, problem
    assert "crc" in problem.problem.lower(), problem
    assert report.checked_segments == len(_finished(planted.tiered, CORRUPT))


def test_the_cli_prints_and_writes_a_report(planted: Planted, tmp_path: Path) -> None:
    config = tmp_path / "runtime.properties"
    config.write_text(
        "".join(f"{key}={value}\n" for key, value in planted.tiered.settings.items())
        + f"log.dirs={planted.tiered.log_dir}\n"
    )
    report = tmp_path / "report.json"
    args = ["verify", "--config", str(config), "--topics", CLEAN, "--report", str(report)]
    result = CliRunner().invoke(spark_group, [*args, "--grace-ms", "0", "--master", "local[2]"])
    assert result.exit_code == 0, result.output
    assert "0 bad segments, 0 orphan uploads left" in result.output
    written = json.loads(report.read_text())
    assert written["clean"] and written["checked_segments"] > 1


def test_unknown_ids_are_deleted_through_the_storage_plugin(spark: Any, planted: Planted) -> None:
    segment = _finished(planted.tiered, CLEAN)[0]
    stray = Uuid.random()
    _copy_objects(planted.tiered.remote, segment, stray)
    tip: TopicIdPartition = segment.topic_id_partition
    report = _verify(spark, planted, [CLEAN], grace_ms=0, delete_orphans=True)
    (orphan,) = report.orphans
    assert (orphan.topic_id, orphan.segment_id, orphan.deleted) == (
        str(tip.topic_id),
        str(stray),
        True,
    )
    assert not list(planted.tiered.remote.rglob(f"*{stray}*"))


def _segment(data: bytes, end_offset: int) -> RemoteLogSegmentMetadata:
    tip = TopicIdPartition.of(Uuid.random(), "t", 0)
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tip), 0, end_offset, 0, 0, 0, len(data), ((0, 0),)
    )


def test_a_batch_crc_failure_is_reported_at_the_batch() -> None:
    first = RecordBatchBuilder(base_offset=0)
    first.append(1, b"k", b"a" * 50)
    second = RecordBatchBuilder(base_offset=1)
    second.append(2, b"k", b"b" * 50)
    head = first.build()
    data = head + second.build()
    assert scan_segment(data, _segment(data, 1)) is None

    broken = bytearray(data)
    broken[len(head) + 70] ^= 0x01
    problem, position = scan_segment(bytes(broken), _segment(data, 1)) or ("", None)
    assert "crc" in problem.lower() and position == len(head)

    assert "size" in (scan_segment(head, _segment(data, 0)) or ("",))[0]
    assert "ends at offset 1" in (scan_segment(data, _segment(data, 5)) or ("",))[0]
