"""Fixtures shared by every test area."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

# CI runs every property test from the same seeds, so a run can only fail for a real reason;
# developers' runs stay random and keep finding new cases.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _plugin_switches_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their plugins explicitly; the developer's shell switches must not leak in."""
    for name in list(os.environ):
        if name.startswith("TIERLOG_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's S3 server on a free loopback port, with fake credentials and no AWS config
    (the s3 tests of the fsspec plugin and of the kit share it)."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.moto_server.threaded_moto_server")
    patch = pytest.MonkeyPatch()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        patch.delenv(name, raising=False)
    patch.setenv("AWS_ACCESS_KEY_ID", "testing")
    patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    patch.setenv("BOTO_CONFIG", os.path.join(os.path.dirname(__file__), "no-such-boto-config"))
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        patch.undo()
