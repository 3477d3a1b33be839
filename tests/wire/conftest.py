"""Brokers that listen on 127.0.0.1 (port 0), reached through real sockets and Kafka clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster

LOOPBACK_ANY_PORT = "PLAINTEXT://127.0.0.1:0"


@pytest.fixture
def make_listening(tmp_path: Path) -> Iterator[Callable[..., EmbeddedCluster]]:
    """``make_listening(size=1, **config)``: a started cluster whose brokers listen; stopped at
    the end of the test."""
    clusters: list[EmbeddedCluster] = []

    def make(size: int = 1, **config: object) -> EmbeddedCluster:
        settings: dict[str, object] = {"listeners": LOOPBACK_ANY_PORT}
        settings.update({key.replace("_", "."): value for key, value in config.items()})
        cluster = EmbeddedCluster(
            size, tmp_path / f"cluster-{len(clusters)}", settings, listen=True
        )
        cluster.start()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in reversed(clusters):
        cluster.stop()
