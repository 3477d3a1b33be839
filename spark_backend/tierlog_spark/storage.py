"""The storage plugin inside a Spark Python worker: one started plugin host per runtime settings.

Plugins live per process, so each worker builds its own host from the settings the driver sends
with every task. Starting a host loads plugins and opens clients, so it is done once per worker
and settings, and closed when the worker exits.
"""

from __future__ import annotations

import atexit
import json
import threading
from collections.abc import Mapping
from typing import Any

from tierlog.config import BrokerConfig
from tierlog.host import PluginHost
from tierlog.spi import RemoteStorageManager

__all__ = ["close_all", "storage_for"]

_hosts: dict[str, PluginHost] = {}
_lock = threading.Lock()


def storage_for(settings: Mapping[str, Any]) -> RemoteStorageManager:
    """The started storage manager for ``settings``, shared by the tasks of this worker."""
    key = json.dumps(sorted(settings.items()), default=str)
    with _lock:
        host = _hosts.get(key)
        if host is None:
            host = PluginHost.create(BrokerConfig.from_mapping(settings))
            host.start()
            if not _hosts:
                atexit.register(close_all)
            _hosts[key] = host
        return host.storage


def close_all() -> None:
    """Close every host this worker started."""
    with _lock:
        hosts = list(_hosts.values())
        _hosts.clear()
    for host in hosts:
        host.close()
