"""Fixtures shared by every test area."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _plugin_switches_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their plugins explicitly; the developer's shell switches must not leak in."""
    for name in list(os.environ):
        if name.startswith("TIERLOG_"):
            monkeypatch.delenv(name)
