"""Real ZooKeeper for the coordination tests: Debian's server as child processes on 127.0.0.1.

Without Java or the ZooKeeper jar these tests skip, saying why; in CI (``CI`` set) they fail
instead, because CI installs both and a skip there would hide a broken setup.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from tierlog.coordination.zookeeper_server import (
    ZooKeeperEnsemble,
    ZooKeeperNotInstalledError,
    check_installed,
)


def require_zookeeper() -> None:
    """Skip (or in CI fail) the calling test when ZooKeeper cannot run here."""
    try:
        check_installed()
    except ZooKeeperNotInstalledError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have ZooKeeper: {err}")
        pytest.skip(str(err))


def started_ensemble(directory: Path, size: int) -> ZooKeeperEnsemble:
    """Started and serving; generous with time, as JVMs start slowly on a busy machine."""
    require_zookeeper()
    ensemble = ZooKeeperEnsemble(directory, size)
    ensemble.start(timeout_s=90)
    return ensemble


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """One ZooKeeper server shared by the session; isolate tests with ``zk_chroot``."""
    ensemble = started_ensemble(tmp_path_factory.mktemp("zookeeper"), 1)
    try:
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture
def zookeeper_ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """A three-node ensemble of the test's own, for tests that kill nodes."""
    ensemble = started_ensemble(tmp_path / "ensemble", 3)
    try:
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture
def zk_chroot(zookeeper: ZooKeeperEnsemble) -> str:
    """A connect string with a chroot of the test's own (created, empty) on the shared server."""
    chroot = f"/t-{uuid.uuid4().hex}"
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=10)
    try:
        client.create(chroot)
    finally:
        client.stop()
        client.close()
    return zookeeper.connect_string + chroot


@pytest.fixture
def zk_client(zk_chroot: str) -> Iterator[KazooClient]:
    """A started kazoo client inside the test's chroot."""
    client = KazooClient(hosts=zk_chroot)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()
