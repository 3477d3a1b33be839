"""tierlog-spark: the Spark data plane over tiered tierlog data.

The ``tierlog`` data source (``register``), and jobs, each in its own module so this package
stays light to import: ``export.export`` (Parquet, incremental, exactly once),
``verify.verify`` (remote storage against the metadata) and ``tier.tier`` (a backlog tiered in
parallel inside the runtime's process). ``tierlog spark ...`` runs the first two.

The source has two readers returning the same rows: a Java DataSource V2 (``jvm``: its jar is
built from the Java sources in the package where a JDK is, and sessions made by
``session.make_session`` or a builder given to ``session.add_jvm_reader`` carry it) that decodes
on executors with no Python, and the Python data source (``datasource``), which reads streams,
storage the JVM cannot reach by itself, and everything where the jar is missing. Spark conf
``spark.tierlog.reader`` (auto, jvm, python) chooses; ``tierlog spark check`` says which reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> bool:
    """Make the ``tierlog`` data source available in ``spark`` (pyspark is imported only here).

    The Python data source is always registered. When the JVM reader's jar is on the session's
    classpath (``session.add_jvm_reader``), the planner it asks on the driver is installed too,
    and ``spark.read.format("tierlog")`` decodes in the JVM; Spark conf ``spark.tierlog.reader``
    (auto, jvm, python) chooses otherwise. A Spark Connect session has no JVM in this process:
    it reads through the Python data source. Returns whether the JVM reader's planner is
    installed.
    """
    from .datasource import register as register_source
    from .jvm.bridge import bridge_class, install, register_python_source

    if bridge_class(spark) is None:
        register_source(spark)
        return False
    register_python_source(spark)
    return install(spark)
