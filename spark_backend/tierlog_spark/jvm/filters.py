"""Spark filters as the JVM reader sends them, turned into ``pyspark.sql.datasource`` filters.

The JVM scan builder writes each filter it can express on a top-level column as a JSON object
(``{"op": "GreaterThan", "column": "offset", "value": 5}``, ``{"op": "Not", "child": ...}``, a
timestamp value as ``{"timestamp_us": ...}``). Turning them into the filter objects the Python
data source receives lets ``pushdown.push_filters`` decide what is applied, so both readers push
down exactly the same filters.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

__all__ = ["FilterFormatError", "filter_from_json"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

#: Filters comparing a column with one value.
_COMPARISONS: dict[str, type[Filter]] = {
    cls.__name__: cls
    for cls in (
        EqualTo,
        EqualNullSafe,
        GreaterThan,
        GreaterThanOrEqual,
        LessThan,
        LessThanOrEqual,
        StringStartsWith,
        StringEndsWith,
        StringContains,
    )
}
#: Filters on a column alone.
_TESTS: dict[str, type[Filter]] = {cls.__name__: cls for cls in (IsNull, IsNotNull)}


class FilterFormatError(ValueError):
    """A filter object that is not one the JVM reader sends; names what is wrong."""


def filter_from_json(document: Any) -> Filter:
    """The ``pyspark.sql.datasource`` filter a JSON filter object stands for."""
    if not isinstance(document, Mapping):
        raise FilterFormatError(f"a filter is a JSON object, not {document!r}")
    op = document.get("op")
    if op == "Not":
        return Not(filter_from_json(document.get("child")))
    if op == "In":
        values = document.get("values")
        if not isinstance(values, list):
            raise FilterFormatError(f"filter In needs a list of values: {document!r}")
        return In(_column(document), tuple(_value(v) for v in values))
    if isinstance(op, str) and op in _TESTS:
        return _TESTS[op](_column(document))  # type: ignore[call-arg]
    if isinstance(op, str) and op in _COMPARISONS:
        if "value" not in document:
            raise FilterFormatError(f"filter {op} needs a value: {document!r}")
        return _COMPARISONS[op](_column(document), _value(document["value"]))  # type: ignore[call-arg]
    raise FilterFormatError(f"unknown filter op {op!r}")


def _column(document: Mapping[str, Any]) -> tuple[str]:
    column = document.get("column")
    if not isinstance(column, str) or not column:
        raise FilterFormatError(f"a filter names its column: {document!r}")
    return (column,)


def _value(value: Any) -> Any:
    """A literal as Spark gives it to Python data sources: timestamps as aware UTC datetimes."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping) and set(value) == {"timestamp_us"}:
        micros = value["timestamp_us"]
        if isinstance(micros, int) and not isinstance(micros, bool):
            try:
                return _EPOCH + datetime.timedelta(microseconds=micros)
            except OverflowError:
                raise FilterFormatError(f"timestamp out of range: {value!r}") from None
    raise FilterFormatError(f"unsupported filter value {value!r}")
