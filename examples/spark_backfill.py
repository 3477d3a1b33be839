"""Backfill a Parquet table from what a topic has tiered, with Spark and no broker running.

The ``tierlog`` data source (tierlog-spark) reads the remote log metadata from the brokers' log
dirs and the segments straight from remote storage, one task per segment range::

    python examples/spark_backfill.py server.toml orders /data/orders.parquet \\
        --starting-offset 1000 --ending-offset 50000

Only the remote tier is read: records still only on the brokers' disks are not in the result.
"""

from __future__ import annotations

import argparse

from pyspark.sql import functions as F
from tierlog_spark.session import make_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="the brokers' configuration file (.toml or .properties)")
    parser.add_argument("topic")
    parser.add_argument("output", help="where to write the Parquet table")
    parser.add_argument("--partitions", help="comma-separated partitions (default: all)")
    parser.add_argument("--starting-offset", type=int, help="first offset, inclusive")
    parser.add_argument("--ending-offset", type=int, help="offset to stop before, exclusive")
    parser.add_argument("--read-committed", action="store_true", help="skip aborted records")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default: embedded)")
    args = parser.parse_args()

    # An embedded Spark (UI off, workers on this interpreter, where tierlog-spark is) with the
    # ``tierlog`` source registered and the filter pushdown it plans with turned on. On a
    # cluster, pass its master URL; the workers need tierlog-spark installed.
    spark = make_session(master=args.master, app_name="tierlog-backfill")
    reader = (
        spark.read.format("tierlog")
        .option("config", args.config)
        .option("topics", args.topic)
        .option("isolation.level", "read_committed" if args.read_committed else "read_uncommitted")
    )
    if args.partitions:
        reader = reader.option("partitions", args.partitions)
    if args.starting_offset is not None:
        reader = reader.option("startingOffset", str(args.starting_offset))
    if args.ending_offset is not None:
        reader = reader.option("endingOffset", str(args.ending_offset))

    records = reader.load().select(
        "partition",
        "offset",
        "timestamp",
        F.col("key").cast("string").alias("key"),
        "value",
        "headers",
    )
    records.write.mode("overwrite").partitionBy("partition").parquet(args.output)
    written = spark.read.parquet(args.output)
    summary = written.groupBy("partition").agg(
        F.count("*").alias("records"), F.min("offset").alias("first"), F.max("offset").alias("last")
    )
    summary.orderBy("partition").show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
