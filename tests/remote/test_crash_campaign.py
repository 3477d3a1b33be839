"""SIGKILL campaigns: a replicated tiered cluster killed again and again loses nothing.

The whole process of a three-broker cluster (replication factor 3, ``min.insync.replicas=2``,
tiering through the fsspec plugin with zstd, 12 KiB segments, ``local.retention.bytes=1``) is
killed at a random moment every 0-4 s while a producer writes with ``acks=all``, and started again
on the same directories. Afterwards every acknowledged record must read back, from either
tier, unchanged; every tiered segment must be readable; no object may be left that metadata
does not reference.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tierlog.testing.crash import count_file_orphans, run_campaign, tiered_crash_plan

pytest.importorskip("tierlog_fsspec")
pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

#: Enough kills that losing committed segments after a restart shows up in every run.
CYCLES = 20


def test_a_replicated_cluster_killed_twenty_times_loses_no_acknowledged_record(
    tmp_path: Path,
) -> None:
    remote = tmp_path / "remote"
    plan = tiered_crash_plan(remote, brokers=3, cycles=CYCLES)
    report = run_campaign(plan, tmp_path / "run", orphans=count_file_orphans(remote))
    print(report.summary())
    assert report.cycles == CYCLES
    assert report.acknowledged > 10 * CYCLES, "the producer kept acknowledging between kills"
    assert report.finished_segments > CYCLES, "segments were tiered between kills"
    assert report.lost == 0, f"acknowledged records missing at {report.lost_ranges[:10]}"
    assert report.changed == 0
    assert report.unreadable_segments == 0
    assert report.orphan_objects == 0


def test_uploads_and_deletions_under_way_are_not_counted_as_orphans(tmp_path: Path) -> None:
    """The files are listed before the metadata: an upload whose COPY_SEGMENT_STARTED is listed
    is never an orphan, whether its objects appeared before or after the files were listed, and
    neither is a segment deleted in between; an object no listing names is one."""
    partition = tmp_path / "t-AAAAAAAAAAAAAAAAAAAAAA" / "0"
    partition.mkdir(parents=True)
    kinds = ("log", "timeindex", "snapshot", "leader-epoch-checkpoint", "rsm-manifest")

    def upload(offset: int, segment_id: str) -> list[Path]:
        paths = [partition / f"{offset:020d}-{segment_id}.{kind}" for kind in kinds]
        for path in paths:
            path.write_bytes(b"x")
        return paths

    upload(0, "finished")
    deleted = upload(10, "deleted")
    upload(20, "stray")
    metadata = {"finished", "deleted"}

    def live() -> set[str]:
        # Meanwhile one upload began (STARTED first, then its objects) and one deletion ended
        # (objects first, then DELETE_SEGMENT_FINISHED).
        metadata.add("begun")
        upload(30, "begun")
        for path in deleted:
            path.unlink()
        metadata.discard("deleted")
        return set(metadata)

    assert count_file_orphans(tmp_path)(live) == len(kinds)  # the stray upload's objects
