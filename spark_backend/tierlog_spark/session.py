"""The Spark session tierlog jobs run in: embedded ``local[*]`` unless a master URL is given."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def make_session(master: str = "local[*]", app_name: str = "tierlog") -> SparkSession:
    """A Spark session with the UI off, Python workers on this interpreter and ``tierlog`` readable.

    Workers must run the driver's interpreter, or they would import a different (or no) tierlog.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    session = builder.getOrCreate()
    from . import register

    register(session)
    return session
