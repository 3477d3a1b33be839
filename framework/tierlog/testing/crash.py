"""Crash campaigns: SIGKILL a whole embedded cluster again and again, then count what was lost.

A worker process (``python -m tierlog.testing.crash DATA_DIR``) runs an embedded cluster on
``DATA_DIR`` and produces with ``acks=all`` for as long as it lives, appending one line per
acknowledged record to ``DATA_DIR/acks.log`` (``partition offset value``) only after the broker
acknowledged it. The campaign kills the worker with SIGKILL at a random moment, starts it again
on the same directories, and repeats. At the end it starts the cluster once more in this process,
reads every partition from its log start offset through both tiers, and reports acknowledged
records that are missing or changed, duplicates, unreadable tiered segments and orphan objects.

Kafka's guarantee is the bar: a record acknowledged with ``acks=all`` to a topic whose
``min.insync.replicas`` is at least 2 survives any process kill (the page cache outlives the
process), so a campaign with storage on local files must report nothing lost.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path

import attrs

from ..client import Admin, Consumer, NewTopic, Producer
from ..client.records import RecordMetadata
from ..cluster import EmbeddedCluster
from ..errors import OffsetOutOfRangeError, TopicExistsError
from ..model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
)
from ..records import iter_batches
from ..remote import RemoteLogManager

ACKS_FILE = "acks.log"
PLAN_FILE = "campaign.json"
READY = "ready"

log = logging.getLogger(__name__)


@attrs.frozen
class CrashPlan:
    """What one campaign runs: the cluster, the topic, and how often and when it is killed."""

    broker_settings: Mapping[str, str]
    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    topic_configs: Mapping[str, str] = attrs.field(factory=dict)
    topic: str = "crash"
    cycles: int = 20
    max_kill_delay: float = 4.0
    record_bytes: int = 100
    seed: int = 0

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CrashPlan:
        return cls(**json.loads(text))


def tiered_crash_plan(
    remote: Path, *, brokers: int, cycles: int, seed: int = 0, max_kill_delay: float = 4.0
) -> CrashPlan:
    """The reference campaign: two partitions replicated on every broker, tiered through the
    fsspec plugin to ``remote`` (zstd), 12 KiB segments, local copies deleted as soon as
    they are tiered, tasks every 100 ms, ``min.insync.replicas`` 2 where there are two."""
    settings = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": remote.resolve().as_uri(),
        "rsm.config.compression": "zstd",
        "remote.log.manager.task.interval.ms": "100",
        "log.retention.check.interval.ms": "100",
    }
    return CrashPlan(
        broker_settings=settings,
        brokers=brokers,
        partitions=2,
        replication_factor=brokers,
        topic_configs={
            "remote.storage.enable": "true",
            "segment.bytes": str(12 * 1024),
            "local.retention.bytes": "1",
            "min.insync.replicas": str(min(2, brokers)),
        },
        cycles=cycles,
        max_kill_delay=max_kill_delay,
        seed=seed,
    )


@attrs.define
class CrashReport:
    """What a campaign saw; ``lost``, ``changed`` and ``unreadable_segments`` must be zero."""

    cycles: int = 0
    acknowledged: int = 0
    lost: int = 0
    lost_ranges: list[tuple[int, int, int]] = attrs.field(factory=list)
    changed: int = 0
    duplicated: int = 0
    read: int = 0
    restart_seconds: list[float] = attrs.field(factory=list)
    #: A clean start of the same cluster after the campaign, the baseline for restarts.
    clean_start_seconds: float = 0.0
    finished_segments: int = 0
    unreadable_segments: int = 0
    orphan_objects: int = 0

    @property
    def restart_p50(self) -> float:
        return _percentile(self.restart_seconds, 0.5)

    @property
    def restart_max(self) -> float:
        return max(self.restart_seconds, default=0.0)

    def summary(self) -> str:
        return (
            f"{self.cycles} kills, {self.acknowledged} acknowledged, {self.lost} lost "
            f"({len(self.lost_ranges)} gaps), {self.changed} changed, {self.duplicated} "
            f"duplicated, {self.finished_segments} tiered segments ({self.unreadable_segments} "
            f"unreadable), {self.orphan_objects} orphan objects, restart p50 "
            f"{self.restart_p50:.2f} s max {self.restart_max:.2f} s"
        )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- the worker -------------------------------------------------------------------------------


def _cluster(plan: CrashPlan, data_dir: Path) -> EmbeddedCluster:
    return EmbeddedCluster(plan.brokers, data_dir / "cluster", dict(plan.broker_settings))


def _ensure_topic(cluster: EmbeddedCluster, plan: CrashPlan) -> None:
    topic = NewTopic(
        plan.topic,
        num_partitions=plan.partitions,
        replication_factor=plan.replication_factor,
        configs=dict(plan.topic_configs),
    )
    with Admin(cluster.transport) as admin, contextlib.suppress(TopicExistsError):
        admin.create_topics([topic])


def run_worker(data_dir: Path) -> None:
    """The worker's body: serve and produce until killed."""
    plan = CrashPlan.from_json((data_dir / PLAN_FILE).read_text())
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(process)d %(threadName)s %(name)s %(levelname)s %(message)s",
    )
    started = time.monotonic()
    cluster = _cluster(plan, data_dir)
    cluster.start()
    _ensure_topic(cluster, plan)
    acks = os.open(data_dir / ACKS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(acks, f"{READY} {time.monotonic() - started:.3f}\n".encode())
    rng = random.Random()
    in_flight = threading.Semaphore(2000)
    settings = {"acks": "all", "linger.ms": 2, "enable.idempotence": True}
    producer = Producer(cluster.transport, settings)
    tag = f"{os.getpid()}-{time.time_ns()}"

    def acknowledged(future: Future[RecordMetadata], value: bytes) -> None:
        in_flight.release()
        if future.exception() is None:
            meta = future.result()
            os.write(acks, b"%d %d %s\n" % (meta.partition, meta.offset, value))

    n = 0
    while True:
        in_flight.acquire()
        prefix = f"{tag}-{n}-".encode()
        padding = rng.randbytes(plan.record_bytes).hex().encode()
        value = (prefix + padding)[: max(len(prefix), plan.record_bytes)]
        future = producer.send(plan.topic, value, partition=n % plan.partitions)
        future.add_done_callback(functools.partial(acknowledged, value=value))
        n += 1


# --- the campaign -----------------------------------------------------------------------------


def _read_acks(path: Path) -> tuple[dict[tuple[int, int], list[bytes]], list[float]]:
    """Acknowledged values by (partition, offset), and the workers' start-up times."""
    acked: dict[tuple[int, int], list[bytes]] = {}
    ready: list[float] = []
    if not path.exists():
        return acked, ready
    for line in path.read_bytes().split(b"\n")[:-1]:  # a torn last line was never complete
        fields = line.split(b" ")
        if fields[0] == READY.encode():
            ready.append(float(fields[1]))
        elif len(fields) == 3:
            acked.setdefault((int(fields[0]), int(fields[1])), []).append(fields[2])
    return acked, ready


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"(unreadable: {err})"


def _wait_ready(
    path: Path, count: int, process: subprocess.Popen[bytes], timeout: float, log_path: Path
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the crash worker exited with {process.returncode} before serving; the end of "
                f"its log ({log_path}):\n{_tail(log_path)}"
            )
        if path.exists() and path.read_bytes().count(READY.encode() + b" ") >= count:
            return
        time.sleep(0.02)
    raise TimeoutError(f"the crash worker did not serve within {timeout} s")


#: Counts objects no metadata refers to, given a function listing the segment ids it does now.
OrphanCounter = Callable[[Callable[[], set[str]]], int]


def run_campaign(
    plan: CrashPlan,
    data_dir: Path,
    *,
    orphans: OrphanCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
    start_timeout: float = 120.0,
) -> CrashReport:
    """Kills a worker ``plan.cycles`` times, then checks every acknowledged record.

    ``orphans``, given a function listing the ids of the segments metadata references now,
    counts the objects in the bucket that belong to none of them (the storage layout is the
    plugin's): see :func:`count_file_orphans`.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / PLAN_FILE).write_text(plan.to_json())
    rng = random.Random(plan.seed)
    acks_path = data_dir / ACKS_FILE
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = data_dir / "worker.log"
    for cycle in range(plan.cycles):
        with open(log_path, "ab") as worker_log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tierlog.testing.crash", str(data_dir)],
                stdout=worker_log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            _wait_ready(acks_path, cycle + 1, process, start_timeout, log_path)
            time.sleep(rng.uniform(0, plan.max_kill_delay))
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
        if progress is not None:
            progress(cycle + 1, plan.cycles)
    return verify(plan, data_dir, orphans=orphans)


def verify(
    plan: CrashPlan,
    data_dir: Path,
    *,
    orphans: OrphanCounter | None = None,
    cleanup_timeout: float = 60.0,
) -> CrashReport:
    """Starts the cluster once more and compares what it serves with what was acknowledged.

    Before tiered segments and orphans are counted, the leaders get up to ``cleanup_timeout``
    seconds to finish what the kills interrupted (half-done deletions) and to tier what the
    last worker left on local disk. Uploads the kills abandoned stay in COPY_SEGMENT_STARTED
    until retention reaches them, as in Kafka: they are referenced, so never orphans.
    """
    acked, ready = _read_acks(data_dir / ACKS_FILE)
    report = CrashReport(cycles=len(ready), restart_seconds=ready)
    started = time.monotonic()
    with _cluster(plan, data_dir) as cluster:
        _ensure_topic(cluster, plan)
        report.clean_start_seconds = time.monotonic() - started
        served = _read_everything(cluster, plan)
        report.read = len(served)
        _compare(acked, served, report)
        deadline = time.monotonic() + cleanup_timeout
        while True:
            # Leaders keep tiering while this runs: settled means every rolled segment tiered,
            # no upload or deletion under way and no object without metadata, or the cleanup
            # time is up.
            unsettled = not _tiering_done(cluster, plan) or any(
                s.remote_log_segment_id in rlm.segments_being_copied
                or s.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED
                for rlm, s in _tiered_segments(cluster, plan)
            )

            def live() -> set[str]:
                segments = _tiered_segments(cluster, plan)
                return {str(s.remote_log_segment_id.id) for _, s in segments}

            report.orphan_objects = 0 if orphans is None else orphans(live)
            if time.monotonic() >= deadline or not (unsettled or report.orphan_objects):
                break
            time.sleep(0.2)
        _check_tiered_segments(_tiered_segments(cluster, plan), report)
    return report


def _compare(
    acked: dict[tuple[int, int], list[bytes]],
    served: dict[tuple[int, int], bytes],
    report: CrashReport,
) -> None:
    seen: dict[bytes, int] = {}
    for value in served.values():
        seen[value] = seen.get(value, 0) + 1
    report.duplicated = sum(count - 1 for count in seen.values())
    missing: list[tuple[int, int]] = []
    for key, values in acked.items():
        report.acknowledged += len(values)
        have = served.get(key)
        if have is None:
            missing.append(key)
            report.lost += len(values)
        else:
            report.changed += sum(1 for v in values if v != have)
    for partition, offset in sorted(missing):
        last = report.lost_ranges[-1] if report.lost_ranges else None
        if last is not None and last[0] == partition and last[2] == offset - 1:
            report.lost_ranges[-1] = (partition, last[1], offset)
        else:
            report.lost_ranges.append((partition, offset, offset))


def _read_everything(cluster: EmbeddedCluster, plan: CrashPlan) -> dict[tuple[int, int], bytes]:
    """Every record of every partition from its log start, stepping over gaps one by one.

    One consumer per partition, so an out-of-range error always belongs to the partition read.
    """
    out: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 600
    for n in range(plan.partitions):
        tp = TopicPartition(plan.topic, n)
        with Consumer(cluster.transport, {"auto.offset.reset": "none"}) as consumer:
            consumer.assign([tp])
            start = consumer.beginning_offsets([tp], timeout_ms=120_000)[tp]
            end = consumer.end_offsets([tp], timeout_ms=120_000)[tp]
            consumer.seek(tp, start)
            while (position := consumer.position(tp)) < end:
                if time.monotonic() > deadline:
                    raise TimeoutError("reading the partitions back took over 600 s")
                try:
                    for record in consumer.poll(timeout_ms=500):
                        out[(record.partition, record.offset)] = record.value or b""
                except OffsetOutOfRangeError:
                    consumer.seek(tp, position + 1)  # a gap: step over one offset
    return out


def _tiered_segments(
    cluster: EmbeddedCluster, plan: CrashPlan
) -> list[tuple[RemoteLogManager, RemoteLogSegmentMetadata]]:
    """Each partition's remote segments not yet deleted, as its leader's metadata lists them."""
    out = []
    for n in range(plan.partitions):
        tp = TopicPartition(plan.topic, n)
        for broker in map(cluster.broker, cluster.broker_ids):
            replica = broker.partition(tp)
            rlm = broker.remote_log_manager
            if replica is None or not replica.is_leader or rlm is None or replica.topic_id is None:
                continue
            tip = TopicIdPartition(replica.topic_id, tp)
            out += [
                (rlm, segment)
                for segment in rlm.metadata.list_remote_log_segments(tip)
                if segment.state is not RemoteLogSegmentState.DELETE_SEGMENT_FINISHED
            ]
    return out


def _tiering_done(cluster: EmbeddedCluster, plan: CrashPlan) -> bool:
    """Whether each partition's leader has tiered every rolled segment of its log."""
    for n in range(plan.partitions):
        tp = TopicPartition(plan.topic, n)
        leaders = [
            replica
            for broker in map(cluster.broker, cluster.broker_ids)
            if (replica := broker.partition(tp)) is not None and replica.is_leader
        ]
        if not leaders:
            return False
        plog = leaders[0].log
        if plog.highest_offset_in_remote_storage < plog.segments()[-1].base_offset - 1:
            return False
    return True


def _check_tiered_segments(
    segments: list[tuple[RemoteLogManager, RemoteLogSegmentMetadata]], report: CrashReport
) -> None:
    """Reads every COPY_SEGMENT_FINISHED segment back through the storage plugin."""
    for rlm, segment in segments:
        if segment.state is not RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            continue
        report.finished_segments += 1
        try:
            with rlm.storage.fetch_log_segment(segment, 0) as stream:
                data = stream.read()
            last = None
            for batch in iter_batches(data):
                last = batch.last_offset
            if last != segment.end_offset:
                raise ValueError(f"the segment ends at {last}, not {segment.end_offset}")
        except Exception as err:
            log.error("tiered segment %s is unreadable: %s", segment.remote_log_segment_id, err)
            report.unreadable_segments += 1


def count_file_orphans(root: Path) -> OrphanCounter:
    """For storage that writes ``<offset>-<segment id>.<kind>`` files under ``root``: counts
    the files of segments that metadata does not reference.

    The files are listed before the metadata is, and what looks orphaned is checked to still
    exist afterwards: a segment's COPY_SEGMENT_STARTED is recorded before its first object is
    written and its objects are deleted before DELETE_SEGMENT_FINISHED, so an upload or a
    deletion under way meanwhile is never taken for an orphan.
    """

    def count(live: Callable[[], set[str]]) -> int:
        found = [
            (path, path.name.split("-", 1)[1].split(".", 1)[0])
            for path in root.rglob("*")
            if path.is_file() and "-" in path.name
        ]
        referenced = live()
        return sum(1 for path, segment in found if segment not in referenced and path.exists())

    return count


if __name__ == "__main__":
    run_worker(Path(sys.argv[1]))
