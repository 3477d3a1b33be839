"""Tiered clusters on real files: the fsspec plugin on ``file://``, the topic-based metadata.

:class:`StorageHistory` wraps the chosen storage manager (a pluggy wrapper, so the real plugin
still does the work) and records every call as an event, as Kafka's LocalTieredStorage does, so
tests can assert what was uploaded, fetched and deleted, and on which thread. It can also slow
fetches down or fail them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog import hookimpl
from tierlog.client import Admin, AlterConfig, ConfigResource
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import RemoteStorageNotReadyError
from tierlog.model import RemoteLogSegmentState
from tierlog.server import protocol as p
from tierlog.server.broker import Broker
from tierlog.testing import Scenario

from tests.server.conftest import Client, batch

pytest.importorskip("tierlog_fsspec")


@attrs.frozen
class Event:
    kind: str  # copy, fetch, fetch_index, delete
    start_offset: int
    end_offset: int
    segment_id: str
    detail: object = None
    thread: str = ""


class StorageHistory:
    """Records every storage call; ``fetch_delay`` and ``copy_delay`` (seconds, or until
    ``release`` is set) slow segment fetches and copies.

    ``fail_copies``, ``fail_fetches`` and ``fail_deletes`` make that many next copies,
    segment fetches or deletions fail.
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.fetch_delay = 0.0
        self.copy_delay = 0.0
        self.fail_copies = 0
        self.fail_fetches = 0
        self.fail_deletes = 0
        self.release = threading.Event()
        self._lock = threading.Lock()

    def _add(self, kind: str, metadata: Any, detail: object = None) -> None:
        with self._lock:
            self.events.append(
                Event(
                    kind,
                    metadata.start_offset,
                    metadata.end_offset,
                    str(metadata.remote_log_segment_id.id),
                    detail,
                    threading.current_thread().name,
                )
            )

    def of(self, kind: str) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.kind == kind]

    @hookimpl(wrapper=True)
    def tierlog_copy_log_segment_data(
        self, remote_log_segment_metadata: Any, log_segment_data: Any
    ) -> Generator[None, Any, Any]:
        if self.copy_delay:
            self.release.wait(self.copy_delay)
        if self.fail_copies > 0:
            self.fail_copies -= 1
            raise OSError("injected copy failure")
        result = yield
        self._add("copy", remote_log_segment_metadata, log_segment_data)
        return result

    @hookimpl(wrapper=True)
    def tierlog_fetch_log_segment(
        self, remote_log_segment_metadata: Any, start_position: int
    ) -> Generator[None, Any, Any]:
        if self.fetch_delay:
            self.release.wait(self.fetch_delay)
        if self.fail_fetches > 0:
            self.fail_fetches -= 1
            raise OSError("injected fetch failure")
        self._add("fetch", remote_log_segment_metadata, start_position)
        return (yield)

    @hookimpl(wrapper=True)
    def tierlog_fetch_index(
        self, remote_log_segment_metadata: Any, index_type: Any
    ) -> Generator[None, Any, Any]:
        self._add("fetch_index", remote_log_segment_metadata, index_type)
        return (yield)

    @hookimpl(wrapper=True)
    def tierlog_delete_log_segment_data(
        self, remote_log_segment_metadata: Any
    ) -> Generator[None, Any, Any]:
        if self.fail_deletes > 0:
            self.fail_deletes -= 1
            raise OSError("injected delete failure")
        result = yield
        self._add("delete", remote_log_segment_metadata)
        return result


def tiered_settings(remote: Path, **extra: object) -> dict[str, object]:
    settings: dict[str, object] = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": remote.resolve().as_uri(),
        "remote.log.manager.task.interval.ms": "50",
        "log.retention.check.interval.ms": "50",
    }
    settings.update({k: str(v) for k, v in extra.items()})
    return settings


class Tiered:
    """A running tiered cluster with a protocol client and the storage history."""

    def __init__(self, cluster: EmbeddedCluster, history: StorageHistory, remote: Path) -> None:
        self.cluster = cluster
        self.client = Client(cluster)
        self.history = history
        self.remote = remote

    def broker_for(self, topic: str, partition: int = 0) -> Broker:
        return self.cluster.broker(self.client.leader(topic, partition))

    def log(self, topic: str, partition: int = 0) -> Any:
        from tierlog.model import TopicPartition

        replica = self.broker_for(topic, partition).partition(TopicPartition(topic, partition))
        assert replica is not None
        return replica.log

    def fill(self, topic: str, batches: int, records: int = 10, partition: int = 0) -> None:
        for n in range(batches):
            response = self.client.produce(
                topic, partition, batch(records, tag=f"b{n}", value_size=100)
            )
            assert response.error_code == p.NONE

    def alter(self, topic: str, **configs: str) -> None:
        """Sets topic configs given by their Python names (`retention_ms` for retention.ms)."""
        with Admin(self.cluster.transport) as admin:
            admin.alter_configs(
                {
                    ConfigResource.topic(topic): [
                        AlterConfig(k.replace("_", "."), v) for k, v in configs.items()
                    ]
                }
            )

    def remote_objects(self) -> list[Path]:
        return [f for f in self.remote.rglob("*") if f.is_file()]

    def finished(self, topic: str, partition: int = 0) -> list[Any]:
        broker = self.broker_for(topic, partition)
        replica = broker.partition(self.log(topic, partition).topic_partition)
        assert replica is not None and replica.topic_id is not None and broker.plugin_host
        from tierlog.model import TopicIdPartition

        tip = TopicIdPartition(replica.topic_id, replica.topic_partition)
        try:
            listed = list(broker.plugin_host.metadata.list_remote_log_segments(tip))
        except RemoteStorageNotReadyError:  # still loading after a (re)start
            return []
        return [s for s in listed if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]


@pytest.fixture
def history() -> Iterator[StorageHistory]:
    recorded = StorageHistory()
    yield recorded
    recorded.release.set()


@pytest.fixture
def make_tiered(tmp_path: Path, history: StorageHistory) -> Iterator[Callable[..., Tiered]]:
    running: list[EmbeddedCluster] = []

    def make(size: int = 1, **extra: object) -> Tiered:
        remote = tmp_path / "remote"
        cluster = EmbeddedCluster(
            size,
            tmp_path / "data",
            tiered_settings(remote, **extra),
            extra_plugins={"history": history},
        )
        cluster.start()
        running.append(cluster)
        return Tiered(cluster, history, remote)

    yield make
    history.release.set()
    for cluster in running:
        cluster.stop()


def file_scenario(tmp_path: Path, *, brokers: int) -> Scenario:
    """A scenario of ``brokers`` brokers tiering to ``tmp_path/remote`` through the fsspec
    plugin, with followers that fetch again quickly (failover and catch-up tests)."""
    settings = {
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": (tmp_path / "remote").as_uri(),
        "replica.fetch.backoff.ms": "50",
        "replica.fetch.wait.max.ms": "100",
    }
    return Scenario(tmp_path, settings, brokers=brokers, timeout_s=60.0)
