"""Fixtures for the fsspec plugin, driven as a third party's plugin would be.

The plugin is found through its ``tierlog`` entry point (the distribution is installed), chosen
by name in a broker configuration, configured by ``PluginHost`` with its own slice, and called
through the SPI facade. Every test runs on ``file://``, ``memory://`` and ``s3://`` (real s3fs
against moto's S3 server over HTTP on 127.0.0.1).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog.config import BrokerConfig
from tierlog.host import PluginHost

from tests.core.recording import RecordingMetadata

BUCKET = "tierlog-test"
CHUNK = 4096


@attrs.define
class Target:
    """Where a test's segments go, and a raw fsspec view of it for inspection and tampering."""

    kind: str
    url: str
    options: dict[str, str]
    fs: Any
    root: str

    def objects(self) -> list[str]:
        """Every object under the root (file names relative to it), sorted."""
        self.fs.invalidate_cache()
        try:
            found = self.fs.find(self.root)
        except FileNotFoundError:
            return []
        root = self.root.rstrip("/") + "/"
        return sorted(path[len(root) :] if path.startswith(root) else path for path in found)


def _reset_moto(endpoint: str) -> None:
    import requests

    requests.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()


@pytest.fixture(
    params=["file", "memory", pytest.param("s3", marks=pytest.mark.s3)],
)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """One storage location per test, on each filesystem."""
    import fsspec.core

    kind = request.param
    if kind == "file":
        root = tmp_path / "remote"
        url, options = f"file://{root}/tiered", {}
    elif kind == "memory":
        url, options = f"memory://tierlog-{uuid.uuid4().hex}/tiered", {}
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        url, options = f"s3://{BUCKET}/tiered", {"endpoint_url": endpoint}
    fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True, **options)
    if kind == "s3":
        fs.mkdir(BUCKET)
    yield Target(kind, url, options, fs, root)
    if kind == "memory" and fs.exists(root.rsplit("/", 1)[0]):
        fs.rm(root.rsplit("/", 1)[0], recursive=True)
    elif kind == "s3":
        _reset_moto(options["endpoint_url"])


HostFactory = Callable[..., PluginHost]


def broker_mapping(target: Target, settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """Broker settings choosing the fsspec plugin, with its slice under rsm.config."""
    mapping = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "remote.log.metadata.manager.name": "meta",
        "rsm.config.url": target.url,
        "rsm.config.chunk.size": str(CHUNK),
        "rsm.config.retry.backoff.ms": "1",
        "rsm.config.retry.backoff.max.ms": "5",
    }
    mapping.update({f"rsm.config.storage.{k}": v for k, v in target.options.items()})
    mapping.update({f"rsm.config.{k}": v for k, v in (settings or {}).items()})
    return mapping


def broker_config(target: Target, settings: Mapping[str, str] | None = None) -> BrokerConfig:
    return BrokerConfig.from_mapping(broker_mapping(target, settings))


@pytest.fixture
def only_fsspec_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load the fsspec entry point and no other third-party plugin (others are not under test)."""
    monkeypatch.setenv("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("TIERLOG_PLUGINS", "fsspec")


@pytest.fixture
def start_host(only_fsspec_plugin: None) -> Iterator[Callable[..., PluginHost]]:
    """Start plugin hosts (entry points discovered) for any target; all closed after the test."""
    hosts: list[PluginHost] = []

    def start(target: Target, settings: Mapping[str, str] | None = None) -> PluginHost:
        host = PluginHost.create(
            broker_config(target, settings),
            extra_plugins={"meta": RecordingMetadata("meta", [])},
        )
        host.start()
        hosts.append(host)
        return host

    yield start
    for host in reversed(hosts):
        host.close()


@pytest.fixture
def make_host(target: Target, start_host: Callable[..., PluginHost]) -> HostFactory:
    """Start a host on this test's target with extra ``rsm.config.*`` settings (or another url)."""

    def make(settings: Mapping[str, str] | None = None, *, url: str | None = None) -> PluginHost:
        return start_host(target if url is None else attrs.evolve(target, url=url), settings)

    return make


@pytest.fixture
def host(make_host: HostFactory) -> PluginHost:
    """A host with the default settings (4 KiB chunks, no transforms, no cache)."""
    return make_host()
