"""The Spark plugin is found through its entry point and can run a real local Spark job."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tierlog.plugins import make_plugin_manager


def test_the_spark_plugin_is_discovered_through_its_entry_point() -> None:
    rows = {row.name: row for row in make_plugin_manager().info()}
    assert rows["spark"].distribution == "tierlog-spark"
    assert rows["spark"].hooks == ("tierlog_register_cli_commands",)


def test_tierlog_spark_check_runs_a_job_through_python_workers() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    env["PYSPARK_PYTHON"] = sys.executable
    result = subprocess.run(
        [sys.executable, "-m", "tierlog", "spark", "check", "--master", "local[2]"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on local[2]: OK (Python workers ran)" in result.stdout


def test_the_shared_session_runs_python_code_on_workers(spark: Any) -> None:
    squares = spark.sparkContext.parallelize(range(10), 2).map(lambda x: x * x).collect()
    assert squares == [x * x for x in range(10)]
    assert spark.sparkContext.master == "local[2]"
