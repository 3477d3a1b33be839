"""Read-only requests (``bytes``, as the broker passes them) are written without a whole copy.

Only the 61-byte headers are copied and stamped; the records go from the caller's buffer to the
file in one ``pwritev``. The log must end up byte for byte as if the request had been a
``bytearray`` rewritten in place, and the caller's bytes must not change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tierlog.errors import OutOfOrderSequenceError
from tierlog.log import PartitionLog, segment
from tierlog.log.producer_state import AppendOrigin
from tierlog.records import Compression, ControlType

from .conftest import LogFactory
from .support import T0, all_batches, batch, idempotent, marker, read_all


def _requests() -> list[bytes]:
    """Single- and multi-batch requests of plain and idempotent batches, every codec."""
    plain = [batch(3, compression=codec, tag=int(codec)) for codec in Compression]
    return [
        plain[0],
        b"".join(plain[1:]),
        idempotent(7, 0, 4),
        idempotent(7, 4, 2) + idempotent(7, 6, 3, compression=Compression.ZSTD),
        batch(1, value_size=100_000),
    ]


def _fill(log: PartitionLog, as_bytearray: bool, epoch: int = 3) -> list[int]:
    firsts = []
    for request in _requests():
        data = bytearray(request) if as_bytearray else request
        firsts.append(log.append_as_leader(data, epoch).first_offset)
    return firsts


def test_read_only_requests_store_the_same_bytes(tmp_path: Path, make_log: LogFactory) -> None:
    in_place = make_log(tmp_path / "a-0")
    read_only = make_log(tmp_path / "b-0")
    assert _fill(read_only, as_bytearray=False) == _fill(in_place, as_bytearray=True)
    assert read_all(read_only) == read_all(in_place)
    assert read_only.segments()[0].size_in_bytes == in_place.segments()[0].size_in_bytes
    stored = all_batches(read_only)
    assert {b.partition_leader_epoch for b in stored} == {3}
    assert [b.base_offset for b in stored][:2] == [0, 3]


def test_the_callers_bytes_are_untouched(log_dir: Path, make_log: LogFactory) -> None:
    log = make_log(log_dir)
    requests = _requests()
    copies = [bytes(bytearray(r)) for r in requests]
    for request in requests:
        log.append_as_leader(request, 0)
    assert requests == copies


def test_producer_checks_see_the_assigned_offsets(log_dir: Path, make_log: LogFactory) -> None:
    log = make_log(log_dir)
    log.append_as_leader(batch(5), 0)
    first = log.append_as_leader(idempotent(9, 0, 2), 0)
    retried = log.append_as_leader(idempotent(9, 0, 2), 0)
    assert retried.duplicate and (retried.first_offset, retried.last_offset) == (5, 6)
    assert first.first_offset == 5
    before = read_all(log)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(9, 5, 1), 0)
    assert read_all(log) == before


def test_markers_and_log_append_time_still_work_from_bytes(
    tmp_path: Path, make_log: LogFactory
) -> None:
    """Both need whole writable batches, so such requests are copied as before."""
    txns = make_log(tmp_path / "t-0")
    txns.append_as_leader(idempotent(1, 0, 2, transactional=True), 0)
    txns.append_as_leader(marker(ControlType.COMMIT, 1), 0, AppendOrigin.COORDINATOR)
    assert [b.is_control for b in all_batches(txns)] == [False, True]
    txns.update_high_watermark(txns.log_end_offset)
    assert txns.first_unstable_offset is None

    stamped = make_log(tmp_path / "s-0", {"message.timestamp.type": "LogAppendTime"})
    data = batch(3)
    info = stamped.append_as_leader(data, 0)
    assert data == batch(3)
    (stored,) = all_batches(stamped)
    assert stored.max_timestamp == info.log_append_time != T0 + 2


def test_requests_of_more_batches_than_one_pwritev_takes(
    log_dir: Path, make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment, "_IOV_MAX", 3)
    log = make_log(log_dir)
    request = b"".join(batch(2, tag=i) for i in range(5))
    log.append_as_leader(request, 0)
    assert [b.base_offset for b in all_batches(log)] == [0, 2, 4, 6, 8]
    assert len(read_all(log)) == len(request)


def test_a_short_pwritev_is_finished(
    log_dir: Path, make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.pwritev

    def short(fd: int, buffers: list[bytes], offset: int) -> int:
        return real(fd, [memoryview(buffers[0])[:10]], offset)

    log = make_log(log_dir)
    monkeypatch.setattr(segment.os, "pwritev", short)
    log.append_as_leader(batch(2) + batch(3), 0)
    monkeypatch.undo()
    assert [b.base_offset for b in all_batches(log)] == [0, 2]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"
