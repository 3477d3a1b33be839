"""The RemoteStorageManager contract as a pytest base class every storage plugin can run.

Subclass it in a test module (``class TestMyStorage(StorageManagerContract)``), override
``storage_settings`` with the broker settings that choose and configure the plugin, and set the
capability flags that describe optional behaviour. Each test drives the plugin the way the
runtime does (through ``PluginHost`` and the ``RemoteStorageManager`` facade, with real segment
files) and a failure names the hook and the rule the plugin broke. The cluster tests run the
plugin inside a three-broker ``EmbeddedCluster`` (a :class:`~tierlog.testing.Scenario`), where
brokers share its storage across a leader change.
"""

from __future__ import annotations

import concurrent.futures
import gc
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from ..config import BrokerConfig
from ..errors import (
    InvalidConfigError,
    PluginError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)
from ..host import PluginHost
from ..location_reader import read_location
from ..locations import SegmentLocation
from ..model import (
    CustomMetadata,
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from ..spi import RemoteStorageManager
from .contract import ContractViolation, check, check_equal, expect_error
from .recording import COPY as RECORDED_COPY
from .recording import RecordingStorageManager
from .scenario import Scenario
from .segments import LocalSegment, build_segment

COPY = "tierlog_copy_log_segment_data"
FETCH = "tierlog_fetch_log_segment"
FETCH_INDEX = "tierlog_fetch_index"
DELETE = "tierlog_delete_log_segment_data"
LOCATE = "tierlog_locate_log_segment"
CONFIGURE = "tierlog_configure"
CLOSE = "tierlog_close"

#: Segments of every shape the runtime hands a copy, by name (``build_segment`` options).
SEGMENT_KINDS: dict[str, dict[str, Any]] = {
    "plain-without-transaction-index": {},
    "with-transaction-index": {"aborted_transactions": True},
    "empty-producer-snapshot": {"empty_producer_snapshot": True},
    "compressed-zstd": {"compression": "zstd"},
    "compressed-gzip": {"compression": "gzip"},
    "transactional-with-control-records": {"transactional": True, "control_records": True},
}

#: The input files a copy reads besides the ``.log``, by name: each is removed in turn to make
#: a copy fail midway.
COPY_INPUTS: dict[str, Callable[[LocalSegment], Path | None]] = {
    "offset-index": lambda s: s.data.offset_index,
    "time-index": lambda s: s.data.time_index,
    "transaction-index": lambda s: s.data.transaction_index,
    "producer-snapshot": lambda s: s.data.producer_snapshot_index,
}

SegmentFactory = Callable[..., LocalSegment]

#: Named byte ranges of a segment, from its size and batch positions: every border a reader hits.
RANGES: dict[str, Callable[[LocalSegment], tuple[int, int | None]]] = {
    "whole-segment": lambda s: (0, None),
    "whole-segment-by-last-byte": lambda s: (0, s.size - 1),
    "first-byte": lambda s: (0, 0),
    "last-byte": lambda s: (s.size - 1, s.size - 1),
    "single-byte-inside": lambda s: (s.size // 2, s.size // 2),
    "two-bytes-across-a-batch-border": lambda s: (
        s.batch_positions[1] - 1,
        s.batch_positions[1],
    ),
    "exactly-one-batch": lambda s: (s.batch_positions[2], s.batch_positions[3] - 1),
    "from-a-batch-to-the-end": lambda s: (s.batch_positions[-1], None),
    "inside-to-the-end": lambda s: (s.size // 3, None),
    "end-past-the-end": lambda s: (s.size // 2, s.size + 10_000),
    "last-byte-with-end-past-the-end": lambda s: (s.size - 1, s.size * 10),
}


def read_range(
    storage: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, start: int, end: int | None
) -> bytes:
    """Everything the plugin's stream for ``[start, end]`` gives, the stream closed after."""
    stream = storage.fetch_log_segment(metadata, start, end)
    try:
        return stream.read()
    finally:
        stream.close()


def read_index(
    storage: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, index_type: IndexType
) -> bytes:
    stream = storage.fetch_index(metadata, index_type)
    try:
        return stream.read()
    finally:
        stream.close()


class StorageManagerContract:
    """Every promise of the storage hooks, as tests. Not collected itself (no ``Test`` prefix).

    Override ``storage_settings`` (or ``plugin_host`` for full control) and, when the plugin is
    registered by code rather than by entry point, ``storage_extra_plugins``.
    """

    #: The plugin returns CustomMetadata from every copy (for example, where the objects live).
    supports_custom_metadata: ClassVar[bool] = False
    #: Kafka's ``remote.log.metadata.custom.metadata.max.bytes``; returned metadata must fit.
    max_custom_metadata_bytes: ClassVar[int] = CustomMetadata.DEFAULT_MAX_BYTES
    #: Several threads may copy, fetch and delete at once (Kafka's copier and reader pools).
    supports_concurrent_use: ClassVar[bool] = True
    #: Threads used by the concurrency test.
    concurrency: ClassVar[int] = 8
    #: A start position at or past the end of a non-empty segment raises RemoteStorageError;
    #: when False the plugin returns an empty stream instead.
    fetch_past_end_raises: ClassVar[bool] = True
    #: Record batches per test segment (at least 4, about 1.3 KiB each); raise it so segments
    #: span several of the plugin's chunks or parts.
    segment_batches: ClassVar[int] = 8
    #: How long a step of the cluster scenarios may wait (a remote store far away: raise it).
    cluster_timeout_s: ClassVar[float] = 60.0
    #: Keys of ``storage_settings`` the plugin cannot work without: leaving one out must fail
    #: ``tierlog_configure`` with InvalidConfigError naming it.
    required_settings: ClassVar[tuple[str, ...]] = ()
    #: How long a thread the plugin started may take to end once ``tierlog_close`` returned.
    close_timeout_s: ClassVar[float] = 10.0

    # --- fixtures the plugin author overrides ----------------------------------------------

    @pytest.fixture
    def storage_settings(self) -> Mapping[str, object]:
        """Broker settings choosing and configuring the storage plugin under test."""
        pytest.fail(
            f"{type(self).__name__} must override the storage_settings fixture with the broker "
            "settings that choose its plugin, e.g. {'remote.log.storage.manager.name': ..., "
            "'rsm.config.<key>': ...}"
        )

    @pytest.fixture
    def storage_extra_plugins(self) -> Mapping[str, object]:
        """Plugins registered by code (name -> plugin) in addition to entry points; a class
        is instantiated once per runtime (per broker in the cluster tests), as entry points are."""
        return {}

    @pytest.fixture
    def storage_recorder(self) -> RecordingStorageManager:
        """Records every call the kit makes, to explain a failure or assert on traffic."""
        return RecordingStorageManager()

    @pytest.fixture
    def plugin_host(
        self,
        storage_settings: Mapping[str, object],
        storage_extra_plugins: Mapping[str, object],
        storage_recorder: RecordingStorageManager,
    ) -> Iterator[PluginHost]:
        """A started host with the plugin chosen (and the built-in ``memory`` metadata
        manager, unless the settings choose another); closed after the test."""
        settings: dict[str, object] = {
            "remote.log.storage.system.enable": "true",
            "remote.log.metadata.manager.name": "memory",
            **storage_settings,
        }
        host = PluginHost.create(
            BrokerConfig.from_mapping(settings),
            extra_plugins={**storage_extra_plugins, "kit-recorder": storage_recorder},
        )
        host.start()
        try:
            yield host
        finally:
            host.close()

    @pytest.fixture
    def storage(self, plugin_host: PluginHost) -> RemoteStorageManager:
        return plugin_host.storage

    @pytest.fixture
    def partition(self) -> TopicIdPartition:
        return TopicIdPartition.of(Uuid.random(), "kit-orders", 3)

    @pytest.fixture
    def make_segment(self, tmp_path: Path, partition: TopicIdPartition) -> SegmentFactory:
        """Builds real segment files in a fresh local directory each call."""
        made = itertools.count()

        def make(**options: Any) -> LocalSegment:
            options.setdefault("partition", partition)
            options.setdefault("batches", self.segment_batches)
            return build_segment(tmp_path / "local" / str(next(made)), **options)

        return make

    # --- helpers ---------------------------------------------------------------------------

    def copy(
        self, storage: RemoteStorageManager, segment: LocalSegment
    ) -> RemoteLogSegmentMetadata:
        """Copy as the copy task does; the metadata later calls get (COPY_SEGMENT_FINISHED,
        with the returned custom metadata)."""
        custom = storage.copy_log_segment_data(segment.metadata, segment.data)
        check(
            custom is None or isinstance(custom, CustomMetadata),
            COPY,
            "returns CustomMetadata or None",
            type(custom).__name__,
        )
        return attrs.evolve(
            segment.metadata,
            state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            custom_metadata=custom,
        )

    # --- copy ------------------------------------------------------------------------------

    def test_copy_returns_custom_metadata_within_the_cap(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment()
        custom = storage.copy_log_segment_data(segment.metadata, segment.data)
        if self.supports_custom_metadata:
            check(
                isinstance(custom, CustomMetadata),
                COPY,
                "returns CustomMetadata (the class declares supports_custom_metadata = True)",
                custom,
            )
        if custom is not None:
            check(
                len(custom.value) <= self.max_custom_metadata_bytes,
                COPY,
                f"custom metadata is at most {self.max_custom_metadata_bytes} bytes "
                "(remote.log.metadata.custom.metadata.max.bytes)",
                f"{len(custom.value)} bytes",
            )

    def test_copy_then_fetch_returns_the_segment_and_every_index(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment(aborted_transactions=True)
        finished = self.copy(storage, segment)
        check_equal(
            read_range(storage, finished, 0, None),
            segment.log,
            FETCH,
            "after a copy, [0, None] returns the whole .log as copied",
        )
        for index_type in IndexType:
            check_equal(
                read_index(storage, finished, index_type),
                segment.indexes[index_type],
                FETCH_INDEX,
                f"after a copy, the {index_type.name} index is the copied file, byte for byte",
            )

    @pytest.mark.parametrize("kind", list(SEGMENT_KINDS))
    def test_every_kind_of_segment_is_copied_whole(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory, kind: str
    ) -> None:
        """Compressed, transactional, with control records, with or without a transaction
        index, and with the empty, segment-aligned producer snapshot the runtime writes for a
        segment that has none (KIP-952): a copy takes each as it is."""
        segment = make_segment(**SEGMENT_KINDS[kind])
        try:
            finished = self.copy(storage, segment)
        except ContractViolation:
            raise
        except Exception as err:
            rule = f"copy accepts every segment the runtime tiers ({kind})"
            if kind == "empty-producer-snapshot":
                rule = (
                    "copy accepts an empty, segment-aligned producer snapshot (KIP-952: the "
                    "runtime uploads one for a segment that has none)"
                )
            raise ContractViolation(COPY, rule, f"{type(err).__name__}: {err}") from err
        check_equal(
            read_range(storage, finished, 0, None),
            segment.log,
            FETCH,
            f"a copied segment is served byte for byte ({kind})",
        )
        for index_type, content in segment.indexes.items():
            check_equal(
                read_index(storage, finished, index_type),
                content,
                FETCH_INDEX,
                f"the {index_type.name} index is served as copied ({kind})",
            )

    @pytest.mark.parametrize("missing", list(COPY_INPUTS))
    def test_a_failed_copy_raises_and_leaves_nothing_visible(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory, missing: str
    ) -> None:
        """A copy that cannot finish (here, one of its input files is gone) raises, so the
        runtime records no upload, and leaves nothing a fetch could serve."""
        segment = make_segment(aborted_transactions=True)
        path = COPY_INPUTS[missing](segment)
        assert path is not None
        path.unlink()
        with expect_error(
            RemoteStorageError,
            COPY,
            f"a copy that fails (the {missing} file to upload is gone) raises "
            "RemoteStorageError; returning normally would make the runtime record an upload "
            "that does not exist",
        ):
            storage.copy_log_segment_data(segment.metadata, segment.data)
        finished = attrs.evolve(segment.metadata, state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        with expect_error(
            RemoteResourceNotFoundError,
            COPY,
            f"copies are all or nothing: after a copy failed midway (the {missing} file was "
            "gone) fetching the segment raises RemoteResourceNotFoundError, never a partial "
            "segment",
        ):
            read_range(storage, finished, 0, None)
        with expect_error(
            RemoteResourceNotFoundError,
            COPY,
            f"copies are all or nothing: after a copy failed midway (the {missing} file was "
            "gone) fetching its OFFSET index raises RemoteResourceNotFoundError",
        ):
            read_index(storage, finished, IndexType.OFFSET)

    # --- configure and close ---------------------------------------------------------------

    def test_configure_refuses_a_missing_required_setting(
        self,
        storage_settings: Mapping[str, object],
        storage_extra_plugins: Mapping[str, object],
    ) -> None:
        if not self.required_settings:
            pytest.skip("required_settings names no setting")
        for key in self.required_settings:
            settings = {
                "remote.log.storage.system.enable": "true",
                "remote.log.metadata.manager.name": "memory",
                **{k: v for k, v in storage_settings.items() if k != key},
            }
            short = key.rsplit(".", 1)[-1]
            rule = (
                f"configure refuses a missing required setting: without {key!r} it raises "
                "InvalidConfigError naming the key"
            )
            try:
                host = PluginHost.create(
                    BrokerConfig.from_mapping(settings), extra_plugins=dict(storage_extra_plugins)
                )
                host.start()
            except Exception as err:
                causes = _causes(err)
                refused = [e for e in causes if isinstance(e, InvalidConfigError)]
                check(
                    any(short in str(e) or e.key in (key, short) for e in refused),
                    CONFIGURE,
                    rule,
                    f"{type(err).__name__}: {err}",
                )
                continue
            host.close()
            raise ContractViolation(CONFIGURE, rule, "the plugin started without it")

    def test_close_releases_threads_and_file_descriptors(
        self,
        tmp_path: Path,
        storage_settings: Mapping[str, object],
        storage_extra_plugins: Mapping[str, object],
        make_segment: SegmentFactory,
    ) -> None:
        """After a copy, fetches and a delete, ``tierlog_close`` leaves no thread the plugin
        started running and no file under the test's directories open."""
        segment = make_segment(aborted_transactions=True)
        gc.collect()
        threads_before = set(threading.enumerate())
        settings: dict[str, object] = {
            "remote.log.storage.system.enable": "true",
            "remote.log.metadata.manager.name": "memory",
            **storage_settings,
        }
        host = PluginHost.create(
            BrokerConfig.from_mapping(settings), extra_plugins=dict(storage_extra_plugins)
        )
        host.start()
        try:
            finished = self.copy(host.storage, segment)
            read_range(host.storage, finished, 0, None)
            read_index(host.storage, finished, IndexType.OFFSET)
            host.storage.delete_log_segment_data(finished)
        finally:
            host.close()
        started = [t for t in threading.enumerate() if t not in threads_before]
        for thread in started:
            thread.join(self.close_timeout_s)
        running = sorted(t.name for t in started if t.is_alive())
        check(not running, CLOSE, "close stops every thread the plugin started", running)
        gc.collect()
        opened = _open_files_under(tmp_path)
        check(
            not opened,
            CLOSE,
            "close releases every file descriptor the plugin opened",
            opened,
        )

    # --- fetch -----------------------------------------------------------------------------

    @pytest.mark.parametrize("border", list(RANGES))
    def test_fetch_returns_exactly_the_inclusive_range(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory, border: str
    ) -> None:
        segment = make_segment()
        finished = self.copy(storage, segment)
        start, end = RANGES[border](segment)
        stop = segment.size if end is None else min(end + 1, segment.size)
        expected = segment.log[start:stop]
        got = read_range(storage, finished, start, end)
        shown = "None (to the end)" if end is None else end
        if got != expected:
            raise ContractViolation(
                FETCH,
                f"a range [start, end] returns exactly bytes start..end inclusive, an end past the "
                f"end is cut to the end ({border}: [{start}, {shown}] of a {segment.size}-byte "
                f"segment must give {_count(len(expected))})",
                _difference(got, expected, start),
            )

    def test_fetch_from_at_or_past_the_end(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment()
        finished = self.copy(storage, segment)
        for start in (segment.size, segment.size + 100):
            if self.fetch_past_end_raises:
                with expect_error(
                    RemoteStorageError,
                    FETCH,
                    f"a start position at or past the end ({start} of {segment.size} bytes) "
                    "raises RemoteStorageError (fetch_past_end_raises = True)",
                ):
                    read_range(storage, finished, start, None)
            else:
                got = read_range(storage, finished, start, None)
                check_equal(
                    got,
                    b"",
                    FETCH,
                    f"a start position at or past the end ({start}) gives an empty stream "
                    "(fetch_past_end_raises = False)",
                )

    def test_fetch_stream_can_be_read_in_small_pieces(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment()
        finished = self.copy(storage, segment)
        start = segment.batch_positions[1] + 3
        stream = storage.fetch_log_segment(finished, start, None)
        try:
            pieces = []
            while piece := stream.read(777):
                check(len(piece) <= 777, FETCH, "read(n) returns at most n bytes", len(piece))
                pieces.append(piece)
            check_equal(stream.read(), b"", FETCH, "a drained stream stays at its end")
        finally:
            stream.close()
        check_equal(
            b"".join(pieces),
            segment.log[start:],
            FETCH,
            "the returned stream reads the same bytes in small pieces as in one read",
        )

    def test_fetch_of_a_segment_never_copied_is_not_found(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        self.copy(storage, make_segment())
        absent = make_segment(base_offset=1_000)
        with expect_error(
            RemoteResourceNotFoundError,
            FETCH,
            "a segment that is not there raises RemoteResourceNotFoundError",
        ):
            read_range(storage, absent.metadata, 0, None)
        for index_type in IndexType:
            with expect_error(
                RemoteResourceNotFoundError,
                FETCH_INDEX,
                f"the {index_type.name} index of a segment that is not there raises "
                "RemoteResourceNotFoundError",
            ):
                read_index(storage, absent.metadata, index_type)

    # --- locate (optional) -----------------------------------------------------------------

    def locate(
        self,
        storage: RemoteStorageManager,
        metadata: RemoteLogSegmentMetadata,
        start: int,
        end: int | None,
    ) -> SegmentLocation:
        """The plugin's location of ``[start, end]``; the test is skipped when the plugin has
        no locate hook or cannot locate segments on this storage (it answers None)."""
        if not storage.can_locate():
            pytest.skip("the plugin does not implement tierlog_locate_log_segment (optional)")
        shown = "None" if end is None else end
        try:
            location = storage.locate_log_segment(metadata, start, end)
        except PluginError as err:
            raise ContractViolation(
                LOCATE,
                f"locate answers a SegmentLocation of the range asked for ([{start}, {shown}]) "
                "or None",
                str(err),
            ) from err
        if location is None:
            pytest.skip("the plugin cannot locate segments on this storage (locate answers None)")
        return location

    @pytest.mark.parametrize("border", list(RANGES))
    def test_locate_yields_the_bytes_fetch_returns(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory, border: str
    ) -> None:
        """Read with the reference reader, a location gives exactly what a fetch of the same
        range gives: a reader outside the plugin (Spark's JVM reader) sees the same segment.
        The bytes are compared with the copied file, so a broken fetch fails the fetch tests
        and a broken locate these."""
        segment = make_segment()
        finished = self.copy(storage, segment)
        start, end = RANGES[border](segment)
        stop = segment.size if end is None else min(end + 1, segment.size)
        shown = "None (to the end)" if end is None else end
        location = self.locate(storage, finished, start, end)
        check_equal(
            (location.start, location.end),
            (start, stop),
            LOCATE,
            f"a location of [start, end] covers segment bytes [start, end + 1), its end "
            f"exclusive and cut to the segment's size ({border}: [{start}, {shown}] of a "
            f"{segment.size}-byte segment)",
        )
        try:
            got = read_location(location, where=f"the location of [{start}, {shown}]")
        except RemoteStorageError as err:
            raise ContractViolation(
                LOCATE,
                f"a location can be read by the reference reader ({border})",
                f"{type(err).__name__}: {err}",
            ) from err
        expected = segment.log[start:stop]  # what the fetch contract holds a fetch to
        if got != expected:
            raise ContractViolation(
                LOCATE,
                f"a location gives exactly the bytes fetch_log_segment returns for the same range "
                f"({border}: [{start}, {shown}] of a {segment.size}-byte segment must give "
                f"{_count(len(expected))})",
                _difference(got, expected, start),
            )

    def test_locate_of_a_segment_never_copied_is_not_found(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        if not storage.can_locate():
            pytest.skip("the plugin does not implement tierlog_locate_log_segment (optional)")
        self.copy(storage, make_segment())
        absent = make_segment(base_offset=1_000)
        with expect_error(
            RemoteResourceNotFoundError,
            LOCATE,
            "locating a segment that is not there raises RemoteResourceNotFoundError, as a "
            "fetch does",
        ):
            storage.locate_log_segment(absent.metadata, 0, None)

    def test_locate_from_past_the_end_fails_as_fetch_does(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment()
        finished = self.copy(storage, segment)
        self.locate(storage, finished, 0, None)
        start = segment.size + 100
        if self.fetch_past_end_raises:
            with expect_error(
                RemoteStorageError,
                LOCATE,
                f"locating from past the end ({start} of {segment.size} bytes) raises "
                "RemoteStorageError, as a fetch does (fetch_past_end_raises = True)",
            ):
                storage.locate_log_segment(finished, start, None)
        else:
            location = storage.locate_log_segment(finished, start, None)
            check(
                location is None or read_location(location) == b"",
                LOCATE,
                f"locating from past the end ({start} of {segment.size} bytes) gives an empty "
                "location, as a fetch gives an empty stream (fetch_past_end_raises = False)",
                location,
            )

    # --- indexes ---------------------------------------------------------------------------

    @pytest.mark.parametrize("index_type", list(IndexType), ids=lambda t: t.name)
    def test_fetch_index_returns_the_whole_file(
        self,
        storage: RemoteStorageManager,
        make_segment: SegmentFactory,
        index_type: IndexType,
    ) -> None:
        segment = make_segment(aborted_transactions=True)
        other = make_segment(base_offset=segment.metadata.end_offset + 1, aborted_transactions=True)
        finished = self.copy(storage, segment)
        self.copy(storage, other)
        check_equal(
            read_index(storage, finished, index_type),
            segment.indexes[index_type],
            FETCH_INDEX,
            f"the {index_type.name} index of a segment is the file copied for it, whole",
        )

    def test_missing_transaction_index_is_not_found(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment(aborted_transactions=False)
        finished = self.copy(storage, segment)
        with expect_error(
            RemoteResourceNotFoundError,
            FETCH_INDEX,
            "a segment copied without a transaction index raises RemoteResourceNotFoundError "
            "for TRANSACTION",
        ):
            read_index(storage, finished, IndexType.TRANSACTION)
        check_equal(
            read_index(storage, finished, IndexType.OFFSET),
            segment.indexes[IndexType.OFFSET],
            FETCH_INDEX,
            "a segment without a transaction index still serves its other indexes",
        )

    # --- delete ----------------------------------------------------------------------------

    def test_delete_removes_the_segment_and_keeps_the_others(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        doomed = make_segment(aborted_transactions=True)
        kept = make_segment(base_offset=doomed.metadata.end_offset + 1)
        doomed_finished = self.copy(storage, doomed)
        kept_finished = self.copy(storage, kept)
        storage.delete_log_segment_data(doomed_finished)
        with expect_error(
            RemoteResourceNotFoundError,
            FETCH,
            "a deleted segment raises RemoteResourceNotFoundError",
        ):
            read_range(storage, doomed_finished, 0, None)
        for index_type in IndexType:
            with expect_error(
                RemoteResourceNotFoundError,
                FETCH_INDEX,
                f"the {index_type.name} index of a deleted segment raises "
                "RemoteResourceNotFoundError (delete removes every object of the segment)",
            ):
                read_index(storage, doomed_finished, index_type)
        check_equal(
            read_range(storage, kept_finished, 0, None),
            kept.log,
            DELETE,
            "deleting one segment leaves the partition's other segments whole",
        )

    def test_delete_is_idempotent(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment()
        finished = self.copy(storage, segment)
        storage.delete_log_segment_data(finished)
        for what, metadata in (
            ("deleting a segment again", finished),
            ("deleting a segment never copied", make_segment(base_offset=5_000).metadata),
        ):
            try:
                storage.delete_log_segment_data(metadata)
            except Exception as err:
                check(
                    False,
                    DELETE,
                    f"delete is idempotent: {what} succeeds",
                    f"{type(err).__name__}: {err}",
                )

    # --- re-copy and re-upload -------------------------------------------------------------

    def test_copying_the_same_segment_id_again_overwrites(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        first = make_segment(aborted_transactions=True)
        self.copy(storage, first)
        second = make_segment(
            segment_id=first.segment_id, batches=self.segment_batches + 2, value_size=57
        )
        try:
            finished = self.copy(storage, second)
        except Exception as err:
            check(
                False,
                COPY,
                "copying the same segment id again overwrites what is there; it is not an error",
                f"{type(err).__name__}: {err}",
            )
        check_equal(
            read_range(storage, finished, 0, None),
            second.log,
            COPY,
            "copying the same segment id again overwrites: fetch returns the new .log",
        )
        check_equal(
            read_index(storage, finished, IndexType.OFFSET),
            second.indexes[IndexType.OFFSET],
            COPY,
            "copying the same segment id again overwrites: fetch_index returns the new index",
        )
        with expect_error(
            RemoteResourceNotFoundError,
            COPY,
            "copying the same segment id again overwrites every object: the re-copy had no "
            "transaction index, so fetching TRANSACTION raises RemoteResourceNotFoundError",
        ):
            read_index(storage, finished, IndexType.TRANSACTION)

    def test_reupload_of_the_same_offsets_is_a_separate_segment(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        older = make_segment()
        newer = make_segment(value_size=61)
        older_finished = self.copy(storage, older)
        newer_finished = self.copy(storage, newer)
        check_equal(
            read_range(storage, older_finished, 0, None),
            older.log,
            COPY,
            "uploads are keyed by segment id: a new id for the same offsets keeps the older",
        )
        storage.delete_log_segment_data(older_finished)
        check_equal(
            read_range(storage, newer_finished, 0, None),
            newer.log,
            DELETE,
            "deleting a segment id leaves another upload of the same offsets whole",
        )

    def test_partitions_with_the_same_offsets_are_separate(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        mine = make_segment()
        tip = mine.metadata.topic_id_partition
        theirs = make_segment(
            partition=TopicIdPartition.of(tip.topic_id, tip.topic, tip.partition + 1)
        )
        other_topic = make_segment(partition=TopicIdPartition.of(Uuid.random(), tip.topic, 0))
        finished = [self.copy(storage, s) for s in (mine, theirs, other_topic)]
        for segment, metadata in zip((mine, theirs, other_topic), finished, strict=True):
            check_equal(
                read_range(storage, metadata, 0, None),
                segment.log,
                FETCH,
                f"segments are kept apart by partition and topic id "
                f"({metadata.topic_id_partition})",
            )

    # --- custom metadata -------------------------------------------------------------------

    def test_segment_is_served_with_its_custom_metadata(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        segment = make_segment()
        finished = self.copy(storage, segment)
        if finished.custom_metadata is None:
            pytest.skip("the plugin returns no custom metadata")
        check_equal(
            read_range(storage, finished, 0, None),
            segment.log,
            FETCH,
            "a segment is served from the metadata carrying the custom metadata its copy returned",
        )
        storage.delete_log_segment_data(finished)
        with expect_error(
            RemoteResourceNotFoundError,
            DELETE,
            "delete with the custom metadata removes the segment",
        ):
            read_range(storage, finished, 0, None)

    # --- threads ---------------------------------------------------------------------------

    def test_concurrent_copies_fetches_and_deletes(
        self, storage: RemoteStorageManager, make_segment: SegmentFactory
    ) -> None:
        if not self.supports_concurrent_use:
            pytest.skip("supports_concurrent_use = False")
        count = self.concurrency * 2
        segments = [make_segment(base_offset=1_000 * n, batches=3 + n % 4) for n in range(count)]

        def round_trip(segment: LocalSegment) -> tuple[RemoteLogSegmentMetadata, bytes, bytes]:
            finished = self.copy(storage, segment)
            whole = read_range(storage, finished, 0, None)
            middle = read_range(storage, finished, segment.size // 4, segment.size // 2)
            if segment.metadata.start_offset % 3000 == 0:
                storage.delete_log_segment_data(finished)
            return finished, whole, middle

        with concurrent.futures.ThreadPoolExecutor(self.concurrency) as pool:
            results = list(pool.map(round_trip, segments, timeout=300))
        for segment, (finished, whole, middle) in zip(segments, results, strict=True):
            check_equal(
                whole,
                segment.log,
                FETCH,
                f"with {self.concurrency} threads copying, fetching and deleting at once, each "
                "segment returns its own bytes",
            )
            check_equal(
                middle,
                segment.log[segment.size // 4 : segment.size // 2 + 1],
                FETCH,
                "a ranged fetch under concurrent use returns exactly its range",
            )
            if segment.metadata.start_offset % 3000 == 0:
                with expect_error(
                    RemoteResourceNotFoundError,
                    DELETE,
                    "a segment deleted while others are copied is gone",
                ):
                    read_range(storage, finished, 0, None)

    # --- in a cluster ----------------------------------------------------------------------

    @pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
    def test_leader_change_in_a_cluster(
        self,
        tmp_path: Path,
        storage_settings: Mapping[str, object],
        storage_extra_plugins: Mapping[str, object],
        clean: bool,
    ) -> None:
        """Three brokers share the storage. When the leader of a tiered partition stops
        (cleanly or as a crash) the new leader reads the old leader's uploads back, tiers on
        from where they end without uploading a range again, and the old leader catches up.

        A plugin registered by code gets one instance per broker when
        ``storage_extra_plugins`` maps its name to the class; an instance is shared.
        """
        first = [f"a-{n:05d}-".encode() + b"x" * 100 for n in range(300)]
        second = [f"b-{n:05d}-".encode() + b"x" * 100 for n in range(200)]
        topic = "kit-failover"
        with Scenario(
            tmp_path / "kit-cluster",
            storage_settings,
            brokers=3,
            extra_plugins=storage_extra_plugins,
            timeout_s=self.cluster_timeout_s,
        ) as scenario:
            scenario.create_topic(
                topic, replication_factor=3, segment_bytes=4096, local_retention_bytes=1
            )
            for broker_id in scenario.cluster.broker_ids:
                scenario.expect_in_isr(topic, 0, broker_id)
            scenario.produce(topic, 0, first).expect_tiered(topic, 0).expect_local_deleted(topic, 0)
            old = scenario.leader(topic, 0)
            (
                scenario.leader_change(topic, 0, clean=clean)
                .consume(topic, 0, from_offset=0, expect=first)
                .expect_fetched_from_remote(topic, 0)
                .produce(topic, 0, second)
                .expect_tiered(topic, 0)
                .start_broker(old)
                .expect_caught_up(topic, 0, old)
                .consume(topic, 0, from_offset=0, expect=first + second)
            )
            uploads = [
                (e.start_offset, e.end_offset)
                for e in scenario.events(topic, 0, RECORDED_COPY)
                if e.succeeded
            ]
            check(
                any(start >= len(first) for start, _end in uploads),
                COPY,
                "the new leader tiers the records produced after the leader change",
                f"uploads: {sorted(uploads)}",
            )
            check(
                len(uploads) == len(set(uploads)),
                COPY,
                "after a leader change no offset range is uploaded twice",
                f"uploads: {sorted(uploads)}",
            )


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and every exception it was raised from."""
    found: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _open_files_under(directory: Path) -> list[str]:
    """Paths under ``directory`` this process holds open (empty where /proc is missing)."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        return []
    root = str(directory.resolve())
    opened = []
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith(root + os.sep):
            opened.append(target)
    return sorted(opened)


def _difference(got: bytes, expected: bytes, start: int) -> str:
    """What a wrong read returned, in terms of the range asked for."""
    missing = len(expected) - len(got)
    if missing > 0 and expected.startswith(got):
        return f"{_count(len(got))}: the range without its last {_count(missing)}"
    if missing > 0 and expected.endswith(got):
        return f"{_count(len(got))}: the range without its first {_count(missing)}"
    if missing < 0 and got.startswith(expected):
        return f"{_count(len(got))}: the range and {_count(-missing)} after it"
    if missing == 0:
        first = next(i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
        return f"{_count(len(got))} that differ from segment byte {start + first} on"
    return f"{_count(len(got))} that are not the range's bytes"


def _count(size: int) -> str:
    return "1 byte" if size == 1 else f"{size} bytes"
