"""The RemoteLogMetadataManager contract as a pytest base class every metadata plugin can run.

Subclass it (``class TestMyMetadata(MetadataManagerContract)``), override ``metadata_settings``
with the broker settings that choose and configure the manager, and set the capability flags.
The manager runs as the runtime runs it (see :mod:`tierlog.testing.runtime`) and is driven
through the ``RemoteLogMetadataManager`` facade; a failure names the hook and the rule broken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..errors import (
    InvalidStateTransitionError,
    RemoteResourceNotFoundError,
)
from ..model import (
    CustomMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)
from ..spi import RemoteLogMetadataManager
from .contract import check, check_equal, expect_error
from .metadata_model import MetadataModel
from .runtime import MetadataRuntime, wait_until
from .uploads import DELETE_FINISHED, DELETE_STARTED, FINISHED, STARTED, Uploads

ADD = "tierlog_add_remote_log_segment_metadata"
UPDATE = "tierlog_update_remote_log_segment_metadata"
LOOKUP = "tierlog_remote_log_segment_metadata"
HIGHEST = "tierlog_highest_offset_for_epoch"
PARTITION_DELETE = "tierlog_put_remote_partition_delete_metadata"
LIST = "tierlog_list_remote_log_segments"
LEADERSHIP = "tierlog_on_partition_leadership_changes"
STOP = "tierlog_on_stop_partitions"
SIZE = "tierlog_remote_log_size"
NEXT_TXN = "tierlog_next_segment_with_txn_index"
READY = "tierlog_is_ready"

MARKED = RemotePartitionDeleteState.DELETE_PARTITION_MARKED
PARTITION_DELETE_STARTED = RemotePartitionDeleteState.DELETE_PARTITION_STARTED
PARTITION_DELETE_FINISHED = RemotePartitionDeleteState.DELETE_PARTITION_FINISHED


def _states_id(value: object) -> str:
    if isinstance(value, tuple):
        return ">".join(state.name for state in value) or "new"
    return str(getattr(value, "name", value))


def listed(
    rlmm: RemoteLogMetadataManager, partition: TopicIdPartition, epoch: int | None = None
) -> list[RemoteLogSegmentMetadata]:
    return list(rlmm.list_remote_log_segments(partition, epoch))


def answers(rlmm: RemoteLogMetadataManager, partition: TopicIdPartition) -> dict[str, Any]:
    """Every lookup's answer for a partition, to compare a manager's state before and after."""
    everything = listed(rlmm, partition)
    epochs = sorted({epoch for s in everything for epoch, _ in s.segment_leader_epochs})
    epochs.append(max(epochs, default=-1) + 1)
    offsets = sorted({o for s in everything for o in (s.start_offset, s.end_offset)})
    return {
        "listed": set(everything),
        "by_epoch": {e: set(listed(rlmm, partition, e)) for e in epochs},
        "highest": {e: rlmm.highest_offset_for_epoch(partition, e) for e in epochs},
        "lookups": {
            (e, o): rlmm.remote_log_segment_metadata(partition, e, o)
            for e in epochs
            for o in offsets
        },
        "size": {e: rlmm.remote_log_size(partition, e) for e in epochs},
    }


class MetadataManagerContract:
    """Every promise of the metadata hooks, as tests. Not collected itself (no ``Test`` prefix).

    Override ``metadata_settings``; ``metadata_extra_plugins`` for a plugin registered by code;
    ``metadata_runtime`` for full control over how the manager runs.
    """

    #: The manager needs a running broker (it is started inside a one-broker EmbeddedCluster).
    needs_broker: ClassVar[bool] = False
    #: The manager keeps its state across a restart on the same data directories.
    persistent: ClassVar[bool] = False
    #: Only partitions this broker leads or follows are ready; others answer
    #: RemoteStorageNotReadyError. When False every partition is ready.
    ready_only_when_held: ClassVar[bool] = False
    #: The runtime's request, copy and expiration threads may call at once.
    supports_concurrent_use: ClassVar[bool] = True
    #: Seconds to wait for readiness after a leadership change or a restart.
    ready_timeout_s: ClassVar[float] = 30.0
    #: Random operation sequences checked against the reference model (0 skips the test).
    model_examples: ClassVar[int] = 20

    # --- fixtures the plugin author overrides ----------------------------------------------

    @pytest.fixture
    def metadata_settings(self) -> Mapping[str, object]:
        """Broker settings choosing and configuring the metadata manager under test."""
        pytest.fail(
            f"{type(self).__name__} must override the metadata_settings fixture with the broker "
            "settings that choose its manager, e.g. {'remote.log.metadata.manager.name': ...}"
        )

    @pytest.fixture
    def metadata_extra_plugins(self) -> Mapping[str, object]:
        """Plugins registered by code (name -> plugin) in addition to entry points."""
        return {}

    @pytest.fixture
    def metadata_runtime(
        self,
        tmp_path: Path,
        metadata_settings: Mapping[str, object],
        metadata_extra_plugins: Mapping[str, object],
    ) -> Iterator[MetadataRuntime]:
        """The manager running in a plugin host, or in a one-broker cluster if it needs one."""
        runtime = MetadataRuntime(
            tmp_path / "kit-metadata",
            metadata_settings,
            needs_broker=self.needs_broker,
            extra_plugins=metadata_extra_plugins,
            ready_timeout_s=self.ready_timeout_s,
        )
        runtime.start()
        try:
            yield runtime
        finally:
            runtime.stop()

    @pytest.fixture
    def partition(self) -> TopicIdPartition:
        return TopicIdPartition.of(Uuid.random(), "kit-orders", 0)

    @pytest.fixture
    def other_partition(self, partition: TopicIdPartition) -> TopicIdPartition:
        return TopicIdPartition.of(partition.topic_id, partition.topic, 1)

    @pytest.fixture
    def rlmm(
        self,
        metadata_runtime: MetadataRuntime,
        partition: TopicIdPartition,
        other_partition: TopicIdPartition,
    ) -> RemoteLogMetadataManager:
        """The facade, leading both test partitions, their metadata ready."""
        metadata_runtime.hold(partition, other_partition)
        return metadata_runtime.rlmm

    @pytest.fixture
    def uploads(self, rlmm: RemoteLogMetadataManager, partition: TopicIdPartition) -> Uploads:
        return Uploads(rlmm, partition)

    # --- an empty partition ----------------------------------------------------------------

    def test_a_partition_without_uploads_answers_nothing(
        self, rlmm: RemoteLogMetadataManager, partition: TopicIdPartition
    ) -> None:
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 0),
            None,
            LOOKUP,
            "no finished segment holds the offset: None",
        )
        check_equal(
            rlmm.highest_offset_for_epoch(partition, 0), None, HIGHEST, "nothing tiered: None"
        )
        check_equal(listed(rlmm, partition), [], LIST, "no segments: nothing listed")
        check_equal(listed(rlmm, partition, 0), [], LIST, "no segments: nothing for epoch 0")
        check_equal(rlmm.remote_log_size(partition, 0), 0, SIZE, "no segments: size 0")
        check_equal(
            rlmm.next_segment_with_txn_index(partition, 0, 0),
            None,
            NEXT_TXN,
            "no segments: None",
        )

    # --- the segment state machine ---------------------------------------------------------

    def test_lifecycle_over_several_epochs(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        plan = [
            (0, 99, {0: 0}),
            (100, 199, {0: 100, 1: 150}),
            (200, 299, {1: 200, 2: 250}),
            (300, 399, {2: 300}),
        ]
        highest: dict[int, int] = {}
        finished = []
        for start, end, epochs in plan:
            started = uploads.add(start, end, epochs)
            for epoch, first in epochs.items():
                for offset in (first, started.end_offset_for_epoch(epoch) or first):
                    check_equal(
                        rlmm.remote_log_segment_metadata(partition, epoch, offset),
                        None,
                        LOOKUP,
                        f"a COPY_SEGMENT_STARTED segment is never served (epoch {epoch}, "
                        f"offset {offset})",
                    )
                check(
                    started in listed(rlmm, partition, epoch),
                    LIST,
                    f"a COPY_SEGMENT_STARTED segment is listed for its epoch {epoch}",
                    listed(rlmm, partition, epoch),
                )
                check_equal(
                    rlmm.highest_offset_for_epoch(partition, epoch),
                    highest.get(epoch),
                    HIGHEST,
                    "a copy in progress does not count",
                )
            done = uploads.move(started, FINISHED)
            finished.append(done)
            for epoch, first in epochs.items():
                last = done.end_offset_for_epoch(epoch)
                assert last is not None
                for offset in (first, (first + last) // 2, last):
                    check_equal(
                        rlmm.remote_log_segment_metadata(partition, epoch, offset),
                        done,
                        LOOKUP,
                        f"the COPY_SEGMENT_FINISHED segment holding offset {offset} in epoch "
                        f"{epoch} is returned, with its latest state",
                    )
                check(
                    done in listed(rlmm, partition, epoch)
                    and started not in listed(rlmm, partition, epoch),
                    LIST,
                    "a segment is listed once, in its latest state",
                    listed(rlmm, partition, epoch),
                )
                highest[epoch] = last
                check_equal(
                    rlmm.highest_offset_for_epoch(partition, epoch),
                    last,
                    HIGHEST,
                    f"the highest offset tiered for epoch {epoch}",
                )
        s0, s1, s2, s3 = finished
        for epoch, expected in {0: [s0, s1], 1: [s1, s2], 2: [s2, s3], 3: []}.items():
            check_equal(
                listed(rlmm, partition, epoch),
                expected,
                LIST,
                f"for epoch {epoch}: the segments containing it, sorted by start offset",
            )
        check_equal(
            set(listed(rlmm, partition)),
            {s0, s1, s2, s3},
            LIST,
            "with no epoch: every segment of the partition",
        )

        deleting = uploads.move(s1, DELETE_STARTED)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 120),
            None,
            LOOKUP,
            "a DELETE_SEGMENT_STARTED segment is no longer served",
        )
        check_equal(
            listed(rlmm, partition, 0),
            [s0, deleting],
            LIST,
            "a DELETE_SEGMENT_STARTED segment is still listed, so expiration can finish it",
        )
        uploads.move(deleting, DELETE_FINISHED)
        check_equal(
            listed(rlmm, partition, 0), [s0], LIST, "a DELETE_SEGMENT_FINISHED segment is gone"
        )
        check_equal(
            {e: rlmm.highest_offset_for_epoch(partition, e) for e in highest},
            highest,
            HIGHEST,
            "deleting segments does not lower the highest offset",
        )

    def test_a_copy_may_be_abandoned_and_deleted(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        deleting = uploads.move(uploads.add(0, 99), DELETE_STARTED)
        check_equal(
            listed(rlmm, partition, 0),
            [deleting],
            LIST,
            "COPY_SEGMENT_STARTED -> DELETE_SEGMENT_STARTED is allowed; the segment is listed",
        )
        check_equal(
            rlmm.highest_offset_for_epoch(partition, 0),
            None,
            HIGHEST,
            "an abandoned copy never counts",
        )
        uploads.move(deleting, DELETE_FINISHED)
        check_equal(listed(rlmm, partition), [], LIST, "a deleted abandoned copy is gone")

    @pytest.mark.parametrize(
        ("path", "target"),
        [
            ((), DELETE_FINISHED),
            ((FINISHED,), DELETE_FINISHED),
            ((DELETE_STARTED,), FINISHED),
            ((FINISHED, DELETE_STARTED), FINISHED),
        ],
        ids=_states_id,
    )
    def test_an_invalid_transition_is_rejected_and_changes_nothing(
        self,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        partition: TopicIdPartition,
        path: tuple[RemoteLogSegmentState, ...],
        target: RemoteLogSegmentState,
    ) -> None:
        uploads.upload(0, 99)
        segment = uploads.move(uploads.add(100, 199, {0: 100, 1: 150}), *path)
        before = answers(rlmm, partition)
        start = path[-1].name if path else STARTED.name
        with expect_error(
            InvalidStateTransitionError,
            UPDATE,
            f"{start} -> {target.name} is not allowed: raise InvalidStateTransitionError",
        ):
            rlmm.update_remote_log_segment_metadata(uploads.update(segment, target))
        check_equal(
            answers(rlmm, partition),
            before,
            UPDATE,
            "a rejected transition changes nothing",
        )

    def test_add_takes_only_copy_segment_started(
        self, metadata_runtime: MetadataRuntime, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        finished = uploads.new(0, 99, state=FINISHED)
        with expect_error(
            InvalidStateTransitionError,
            ADD,
            "metadata in any state but COPY_SEGMENT_STARTED raises InvalidStateTransitionError",
        ):
            metadata_runtime.provider.tierlog_add_remote_log_segment_metadata(
                remote_log_segment_metadata=finished
            )
        check_equal(
            listed(metadata_runtime.rlmm, partition), [], ADD, "a rejected add records nothing"
        )

    def test_adding_a_known_segment_again_is_rejected_once_it_moved_on(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        started = uploads.add(0, 99)
        done = uploads.move(started, FINISHED)
        with expect_error(
            InvalidStateTransitionError,
            ADD,
            "adding a segment id that is already COPY_SEGMENT_FINISHED raises "
            "InvalidStateTransitionError",
        ):
            rlmm.add_remote_log_segment_metadata(started)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 50),
            done,
            ADD,
            "a rejected add leaves the segment as it was",
        )

    def test_repeating_a_state_is_a_harmless_retry(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        started = uploads.add(0, 99)
        try:
            rlmm.add_remote_log_segment_metadata(started)
        except Exception as err:
            check(False, ADD, "adding the same COPY_SEGMENT_STARTED again is a retry", err)
        check_equal(
            listed(rlmm, partition, 0), [started], ADD, "a retried add lists the segment once"
        )
        done = uploads.move(started, FINISHED)
        retry = uploads.update(done, FINISHED, CustomMetadata(b"bucket-2"))
        try:
            rlmm.update_remote_log_segment_metadata(retry)
        except Exception as err:
            check(False, UPDATE, "repeating COPY_SEGMENT_FINISHED is allowed", err)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 50),
            done.create_with_updates(retry),
            UPDATE,
            "a repeated state takes the update's fields (custom metadata, event time)",
        )

    def test_update_for_an_unknown_segment_is_not_found(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads
    ) -> None:
        never_added = uploads.new(0, 99)
        with expect_error(
            RemoteResourceNotFoundError,
            UPDATE,
            "an update for a segment id never added raises RemoteResourceNotFoundError",
        ):
            rlmm.update_remote_log_segment_metadata(uploads.update(never_added, FINISHED))
        uploads.upload(100, 199)
        gone = uploads.move(uploads.upload(200, 299), DELETE_STARTED, DELETE_FINISHED)
        with expect_error(
            RemoteResourceNotFoundError,
            UPDATE,
            "an update for a DELETE_SEGMENT_FINISHED (forgotten) segment raises "
            "RemoteResourceNotFoundError",
        ):
            rlmm.update_remote_log_segment_metadata(uploads.update(gone, DELETE_FINISHED))

    # --- lookups by epoch and offset -------------------------------------------------------

    def test_a_segment_spanning_epochs_answers_each_epoch_for_its_own_range(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        segment = uploads.upload(0, 99, {0: 0, 1: 40, 3: 80})
        expected = {
            (0, 0): segment,
            (0, 39): segment,
            (0, 40): None,
            (1, 39): None,
            (1, 40): segment,
            (1, 79): segment,
            (1, 80): None,
            (2, 50): None,
            (3, 80): segment,
            (3, 99): segment,
            (3, 100): None,
        }
        for (epoch, offset), want in expected.items():
            check_equal(
                rlmm.remote_log_segment_metadata(partition, epoch, offset),
                want,
                LOOKUP,
                f"offset {offset} in epoch {epoch}: only the epoch's own range of the segment",
            )
        check_equal(
            [rlmm.highest_offset_for_epoch(partition, e) for e in range(4)],
            [39, 79, None, 99],
            HIGHEST,
            "per epoch, the last offset of that epoch in the finished segments",
        )

    def test_partitions_are_independent(
        self,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        partition: TopicIdPartition,
        other_partition: TopicIdPartition,
    ) -> None:
        mine = uploads.upload(0, 99)
        theirs = uploads.upload(0, 49, partition=other_partition)
        check_equal(
            rlmm.remote_log_segment_metadata(other_partition, 0, 70),
            None,
            LOOKUP,
            "one partition's segments are not served for another",
        )
        check_equal(rlmm.highest_offset_for_epoch(other_partition, 0), 49, HIGHEST, "per partition")
        check_equal(listed(rlmm, other_partition), [theirs], LIST, "per partition")
        check_equal(listed(rlmm, partition, 0), [mine], LIST, "per partition")

    def test_highest_offset_per_epoch_only_grows(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        first = uploads.upload(0, 99)
        second = uploads.upload(100, 199)
        check_equal(rlmm.highest_offset_for_epoch(partition, 0), 199, HIGHEST, "grows")
        for segment in (second, first):
            uploads.move(segment, DELETE_STARTED, DELETE_FINISHED)
            check_equal(
                rlmm.highest_offset_for_epoch(partition, 0),
                199,
                HIGHEST,
                "it only grows: deleting segments does not lower it",
            )
        uploads.add(200, 299)
        check_equal(
            rlmm.highest_offset_for_epoch(partition, 0),
            199,
            HIGHEST,
            "a copy in progress counts for nothing",
        )
        uploads.upload(0, 49)
        check_equal(
            rlmm.highest_offset_for_epoch(partition, 0),
            199,
            HIGHEST,
            "it only grows: a lower upload does not lower it",
        )

    # --- listing ---------------------------------------------------------------------------

    def test_listing_by_epoch_is_sorted_by_start_offset(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        late = uploads.upload(200, 299)
        copying = uploads.add(300, 399)
        early = uploads.upload(0, 99)
        middle = uploads.move(uploads.upload(100, 199), DELETE_STARTED)
        check_equal(
            listed(rlmm, partition, 0),
            [early, middle, late, copying],
            LIST,
            "for an epoch: COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED and "
            "DELETE_SEGMENT_STARTED segments, sorted by start offset",
        )
        check_equal(
            set(listed(rlmm, partition)),
            {early, middle, late, copying},
            LIST,
            "with no epoch: the same segments, in any order",
        )

    def test_unreferenced_uploads_stay_listed(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        older = uploads.upload(0, 99)
        newer = uploads.upload(0, 99)
        failed = uploads.add(100, 199)
        replacement = uploads.upload(100, 199)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 50),
            newer,
            LOOKUP,
            "a re-upload of the same offsets supersedes the older",
        )
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 150),
            replacement,
            LOOKUP,
            "a finished upload is served, not the failed copy of the same offsets",
        )
        check_equal(
            set(listed(rlmm, partition, 0)),
            {older, newer, failed, replacement},
            LIST,
            "unreferenced segments (superseded or failed uploads) are listed, so the "
            "expiration task can clean them",
        )
        offsets = [s.start_offset for s in listed(rlmm, partition, 0)]
        check_equal(offsets, sorted(offsets), LIST, "for an epoch, sorted by start offset")
        uploads.move(older, DELETE_STARTED, DELETE_FINISHED)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 50),
            newer,
            LOOKUP,
            "deleting a superseded upload does not disturb the newer",
        )
        uploads.move(newer, DELETE_STARTED)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 50),
            None,
            LOOKUP,
            "a superseded upload is not served again when the newer is deleted",
        )

    def test_remote_log_size_sums_the_listed_segments_of_the_epoch(
        self,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        other_partition: TopicIdPartition,
        partition: TopicIdPartition,
    ) -> None:
        uploads.upload(0, 99, size=1_000)
        uploads.upload(100, 199, {0: 100, 1: 150}, size=2_000)
        uploads.add(200, 299, {1: 200}, size=400)
        uploads.move(uploads.upload(300, 399, {1: 300}, size=30), DELETE_STARTED)
        uploads.move(uploads.upload(400, 499, {1: 400}, size=5), DELETE_STARTED, DELETE_FINISHED)
        uploads.upload(0, 99, partition=other_partition, size=7)
        check_equal(
            [rlmm.remote_log_size(partition, epoch) for epoch in range(3)],
            [3_000, 2_430, 0],
            SIZE,
            "the total segment_size_in_bytes of the segments listed for the epoch",
        )

    def test_next_segment_with_txn_index_walks_forward_within_the_epoch(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        uploads.upload(0, 99)
        with_txn = uploads.upload(100, 199, txn_idx_empty=False)
        uploads.upload(200, 299, {0: 200, 1: 250})
        next_epoch = uploads.upload(300, 399, {1: 300}, txn_idx_empty=False)
        uploads.add(400, 499, {1: 400}, txn_idx_empty=False)
        for (epoch, offset), want in {
            (0, 0): with_txn,
            (0, 150): with_txn,
            (0, 200): None,
            (1, 250): next_epoch,
            (1, 400): None,
            (2, 0): None,
        }.items():
            check_equal(
                rlmm.next_segment_with_txn_index(partition, epoch, offset),
                want,
                NEXT_TXN,
                f"the first finished segment of epoch {epoch} at or after offset {offset} "
                "with a transaction index",
            )

    # --- partition deletion ----------------------------------------------------------------

    def _partition_delete(
        self, partition: TopicIdPartition, state: RemotePartitionDeleteState
    ) -> RemotePartitionDeleteMetadata:
        return RemotePartitionDeleteMetadata(partition, state, event_timestamp_ms=1, broker_id=0)

    def test_partition_delete_finished_forgets_the_partition(
        self,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        partition: TopicIdPartition,
        other_partition: TopicIdPartition,
    ) -> None:
        kept = uploads.upload(0, 49, partition=other_partition)
        segment = uploads.upload(0, 99)
        for state in (MARKED, MARKED, PARTITION_DELETE_STARTED):
            rlmm.put_remote_partition_delete_metadata(self._partition_delete(partition, state))
        uploads.move(segment, DELETE_STARTED, DELETE_FINISHED)
        rlmm.put_remote_partition_delete_metadata(
            self._partition_delete(partition, PARTITION_DELETE_FINISHED)
        )
        gone = "after DELETE_PARTITION_FINISHED the partition is unknown: "
        with expect_error(
            RemoteResourceNotFoundError, LIST, gone + "listing raises RemoteResourceNotFoundError"
        ):
            listed(rlmm, partition)
        with expect_error(
            RemoteResourceNotFoundError, LIST, gone + "listing raises RemoteResourceNotFoundError"
        ):
            listed(rlmm, partition, 0)
        with expect_error(
            RemoteResourceNotFoundError, LOOKUP, gone + "lookups raise RemoteResourceNotFoundError"
        ):
            rlmm.remote_log_segment_metadata(partition, 0, 50)
        with expect_error(
            RemoteResourceNotFoundError, SIZE, gone + "its size raises RemoteResourceNotFoundError"
        ):
            rlmm.remote_log_size(partition, 0)
        check_equal(
            listed(rlmm, other_partition),
            [kept],
            PARTITION_DELETE,
            "deleting one partition leaves the others",
        )

    def test_a_partition_never_known_is_not_found(self, rlmm: RemoteLogMetadataManager) -> None:
        stranger = TopicIdPartition.of(Uuid.random(), "kit-never-known", 0)
        rule = (
            "a partition the manager never knew raises RemoteResourceNotFoundError (not "
            "retriable), never the retriable RemoteStorageNotReadyError"
        )
        lookups: list[tuple[str, Callable[[], object]]] = [
            (LIST, lambda: listed(rlmm, stranger)),
            (LIST, lambda: listed(rlmm, stranger, 0)),
            (SIZE, lambda: rlmm.remote_log_size(stranger, 0)),
        ]
        for hook, lookup in lookups:
            with expect_error(RemoteResourceNotFoundError, hook, rule):
                lookup()

    def test_events_published_before_assignment_are_applied_on_assignment(
        self,
        rlmm: RemoteLogMetadataManager,
        metadata_runtime: MetadataRuntime,
        uploads: Uploads,
    ) -> None:
        later = TopicIdPartition.of(Uuid.random(), "kit-assigned-later", 0)
        first = uploads.upload(0, 99, partition=later, size=1000)
        second = uploads.upload(100, 149, partition=later, size=500)
        metadata_runtime.hold(later)
        rule = (
            "segments added before the partition was assigned to this broker are listed once "
            "it leads the partition (the events are published, and applied on assignment)"
        )
        check_equal(listed(rlmm, later), [first, second], LIST, rule)
        check_equal(rlmm.remote_log_size(later, 0), 1500, SIZE, rule)

    @pytest.mark.parametrize(
        ("path", "target"),
        [
            ((), PARTITION_DELETE_STARTED),
            ((), PARTITION_DELETE_FINISHED),
            ((MARKED,), PARTITION_DELETE_FINISHED),
            ((MARKED, PARTITION_DELETE_STARTED), MARKED),
        ],
        ids=_states_id,
    )
    def test_an_invalid_partition_delete_step_is_rejected(
        self,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        partition: TopicIdPartition,
        path: tuple[RemotePartitionDeleteState, ...],
        target: RemotePartitionDeleteState,
    ) -> None:
        for state in path:
            rlmm.put_remote_partition_delete_metadata(self._partition_delete(partition, state))
        segment = uploads.upload(0, 99)
        start = path[-1].name if path else "(none)"
        with expect_error(
            InvalidStateTransitionError,
            PARTITION_DELETE,
            f"{start} -> {target.name} is not allowed (MARKED -> STARTED -> FINISHED): raise "
            "InvalidStateTransitionError",
        ):
            rlmm.put_remote_partition_delete_metadata(self._partition_delete(partition, target))
        check_equal(
            listed(rlmm, partition), [segment], PARTITION_DELETE, "a rejected step deletes nothing"
        )

    # --- random sequences against a reference model ----------------------------------------

    def test_random_operations_match_the_reference_model(
        self, rlmm: RemoteLogMetadataManager, metadata_runtime: MetadataRuntime
    ) -> None:
        """Property-based: sequences of adds and state changes (valid or not), each on a fresh
        partition, must leave every answer equal to :class:`MetadataModel`'s. A failure shows
        the shortest sequence found that breaks the rule."""
        if self.model_examples <= 0:
            pytest.skip("model_examples = 0")
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        states = st.sampled_from([FINISHED, DELETE_STARTED, DELETE_FINISHED])  # update targets
        operation = st.one_of(
            st.tuples(st.just("add"), st.booleans(), st.booleans(), st.integers(1, 1000)),
            st.tuples(st.just("move"), st.integers(0, 7), states),
        )

        @settings(
            max_examples=self.model_examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(operation, min_size=1, max_size=10))
        def check_sequence(operations: list[tuple[Any, ...]]) -> None:
            partition = TopicIdPartition.of(Uuid.random(), "kit-model", 0)
            metadata_runtime.hold(partition)
            _replay_against_model(rlmm, partition, operations)

        check_sequence()

    # --- readiness and assignment ----------------------------------------------------------

    def test_held_partitions_are_ready(
        self, rlmm: RemoteLogMetadataManager, partition: TopicIdPartition
    ) -> None:
        ready = rlmm.is_ready(partition)
        check(
            ready is True,
            READY,
            "a partition is ready once its metadata is loaded after a leadership change",
            ready,
        )
        stranger = TopicIdPartition.of(Uuid.random(), "kit-elsewhere", 0)
        if not self.ready_only_when_held:
            check(
                rlmm.is_ready(stranger) is True,
                READY,
                "every partition is ready (ready_only_when_held = False)",
                rlmm.is_ready(stranger),
            )
            return
        check(
            rlmm.is_ready(stranger) is False,
            READY,
            "a partition neither led nor followed is not ready (ready_only_when_held = True)",
            rlmm.is_ready(stranger),
        )

    def test_leadership_changes_keep_what_is_known(
        self,
        rlmm: RemoteLogMetadataManager,
        metadata_runtime: MetadataRuntime,
        uploads: Uploads,
        partition: TopicIdPartition,
    ) -> None:
        segment = uploads.upload(0, 99)
        rlmm.on_partition_leadership_changes(frozenset(), frozenset({partition}))
        metadata_runtime.hold(partition)
        check_equal(
            rlmm.remote_log_segment_metadata(partition, 0, 50),
            segment,
            LEADERSHIP,
            "becoming follower, then leader again, keeps the partition's metadata",
        )

    def test_stopped_partitions_are_dropped(
        self,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        partition: TopicIdPartition,
        other_partition: TopicIdPartition,
    ) -> None:
        uploads.upload(0, 99)
        kept = uploads.upload(0, 99, partition=other_partition)
        rlmm.on_stop_partitions(frozenset({partition}))

        def dropped() -> bool:
            try:
                listed(rlmm, partition)
            except RemoteResourceNotFoundError:
                return True
            return False

        wait_until(
            dropped,
            STOP,
            "a stopped partition's state is dropped: listing it raises RemoteResourceNotFoundError",
            self.ready_timeout_s,
        )
        check_equal(listed(rlmm, other_partition), [kept], STOP, "other partitions stay")

    # --- threads ---------------------------------------------------------------------------

    def test_concurrent_writers_and_readers(
        self, rlmm: RemoteLogMetadataManager, uploads: Uploads, partition: TopicIdPartition
    ) -> None:
        if not self.supports_concurrent_use:
            pytest.skip("supports_concurrent_use = False")
        writers, per_writer = 4, 25
        start = threading.Barrier(writers + 1)
        done = threading.Event()
        failures: list[BaseException] = []

        def write(index: int) -> None:
            try:
                start.wait()
                for n in range(per_writer):
                    base = (n * writers + index) * 10
                    segment = uploads.upload(base, base + 9)
                    if n % 5 == 0:
                        uploads.move(segment, DELETE_STARTED, DELETE_FINISHED)
            except BaseException as err:
                failures.append(err)

        def read() -> None:
            try:
                start.wait()
                while not done.is_set():
                    for segment in rlmm.list_remote_log_segments(partition, 0):
                        check(
                            segment.state in (STARTED, FINISHED, DELETE_STARTED),
                            LIST,
                            "lists only STARTED, FINISHED and DELETE_STARTED segments, "
                            "also while others write",
                            segment.state,
                        )
                    rlmm.remote_log_size(partition, 0)
            except BaseException as err:
                failures.append(err)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        reader = threading.Thread(target=read)
        for thread in [*threads, reader]:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        reader.join()
        check_equal(failures, [], ADD, "concurrent writers and readers raise nothing")
        kept = listed(rlmm, partition, 0)
        check_equal(
            len(kept),
            writers * per_writer * 4 // 5,
            LIST,
            "every concurrent upload that was not deleted is listed",
        )
        check_equal(
            rlmm.highest_offset_for_epoch(partition, 0),
            writers * per_writer * 10 - 1,
            HIGHEST,
            "concurrent uploads: the highest offset tiered",
        )

    # --- restart ---------------------------------------------------------------------------

    def test_state_after_restart(
        self,
        metadata_runtime: MetadataRuntime,
        rlmm: RemoteLogMetadataManager,
        uploads: Uploads,
        partition: TopicIdPartition,
        other_partition: TopicIdPartition,
    ) -> None:
        if not self.persistent:
            pytest.skip("persistent = False")
        s0 = uploads.upload(0, 99, {0: 0})
        uploads.upload(100, 199, {0: 100, 1: 150})
        uploads.upload(150, 249, {1: 150})
        uploads.add(250, 299, {1: 250})
        uploads.move(s0, DELETE_STARTED, DELETE_FINISHED)
        uploads.upload(0, 49, partition=other_partition)
        before = {tip: answers(rlmm, tip) for tip in (partition, other_partition)}

        metadata_runtime.restart()
        after_rlmm = metadata_runtime.rlmm
        for tip in (partition, other_partition):
            check_equal(
                answers(after_rlmm, tip),
                before[tip],
                LOOKUP,
                "a persistent manager answers every lookup, listing, highest offset and size "
                "after a restart as before it",
            )
        Uploads(after_rlmm, partition).upload(300, 399, {2: 300})
        check_equal(
            after_rlmm.highest_offset_for_epoch(partition, 2),
            399,
            HIGHEST,
            "after a restart the manager carries on recording",
        )


def _replay_against_model(
    rlmm: RemoteLogMetadataManager,
    partition: TopicIdPartition,
    operations: list[tuple[Any, ...]],
) -> None:
    """Applies ``operations`` to the manager and to the model, comparing after each one."""
    uploads = Uploads(rlmm, partition)
    model = MetadataModel()
    added: list[RemoteLogSegmentMetadata] = []
    done: list[str] = []
    next_offset, epoch = 0, 0
    for operation in operations:
        if operation[0] == "add":
            _, bump, split, size = operation
            epoch += int(bump)
            epochs = {epoch: next_offset}
            if split:  # a leader change inside the segment
                epoch += 1
                epochs[epoch] = next_offset + 10
            metadata = uploads.add(next_offset, next_offset + 19, epochs, size=size)
            model.added(metadata)
            added.append(metadata)
            done.append(f"add [{next_offset}, {next_offset + 19}] epochs {epochs}")
            next_offset += 20
        elif added:
            _, index, target = operation
            original = added[index % len(added)]
            segment_id = original.remote_log_segment_id
            current = model.segments.get(segment_id)
            update = uploads.update(current or original, target)
            number = added.index(original)
            done.append(f"move segment #{number} to {target.name}")
            rule = "after " + "; ".join(done)
            if current is None:
                with expect_error(
                    RemoteResourceNotFoundError, UPDATE, rule + ": a deleted segment is unknown"
                ):
                    rlmm.update_remote_log_segment_metadata(update)
            elif not model.allows(segment_id, target):
                with expect_error(
                    InvalidStateTransitionError,
                    UPDATE,
                    rule + f": {current.state.name} -> {target.name} is refused",
                ):
                    rlmm.update_remote_log_segment_metadata(update)
            else:
                rlmm.update_remote_log_segment_metadata(update)
                model.moved(current.create_with_updates(update))
        _compare_with_model(rlmm, partition, model, epoch, "after " + "; ".join(done))


def _compare_with_model(
    rlmm: RemoteLogMetadataManager,
    partition: TopicIdPartition,
    model: MetadataModel,
    last_epoch: int,
    history: str,
) -> None:
    rule = f"{history}: the answer is the reference model's"
    check_equal(set(listed(rlmm, partition)), set(model.listed()), LIST, rule)
    for epoch in range(last_epoch + 2):
        check_equal(
            listed(rlmm, partition, epoch), model.listed(epoch), LIST, f"{rule} (epoch {epoch})"
        )
        check_equal(
            rlmm.highest_offset_for_epoch(partition, epoch),
            model.highest.get(epoch),
            HIGHEST,
            f"{rule} (epoch {epoch})",
        )
        check_equal(
            rlmm.remote_log_size(partition, epoch),
            model.size(epoch),
            SIZE,
            f"{rule} (epoch {epoch})",
        )
    for segment in model.listed():
        for epoch, start in segment.segment_leader_epochs:
            end = segment.end_offset_for_epoch(epoch)
            for offset in (start, end):
                assert offset is not None
                check_equal(
                    rlmm.remote_log_segment_metadata(partition, epoch, offset),
                    model.lookup(epoch, offset),
                    LOOKUP,
                    f"{rule} (epoch {epoch}, offset {offset})",
                )
