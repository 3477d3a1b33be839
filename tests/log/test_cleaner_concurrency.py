"""The cleaner's thread swapping segments under a writer that keeps appending and rolling, and
readers that keep reading from the log start: every read gets whole valid batches in offset
order, and each key's newest value is never lost."""

from __future__ import annotations

import threading
from pathlib import Path

from tierlog.errors import OffsetOutOfRangeError
from tierlog.log import FetchIsolation
from tierlog.log.cleaner import CleanerSettings, LogCleaner
from tierlog.records import iter_batches

from .cleaner_support import entries, keyed
from .conftest import LogFactory

KEYS = 50
BATCHES = 3000


def test_readers_and_a_writer_run_safely_beside_the_cleaner(
    tmp_path: Path, make_log: LogFactory
) -> None:
    config = {
        "cleanup.policy": "compact,delete",
        "segment.bytes": 8192,
        "min.cleanable.dirty.ratio": 0.1,
        "file.delete.delay.ms": 0,
    }
    log = make_log(tmp_path / "c-0", config)
    cleaner = LogCleaner(lambda: CleanerSettings(backoff_ms=1), lambda: [log])
    done = threading.Event()
    failures: list[BaseException] = []
    reads = [0]

    def read_all() -> None:
        try:
            while not done.is_set():
                offset, last = log.local_log_start_offset, -1
                while offset < log.high_watermark:
                    try:
                        info = log.read(offset, 4096, FetchIsolation.HIGH_WATERMARK)
                    except OffsetOutOfRangeError:
                        break  # retention moved the start meanwhile
                    if not info.records:
                        break
                    for batch in iter_batches(info.records):
                        assert batch.base_offset > last
                        for record in batch.records():
                            assert record.key is not None
                        last = batch.last_offset
                    offset = info.next_offset
                reads[0] += 1
        except BaseException as err:
            failures.append(err)

    readers = [threading.Thread(target=read_all) for _ in range(2)]
    cleaner.start()
    for reader in readers:
        reader.start()
    latest: dict[bytes, bytes] = {}
    try:
        for n in range(BATCHES):
            pairs = [(f"k{(n * 7 + i) % KEYS}".encode(), f"{n}-{i}".encode()) for i in range(5)]
            log.append_as_leader(keyed(pairs), 0)
            log.update_high_watermark(log.log_end_offset)
            latest.update(pairs)  # type: ignore[arg-type]
            if n % 200 == 0:
                log.delete_old_segments()
        log.roll()
        assert cleaner.await_cleaned(log, log.log_end_offset, timeout=60)
    finally:
        done.set()
        for reader in readers:
            reader.join()
        cleaner.stop()
    assert failures == []
    assert reads[0] > 0
    assert {key: value for _, key, value in entries(log)} == latest
    assert len(entries(log)) == KEYS
