"""How long a restarted broker takes until every partition's remote metadata is ready.

The topic-based metadata manager rebuilds its per-partition caches after a restart, and each
partition answers "not ready" (KIP-1007) until its share is loaded. Setup: 1,000 user partitions
x 100 finished segments (100 x 10 in quick mode); each segment's COPY_SEGMENT_STARTED and
COPY_SEGMENT_FINISHED events are published to ``__remote_log_metadata`` with a plain producer,
as the copy tasks would have. The broker is then restarted and handed every partition; the
time runs from the broker's start until the last partition is ready:

* with the consumed-state checkpoint written at the previous clean stop (target under 2 s);
  its baseline is the cold figure below, measured in the same run;
* cold, the checkpoint deleted so the topic is replayed (target under 10 s); its baseline is a
  plain consumer reading the same records from the same topic (no decoding, no caches).

The topic is compacted, so a restart's cost is bounded by the live segments, not by history. A
third row measures that: the same partitions with the same live segments, once after a single
retention cycle and once after ten (the nine before it uploaded, expired and tombstoned every
segment), each with the log cleaner run over the topic (twice, so the tombstones go too) and
the checkpoint deleted; the median of three restarts. Its ``value`` is the ten-cycle time, its
baseline the one-cycle time and its ``target`` a maximum for the ratio (1.5): close to 1 means
history costs nothing.

Rows: ``value`` in seconds, ``target`` a maximum for it (for a ratio, for the ratio),
``ratio = value / baseline``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

N_METADATA_PARTITIONS = 50


def _row(name: str, value: float, baseline: float, target: float) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value, 3),
        "unit": "s",
        "baseline": round(baseline, 3),
        "ratio": round(value / baseline, 3) if baseline else 0.0,
        "target": target,
        "ok": value <= target,
    }


def _settings(work: Path) -> dict[str, object]:
    return {
        "log.cleaner.backoff.ms": 50,
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": (work / "remote").resolve().as_uri(),
        "remote.log.metadata.manager.name": "topic",
        "rlmm.config.remote.log.metadata.topic.num.partitions": N_METADATA_PARTITIONS,
    }


def _partitions(count: int) -> list[Any]:
    from tierlog.model import TopicIdPartition, Uuid

    topic_id = Uuid.random()
    return [TopicIdPartition.of(topic_id, "bench", n) for n in range(count)]


def _time_to_ready(work: Path, partitions: list[Any], listed: list[int] | None = None) -> float:
    """Starts the broker, hands it every partition, returns the seconds until all are ready;
    appends to ``listed`` (when given) how many segments each partition then lists."""
    from tierlog.cluster import EmbeddedCluster

    cluster = EmbeddedCluster(1, work / "data", _settings(work))
    began = time.perf_counter()
    cluster.start()
    try:
        host = cluster.broker(0).plugin_host
        assert host is not None
        rlmm = host.metadata
        rlmm.on_partition_leadership_changes(frozenset(partitions), frozenset())
        pending = list(partitions)
        while pending:  # one check per wake-up while waiting, so polling costs nothing
            while pending and rlmm.is_ready(pending[-1]):
                pending.pop()
            if pending:
                time.sleep(0.005)
        elapsed = time.perf_counter() - began
        if listed is not None:
            listed += [len(list(rlmm.list_remote_log_segments(tip))) for tip in partitions]
        return elapsed
    finally:
        cluster.stop()


def _raw_consume(work: Path, expected: int) -> float:
    """Seconds for a plain consumer to read ``expected`` records of the metadata topic."""
    from tierlog.client import Consumer
    from tierlog.cluster import EmbeddedCluster
    from tierlog.model import TopicPartition

    with EmbeddedCluster(1, work / "data", _settings(work)) as cluster:
        consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
        consumer.assign(
            TopicPartition("__remote_log_metadata", n) for n in range(N_METADATA_PARTITIONS)
        )
        began = time.perf_counter()
        seen = 0
        while seen < expected:
            seen += len(consumer.poll(1000))
        elapsed = time.perf_counter() - began
        consumer.close()
        return elapsed


def _publish(cluster: Any, partitions: list[Any], segments: int, cycles: int = 1) -> int:
    """Publishes ``cycles`` generations of ``segments`` segments per partition as the manager
    would, every generation but the last expired (deleted, then tombstoned); returns how many
    records."""
    from tierlog.client import Producer
    from tierlog.metadata.keys import event_key, segment_keys
    from tierlog.metadata.partitioner import metadata_partition
    from tierlog.metadata.serde import encode_event
    from tierlog.model import (
        RemoteLogSegmentId,
        RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate,
        RemoteLogSegmentState,
    )

    producer = Producer(
        cluster.transport,
        {"linger.ms": "20", "batch.size": str(1 << 20), "acks": "all"},
        internal_topics_allowed=True,
    )
    sent = 0
    for tip in partitions:
        target = metadata_partition(tip, N_METADATA_PARTITIONS)
        for cycle in range(cycles):
            expired = cycle < cycles - 1
            for n in range(segments):
                start = (cycle * segments + n) * 1000
                started = RemoteLogSegmentMetadata(
                    remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
                    start_offset=start,
                    end_offset=start + 999,
                    max_timestamp_ms=1_700_000_000_000 + start,
                    broker_id=0,
                    event_timestamp_ms=1_700_000_000_000,
                    segment_size_in_bytes=1 << 20,
                    segment_leader_epochs=((0, start),),
                )
                states = [RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
                if expired:
                    states += [
                        RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                        RemoteLogSegmentState.DELETE_SEGMENT_FINISHED,
                    ]
                events: list[Any] = [started]
                events += [
                    RemoteLogSegmentMetadataUpdate(
                        started.remote_log_segment_id, 1_700_000_000_001, None, state, 0
                    )
                    for state in states
                ]
                for event in events:
                    producer.send(
                        "__remote_log_metadata",
                        encode_event(event),
                        key=event_key(event),
                        partition=target,
                    )
                sent += len(events)
                if expired:
                    for key in segment_keys(started.remote_log_segment_id):
                        producer.send("__remote_log_metadata", None, key=key, partition=target)
                    sent += 4
    producer.flush()
    producer.close()
    return sent


def _clean(cluster: Any) -> None:
    """Runs the cleaner over every metadata partition twice: the first pass sets the tombstones'
    delete horizon (``delete.retention.ms`` 0 here), the second drops them. Each pass needs the
    active segment rolled past what it cleans, so each partition gets filler records first: one
    keyed event of a partition nobody holds, overwritten until the segment rolls."""
    from tierlog.client import Producer
    from tierlog.metadata.keys import event_key
    from tierlog.metadata.serde import encode_event
    from tierlog.model import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicPartition

    filler = RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(_partitions(1)[0]),
        start_offset=0,
        end_offset=0,
        max_timestamp_ms=0,
        broker_id=0,
        event_timestamp_ms=0,
        segment_size_in_bytes=1,
        segment_leader_epochs=((0, 0),),
    )
    value, key = encode_event(filler), event_key(filler)
    producer = Producer(
        cluster.transport, {"linger.ms": "5", "acks": "all"}, internal_topics_allowed=True
    )
    broker = cluster.broker(0)
    logs = [
        broker.partition(TopicPartition("__remote_log_metadata", mp)).log
        for mp in range(N_METADATA_PARTITIONS)
    ]
    for _ in range(2):
        marks = [plog.segments()[-1].base_offset for plog in logs]
        for mp, plog in enumerate(logs):
            while plog.segments()[-1].base_offset == marks[mp]:
                for _ in range(100):
                    producer.send("__remote_log_metadata", value, key=key, partition=mp)
                producer.flush()
        rolled = [plog.segments()[-1].base_offset for plog in logs]
        for mp, plog in enumerate(logs):
            while (plog.cleaner_checkpoint or 0) < rolled[mp]:
                time.sleep(0.02)
    producer.close()


def _cleaned_restart(
    work: Path, partitions: list[Any], segments: int, cycles: int, segment_bytes: int
) -> tuple[float, int, tuple[int, int]]:
    """Seconds to ready after a cold restart of a cleaned topic holding ``cycles`` generations;
    also the records published and the (records, batches) left."""
    from tierlog.cluster import EmbeddedCluster

    with EmbeddedCluster(1, work / "data", _settings(work)) as cluster:
        host = cluster.broker(0).plugin_host
        assert host is not None
        manager = host.plugin_manager.get_plugin("topic")
        assert manager is not None and manager.wait_initialized(60)
        cluster.controller.alter_topic_configs(
            "__remote_log_metadata",
            {
                "segment.bytes": str(segment_bytes),
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "0",
            },
        )
        published = _publish(cluster, partitions, segments, cycles)
        _clean(cluster)
    left = [0, 0]  # counted once the broker has stopped, so no cleaning runs under the count
    for path in (work / "data" / "broker-0" / "logs").glob("__remote_log_metadata-*/*.log"):
        records, batches = _count_records(path)
        left[0] += records
        left[1] += batches
    times = []
    listed: list[int] = []
    for _ in range(3):  # the median of three cold restarts
        checkpoint = work / "data" / "broker-0" / "logs" / "remote-log-metadata.checkpoint"
        checkpoint.unlink(missing_ok=True)
        times.append(_time_to_ready(work, partitions, listed))
    if set(listed) != {segments}:  # a figure from lost metadata would be worthless
        raise AssertionError(
            f"after the restart partitions list {sorted(set(listed))} segments, not {segments}"
        )
    return sorted(times)[1], published, (left[0], left[1])


def _count_records(path: Path) -> tuple[int, int]:
    """Records and batches of one segment file."""
    from tierlog.records import iter_batches

    records = batches = 0
    for batch in iter_batches(path.read_bytes()):
        batches += 1
        records += sum(1 for _ in batch.records())
    return records, batches


def run(quick: bool) -> list[dict[str, Any]]:
    from tierlog.cluster import EmbeddedCluster

    count, segments = (100, 10) if quick else (1000, 100)
    work = Path(tempfile.mkdtemp(prefix="tierlog-metadata-bench-"))
    try:
        partitions = _partitions(count)
        with EmbeddedCluster(1, work / "data", _settings(work)) as cluster:
            host = cluster.broker(0).plugin_host
            assert host is not None
            plugin = host.plugin_manager.get_plugin("topic")
            assert plugin is not None and plugin.wait_initialized(60)
            events = _publish(cluster, partitions, segments)
            # Held once before the clean stop, so the stop writes the checkpoint.
            host.metadata.on_partition_leadership_changes(frozenset(partitions), frozenset())
            while not all(host.metadata.is_ready(tip) for tip in partitions):
                time.sleep(0.01)
        checkpoint = work / "data" / "broker-0" / "logs" / "remote-log-metadata.checkpoint"
        assert checkpoint.exists()
        warm = _time_to_ready(work, partitions)
        checkpoint.unlink()
        cold = _time_to_ready(work, partitions)
        raw = _raw_consume(work, events)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    label = f"{count:,} partitions x {segments} segments ({events:,} events)"
    segment_bytes = (64 << 10) if quick else (1 << 20)
    bounded = []
    for cycles in (1, 10):
        work = Path(tempfile.mkdtemp(prefix="tierlog-metadata-bench-"))
        try:
            bounded.append(
                _cleaned_restart(work, _partitions(count), segments, cycles, segment_bytes)
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    (one, _, left_one), (ten, published, left_ten) = bounded
    ratio_row = _row(
        f"metadata ready after restart, cleaned topic, {count:,} partitions x {segments} live "
        f"segments after 10 retention cycles ({published:,} records published, "
        f"{left_ten[0]:,} left in {left_ten[1]:,} batches; one cycle leaves {left_one[0]:,} "
        f"in {left_one[1]:,})",
        ten,
        one,
        1.5,
    )
    ratio_row["ok"] = ratio_row["ratio"] <= 1.5
    return [
        _row(f"metadata ready after restart, checkpoint, {label}", warm, cold, 2.0),
        _row(f"metadata ready after restart, cold replay, {label}", cold, raw, 10.0),
        ratio_row,
    ]
