from __future__ import annotations

import pytest
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.plugins import TierlogPluginManager
from tierlog.spi import RemoteLogMetadataManager

from .support import (
    OTHER_TIP,
    TIP,
    Segments,
    make_plugin_manager_with_memory,
    memory_plugin,
    metadata_facade,
)


@pytest.fixture
def plugin_manager() -> TierlogPluginManager:
    return make_plugin_manager_with_memory()


@pytest.fixture
def manager(plugin_manager: TierlogPluginManager) -> InMemoryRemoteLogMetadataManager:
    return memory_plugin(plugin_manager)[1]


@pytest.fixture
def rlmm(plugin_manager: TierlogPluginManager) -> RemoteLogMetadataManager:
    """The facade, leading TIP and OTHER_TIP as the runtime's leadership change would."""
    facade = metadata_facade(plugin_manager)
    facade.on_partition_leadership_changes(frozenset({TIP, OTHER_TIP}), frozenset())
    return facade


@pytest.fixture
def segments(rlmm: RemoteLogMetadataManager) -> Segments:
    return Segments(rlmm)
