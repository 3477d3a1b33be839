"""Fixtures shared by every test area."""

from __future__ import annotations

import os

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
