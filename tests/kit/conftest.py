"""The kit runs against plugins chosen by the tests: no third-party plugin loads unasked."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _only_plugins_under_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("TIERLOG_PLUGINS", "fsspec")
