"""Spark filters the ``tierlog`` reader applies itself, so that unneeded segments are never fetched.

Filters on ``topic`` and ``partition`` choose partitions; filters on ``offset`` and ``timestamp``
narrow the bounds every range is cut to and that ``decode_segment`` checks record by record. The
reader applies them exactly, so Spark does not evaluate them again. Anything else is left to
Spark.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Sequence

import attrs
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from .planning import Bounds

__all__ = ["Selection", "push_filters"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@attrs.frozen
class Selection:
    """Which topics, partitions, offsets and timestamps a read covers; None is all."""

    topics: frozenset[str] | None
    partitions: frozenset[int] | None
    bounds: Bounds

    @property
    def is_empty(self) -> bool:
        return self.topics == frozenset() or self.partitions == frozenset() or self.bounds.is_empty


def push_filters(selection: Selection, filters: Iterable[Filter]) -> tuple[Selection, list[Filter]]:
    """``selection`` narrowed by the filters it can apply exactly, and the filters it cannot."""
    rest: list[Filter] = []
    for spark_filter in filters:
        narrowed = _narrow(selection, spark_filter)
        if narrowed is None:
            rest.append(spark_filter)
        else:
            selection = narrowed
    return selection, rest


def _narrow(selection: Selection, spark_filter: Filter) -> Selection | None:
    column: tuple[str, ...] = getattr(spark_filter, "attribute", ())
    if len(column) != 1:
        return None
    name = column[0].lower()
    if name == "topic":
        values = _values(spark_filter, str)
        if values is None:
            return None
        topics = values if selection.topics is None else selection.topics & values
        return attrs.evolve(selection, topics=topics)
    if name == "partition":
        values = _values(spark_filter, int)
        if values is None:
            return None
        partitions = values if selection.partitions is None else selection.partitions & values
        return attrs.evolve(selection, partitions=partitions)
    if name == "offset":
        value = getattr(spark_filter, "value", None)
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        low, high = _integer_range(spark_filter, value, value)
        if low is None and high is None:
            return None
        bounds = selection.bounds.narrow(first_offset=low, last_offset=high)
        return attrs.evolve(selection, bounds=bounds)
    if name == "timestamp":
        value = getattr(spark_filter, "value", None)
        if not isinstance(value, datetime.datetime):
            return None
        micros = _micros(value)
        # Records carry whole milliseconds: compare them with the value in microseconds.
        low, high = _integer_range(
            spark_filter, math.ceil(micros / 1000), math.floor(micros / 1000), micros % 1000 == 0
        )
        if low is None and high is None:
            return None
        bounds = selection.bounds.narrow(min_timestamp=low, max_timestamp=high)
        return attrs.evolve(selection, bounds=bounds)
    return None


def _integer_range(
    spark_filter: Filter, ceiling: int, floor: int, exact: bool = True
) -> tuple[int | None, int | None]:
    """The inclusive integer bounds a comparison with a value sets; ``ceiling`` and ``floor``
    are the value rounded up and down (equal when ``exact``)."""
    if isinstance(spark_filter, EqualTo):
        return (ceiling, floor) if exact else (ceiling, ceiling - 1)
    if isinstance(spark_filter, GreaterThan):
        return floor + 1, None
    if isinstance(spark_filter, GreaterThanOrEqual):
        return ceiling, None
    if isinstance(spark_filter, LessThan):
        return None, ceiling - 1
    if isinstance(spark_filter, LessThanOrEqual):
        return None, floor
    return None, None


def _values(spark_filter: Filter, kind: type) -> frozenset | None:  # type: ignore[type-arg]
    if isinstance(spark_filter, EqualTo):
        candidates: Sequence[object] = (spark_filter.value,)
    elif isinstance(spark_filter, In):
        candidates = tuple(spark_filter.value)
    else:
        return None
    if kind is int and not all(_is_int(v) for v in candidates):
        return None
    if kind is str and not all(isinstance(v, str) for v in candidates):
        return None
    return frozenset(candidates)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _micros(value: datetime.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
