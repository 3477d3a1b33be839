"""The storage contract against the fsspec plugin, found through its entry point, on file://,
memory:// and s3:// (real s3fs against moto's S3 server on 127.0.0.1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from tierlog.testing import StorageManagerContract

pytest.importorskip("tierlog_fsspec")

BUCKET = "tierlog-kit"


def fsspec_settings(url: str, **storage_options: str) -> dict[str, object]:
    """The smallest chunks, so ranges cross chunk borders, and quick retries."""
    return {
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": url,
        "rsm.config.chunk.size": "4096",
        "rsm.config.retry.backoff.ms": "1",
        "rsm.config.retry.backoff.max.ms": "5",
        **{f"rsm.config.storage.{key}": value for key, value in storage_options.items()},
    }


class FsspecContract(StorageManagerContract):
    supports_custom_metadata = True
    segment_batches = 16
    required_settings = ("rsm.config.url",)


class TestFsspecOnFile(FsspecContract):
    @pytest.fixture
    def storage_settings(self, tmp_path: Path) -> Mapping[str, object]:
        return fsspec_settings((tmp_path / "remote").as_uri())


class TestFsspecOnMemory(FsspecContract):
    @pytest.fixture
    def storage_settings(self) -> Iterator[Mapping[str, object]]:
        import fsspec

        root = f"tierlog-kit-{uuid.uuid4().hex}"
        yield fsspec_settings(f"memory://{root}/tiered")
        filesystem = fsspec.filesystem("memory")
        if filesystem.exists(root):
            filesystem.rm(root, recursive=True)


@pytest.mark.s3
class TestFsspecOnS3(FsspecContract):
    @pytest.fixture
    def storage_settings(self, moto_endpoint: str) -> Iterator[Mapping[str, object]]:
        import requests
        import s3fs

        s3fs.S3FileSystem(
            client_kwargs={"endpoint_url": moto_endpoint}, skip_instance_cache=True
        ).mkdir(BUCKET)
        yield fsspec_settings(f"s3://{BUCKET}/tiered", endpoint_url=moto_endpoint)
        requests.post(f"{moto_endpoint}/moto-api/reset", timeout=10).raise_for_status()
