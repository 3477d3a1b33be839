"""examples/spark_backfill.py runs as a user runs it: a fresh interpreter, a broker config file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.spark.tiered import tiered_cluster

pytest.importorskip("tierlog_fsspec")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_backfill.py"


def test_the_backfill_example_writes_every_tiered_record_in_range(tmp_path: Path) -> None:
    with tiered_cluster(tmp_path / "cluster") as tiered:
        tiered.create("orders", 2)
        for partition in range(2):
            tiered.produce("orders", partition, 10)
        expected = sorted(
            (partition, offset, value)
            for partition in range(2)
            for _, _, offset, value, _ in tiered.tiered_records("orders", partition)
            if offset >= 4
        )
        config = tmp_path / "server.properties"
        config.write_text(
            "".join(f"{key}={value}\n" for key, value in tiered.settings.items())
            + f"log.dirs={tiered.log_dir}\n"
        )
        output = tmp_path / "orders.parquet"
        result = subprocess.run(
            [
                sys.executable,
                str(EXAMPLE),
                str(config),
                "orders",
                str(output),
                "--starting-offset",
                "4",
                "--master",
                "local[1]",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            check=False,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    table = ds.dataset(output, format="parquet", partitioning="hive").to_table()
    written = sorted(
        (int(row["partition"]), row["offset"], row["value"]) for row in table.to_pylist()
    )
    assert written == expected
    assert "records" in result.stdout, "the example prints its per-partition summary"
