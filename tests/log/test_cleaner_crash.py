"""A cleaner process killed with SIGKILL at each step of a clean loses nothing: the reopened log
holds every record the clean would keep, nothing it had not before, no leftover file, and a
new round finishes the job exactly as an uninterrupted one does."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tierlog.log import PartitionLog

from .cleaner_crash_worker import CONFIG
from .cleaner_support import entries, keyed, transient_files
from .support import T0

WORKER = Path(__file__).with_name("cleaner_crash_worker.py")
NOW = T0 + 60_000


def _populate(directory: Path) -> None:
    log = PartitionLog.open(directory, CONFIG, clock=lambda: T0)
    try:
        # Keys written once: the first cleaned segment has records to write.
        log.append_as_leader(keyed([(f"once-{i}".encode(), b"1") for i in range(4)]), 0)
        for r in range(12):
            for k in range(0, 10, 2):
                value = None if (r, k) in ((5, 2), (11, 4)) else f"r{r}-k{k}".encode()
                pairs = [(f"k{k}".encode(), value), (f"k{k + 1}".encode(), b"x" * 40)]
                log.append_as_leader(keyed(pairs), 0)
        log.update_high_watermark(log.log_end_offset)
        log.roll()
    finally:
        log.close()


def _clean_in_process(directory: Path) -> None:
    from tierlog.log.cleaner import CleanerSettings, LogCleaner

    log = PartitionLog.open(directory, CONFIG, clock=lambda: NOW)
    try:
        LogCleaner(lambda: CleanerSettings(), lambda: [log], clock=lambda: NOW).clean_once()
    finally:
        log.close()


def _entries_of(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    log = PartitionLog.open(directory, CONFIG, clock=lambda: NOW)
    try:
        return entries(log)
    finally:
        log.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, list]:  # type: ignore[type-arg]
    """A populated log, what it holds, and what one uninterrupted clean leaves."""
    base = tmp_path_factory.mktemp("cleaner-crash")
    original = base / "original" / "c-0"
    _populate(original)
    cleaned = base / "cleaned" / "c-0"
    shutil.copytree(original, cleaned)
    _clean_in_process(cleaned)
    return original, _entries_of(original), _entries_of(cleaned)


@pytest.mark.parametrize(
    ("step", "committed"),
    [
        ("writing", False),
        ("before-swap-rename", False),
        ("after-swap-rename", True),
        ("after-delete-rename", True),
        ("after-live-rename", True),
    ],
)
def test_a_clean_killed_at_any_step_loses_nothing(
    tmp_path: Path,
    reference: tuple[Path, list, list],  # type: ignore[type-arg]
    step: str,
    committed: bool,
) -> None:
    original, before, after = reference
    assert len(after) < len(before)
    directory = tmp_path / "c-0"
    shutil.copytree(original, directory)
    process = subprocess.run(
        [sys.executable, str(WORKER), str(directory), step, str(NOW)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr.decode()
    crashed = _entries_of(directory)
    assert set(after) <= set(crashed) <= set(before)
    assert (crashed != before) is committed
    assert [e[0] for e in crashed] == sorted({e[0] for e in crashed})
    assert transient_files(directory) == []
    _clean_in_process(directory)
    assert _entries_of(directory) == after
