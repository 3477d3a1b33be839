"""Multi-process clusters: a real ZooKeeper ensemble and one ``tierlog run`` process per broker.

Every test gets its own ensemble and brokers on free ports of 127.0.0.1 and stops them itself;
the brokers tier through the fsspec plugin to a local bucket directory of the test's own.
Without Java or ZooKeeper these tests skip, and in CI they fail (see ``require_zookeeper``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.testing.processes import ProcessCluster
from tierlog.testing.processes import tiered_settings as kit_tiered_settings

from tests.coordination.conftest import started_ensemble

#: Short enough that a crash is noticed quickly, long enough for a busy 2-core machine.
SESSION_TIMEOUT_MS = 6000


def _ensemble(tmp_path: Path, size: int) -> Iterator[ZooKeeperEnsemble]:
    zk = started_ensemble(tmp_path / "zookeeper", size)
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """Three ZooKeeper nodes of the test's own (it may kill one)."""
    yield from _ensemble(tmp_path, 3)


@pytest.fixture
def single_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """One ZooKeeper node of the test's own, for tests that never kill one."""
    yield from _ensemble(tmp_path, 1)


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    path = tmp_path / "bucket"
    path.mkdir()
    return path


def tiered_settings(bucket: Path) -> dict[str, object]:
    """The kit's tiered settings, with followers dropped from the ISR after 4 s."""
    return {**kit_tiered_settings(bucket), "replica.lag.time.max.ms": 4000}


@pytest.fixture
def cluster(tmp_path: Path, ensemble: ZooKeeperEnsemble, bucket: Path) -> Iterator[ProcessCluster]:
    """Three tiered brokers, one process each, serving."""
    with ProcessCluster(
        tmp_path / "brokers",
        ensemble.connect_string,
        3,
        settings=tiered_settings(bucket),
        session_timeout_ms=SESSION_TIMEOUT_MS,
    ) as running:
        yield running
