"""Credentials never appear in a log record, an error message, a metric or a repr."""

from __future__ import annotations

import base64
import errno
import logging
import traceback
from collections.abc import Callable
from pathlib import Path

import attrs
import fsspec
import pytest
from tierlog.errors import RemoteStorageError, TierlogError
from tierlog.host import PluginHost
from tierlog.model import IndexType

from .conftest import Target
from .flaky import FlakyFileSystem, register
from .segments import make_segment

ACCESS_KEY = "AKIATIERLOGTESTKEY42"
SECRET_KEY = "tierlog/Secret+Key/never-shown-0123456789"
SESSION_TOKEN = "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"
RING_KEY = base64.b64encode(b"k" * 32).decode()
SECRETS = (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, RING_KEY)


def credentials(target: Target) -> dict[str, str]:
    options = {"key": ACCESS_KEY, "secret": SECRET_KEY}
    if target.kind == "s3":
        options["token"] = SESSION_TOKEN
    else:
        options["client_kwargs.aws_session_token"] = SESSION_TOKEN
    return options


def assert_no_secret(text: str, what: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a credential leaked into {what}: {text[:300]!r}"


def everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        if record.exc_info:
            parts.append("".join(traceback.format_exception(*record.exc_info)))
    return "\n".join(parts)


def test_credentials_never_leak_through_logs_errors_or_metrics(
    target: Target,
    start_host: Callable[..., PluginHost],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with_credentials = attrs.evolve(target, options={**target.options, **credentials(target)})
    host = start_host(with_credentials, {"encryption.keys": f"main:{RING_KEY}"})
    segment = make_segment(tmp_path)
    errors: list[BaseException] = []

    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert host.storage.fetch_log_segment(segment.metadata, 5).read() == segment.payload[5:]
    for failing in (
        lambda: host.storage.fetch_index(segment.metadata, IndexType.TRANSACTION),
        lambda: host.storage.fetch_log_segment(segment.metadata, 10**9),
    ):
        with pytest.raises(TierlogError) as caught:
            failing()
        errors.append(caught.value)
    target.fs.pipe_file(segment.object_base(target.root) + ".log", b"garbage")
    host.storage.delete_log_segment_data(segment.metadata)
    with pytest.raises(TierlogError) as caught:
        host.storage.fetch_log_segment(segment.metadata, 0)
    errors.append(caught.value)

    for error in errors:
        assert_no_secret("".join(traceback.format_exception(error)), "an error")
    assert_no_secret(everything_logged(caplog), "the log")
    assert caplog.records, "the run logged nothing: the log check would prove nothing"
    assert_no_secret(repr(host.metrics.names()), "metric names and tags")
    assert_no_secret(repr(host.plugin_manager.get_plugin("fsspec")), "the plugin's repr")
    assert_no_secret(
        repr(host.plugin_manager.get_plugin("fsspec").storage().config), "the config repr"
    )


def test_a_backend_error_that_quotes_a_credential_is_scrubbed(
    start_host: Callable[..., PluginHost], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = register()
    fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True)
    host = start_host(
        Target("flaky", url, credentials(Target("flaky", url, {}, fs, root)), fs, root),
        {"retry.max.attempts": "2"},
    )
    segment = make_segment(tmp_path)
    FlakyFileSystem.plan[:] = [
        ("put *", ConnectionResetError(errno.ECONNRESET, f"reset while signing with {SECRET_KEY}")),
        ("put *", PermissionError(f"InvalidAccessKeyId: {ACCESS_KEY} is not known")),
    ]
    with caplog.at_level(logging.DEBUG), pytest.raises(RemoteStorageError) as caught:
        host.storage.copy_log_segment_data(segment.metadata, segment.data)
    text = "".join(traceback.format_exception(caught.value))
    assert "InvalidAccessKeyId: [hidden] is not known" in str(caught.value)
    assert_no_secret(text, "the error and its chained causes")
    assert "reset while signing with [hidden]" in caplog.text
    assert_no_secret(everything_logged(caplog), "the log")
    FlakyFileSystem.reset()


def test_backend_library_log_records_are_scrubbed(
    target: Target, start_host: Callable[..., PluginHost], caplog: pytest.LogCaptureFixture
) -> None:
    """botocore logs request headers at DEBUG (a session token travels in one)."""
    with_credentials = attrs.evolve(target, options={**target.options, **credentials(target)})
    host = start_host(with_credentials)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("botocore.endpoint").debug(
            "Sending http request: headers=%s", {"X-Amz-Security-Token": SESSION_TOKEN}
        )
    assert "X-Amz-Security-Token': '[hidden]'" in caplog.text
    host.close()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("botocore.endpoint").debug("after close: %s", "plain")
    assert "after close: plain" in caplog.text  # the filter is gone with the plugin


def test_config_errors_never_show_key_material(
    target: Target, start_host: Callable[..., PluginHost]
) -> None:
    short = base64.b64encode(b"short-key-material!").decode()
    for ring, expected in [
        (f"k1:{short}", "key 'k1' is 19 bytes; AES-256 needs 32"),
        (f"k1:{RING_KEY}!!", "key 'k1' is not valid base64"),
    ]:
        with pytest.raises(TierlogError, match=expected) as caught:
            start_host(target, {"encryption.keys": ring})
        text = "".join(traceback.format_exception(caught.value))
        assert short not in text and RING_KEY not in text
