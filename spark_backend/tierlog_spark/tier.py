"""Tiering a backlog of rolled segments in parallel, alongside a running runtime.

Right after tiering is switched on for an old topic, the runtime's copy task uploads its
backlog one segment at a time per partition. This job uploads it in parallel Spark tasks
through the storage plugin, with the copy task's protocol: per segment, COPY_SEGMENT_STARTED
is published before any byte is uploaded (the segment is registered as being copied, so the
expiration task leaves it alone), then the upload, then COPY_SEGMENT_FINISHED; a segment with
no producer snapshot is uploaded with the segment-aligned empty one.

No segment may be uploaded twice, or skipped. So the job takes each partition's copy slot, the
one the runtime's scheduler itself takes before running a partition's copy task: while the job
holds it the runtime copies nothing there. FINISHED is published in offset order and the
partition's tiered offset only moves past a segment once it and every segment before it are
finished; the uploads after a failed one are deleted again, as the copy task does with a
failed upload, so the runtime resumes exactly where the job stopped.

Two ways to run it. In the runtime's process (an embedded cluster): ``tier(spark,
cluster.brokers, ["orders"])``, the slot taken through ``RemoteLogManager.copy_slot``. Beside
one broker of a multi-process cluster, in a process of its own on that broker's machine:
``tier_attached(spark, "server.properties", ["orders"])`` tiers the partitions that broker
leads, reading their files from its log dirs, taking each partition's slot as a file lock the
broker's copy task also takes, and publishing through a metadata manager of its own (see
``attached``). Out of process, the job also stops on a partition whose leadership changed,
deleting the uploads it has not finished, so no range is tiered by two leaders; and before
each FINISHED it notes in the partition's directory how far it tiered, so the broker copies
again only from what its metadata shows, once that includes the job's uploads.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tierlog.errors import CustomMetadataSizeLimitExceededError
from tierlog.log import write_empty_snapshot
from tierlog.model import (
    CustomMetadata,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.remote.copy import candidates, find_highest_remote_offset, now_ms, started_metadata

from .attached import AttachedBroker, AttachedPartition, SlotUnavailableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["TierError", "TierResult", "tier", "tier_attached", "wait_ready"]

log = logging.getLogger(__name__)

#: How long to wait for a copy the runtime is running on a partition to end.
SLOT_TIMEOUT_S = 300.0


class TierError(RuntimeError):
    """A partition's backlog could not be tiered in full; what was finished stays tiered."""


@attrs.frozen
class TierResult:
    #: Per partition, the segments this job tiered (metadata as FINISHED).
    tiered: dict[TopicIdPartition, tuple[RemoteLogSegmentMetadata, ...]]
    #: Per partition that stopped early, why.
    failed: dict[TopicIdPartition, str]

    @property
    def segments(self) -> int:
        return sum(len(done) for done in self.tiered.values())


@attrs.frozen
class _Upload:
    started: RemoteLogSegmentMetadata
    data: LogSegmentData


def tier(
    spark: SparkSession,
    brokers: Iterable[Any],
    topics: Sequence[str],
    *,
    max_segments_per_round: int = 256,
) -> TierResult:
    """Tier every eligible rolled segment of ``topics`` on the partitions ``brokers`` lead."""
    tiered: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]] = {}
    failed: dict[TopicIdPartition, str] = {}
    for broker in brokers:
        rlm = broker.remote_log_manager
        if rlm is None:
            continue
        settings = {key: str(value) for key, value in broker.config.originals().items()}
        tips = [tip for tip in rlm.led_partitions() if tip.topic in topics]
        with ExitStack() as slots:
            held = {tip: slots.enter_context(_copy_slot(rlm, tip)) for tip in tips}
            _tier_held(spark, rlm, settings, held, max_segments_per_round, tiered, failed)
    return TierResult({tip: tuple(done) for tip, done in tiered.items()}, failed)


def tier_attached(
    spark: SparkSession,
    config_file: str | Path,
    topics: Sequence[str],
    *,
    slot_timeout_s: float = SLOT_TIMEOUT_S,
    max_segments_per_round: int = 256,
) -> TierResult:
    """Tier every eligible rolled segment of ``topics`` on the partitions led by the broker
    whose config ``config_file`` is, from this process: run it on that broker's machine.

    :raises TierError: a partition's copy slot could not be taken (naming the partition);
        nothing was tiered then.
    """
    tiered: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]] = {}
    failed: dict[TopicIdPartition, str] = {}
    scratch = Path(tempfile.mkdtemp(prefix="tierlog-tier-"))
    try:
        with AttachedBroker(Path(config_file), scratch) as broker, ExitStack() as slots:
            parts = broker.led_partitions(topics)
            held = {}
            for part in sorted(parts, key=lambda part: str(part.topic_id_partition)):
                try:
                    held[part.topic_id_partition] = slots.enter_context(
                        broker.copy_slot(part, slot_timeout_s)
                    )
                except SlotUnavailableError as err:
                    raise TierError(str(err)) from err
            _tier_held(spark, broker, broker.settings, held, max_segments_per_round, tiered, failed)
            for tip, part in held.items():
                if part.stopped is not None and tip not in failed:
                    failed[tip] = part.stopped
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TierResult({tip: tuple(done) for tip, done in tiered.items()}, failed)


def _tier_held(
    spark: SparkSession,
    rlm: Any,
    settings: dict[str, str],
    held: dict[TopicIdPartition, Any],
    max_segments_per_round: int,
    tiered: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]],
    failed: dict[TopicIdPartition, str],
) -> None:
    """Rounds of STARTED, parallel uploads, FINISHED over the partitions whose slots are held."""
    pending = set(held)
    while pending:
        uploads = {}
        for tip in sorted(pending, key=str):
            found = _start(rlm, held[tip], max_segments_per_round)
            if found:
                uploads[tip] = found
        if not uploads:
            break
        results = _upload_all(spark, settings, uploads)
        for tip, round_uploads in uploads.items():
            done, error = _finish(rlm, held[tip], round_uploads, results)
            tiered.setdefault(tip, []).extend(done)
            if error is not None:
                failed[tip] = error
        pending = {
            tip
            for tip, round_uploads in uploads.items()
            if tip not in failed and len(round_uploads) == max_segments_per_round
        }


def wait_ready(cluster: Any, topics: Sequence[str], timeout_s: float) -> None:
    """Waits until every partition of ``topics`` has a leader whose remote log manager can
    tier it (its metadata is ready): a job started earlier would find nothing to do."""
    deadline = time.monotonic() + timeout_s
    while True:
        waiting = []
        image = cluster.controller.image()
        for topic in topics:
            found = image.topic(topic)
            if found is None:
                raise TierError(f"there is no topic {topic!r}")
            for partition in range(len(found.partitions)):
                tip = TopicIdPartition.of(found.topic_id, topic, partition)
                if not any(_can_tier(cluster.broker(n), tip) for n in cluster.broker_ids):
                    waiting.append(str(tip))
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TierError(f"not ready to tier after {timeout_s:.0f} s: {', '.join(waiting)}")
        time.sleep(0.05)


def _can_tier(broker: Any, tip: TopicIdPartition) -> bool:
    rlm = broker.remote_log_manager
    if rlm is None:
        return False
    return tip in rlm.led_partitions() and bool(rlm.metadata.is_ready(tip))


@contextmanager
def _copy_slot(rlm: Any, tip: TopicIdPartition) -> Iterator[Any]:
    """The partition's copy task state, held so the runtime's copy task does not run."""
    with ExitStack() as stack:
        try:
            tasks = stack.enter_context(rlm.copy_slot(tip, SLOT_TIMEOUT_S))
        except LookupError as err:
            raise TierError(f"{tip}: not a partition of this broker any more") from err
        except TimeoutError as err:
            raise TierError(
                f"{tip}: the runtime's copy task did not end in {SLOT_TIMEOUT_S} s"
            ) from err
        yield tasks


def _start(rlm: Any, tasks: Any, limit: int) -> list[_Upload]:
    """COPY_SEGMENT_STARTED for the next ``limit`` eligible segments, in offset order."""
    if not rlm.uploads_allowed(tasks) or not tasks.leader:
        return []
    plog = tasks.partition.log
    if plog.closed or not plog.config.remote_storage_enable or plog.config.remote_log_copy_disable:
        return []
    tip = tasks.topic_id_partition
    if not rlm.metadata.is_ready(tip):
        return []
    if not tasks.initialized:
        plog.highest_offset_in_remote_storage = find_highest_remote_offset(rlm, plog, tip)
        tasks.initialized = True
    uploads: list[_Upload] = []
    try:
        _start_each(rlm, tasks, plog, tip, limit, uploads)
    except BaseException:
        for upload in uploads:  # leave no STARTED segment behind
            rlm.segments_being_copied.discard(upload.started.remote_log_segment_id)
            rlm.delete_remote_segment(upload.started, count=False)
        raise
    return uploads


