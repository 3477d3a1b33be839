"""The conformance kit against the installed plugin, found through its entry point, and the
plugin as ``tierlog plugins`` lists it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from tierlog.testing import Scenario, StorageManagerContract


def sqlite_settings(tmp_path: Path) -> dict[str, object]:
    return {
        "remote.log.storage.manager.name": "sqlite",
        "rsm.config.path": str(tmp_path / "remote.sqlite"),
    }


class TestSqliteStorage(StorageManagerContract):
    required_settings = ("rsm.config.path",)

    @pytest.fixture
    def storage_settings(self, tmp_path: Path) -> Mapping[str, object]:
        return sqlite_settings(tmp_path)


def test_segments_tier_to_sqlite_and_read_back(tmp_path: Path) -> None:
    values = [f"{n:04d}".encode() * 30 for n in range(300)]
    with Scenario(tmp_path, sqlite_settings(tmp_path)) as scenario:
        (
            scenario.create_topic("t", segment_bytes=4096, local_retention_bytes=1)
            .produce("t", 0, values)
            .expect_tiered("t", 0)
            .expect_local_deleted("t", 0)
            .consume("t", 0, from_offset=0, expect=values)
            .expect_fetched_from_remote("t", 0)
            .delete_topic("t")
            .expect_remote_empty("t")
        )


def test_tierlog_plugins_lists_the_distribution() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "tierlog", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["sqlite"]["distribution"] == "tierlog-sqlite-storage"
    assert "tierlog_copy_log_segment_data" in rows["sqlite"]["hooks"]
