"""Spark tests share one local[2] session for the whole run (starting a JVM takes seconds).

The session carries the JVM reader's jar, and every test that takes the ``spark`` fixture runs
once per reader: Spark conf ``spark.tierlog.reader`` is ``python``, then ``jvm``, for the test's
duration. The ``jvm`` run is skipped where the JVM reader cannot be built (no JDK), and fails
where it could be but is not installed. Tests about something else than reading (jobs that use
Spark only to run Python code) and the streaming tests run once, with the conf unset: their
modules are listed in ``ONE_READER_MODULES``, or a test is marked ``one_reader``.
"""

from __future__ import annotations

import inspect
import os
import sys
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

READER_CONF = "spark.tierlog.reader"
BRIDGE_CLASS_FILE = "io/tierlog/spark/PlannerBridge.class"
READERS = ("python", "jvm")
#: Modules whose Spark tests read no ``tierlog`` data source, and the streaming tests: a stream
#: is read by the Python reader whatever the conf (with the jar, through the JVM table), and
#: its tests create topics in a cluster shared by the module.
ONE_READER_MODULES = frozenset({"test_plugin", "test_streaming", "test_tier", "test_verify"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "one_reader: run a test taking the spark fixture once, not once per reader"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests asking for ``spark`` themselves run once per reader (``spark_reader``)."""
    if "spark" not in inspect.signature(metafunc.function).parameters:
        return
    if metafunc.module.__name__.rpartition(".")[2] in ONE_READER_MODULES:
        return
    if metafunc.definition.get_closest_marker("one_reader") is not None:
        return
    metafunc.parametrize("spark_reader", READERS, indirect=True)


def jvm_reader_buildable() -> bool:
    """Whether a jar holding the JVM reader's planner bridge can be built here."""
    from tierlog_spark.session import jvm_reader_jar

    jar = jvm_reader_jar()
    if jar is None:
        return False
    with zipfile.ZipFile(jar) as contents:
        return BRIDGE_CLASS_FILE in contents.namelist()


def require_jvm_reader(spark: Any) -> None:
    """Skips a test without a JDK to build the JVM reader; fails it if the reader could be
    built but is not installed in the session."""
    from tierlog_spark.jvm.bridge import installed

    if installed(spark):
        return
    if not jvm_reader_buildable():
        pytest.skip("no JVM reader: no JDK, or no planner bridge among its sources")
    pytest.fail("the JVM reader's jar has the planner bridge, but it is not installed")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from tierlog_spark.session import make_session

    session = make_session(master="local[2]", app_name="tierlog-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def spark_reader(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The reader a test reads with (None: not parametrized, the conf left unset)."""
    reader = getattr(request, "param", None)
    if reader is None:
        yield None
        return
    session = request.getfixturevalue("spark")
    if reader == "jvm":
        require_jvm_reader(session)
    session.conf.set(READER_CONF, reader)
    try:
        yield reader
    finally:
        session.conf.unset(READER_CONF)
