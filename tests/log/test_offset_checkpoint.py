"""``read_offset_checkpoint``: Kafka's offset checkpoint text as readers outside the log see it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tierlog.log.checkpoint import read_offset_checkpoint


def test_the_partitions_entry_is_read(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n3\nt 0 10\nt 1 20\nother-topic 1 30\n")

    assert read_offset_checkpoint(path, "t", 1) == 20
    assert read_offset_checkpoint(path, "other-topic", 1) == 30
    assert read_offset_checkpoint(path, "t", 2) is None


def test_a_missing_file_has_no_entry(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path / "absent", "t", 0) is None


@pytest.mark.parametrize(
    "text",
    ["1\n1\nt 0 10\n", "0\n2\nt 0 10\n", "0\n1\nt zero 10\n", "", "\xff not text"],
    ids=["unknown version", "fewer entries than declared", "bad line", "empty", "garbage"],
)
def test_a_damaged_file_is_logged_and_ignored(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(text.encode("latin-1"))

    with caplog.at_level(logging.WARNING, logger="tierlog.log.checkpoint"):
        assert read_offset_checkpoint(path, "t", 0) is None
    assert str(path) in caplog.text
