"""The crash campaign at length: SIGKILL tiered clusters again and again, then count the damage.

One-broker and three-broker clusters (replication factor 3, ``min.insync.replicas=2``) tier
through the fsspec plugin to a local bucket while a producer writes with ``acks=all``; the whole
process is killed at a random moment every 0-4 s and started again, 200 times each (10 with
``--quick``). Reported: acknowledged records, lost, changed, duplicated, tiered segments that do
not read back, objects no metadata references, and the restart time beside a clean start of the
same cluster. Target: nothing lost, unreadable or orphaned.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tierlog.testing.crash import count_file_orphans, run_campaign, tiered_crash_plan

from .report import row


def run(quick: bool) -> list[dict[str, Any]]:
    cycles = 10 if quick else 200
    rows: list[dict[str, Any]] = []
    for brokers in (1, 3):
        with tempfile.TemporaryDirectory(prefix="tierlog-crash-") as tmp:
            remote = Path(tmp) / "remote"
            plan = tiered_crash_plan(remote, brokers=brokers, cycles=cycles, seed=brokers)
            report = run_campaign(plan, Path(tmp) / "run", orphans=count_file_orphans(remote))
        name = f"crash_{brokers}_broker{'s' if brokers > 1 else ''}"
        print(f"{name}: {report.summary()}")
        rows += [
            row(f"{name}_acknowledged", report.acknowledged, "records", None, None),
            row(f"{name}_lost", report.lost, "records", None, 0, higher_is_better=False),
            row(f"{name}_changed", report.changed, "records", None, 0, higher_is_better=False),
            row(f"{name}_duplicated", report.duplicated, "records", None, None),
            row(
                f"{name}_unreadable_segments",
                report.unreadable_segments,
                "segments",
                None,
                0,
                higher_is_better=False,
            ),
            row(f"{name}_tiered_segments", report.finished_segments, "segments", None, None),
            row(
                f"{name}_orphans", report.orphan_objects, "objects", None, 0, higher_is_better=False
            ),
            row(
                f"{name}_restart_p50",
                report.restart_p50,
                "s",
                report.clean_start_seconds,
                None,
                higher_is_better=False,
            ),
            row(
                f"{name}_restart_max",
                report.restart_max,
                "s",
                report.clean_start_seconds,
                None,
                higher_is_better=False,
            ),
        ]
    return rows
