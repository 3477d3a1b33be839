from __future__ import annotations

import pytest
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.plugins import TierlogPluginManager
from tierlog.spi import RemoteLogMetadataManager

from .support import Segments, make_plugin_manager_with_memory, memory_plugin, metadata_facade


@pytest.fixture
def plugin_manager() -> TierlogPluginManager:
    return make_plugin_manager_with_memory()


@pytest.fixture
def manager(plugin_manager: TierlogPluginManager) -> InMemoryRemoteLogMetadataManager:
    return memory_plugin(plugin_manager)[1]


@pytest.fixture
def rlmm(plugin_manager: TierlogPluginManager) -> RemoteLogMetadataManager:
    return metadata_facade(plugin_manager)


@pytest.fixture
def segments(rlmm: RemoteLogMetadataManager) -> Segments:
    return Segments(rlmm)
