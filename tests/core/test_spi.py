"""Calling plugins through the SPI facades: wrappers, contract checks, error attribution."""

from __future__ import annotations

import inspect
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import tierlog
from tierlog import hookspecs
from tierlog.config import BrokerConfig
from tierlog.errors import PluginError, RemoteResourceNotFoundError, RemoteStorageError
from tierlog.host import PluginHost
from tierlog.model import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from tierlog.plugins import make_plugin_manager

from .recording import RecordingMetadata, RecordingStorage

TIP = TopicIdPartition.of(Uuid.random(), "orders", 0)


def segment(start: int = 0, end: int = 9) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=1000,
        broker_id=0,
        event_timestamp_ms=1000,
        segment_size_in_bytes=10,
        segment_leader_epochs={0: start},
    )


def segment_data(tmp_path: Path, payload: bytes) -> LogSegmentData:
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(payload)
    for suffix in (".index", ".timeindex", ".snapshot"):
        (tmp_path / f"00000000000000000000{suffix}").write_bytes(b"")
    return LogSegmentData(
        log_segment=log,
        offset_index=tmp_path / "00000000000000000000.index",
        time_index=tmp_path / "00000000000000000000.timeindex",
        transaction_index=None,
        producer_snapshot_index=tmp_path / "00000000000000000000.snapshot",
        leader_epoch_index=b"0\n1\n0 0\n",
    )


def started_host(plugins: dict[str, Any]) -> PluginHost:
    pm = make_plugin_manager(load_entry_points=False, extra_plugins=plugins)
    config = BrokerConfig.from_mapping(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.name": "store",
            "remote.log.metadata.manager.name": "memory",
        }
    )
    host = PluginHost.create(config, plugin_manager=pm)
    host.start()
    return host


class SlowFetchWrapper:
    """A fault-injection plugin: wraps the provider's fetch without touching it."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    @tierlog.hookimpl(wrapper=True)
    def tierlog_fetch_log_segment(
        self, remote_log_segment_metadata: Any, start_position: int, end_position: Any
    ) -> Generator[None, Any, Any]:
        self.seen.append(start_position)
        stream = yield
        return stream


class NotFoundWrapper:
    @tierlog.hookimpl(wrapper=True)
    def tierlog_fetch_index(
        self, remote_log_segment_metadata: Any, index_type: Any
    ) -> Generator[None, Any, Any]:
        if index_type is IndexType.TRANSACTION:
            raise RemoteResourceNotFoundError("no transaction index")
        return (yield)


def test_copy_and_ranged_fetch_go_through_the_provider(tmp_path: Path) -> None:
    calls: list[Any] = []
    host = started_host(
        {"store": RecordingStorage("store", calls), "meta": RecordingMetadata("m", calls)}
    )
    meta = segment()
    assert host.storage.copy_log_segment_data(
        meta, segment_data(tmp_path, b"0123456789")
    ) == CustomMetadata(b"store")
    with host.storage.fetch_log_segment(meta, 2, 4) as stream:
        assert stream.read() == b"234"
    with host.storage.fetch_log_segment(meta, 7) as stream:
        assert stream.read() == b"789"
    host.storage.delete_log_segment_data(meta)
    host.close()


def test_a_wrapper_sees_every_call_and_the_provider_still_answers(tmp_path: Path) -> None:
    wrapper = SlowFetchWrapper()
    host = started_host(
        {
            "store": RecordingStorage("store", []),
            "meta": RecordingMetadata("m", []),
            "slow": wrapper,
        }
    )
    assert host.plugin_manager.roles_of(wrapper) == ()
    meta = segment()
    host.storage.copy_log_segment_data(meta, segment_data(tmp_path, b"abcdef"))
    assert host.storage.fetch_log_segment(meta, 3).read() == b"def"
    assert wrapper.seen == [3]
    host.close()


def test_a_wrapper_can_raise_the_spi_error_itself() -> None:
    host = started_host(
        {
            "store": RecordingStorage("store", []),
            "meta": RecordingMetadata("m", []),
            "nf": NotFoundWrapper(),
        }
    )
    with pytest.raises(RemoteResourceNotFoundError):
        host.storage.fetch_index(segment(), IndexType.TRANSACTION)
    assert host.storage.fetch_index(segment(), IndexType.OFFSET).read() == b""
    host.close()


def test_an_unexpected_plugin_exception_is_attributed_to_the_plugin() -> None:
    host = started_host(
        {"store": RecordingStorage("store", []), "meta": RecordingMetadata("m", [])}
    )
    with pytest.raises(
        RemoteStorageError,
        match=r"RemoteStorageManager plugin 'store' raised KeyError in fetch_log_segment",
    ) as caught:
        host.storage.fetch_log_segment(segment(), 0)
    assert isinstance(caught.value.__cause__, KeyError)
    host.close()


def test_a_wrong_return_type_is_reported_as_the_plugins_bug(tmp_path: Path) -> None:
    class BadStorage(RecordingStorage):
        @tierlog.hookimpl
        def tierlog_copy_log_segment_data(
            self, remote_log_segment_metadata: Any, log_segment_data: Any
        ) -> Any:
            return b"not custom metadata"

    host = started_host({"store": BadStorage("store", []), "meta": RecordingMetadata("m", [])})
    with pytest.raises(
        PluginError,
        match="'store' returned bytes from copy_log_segment_data; expected CustomMetadata or None",
    ):
        host.storage.copy_log_segment_data(segment(), segment_data(tmp_path, b"x"))
    host.close()


def test_the_host_refuses_calls_that_break_the_contract(tmp_path: Path) -> None:
    host = started_host(
        {"store": RecordingStorage("store", []), "meta": RecordingMetadata("m", [])}
    )
    finished = RemoteLogSegmentMetadata(
        **{**_fields(segment()), "state": RemoteLogSegmentState.COPY_SEGMENT_FINISHED}
    )
    with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
        host.storage.copy_log_segment_data(finished, segment_data(tmp_path, b"x"))
    with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
        host.metadata.add_remote_log_segment_metadata(finished)
    with pytest.raises(ValueError, match="start_position"):
        host.storage.fetch_log_segment(segment(), -1)
    host.close()


def test_optional_metadata_hooks_have_runtime_defaults() -> None:
    host = started_host(
        {"store": RecordingStorage("store", []), "meta": RecordingMetadata("m", [])}
    )
    first, second = segment(0, 9), segment(10, 19)
    host.metadata.add_remote_log_segment_metadata(first)
    host.metadata.add_remote_log_segment_metadata(second)
    assert host.metadata.is_ready(TIP) is True
    assert host.metadata.remote_log_size(TIP, 0) == 20
    host.close()


def _fields(meta: RemoteLogSegmentMetadata) -> dict[str, Any]:
    import attrs

    return attrs.asdict(meta, recurse=False)


def test_every_hook_is_documented_and_exercised_by_the_tests() -> None:
    """A hook without a docstring or without a test is a hole in the SPI's contract."""
    specs = {
        name: fn
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("tierlog_")
    }
    assert len(specs) >= 20
    test_sources = "".join(p.read_text() for p in Path(__file__).parents[1].rglob("*.py"))
    for name, fn in specs.items():
        doc = inspect.getdoc(fn) or ""
        assert len(doc) > 40, (
            f"{name} needs a docstring saying when it is called and what it returns"
        )
        assert name in test_sources or name.removeprefix("tierlog_") in test_sources, (
            f"no test mentions {name}"
        )
