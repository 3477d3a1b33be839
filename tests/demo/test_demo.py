"""``tierlog demo``: the README's first command must work and verify what it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tierlog_fsspec")

import kafka
from tierlog.demo import run_demo
from tierlog.wire import APIS


def test_run_demo_tiers_deletes_local_copies_and_reads_both_tiers(tmp_path: Path) -> None:
    report = run_demo(tmp_path, records=6000, segment_bytes=32 * 1024)
    assert report.consumed == report.records == 6000
    # everything went through the listener, with a real Kafka client
    host, _, port = report.bootstrap_servers.partition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert report.client.startswith(f"kafka-python {kafka.__version__}")
    assert report.wire_requests["Produce"] >= 3  # a batch per partition at least
    assert report.wire_requests["Fetch"] >= 1
    assert report.wire_requests["CreateTopics"] == 1
    # the producer is idempotent as soon as the listener serves InitProducerId
    assert report.wire_requests.get("InitProducerId", 0) == (1 if 22 in APIS else 0)
    assert (report.storage_plugin, report.metadata_plugin) == ("fsspec", "topic")
    assert report.tiered_segments >= 3
    assert report.local_segments == 3  # only each partition's active segment stays local
    assert 0 < report.remote_records_verified < report.records
    assert report.remote_fetches >= 1
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
    assert "bootstrap servers" in result.stdout and "127.0.0.1:" in result.stdout
    assert "kafka-python" in result.stdout
    assert "matches what was produced" in result.stdout
