"""The Spark session tierlog jobs run in: embedded ``local[*]`` unless a master URL is given.

Sessions made here carry the JVM reader's jar (``add_jvm_reader``), so ``spark.read.format(
"tierlog")`` decodes segments in the JVM. Without a JDK to build the jar, reads go through the
Python data source, which returns the same rows.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["add_jvm_reader", "jvm_reader_jar", "make_session"]

log = logging.getLogger(__name__)

_noticed = threading.Event()


def jvm_reader_jar() -> Path | None:
    """The JVM reader's jar, built now if needed; None when it cannot be built (no JDK), which
    is logged once per process."""
    from .jvm.build import JarBuildError, build_jar

    try:
        return build_jar()
    except JarBuildError as err:
        if not _noticed.is_set():
            _noticed.set()
            log.warning("tierlog: reading with the Python data source, not the JVM reader: %s", err)
        return None


def add_jvm_reader(builder: SparkSession.Builder) -> SparkSession.Builder:
    """``builder`` with the JVM reader's jar added to ``spark.jars``, for a session of your own.

    The jar must be there when the session's JVM starts (a session already running in this
    process keeps its classpath). Call ``tierlog_spark.register(spark)`` on the session to
    install the planner the JVM reader asks. Without a JDK, or for a Spark Connect session
    (no JVM in this process to ask), the builder is returned unchanged.
    """
    options = getattr(builder, "_options", {})
    if "spark.remote" in options or os.environ.get("SPARK_REMOTE"):
        return builder
    jar = jvm_reader_jar()
    if jar is None:
        return builder
    configured = options.get("spark.jars") or ""
    jars = [entry.strip() for entry in str(configured).split(",") if entry.strip()]
    if str(jar) not in jars:
        jars.append(str(jar))
    return builder.config("spark.jars", ",".join(jars))


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
    session = add_jvm_reader(builder).getOrCreate()
    from . import register

    register(session)
    return session
