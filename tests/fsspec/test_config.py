"""The configuration slice: keys, storage options, and invalid combinations named by full key."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from tierlog.errors import InvalidConfigError, PluginCallError
from tierlog.host import PluginHost
from tierlog_fsspec.config import FsspecStorageConfig

from .conftest import Target

KEY = base64.b64encode(b"a" * 32).decode()


def test_a_minimal_slice_takes_the_documented_defaults() -> None:
    config = FsspecStorageConfig.from_mapping({"url": "memory://x"})
    assert config.chunk_size == 4 * 1024 * 1024
    assert (config.compression, config.cache_kind, config.prefetch_chunks) == ("none", "none", 0)
    assert (config.retry_max_attempts, config.upload_part_size) == (3, 25 * 1024 * 1024)
    assert not config.transforms


def test_storage_options_nest_and_are_typed_like_fsspec_expects() -> None:
    config = FsspecStorageConfig.from_mapping(
        {
            "url": "memory://x",
            "storage.anon": "false",
            "storage.default_block_size": "1048576",
            "storage.client_kwargs.endpoint_url": "http://127.0.0.1:9000",
            "storage.client_kwargs.region_name": "eu-west-1",
            "storage.config_kwargs.s3.addressing_style": "path",
            "storage.secret": "12345678",
        }
    )
    assert dict(config.storage_options) == {
        "anon": False,
        "default_block_size": 1048576,
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
        "secret": "12345678",  # a credential stays a string, even when it looks like a number
    }
    assert "12345678" not in repr(config)
    assert "12345678" in config.secrets()


def test_the_key_ring_chooses_its_active_key() -> None:
    single = FsspecStorageConfig.from_mapping(
        {"url": "memory://x", "encryption.keys": f"only:{KEY}"}
    )
    assert single.active_key_id == "only" and single.encrypted
    rotated = FsspecStorageConfig.from_mapping(
        {
            "url": "memory://x",
            "encryption.keys": f"old:{KEY}, new:{KEY}",
            "encryption.active.key": "new",
        }
    )
    assert rotated.active_key_id == "new" and set(rotated.encryption_keys) == {"old", "new"}


@pytest.mark.parametrize(
    ("settings", "key", "message"),
    [
        ({"chunk.sise": "8192"}, "chunk.sise", "did you mean 'chunk.size'"),
        ({"chunk.size": "1000"}, "chunk.size", "between 4096 and"),
        ({"compression": "lz4"}, "compression", "one of 'none', 'zstd'"),
        ({"encryption.active.key": "k1"}, "encryption.active.key", "encryption.keys is empty"),
        (
            {"encryption.keys": f"k1:{KEY},k2:{KEY}"},
            "encryption.active.key",
            "say which one wraps new data keys",
        ),
        (
            {"encryption.keys": f"k1:{KEY}", "encryption.active.key": "k9"},
            "encryption.active.key",
            "'k9' is not in encryption.keys",
        ),
        ({"encryption.keys": "k1"}, "encryption.keys", "not 'id:base64key'"),
        ({"prefetch.chunks": "4"}, "prefetch.chunks", "needs a cache"),
        (
            {"cache.kind": "memory", "cache.size.bytes": "8192", "prefetch.chunks": "4"},
            "cache.size.bytes",
            "cannot hold",
        ),
        ({"cache.dir": "/tmp/x"}, "cache.dir", "only used by the disk cache"),
        (
            {"retry.backoff.max.ms": "1", "retry.backoff.ms": "10"},
            "retry.backoff.max.ms",
            "at least",
        ),
        ({"url": "/var/tierlog"}, "url", "expected <protocol>://<path>"),
        ({"url": "nosuchprotocol://x"}, "url", "cannot open protocol 'nosuchprotocol'"),
        ({"url": "ftp://user:pw@host/x"}, "url", "must not carry credentials"),
    ],
)
def test_invalid_settings_are_rejected_at_configure_naming_the_full_key(
    target: Target,
    start_host: Callable[..., PluginHost],
    settings: dict[str, str],
    key: str,
    message: str,
) -> None:
    with pytest.raises(InvalidConfigError, match=message) as caught:
        start_host(target, settings)
    # a key that was given is named where it was given; a missing one under the plugin's prefix
    prefix = "rsm.config." if key in settings else "plugin.fsspec."
    assert caught.value.key == prefix + key
    assert "pw@" not in str(caught.value)


@pytest.mark.s3
def test_s3_parts_below_five_mebibytes_are_rejected(
    moto_endpoint: str, start_host: Callable[..., PluginHost]
) -> None:
    target = Target("s3", "s3://bucket/prefix", {"endpoint_url": moto_endpoint}, None, "")
    with pytest.raises(InvalidConfigError, match=r"below S3's minimum part size") as caught:
        start_host(target, {"upload.part.size": str(1024 * 1024)})
    assert caught.value.key == "rsm.config.upload.part.size"
    start_host(target, {"upload.part.size": str(5 * 1024 * 1024)})


def test_storage_options_fsspec_rejects_fail_at_configure(
    start_host: Callable[..., PluginHost],
) -> None:
    target = Target("zip", "zip://inner", {"fo": "/nonexistent/archive.zip"}, None, "")
    with pytest.raises(PluginCallError, match=r"fsspec cannot open url.*archive.zip") as caught:
        start_host(target)
    assert isinstance(caught.value.__cause__, InvalidConfigError)
