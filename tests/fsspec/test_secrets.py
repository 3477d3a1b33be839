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
from click.testing import CliRunner
from tierlog.cli import main
from tierlog.cluster import EmbeddedCluster
from tierlog.config import BrokerConfig, url_has_userinfo
from tierlog.errors import InvalidConfigError, RemoteStorageError, TierlogError
from tierlog.host import PluginHost
from tierlog.metrics.prometheus import prometheus_text
from tierlog.model import IndexType
from tierlog.plugins import ENV_TRACE
from tierlog_fsspec.config import config_def as fsspec_config_def

from tests.server.conftest import Client, batch, values
from tests.waiting import wait_until

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


RING_MATERIAL = b"tierlog-ring-secret-material-32b"
RING_SECRET = base64.b64encode(RING_MATERIAL).decode()
STORAGE_SECRET = "tierlog-storage-secret-value-42"
FREE_FORM_SECRET = "tierlog-free-form-api-token-77"
URL_PASSWORD = "ab/cd+ef?gh#url-password-99"
EVERY_SECRET = (
    RING_SECRET,
    RING_MATERIAL.decode(),
    STORAGE_SECRET,
    FREE_FORM_SECRET,
    "url-password",
)


def secret_settings(tmp_path: Path, **changes: str) -> dict[str, str]:
    """A tiered broker whose fsspec slice holds a key ring, a declared credential and a
    free-form credential-named storage option."""
    settings = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "remote.log.manager.task.interval.ms": "50",
        "log.retention.check.interval.ms": "50",
        "rsm.config.url": (tmp_path / "bucket").as_uri(),
        "rsm.config.chunk.size": "4096",
        "rsm.config.encryption.keys": f"k1:{RING_SECRET}",
        "rsm.config.storage.secret": STORAGE_SECRET,
        "rsm.config.storage.api_token": FREE_FORM_SECRET,
    }
    settings.update(changes)
    return settings


def assert_nowhere(texts: dict[str, str]) -> None:
    for what, text in texts.items():
        for secret in EVERY_SECRET:
            assert secret not in text, f"a secret leaked into {what}: {text[:400]!r}"


def refusal(tmp_path: Path, settings: dict[str, str]) -> str:
    """The full traceback of the error a cluster start with ``settings`` raises."""
    cluster = EmbeddedCluster(1, tmp_path / "refused", settings)
    with pytest.raises(TierlogError) as caught:
        cluster.start()
    return "".join(traceback.format_exception(caught.value))


def test_no_secret_in_any_repr_log_line_trace_error_cli_output_or_metric(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_TRACE, "1")  # every hook call and its arguments to stderr
    settings = secret_settings(tmp_path)
    texts: dict[str, str] = {}

    caplog.set_level(logging.DEBUG)
    cluster = EmbeddedCluster(1, tmp_path / "data", settings)
    cluster.start()
    try:
        client = Client(cluster)
        client.create("t", segment_bytes="2048", remote_storage_enable="true")
        for n in range(8):
            assert client.produce("t", 0, batch(10, tag=f"b{n}", value_size=100)).error_code == 0
        bucket = tmp_path / "bucket"
        wait_until(lambda: any(f.is_file() for f in bucket.rglob("*")), "a tiered segment")
        assert values(client.fetch("t", 0, 0).records)[:1] == [b"b0-0"]
        broker = cluster.broker(0)
        host = broker.plugin_host
        assert host is not None
        plugin = host.plugin_manager.get_plugin("fsspec")
        for name, obj in {
            "the broker config": broker.config,
            "a fresh broker config": cluster.broker_config(0),
            "the plugin host": host,
            "the plugin": plugin,
            "the plugin's typed config": plugin.storage().config,
            "the plugin's config definition": fsspec_config_def(),
        }.items():
            texts[f"repr of {name}"] = repr(obj)
            texts[f"str of {name}"] = str(obj)
        texts["the Prometheus export"] = prometheus_text(host.metrics)
        with pytest.raises(TypeError) as wrong_type:
            broker.config.get_int("rsm.config.storage.api_token")
        texts["a wrong-type error"] = str(wrong_type.value)
    finally:
        cluster.stop()
    assert caplog.records, "nothing was logged: the log check would prove nothing"
    texts["the log at DEBUG"] = everything_logged(caplog)
    trace = capsys.readouterr().err
    assert "tierlog_configure" in trace, "no hook trace: the trace check would prove nothing"
    texts["the hook trace"] = trace

    for name, changes in {
        "a key ring of the wrong length": {
            "rsm.config.encryption.keys": "k1:" + base64.b64encode(RING_MATERIAL[:31]).decode()
        },
        "a misspelt key ring key": {"rsm.config.encryption.kyes": f"k1:{RING_SECRET}"},
        "credentials in the url": {
            "rsm.config.url": f"s3://AKIATIERLOG:{URL_PASSWORD}@bucket/prefix"
        },
    }.items():
        texts[f"the error for {name}"] = refusal(tmp_path, secret_settings(tmp_path, **changes))

    path = tmp_path / "server.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    runner = CliRunner()
    for args in (["config", "--check", str(path)], ["config", "--json"], ["config"]):
        result = runner.invoke(main, args, env={"TIERLOG_RSM_CONFIG_STORAGE_SECRET": "x" * 8})
        assert result.exit_code == 0, result.output
        texts[f"tierlog {' '.join(args[:2])}"] = result.output
    path.write_text(path.read_text() + "rsm.config.storage.secret.extra.nesting=1\n")
    result = runner.invoke(main, ["config", "--check", str(path)])
    assert result.exit_code == 2
    texts["a failed config check"] = result.output

    assert_nowhere(texts)


@pytest.mark.parametrize(
    "url",
    [
        f"s3://AKIATIERLOG:{URL_PASSWORD}@bucket/prefix",
        "s3://AKIATIERLOG:ab/cd+ef-url-password@bucket/prefix",
        "s3://AKIATIERLOG:ab?url-password@bucket/prefix",
        "s3://AKIATIERLOG:ab#url-password@bucket/prefix",
        "memory://AKIATIERLOG:url-password@bucket/prefix",
        "s3://url-password@bucket/prefix",
        "s3:AKIATIERLOG:url-password@bucket/prefix",
    ],
)
def test_credentials_in_the_url_are_refused_without_echo(
    start_host: Callable[..., PluginHost], tmp_path: Path, url: str
) -> None:
    target = Target("url", url, {}, None, "")
    with pytest.raises(InvalidConfigError, match="must not carry credentials") as caught:
        start_host(target)
    assert caught.value.key == "rsm.config.url"
    text = "".join(traceback.format_exception(caught.value))
    assert "url-password" not in text
    assert "url-password" not in repr(BrokerConfig.from_mapping({"rsm.config.url": url}))


@pytest.mark.parametrize(
    "url",
    ["s3://bucket/path/with@sign", "file:///var/tierlog/a@b", "memory://name/x@y:z"],
)
def test_an_at_sign_in_the_path_is_not_a_credential(url: str) -> None:
    assert not url_has_userinfo(url)
