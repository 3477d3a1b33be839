"""``tierlog demo``: the README's first command must work and verify what it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tierlog_fsspec")

from tierlog.demo import run_demo


def test_run_demo_round_trips_every_record_and_tiers_the_rolled_segments(tmp_path: Path) -> None:
    report = run_demo(tmp_path, records=6000, segment_bytes=32 * 1024)
    assert report.consumed == report.records == 6000
    assert (report.storage_plugin, report.metadata_plugin) == ("fsspec", "memory")
    assert report.tiered_segments >= 1
    assert report.tiered_segments < report.local_segments  # the active segments stay local
    assert report.remote_records_verified > 0
    assert len(report.fetch_latencies_ms) == report.tiered_segments
    remote = [p for p in (tmp_path / "remote").rglob("*") if p.is_file()]
    assert len(remote) == report.remote_objects
    # objects are named <20-digit start offset>-<segment id>.<kind>; partition 0 starts at 0
    assert any(p.name.startswith(f"{0:020d}-") for p in remote)


def test_the_demo_command_runs_from_the_shell(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    result = subprocess.run(
        [sys.executable, "-m", "tierlog", "demo", "--data-dir", str(tmp_path), "--records", "5000"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "5000 / 5000" in result.stdout
    assert "matches what was produced" in result.stdout
