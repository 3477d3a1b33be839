"""Building segments and driving the memory manager through the SPI the way the runtime does."""

from __future__ import annotations

from collections.abc import Iterable

from tierlog import hookspecs
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.model import TopicIdPartition, Uuid
from tierlog.plugins import BUILTIN_PLUGINS, TierlogPluginManager, make_plugin_manager
from tierlog.spi import RemoteLogMetadataManager
from tierlog.testing.uploads import DELETE_FINISHED, DELETE_STARTED, FINISHED, STARTED, Uploads

__all__ = ["DELETE_FINISHED", "DELETE_STARTED", "FINISHED", "STARTED", "Segments"]

RLMM_HOOKS = (
    hookspecs.REMOTE_LOG_METADATA_MANAGER_HOOKS
    + hookspecs.REMOTE_LOG_METADATA_MANAGER_OPTIONAL_HOOKS
)

TIP = TopicIdPartition.of(Uuid.random(), "orders", 0)
OTHER_TIP = TopicIdPartition.of(TIP.topic_id, "orders", 1)


def make_plugin_manager_with_memory(
    plugin: InMemoryRemoteLogMetadataManager | None = None,
) -> TierlogPluginManager:
    """A plugin manager whose only plugin is a memory manager: the built-in ``memory`` once
    plugins.py lists it, otherwise (or when ``plugin`` is given) an instance registered by hand."""
    if plugin is None and "memory" in BUILTIN_PLUGINS:
        blocked = [name for name in BUILTIN_PLUGINS if name != "memory"]
        extra: dict[str, object] = {}
    else:
        blocked = list(BUILTIN_PLUGINS)
        plugin = plugin if plugin is not None else InMemoryRemoteLogMetadataManager()
        extra = {"memory-under-test": plugin}
    return make_plugin_manager(
        blocked=blocked, load_entry_points=False, extra_plugins=extra, environ={}
    )


def memory_plugin(pm: TierlogPluginManager) -> tuple[str, InMemoryRemoteLogMetadataManager]:
    """The name and instance of the plugin manager's one memory manager."""
    (found,) = [
        (name, plugin)
        for name, plugin in pm.plugins_in_order()
        if isinstance(plugin, InMemoryRemoteLogMetadataManager)
    ]
    return found


def metadata_facade(
    pm: TierlogPluginManager, hooks: Iterable[str] = RLMM_HOOKS
) -> RemoteLogMetadataManager:
    """The runtime's facade over the memory plugin's hooks (and only those in ``hooks``)."""
    name, plugin = memory_plugin(pm)
    others = [p for _, p in pm.plugins_in_order() if p is not plugin]
    callers = {hook: pm.subset_hook_caller(hook, remove_plugins=others) for hook in hooks}
    return RemoteLogMetadataManager(name, callers)


class Segments(Uploads):
    """The kit's ``Uploads`` on ``TIP``; without a facade it only builds values."""

    def __init__(self, rlmm: RemoteLogMetadataManager | None = None) -> None:
        super().__init__(rlmm, TIP)  # type: ignore[arg-type]  # a value builder needs no facade
