"""A running tiered cluster for the Spark job tests: produce records, wait until they are tiered."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import attrs
from tierlog.cluster import EmbeddedCluster
from tierlog.model import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
)
from tierlog.records import RecordBatchBuilder
from tierlog.server import protocol as p

from tests.remote.conftest import tiered_settings
from tests.server.conftest import T0, Client
from tests.waiting import wait_until

#: A record as the tests compare it: (topic, partition, offset, value, timestamp ms).
Record = tuple[str, int, int, bytes, int]
DAY_MS = 86_400_000
TICK_MS = DAY_MS // 400
#: The first record's timestamp: ten ticks before a UTC midnight three to four days ago, so the
#: records cross a UTC day at the same offset whatever the time of day the tests run.
FIRST_TIMESTAMP = (T0 - 3 * DAY_MS) // DAY_MS * DAY_MS - 10 * TICK_MS


@attrs.define
class TieredCluster:
    cluster: EmbeddedCluster
    client: Client
    settings: dict[str, str]
    log_dir: Path
    remote: Path
    produced: dict[tuple[str, int], list[Record]] = attrs.field(factory=dict)
    clock: Iterator[int] = attrs.field(factory=itertools.count)

    def create(self, topic: str, partitions: int) -> None:
        self.client.create(
            topic,
            partitions,
            segment_bytes="1024",
            remote_storage_enable="true",
            local_retention_bytes="1",
        )

    def produce(self, topic: str, partition: int, batches: int, per_batch: int = 4) -> None:
        """Appends records a tick apart from ``FIRST_TIMESTAMP``: the eleventh crosses a day."""
        for _ in range(batches):
            builder = RecordBatchBuilder()
            values = []
            for _ in range(per_batch):
                tick = next(self.clock)
                timestamp = FIRST_TIMESTAMP + tick * TICK_MS
                value = b"value-%d-" % tick + bytes(40)
                builder.append(timestamp, b"k", value)
                values.append((value, timestamp))
            response = self.client.produce(topic, partition, builder.build())
            assert response.error_code == p.NONE, response
            records = self.produced.setdefault((topic, partition), [])
            for i, (value, timestamp) in enumerate(values):
                records.append((topic, partition, response.base_offset + i, value, timestamp))

    def wait_tiered(self, topic: str, partition: int) -> int:
        """Waits until every rolled segment is tiered; the first offset not tiered."""
        replica = self.cluster.broker(0).partition(TopicPartition(topic, partition))
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

    def tiered_records(self, topic: str, partition: int) -> list[Record]:
        end = self.wait_tiered(topic, partition)
        return [r for r in self.produced.get((topic, partition), []) if r[2] < end]


def spark_settings(root: Path, **extra: str) -> dict[str, str]:
    """Runtime settings tiering to ``root/remote`` through fsspec, metadata in the metadata
    topic (3 partitions, which the reader's options must match)."""
    settings = tiered_settings(
        root / "remote",
        **{
            "remote.log.metadata.manager.name": "topic",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            # A write racing the shutdown must not hold the broker's stop for two minutes.
            "rlmm.config.remote.log.metadata.consume.wait.ms": "10000",
            **extra,
        },
    )
    return {key: str(value) for key, value in settings.items()}


@contextmanager
def tiered_cluster(root: Path, **extra: str) -> Iterator[TieredCluster]:
    """One broker tiering to ``root/remote`` through fsspec, metadata in the metadata topic."""
    settings = spark_settings(root, **extra)
    cluster = EmbeddedCluster(1, root / "data", settings)
    with cluster:
        yield TieredCluster(
            cluster,
            Client(cluster),
            settings,
            root / "data" / "broker-0" / "logs",
            root / "remote",
        )


def upload_again(
    cluster: EmbeddedCluster,
    tip: TopicIdPartition,
    work: Path,
    rewrite: Callable[[bytes], bytes] | None = None,
) -> tuple[RemoteLogSegmentMetadata, RemoteLogSegmentMetadata]:
    """Uploads the second tiered segment of ``tip`` again under a new id, as a retried copy task
    would, with its log bytes passed through ``rewrite`` when given (offset and time indexes are
    then left empty); returns (new, old).

    The upload is registered as being copied, as the copy task does, or the expiration task
    would take it for an abandoned one and delete it.
    """
    broker = cluster.broker(0)
    host, rlm = broker.plugin_host, broker.remote_log_manager
    assert host is not None and rlm is not None
    finished = [
        s
        for s in host.metadata.list_remote_log_segments(tip)
        if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    ]
    old = finished[1]
    work.mkdir()

    def fetched(stream: BinaryIO) -> bytes:
        try:
            return stream.read()
        finally:
            stream.close()

    data = fetched(host.storage.fetch_log_segment(old, 0))
    indexes = {"index": IndexType.OFFSET, "timeindex": IndexType.TIMESTAMP}
    contents = {
        "log": data if rewrite is None else rewrite(data),
        **{
            name: b"" if rewrite is not None else fetched(host.storage.fetch_index(old, kind))
            for name, kind in indexes.items()
        },
        "snapshot": fetched(host.storage.fetch_index(old, IndexType.PRODUCER_SNAPSHOT)),
    }
    files = {}
    for name, content in contents.items():
        files[name] = work / f"{old.start_offset:020d}.{name}"
        files[name].write_bytes(content)
    new = attrs.evolve(
        old,
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        custom_metadata=None,
        segment_size_in_bytes=len(contents["log"]),
    )
    rlm.segments_being_copied.add(new.remote_log_segment_id)
    host.metadata.add_remote_log_segment_metadata(new)
    custom = host.storage.copy_log_segment_data(
        new,
        LogSegmentData(
            files["log"],
            files["index"],
            files["timeindex"],
            None,
            files["snapshot"],
            b"0\n1\n%d %d\n" % old.segment_leader_epochs[0],
        ),
    )
    host.metadata.update_remote_log_segment_metadata(
        RemoteLogSegmentMetadataUpdate(
            new.remote_log_segment_id,
            new.event_timestamp_ms + 1,
            custom,
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            0,
        )
    )
    rlm.segments_being_copied.discard(new.remote_log_segment_id)
    return new, old
