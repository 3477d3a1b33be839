"""A log of offset commits stays bounded: 200,000 commits of 100 groups for 10 partitions each
(1,000 keys), with the cleaner's thread running as on a broker, leave a log the size of its
live keys plus what the dirty ratio allows, holding the latest commit of every key."""

from __future__ import annotations

from pathlib import Path

from tierlog.log.cleaner import CleanerSettings, LogCleaner

from .cleaner_support import entries, keyed
from .conftest import LogFactory

SEGMENT_BYTES = 64 * 1024
COMMITS = 200_000
GROUPS = 100
PARTITIONS = 10
#: Commits between two looks at the log's size.
BURST = 10_000


def test_a_commit_log_stays_bounded_under_continuous_cleaning(
    tmp_path: Path, make_log: LogFactory
) -> None:
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": SEGMENT_BYTES,
        "file.delete.delay.ms": 0,
    }
    log = make_log(tmp_path / "__consumer_offsets-0", config)
    cleaner = LogCleaner(lambda: CleanerSettings(backoff_ms=5), lambda: [log])
    cleaner.start()
    latest: dict[bytes, bytes] = {}
    sizes = []
    try:
        for start in range(0, COMMITS, 100):
            pairs = []
            for n in range(start, start + 100):
                key = f"group-{n % GROUPS:03d}/orders/{n // GROUPS % PARTITIONS}".encode()
                value = n.to_bytes(8, "big") * 4
                pairs.append((key, value))
                latest[key] = value
            log.append_as_leader(keyed(pairs), 0)
            log.update_high_watermark(log.log_end_offset)
            if (start + 100) % BURST == 0:
                # Between bursts the cleaner catches up with what was rolled.
                rolled = log.segments()[-1].base_offset
                assert cleaner.await_cleaned(log, rolled, timeout=120)
                sizes.append(log.size)
    finally:
        cleaner.stop()
    assert {key: value for _, key, value in entries(log)} == latest
    # The whole history is 12 MB; after every burst the log is back to its live keys, the
    # dirty rest of the last segments and the active one: the same few hundred KiB each time.
    assert max(sizes) < 8 * SEGMENT_BYTES
    assert max(sizes[len(sizes) // 2 :]) < 2 * min(sizes[: len(sizes) // 2])
