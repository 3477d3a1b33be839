"""Reads from other threads while the log appends, rolls and deletes old segments."""

from __future__ import annotations

import threading
from pathlib import Path

from tierlog.errors import OffsetOutOfRangeError
from tierlog.log import FetchIsolation
from tierlog.records import RecordBatch

from .conftest import LogFactory
from .support import batch


def test_readers_only_ever_see_whole_valid_batches(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(
        tmp_path / "t-0",
        {"segment.bytes": 4000, "file.delete.delay.ms": 0, "retention.bytes": 20_000},
    )
    stop = threading.Event()
    failures: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                offset = log.local_log_start_offset
                while offset < log.high_watermark and not stop.is_set():
                    try:
                        info = log.read(offset, 3000, FetchIsolation.HIGH_WATERMARK)
                    except OffsetOutOfRangeError:
                        break  # retention moved the start past us; start again
                    view = memoryview(info.records)
                    position = 0
                    while position < len(view):
                        found = RecordBatch.parse(view, position)
                        found.validate()
                        assert found.base_offset <= offset or position > 0
                        assert found.next_offset <= log.high_watermark
                        position = found.end_position
                        offset = found.next_offset
                    reads[0] += 1
        except BaseException as err:  # handed to the main thread
            failures.append(err)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for i in range(1500):
            log.append_as_leader(batch(3, value_size=50, tag=i), leader_epoch=0)
            log.update_high_watermark(log.log_end_offset)
            if i % 50 == 0:
                log.delete_old_segments()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not failures, failures[0]
    assert reads[0] > 0
    assert log.log_start_offset > 0
