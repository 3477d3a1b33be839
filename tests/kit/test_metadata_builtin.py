"""The metadata contract against the built-in managers: ``memory`` in a bare plugin host, and
``topic`` inside a one-broker cluster, restarted on the same data."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from tierlog.testing import MetadataManagerContract


class TestMemoryMetadata(MetadataManagerContract):
    @pytest.fixture
    def metadata_settings(self) -> Mapping[str, object]:
        return {"remote.log.metadata.manager.name": "memory"}


class TestTopicBasedMetadata(MetadataManagerContract):
    needs_broker = True
    persistent = True
    ready_only_when_held = True

    @pytest.fixture
    def metadata_settings(self) -> Mapping[str, object]:
        return {
            "remote.log.metadata.manager.name": "topic",
            "rlmm.config.remote.log.metadata.topic.num.partitions": 3,
        }
