"""The kit's helpers on their own: real segment files and the recording storage wrapper."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.config import BrokerConfig
from tierlog.errors import RemoteResourceNotFoundError
from tierlog.host import PluginHost
from tierlog.log.epoch_cache import EpochEntry, LeaderEpochCheckpointFile
from tierlog.log.offset_index import OffsetIndex
from tierlog.log.snapshot import EMPTY_SNAPSHOT, decode_snapshot
from tierlog.log.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from tierlog.model import IndexType
from tierlog.records import Compression, iter_batches
from tierlog.testing import DirectoryStorageManager, RecordingStorageManager, build_segment


def test_a_built_segment_holds_real_batches_and_indexes_pointing_at_them(tmp_path: Path) -> None:
    segment = build_segment(
        tmp_path, base_offset=500, batches=5, records_per_batch=4, leader_epochs={3: 500, 4: 508}
    )
    batches = list(iter_batches(segment.log))
    assert [b.base_offset for b in batches] == [500, 504, 508, 512, 516]
    assert [b.partition_leader_epoch for b in batches] == [3, 3, 4, 4, 4]
    assert [len(list(b.records())) for b in batches] == [4] * 5
    assert segment.data.log_segment.read_bytes() == segment.log

    offsets = [
        OffsetIndex.ENTRY.unpack_from(segment.indexes[IndexType.OFFSET], 8 * n) for n in range(5)
    ]
    assert offsets == [(4 * n, position) for n, position in enumerate(segment.batch_positions)]
    for (relative, position), batch in zip(offsets, batches, strict=True):
        (found,) = list(iter_batches(segment.log[position : position + len(batch.raw)]))
        assert found.base_offset == 500 + relative

    (entry,) = decode_snapshot(segment.indexes[IndexType.PRODUCER_SNAPSHOT])
    assert entry.last_offset == segment.metadata.end_offset == 519
    assert LeaderEpochCheckpointFile.decode(segment.data.leader_epoch_index) == [
        EpochEntry(3, 500),
        EpochEntry(4, 508),
    ]
    assert segment.metadata.leader_epochs == {3: 500, 4: 508}
    assert segment.metadata.segment_size_in_bytes == len(segment.log)
    assert segment.data.transaction_index is None and segment.metadata.txn_idx_empty
    assert segment.data.producer_snapshot_index.name == f"{520:020d}.snapshot"


def test_a_segment_with_aborted_transactions_has_a_transaction_index(tmp_path: Path) -> None:
    segment = build_segment(tmp_path, aborted_transactions=True)
    assert segment.data.transaction_index is not None
    assert segment.data.transaction_index.read_bytes() == segment.indexes[IndexType.TRANSACTION]
    assert len(segment.indexes[IndexType.TRANSACTION]) == 2 * TXN_ENTRY_SIZE
    assert not segment.metadata.txn_idx_empty


def test_the_recorder_sees_every_call_with_its_range_and_outcome(tmp_path: Path) -> None:
    recorder = RecordingStorageManager()
    host = PluginHost.create(
        BrokerConfig.from_mapping(
            {
                "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.name": "directory",
                "remote.log.metadata.manager.name": "memory",
                "rsm.config.root": str(tmp_path / "remote"),
            }
        ),
        extra_plugins={"directory": DirectoryStorageManager(), "recorder": recorder},
    )
    host.start()
    try:
        segment = build_segment(tmp_path / "local")
        host.storage.copy_log_segment_data(segment.metadata, segment.data)
        with host.storage.fetch_log_segment(segment.metadata, 10, 20) as stream:
            assert stream.read() == segment.log[10:21]
        host.storage.fetch_index(segment.metadata, IndexType.OFFSET).close()
        with pytest.raises(RemoteResourceNotFoundError):
            host.storage.fetch_index(segment.metadata, IndexType.TRANSACTION)
        host.storage.delete_log_segment_data(segment.metadata)
    finally:
        host.close()

    events = recorder.events
    assert [(e.kind, e.detail, e.error) for e in events] == [
        ("copy", None, None),
        ("fetch", (10, 20), None),
        ("fetch_index", IndexType.OFFSET, None),
        ("fetch_index", IndexType.TRANSACTION, "RemoteResourceNotFoundError"),
        ("delete", None, None),
    ]
    assert {e.segment_id for e in events} == {segment.segment_id}
    assert recorder.of("fetch_index", segment.segment_id)[1].succeeded is False
    recorder.clear()
    assert recorder.events == []


def test_the_segment_builder_makes_every_kind_of_segment_a_broker_tiers(tmp_path: Path) -> None:
    plain = build_segment(tmp_path / "plain", batches=3)
    assert plain.data.transaction_index is None, "no transaction index unless asked"

    empty = build_segment(tmp_path / "empty", base_offset=100, empty_producer_snapshot=True)
    assert empty.data.producer_snapshot_index.read_bytes() == EMPTY_SNAPSHOT
    assert decode_snapshot(empty.indexes[IndexType.PRODUCER_SNAPSHOT]) == []
    end = empty.metadata.end_offset
    assert empty.data.producer_snapshot_index.name == f"{end + 1:020d}.snapshot", "aligned"

    zstd = build_segment(tmp_path / "zstd", compression="zstd", batches=3)
    assert {b.compression for b in iter_batches(zstd.log)} == {Compression.ZSTD}
    assert [len(list(b.records())) for b in iter_batches(zstd.log)] == [10, 10, 10]

    txn = build_segment(
        tmp_path / "txn", base_offset=50, batches=3, transactional=True, control_records=True
    )
    batches = list(iter_batches(txn.log))
    assert [(b.base_offset, b.is_control) for b in batches] == [
        (50, False),
        (60, True),
        (61, False),
        (71, True),
        (72, False),
        (82, True),
    ]
    assert all(b.is_transactional for b in batches)
    assert txn.metadata.end_offset == batches[-1].last_offset == 82
    assert len(txn.batch_positions) == len(batches)
    relative = [
        OffsetIndex.ENTRY.unpack_from(txn.indexes[IndexType.OFFSET], 8 * n)[0]
        for n in range(len(batches))
    ]
    assert relative == [b.base_offset - 50 for b in batches]
    with pytest.raises(ValueError, match="transactional"):
        build_segment(tmp_path / "bad", control_records=True)
