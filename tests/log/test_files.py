"""Kafka's file and directory names for a partition's log."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tierlog.log import files
from tierlog.model import TopicPartition


def test_segment_file_names_are_20_digit_offsets() -> None:
    assert files.log_file_name(123) == "00000000000000000123.log"
    assert files.offset_index_file_name(0) == "00000000000000000000.index"
    assert files.time_index_file_name(7) == "00000000000000000007.timeindex"
    assert files.txn_index_file_name(9) == "00000000000000000009.txnindex"
    with pytest.raises(ValueError, match="negative"):
        files.offset_prefix(-1)


@given(st.integers(0, (1 << 63) - 1), st.sampled_from((*files.SEGMENT_SUFFIXES, ".snapshot")))
def test_offsets_round_trip_through_file_names(offset: int, suffix: str) -> None:
    name = files.offset_prefix(offset) + suffix
    assert files.offset_from_file_name(name) == offset
    assert files.is_segment_file(name, suffix)
    for transient in files.TRANSIENT_SUFFIXES:
        assert files.offset_from_file_name(name + transient) == offset
        assert not files.is_segment_file(name + transient, suffix)


@pytest.mark.parametrize("name", ["123.log", "leader-epoch-checkpoint", "0000000000000000000x.log"])
def test_other_names_are_not_segment_files(name: str) -> None:
    with pytest.raises(ValueError, match="not a segment"):
        files.offset_from_file_name(name)
    assert not files.is_segment_file(name, ".log")


def test_partition_directories() -> None:
    tp = TopicPartition("my-topic", 12)
    assert files.log_dir_name(tp) == "my-topic-12"
    assert files.parse_log_dir_name("my-topic-12") == tp
    assert files.parse_log_dir_name("my-topic-12.5f2a9c-delete") == tp
    assert files.parse_log_dir_name("my-topic-3.abc-future") == TopicPartition("my-topic", 3)
    for bad in ("topic", "topic-x", "-3", "topic-3-delete"):
        with pytest.raises(ValueError, match="not a log directory"):
            files.parse_log_dir_name(bad)
