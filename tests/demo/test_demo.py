"""``tierlog demo``: the README's first command must work and verify what it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tierlog_fsspec")

from tierlog.demo import run_demo


def test_run_demo_tiers_every_segment_and_reads_every_record_back(tmp_path: Path) -> None:
    report = run_demo(tmp_path, segments=3, records_per_segment=250)
    assert (report.storage_plugin, report.metadata_plugin) == ("fsspec", "memory")
    assert report.segments == 3 and report.records == 750
    assert report.verified_records == 750
    assert report.fetches == 3
    remote = [p for p in (tmp_path / "remote").rglob("*") if p.is_file()]
    assert len(remote) == report.remote_objects > 0
    # the remote tier is a separate copy: deleting local segments would not lose anything
    assert all(not str(p).startswith(str(tmp_path / "local")) for p in remote)


def test_the_demo_command_runs_from_the_shell(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    result = subprocess.run(
        [sys.executable, "-m", "tierlog", "demo", "--data-dir", str(tmp_path), "--segments", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "every record read back from the remote tier matches" in result.stdout
    assert "4000" in result.stdout  # 2 segments x 2000 records, verified
