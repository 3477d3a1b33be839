"""The committed references under docs/ are exactly what ``tierlog docs`` writes today."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from tierlog.cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("what", "committed"),
    [("spi", "spi-reference.md"), ("config", "config-reference.md"), ("wire", "wire-reference.md")],
)
def test_committed_reference_is_current(what: str, committed: str) -> None:
    if what == "config":
        pytest.importorskip("tierlog_fsspec")
    result = CliRunner().invoke(main, ["docs", what], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output == (DOCS / committed).read_text(encoding="utf-8"), (
        f"docs/{committed} is stale: run `tierlog docs {what} --output docs/{committed}`"
    )


def test_every_hook_is_in_the_spi_reference() -> None:
    from tierlog import hookspecs

    text = (DOCS / "spi-reference.md").read_text(encoding="utf-8")
    hooks = [name for name in vars(hookspecs) if name.startswith("tierlog_")]
    assert hooks
    assert all(f"### `{name}`" in text for name in hooks)


def test_every_served_api_is_in_the_wire_reference() -> None:
    from tierlog.wire import APIS

    text = (DOCS / "wire-reference.md").read_text(encoding="utf-8")
    assert len(APIS) >= 6
    for key, api in APIS.items():
        assert f"| {api.name} | {key} | {api.min_version} | {api.max_version} |" in text


def test_the_user_guides_differences_from_kafka_match_what_is_served() -> None:
    """The hand-written list goes stale when an API is added: this says so."""
    from tierlog.wire import APIS

    guide = (DOCS / "tiered-storage.md").read_text(encoding="utf-8")
    fetch, produce = APIS[1].max_version, APIS[0].max_version
    assert f"Fetch up to version {fetch}, Produce up to {produce}" in guide
    assert ("FindCoordinator answers every key COORDINATOR_NOT_AVAILABLE" in guide) == (
        10 in APIS and "JoinGroup" not in {api.name for api in APIS.values()}
    )
    assert ("EndTxn, ...) are not served" in guide) == (26 not in APIS)


def test_output_option_writes_the_file(tmp_path: Path) -> None:
    target = tmp_path / "spi.md"
    result = CliRunner().invoke(main, ["docs", "spi", "--output", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text(encoding="utf-8").startswith("# SPI reference\n")
