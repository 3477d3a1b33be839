"""Which Spark filters the tierlog reader applies itself, and the exact bounds they become."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)
from tierlog_spark.planning import Bounds
from tierlog_spark.pushdown import Selection, push_filters

EVERYTHING = Selection(frozenset({"orders", "payments"}), None, Bounds())
MOMENT = datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)  # 6 ms past the second
MOMENT_MS = int(MOMENT.timestamp()) * 1000 + 6


def test_topic_and_partition_filters_choose_partitions() -> None:
    selection, rest = push_filters(
        EVERYTHING,
        [EqualTo(("topic",), "orders"), In(("partition",), (1, 2)), EqualTo(("partition",), 2)],
    )
    assert rest == []
    assert selection.topics == {"orders"}
    assert selection.partitions == {2}


def test_a_topic_outside_the_options_selects_nothing() -> None:
    selection, _ = push_filters(EVERYTHING, [EqualTo(("topic",), "audit")])
    assert selection.is_empty


def test_offset_comparisons_become_inclusive_bounds() -> None:
    selection, rest = push_filters(
        EVERYTHING, [GreaterThan(("offset",), 9), LessThanOrEqual(("offset",), 20)]
    )
    assert rest == []
    assert selection.bounds == Bounds(first_offset=10, last_offset=20)
    selection, _ = push_filters(
        EVERYTHING, [GreaterThanOrEqual(("offset",), 5), LessThan(("offset",), 8)]
    )
    assert selection.bounds == Bounds(first_offset=5, last_offset=7)
    selection, _ = push_filters(EVERYTHING, [EqualTo(("offset",), 42)])
    assert selection.bounds == Bounds(first_offset=42, last_offset=42)


def test_timestamps_compare_as_microseconds_against_whole_milliseconds() -> None:
    exact, _ = push_filters(
        EVERYTHING, [GreaterThan(("timestamp",), MOMENT), LessThan(("timestamp",), MOMENT)]
    )
    assert exact.bounds.min_timestamp == MOMENT_MS + 1
    assert exact.bounds.max_timestamp == MOMENT_MS - 1
    between = MOMENT + timedelta(microseconds=400)
    selection, _ = push_filters(
        EVERYTHING,
        [GreaterThanOrEqual(("timestamp",), between), LessThanOrEqual(("timestamp",), between)],
    )
    assert selection.bounds.min_timestamp == MOMENT_MS + 1
    assert selection.bounds.max_timestamp == MOMENT_MS
    assert selection.is_empty
    equal, _ = push_filters(EVERYTHING, [EqualTo(("timestamp",), between)])
    assert equal.is_empty
    naive, _ = push_filters(EVERYTHING, [EqualTo(("timestamp",), MOMENT.replace(tzinfo=None))])
    assert naive.bounds.min_timestamp == naive.bounds.max_timestamp == MOMENT_MS


def test_other_filters_are_left_to_spark() -> None:
    others = [
        Not(EqualTo(("partition",), 1)),
        IsNotNull(("key",)),
        StringStartsWith(("topic",), "ord"),
        EqualTo(("value",), b"x"),
        GreaterThan(("partition",), 1),
        EqualTo(("offset",), 1.5),
        EqualTo(("headers", "key"), "trace"),
    ]
    selection, rest = push_filters(EVERYTHING, others)
    assert rest == others
    assert selection == EVERYTHING
