"""tierlog-spark: the Spark data plane over tiered tierlog data."""
