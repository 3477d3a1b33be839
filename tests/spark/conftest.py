"""Spark tests share one local[2] session for the whole run (starting a JVM takes seconds)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from tierlog_spark.session import make_session

    session = make_session(master="local[2]", app_name="tierlog-tests")
    yield session
    session.stop()
