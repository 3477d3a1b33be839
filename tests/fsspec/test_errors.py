"""Transient errors are retried with backoff; permanent ones fail at once with the cause
chained; not-found is RemoteResourceNotFoundError; the manifest is always written last."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pytest
from tierlog.errors import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
)
from tierlog.host import PluginHost
from tierlog.model import IndexType
from tierlog_fsspec.retry import RetryPolicy, is_transient

from .conftest import Target
from .flaky import FlakyFileSystem, register
from .segments import make_segment


@pytest.fixture
def flaky() -> Iterator[Target]:
    url = register()
    fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True)
    yield Target("flaky", url, {}, fs, root)
    FlakyFileSystem.reset()


@pytest.fixture
def flaky_host(flaky: Target, start_host: Callable[..., PluginHost]) -> PluginHost:
    return start_host(flaky, {"retry.max.attempts": "3"})


def retries(host: PluginHost, operation: str, topic: str = "orders", partition: int = 0) -> int:
    return int(
        host.metrics.value(  # type: ignore[arg-type]
            "RemoteStorageManager",
            "RequestRetries",
            plugin="fsspec",
            role="RemoteStorageManager",
            topic=topic,
            partition=partition,
            operation=operation,
        )
    )


def test_transient_errors_are_retried(
    flaky_host: PluginHost, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segment = make_segment(tmp_path)
    FlakyFileSystem.plan[:] = [
        ("put *", ConnectionResetError(errno.ECONNRESET, "connection reset"))
    ]
    flaky_host.storage.copy_log_segment_data(segment.metadata, segment.data)
    FlakyFileSystem.plan[:] = [
        ("get *", TimeoutError("read timed out")),
        ("get *", OSError(errno.EBUSY, "SlowDown: please reduce your request rate")),
    ]
    with caplog.at_level(logging.WARNING, logger="tierlog_fsspec"):
        assert flaky_host.storage.fetch_log_segment(segment.metadata, 0).read() == segment.payload
    assert FlakyFileSystem.plan == []
    assert retries(flaky_host, "put") == 1
    assert retries(flaky_host, "get") == 2
    assert "retry 1 of 2" in caplog.text and "retry 2 of 2" in caplog.text


def test_a_transient_error_that_persists_is_retriable(
    flaky_host: PluginHost, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path)
    flaky_host.storage.copy_log_segment_data(segment.metadata, segment.data)
    FlakyFileSystem.plan[:] = [("get *", TimeoutError("read timed out"))] * 3
    with pytest.raises(RetriableRemoteStorageError, match=r"failed after 3 attempt") as caught:
        flaky_host.storage.fetch_log_segment(segment.metadata, 0)
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert caught.value.retriable


def test_a_permanent_error_fails_at_once_with_its_cause(
    flaky_host: PluginHost, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path)
    FlakyFileSystem.plan[:] = [("put *", PermissionError(errno.EACCES, "Access Denied"))]
    with pytest.raises(
        RemoteStorageError, match=r"put .* failed: PermissionError.*Access Denied"
    ) as caught:
        flaky_host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert not isinstance(caught.value, RetriableRemoteStorageError)
    assert isinstance(caught.value.__cause__, PermissionError)
    assert retries(flaky_host, "put") == 0


def test_a_missing_object_is_not_found_and_not_retried(
    flaky_host: PluginHost, flaky: Target, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path)
    flaky_host.storage.copy_log_segment_data(segment.metadata, segment.data)
    flaky.fs.rm_file(segment.object_base(flaky.root) + ".index")
    with pytest.raises(RemoteResourceNotFoundError) as caught:
        flaky_host.storage.fetch_index(segment.metadata, IndexType.OFFSET)
    assert isinstance(caught.value, FileNotFoundError)
    assert retries(flaky_host, "get") == 0


def test_the_manifest_is_written_last_and_a_failed_upload_is_never_served(
    flaky_host: PluginHost, flaky: Target, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path, transaction_index=b"t" * 12)
    flaky_host.storage.copy_log_segment_data(segment.metadata, segment.data)
    writes = [
        path.rsplit(".", 1)[1] for operation, path in FlakyFileSystem.log if operation == "put"
    ]
    assert writes[-1] == "rsm-manifest"
    assert sorted(writes[:-1]) == [
        "index",
        "leader-epoch-checkpoint",
        "log",
        "snapshot",
        "timeindex",
        "txnindex",
    ]

    again = make_segment(tmp_path / "again")
    FlakyFileSystem.plan[:] = [("put *.rsm-manifest", PermissionError("denied"))]
    with pytest.raises(RemoteStorageError, match=r"denied"):
        flaky_host.storage.copy_log_segment_data(again.metadata, again.data)
    assert len([path for path in FlakyFileSystem.store if again.uuid in path]) == 5
    with pytest.raises(RemoteResourceNotFoundError, match=r"no manifest"):
        flaky_host.storage.fetch_log_segment(again.metadata, 0)
    flaky_host.storage.delete_log_segment_data(again.metadata)
    assert not [path for path in FlakyFileSystem.store if again.uuid in path]


def test_backoff_grows_exponentially_with_jitter_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_ms=100, backoff_max_ms=1000)
    for retry, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        delays = {policy.delay_seconds(retry) for _ in range(200)}
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert len(delays) > 100  # jittered, not a fixed wait


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (OSError(errno.EBUSY, "SlowDown"), True),
        (OSError(errno.EINVAL, "InvalidRange"), False),
        (PermissionError(), False),
        (FileNotFoundError(), False),
        (type("ReadTimeoutError", (Exception,), {})(), True),
        (ValueError("bad"), False),
    ],
)
def test_which_errors_are_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient
