"""The storage contract against the kit's own directory storage manager (no extra install)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from tierlog.testing import DirectoryStorageManager, StorageManagerContract


class TestDirectoryStorage(StorageManagerContract):
    required_settings = ("rsm.config.root",)

    @pytest.fixture
    def storage_settings(self, tmp_path: Path) -> Mapping[str, object]:
        return {
            "remote.log.storage.manager.name": "directory",
            "rsm.config.root": str(tmp_path / "remote"),
        }

    @pytest.fixture
    def storage_extra_plugins(self) -> Mapping[str, object]:
        return {"directory": DirectoryStorageManager}  # one instance per broker
