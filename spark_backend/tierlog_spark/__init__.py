"""tierlog-spark: the Spark data plane over tiered tierlog data."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Make the ``tierlog`` data source available in ``spark`` (pyspark is imported only here)."""
    from .datasource import register as register_source

    register_source(spark)