def _start_each(
    rlm: Any, tasks: Any, plog: Any, tip: TopicIdPartition, limit: int, uploads: list[_Upload]
) -> None:
    for segment in candidates(plog):
        if segment.end_offset <= plog.highest_offset_in_remote_storage:
            continue
        if len(uploads) == limit:
            break
        snapshot = segment.producer_snapshot
        if snapshot is None or not snapshot.exists():  # never taken, or deleted since
            scratch = Path(tempfile.mkdtemp(prefix="snapshot-", dir=rlm.scratch_dir))
            snapshot = write_empty_snapshot(scratch, segment.end_offset + 1)
            log.warning(
                "%s: segment %d has no producer snapshot; tiering it with an empty one",
                plog.topic_partition,
                segment.base_offset,
            )
        started = started_metadata(tip, segment, rlm.broker_id, plog.leader_epoch_cache)
        data = segment.to_log_segment_data(snapshot)
        rlm.copy_quota.acquire(segment.size_in_bytes, rlm.stop_event)
        rlm.segments_being_copied.add(started.remote_log_segment_id)
        rlm.metadata.add_remote_log_segment_metadata(started)
        uploads.append(_Upload(started, data))


def _upload_all(
    spark: SparkSession, settings: dict[str, str], uploads: dict[TopicIdPartition, list[_Upload]]
) -> dict[RemoteLogSegmentId, CustomMetadata | str | None]:
    """Each upload's custom metadata, or why it failed; the uploads run in Spark tasks."""
    work = [upload for round_uploads in uploads.values() for upload in round_uploads]

    def copy(batch: Iterator[_Upload]) -> Iterator[tuple[RemoteLogSegmentId, Any]]:
        from .storage import storage_for

        storage = storage_for(settings)
        for upload in batch:
            try:
                custom = storage.copy_log_segment_data(upload.started, upload.data)
            except Exception as err:  # reported to the driver, which undoes the upload
                yield upload.started.remote_log_segment_id, f"{type(err).__name__}: {err}"
            else:
                yield upload.started.remote_log_segment_id, custom

    slices = min(len(work), spark.sparkContext.defaultParallelism * 2)
    return dict(spark.sparkContext.parallelize(work, slices).mapPartitions(copy).collect())


def _finish(
    rlm: Any,
    tasks: Any,
    uploads: list[_Upload],
    results: dict[RemoteLogSegmentId, CustomMetadata | str | None],
) -> tuple[list[RemoteLogSegmentMetadata], str | None]:
    """FINISHED in offset order up to the first failure; the uploads from there are deleted."""
    plog = tasks.partition.log
    done: list[RemoteLogSegmentMetadata] = []
    error: str | None = None
    for upload in uploads:
        started = upload.started
        segment_id = started.remote_log_segment_id
        try:
            result = results.get(segment_id, "no result")
            if error is None and isinstance(result, str):
                error = f"segment {started.start_offset}: {result}"
            if error is None and result is not None and not isinstance(result, str):
                try:
                    result.check_size(rlm.custom_metadata_max_bytes)
                except CustomMetadataSizeLimitExceededError as err:
                    error = f"segment {started.start_offset}: {err}"
            attached = isinstance(tasks, AttachedPartition)
            if error is None and attached and not rlm.uploads_allowed(tasks):
                error = f"segment {started.start_offset}: stopped: {tasks.stopped}"
            if error is not None:
                rlm.delete_remote_segment(started, count=False)
                continue
            assert not isinstance(result, str)
            update = RemoteLogSegmentMetadataUpdate(
                segment_id,
                now_ms(),
                result,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                rlm.broker_id,
            )
            if attached:  # the broker must wait for this FINISHED if it may have been sent
                tasks.hand_back(plog.highest_offset_in_remote_storage, started.end_offset)
            rlm.metadata.update_remote_log_segment_metadata(update)
            plog.highest_offset_in_remote_storage = started.end_offset
            if attached:
                tasks.hand_back(started.end_offset)
            done.append(started.create_with_updates(update))
        finally:
            rlm.segments_being_copied.discard(segment_id)
            snapshot = upload.data.producer_snapshot_index
            if snapshot.parent.parent == rlm.scratch_dir:
                shutil.rmtree(snapshot.parent, ignore_errors=True)
    return done, error
