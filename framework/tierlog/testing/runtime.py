"""Runs a metadata manager the way the runtime does, so the contract can drive it and restart it.

A manager that needs nothing but its configuration runs in a bare ``PluginHost``; one that needs
a broker (the topic-based manager reads and writes an internal topic) runs inside a one-broker
``EmbeddedCluster``. Either way a storage manager is chosen too, as the runtime requires: the
kit's directory storage manager unless the settings name another. Both keep their data under one
directory, so a restart on it shows what a persistent manager brings back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..cluster import EmbeddedCluster
from ..config import BrokerConfig
from ..host import PluginHost
from ..model import TopicIdPartition
from ..plugins import ROLE_METADATA
from ..spi import RemoteLogMetadataManager
from .contract import ContractViolation
from .directory_storage import DirectoryStorageManager

KIT_STORAGE = "kit-directory"


class MetadataRuntime:
    """A running metadata manager under ``data_dir``; ``restart`` starts it again on the same
    data. Use ``rlmm`` again after a restart: it is a new facade."""

    def __init__(
        self,
        data_dir: Path,
        settings: Mapping[str, object],
        *,
        needs_broker: bool = False,
        extra_plugins: Mapping[str, object] | None = None,
        ready_timeout_s: float = 30.0,
    ) -> None:
        self.data_dir = data_dir
        self.needs_broker = needs_broker
        self.ready_timeout_s = ready_timeout_s
        self._settings: dict[str, object] = {
            "remote.log.storage.system.enable": "true",
            **settings,
        }
        self._extra_plugins = dict(extra_plugins or {})
        self._uses_kit_storage = "remote.log.storage.manager.name" not in self._settings
        if self._uses_kit_storage:
            self._settings["remote.log.storage.manager.name"] = KIT_STORAGE
            self._settings[f"plugin.{KIT_STORAGE}.root"] = str(data_dir / "remote")
        self._held: set[TopicIdPartition] = set()
        self._cluster: EmbeddedCluster | None = None
        self._host: PluginHost | None = None

    def _plugins(self) -> dict[str, object]:
        plugins = dict(self._extra_plugins)
        if self._uses_kit_storage:
            plugins[KIT_STORAGE] = DirectoryStorageManager()
        return plugins

    def start(self) -> None:
        if self.needs_broker:
            self._cluster = EmbeddedCluster(
                1, self.data_dir / "cluster", self._settings, extra_plugins=self._plugins()
            )
            self._cluster.start()
            self._host = self._cluster.broker(0).plugin_host
        else:
            config = BrokerConfig.from_mapping(
                {
                    **self._settings,
                    "broker.id": 0,
                    "log.dirs": [str(self.data_dir / "logs")],
                }
            )
            self._host = PluginHost.create(config, extra_plugins=self._plugins())
            self._host.start()

    def stop(self) -> None:
        cluster, host = self._cluster, self._host
        self._cluster = self._host = None
        if cluster is not None:
            cluster.stop()
        elif host is not None:
            host.close()

    def restart(self) -> None:
        """Stop cleanly and start again on the same data; held partitions are held again."""
        self.stop()
        self.start()
        if self._held:
            self.hold(*self._held)

    @property
    def host(self) -> PluginHost:
        if self._host is None:
            raise RuntimeError("the metadata runtime is not running")
        return self._host

    @property
    def rlmm(self) -> RemoteLogMetadataManager:
        return self.host.metadata

    @property
    def provider(self) -> Any:
        """The chosen metadata plugin itself, to call a hook past the facade's checks."""
        return self.host.plugin_manager.get_plugin(self.host.chosen[ROLE_METADATA])

    def hold(self, *partitions: TopicIdPartition) -> None:
        """Lead ``partitions`` (as after an election) and wait until their metadata is ready."""
        self._held.update(partitions)
        rlmm = self.rlmm
        rlmm.on_partition_leadership_changes(frozenset(partitions), frozenset())
        wait_until(
            lambda: all(rlmm.is_ready(partition) for partition in partitions),
            "tierlog_is_ready",
            "partitions become ready after tierlog_on_partition_leadership_changes "
            f"(within {self.ready_timeout_s}s)",
            self.ready_timeout_s,
        )


def wait_until(condition: Callable[[], object], hook: str, rule: str, timeout: float) -> None:
    """Poll ``condition``; a timeout breaks ``hook``'s contract as ``rule`` says."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ContractViolation(hook, rule, f"still not true after {timeout}s")
        time.sleep(0.02)
