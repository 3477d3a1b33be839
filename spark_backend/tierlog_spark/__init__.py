"""tierlog-spark: the Spark data plane over tiered tierlog data.

The ``tierlog`` data source (``register``), and jobs, each in its own module so this package
stays light to import: ``export.export`` (Parquet, incremental, exactly once),
``verify.verify`` (remote storage against the metadata) and ``tier.tier`` (a backlog tiered in
parallel inside the runtime's process). ``tierlog spark ...`` runs the first two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Make the ``tierlog`` data source available in ``spark`` (pyspark is imported only here)."""
    from .datasource import register as register_source

    register_source(spark)
