"""``export``: Parquet by topic, partition and date, incremental and exactly once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner
from tierlog_spark import export as export_module
from tierlog_spark.cli import spark_group
from tierlog_spark.export import OFFSETS_FILE, STAGING_DIR, export, read_committed_offsets

from tests.spark.tiered import Record, TieredCluster, tiered_cluster

pytest.importorskip("tierlog_fsspec")

TOPIC, OTHER = "clicks", "views"


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredCluster]:
    with tiered_cluster(tmp_path_factory.mktemp("export")) as cluster:
        cluster.create(TOPIC, 2)
        cluster.create(OTHER, 1)
        for partition in range(2):
            cluster.produce(TOPIC, partition, 12)
        cluster.produce(OTHER, 0, 8)
        for key in ((TOPIC, 0), (TOPIC, 1), (OTHER, 0)):
            cluster.wait_tiered(*key)
        yield cluster


def _tiered(tiered: TieredCluster, *keys: tuple[str, int]) -> list[Record]:
    return sorted(r for key in keys for r in tiered.tiered_records(*key))


def _exported(output: Path) -> list[Record]:
    if not any(output.rglob("*.parquet")):
        return []
    table = ds.dataset(output, format="parquet", partitioning="hive").to_table()
    rows = []
    for row in table.to_pylist():
        timestamp = int(row["timestamp"].timestamp() * 1000 + 0.5)
        day = datetime.fromtimestamp(timestamp / 1000, UTC).date()
        assert str(row["date"]) == day.isoformat(), "the date directory is the UTC record date"
        rows.append((row["topic"], int(row["partition"]), row["offset"], row["value"], timestamp))
    return sorted(rows)


def _options(tiered: TieredCluster) -> dict[str, str]:
    return {"log.dirs": str(tiered.log_dir)}


def test_export_is_incremental_and_a_rerun_adds_nothing(
    spark: Any, tiered: TieredCluster, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    keys = [(TOPIC, 0), (TOPIC, 1)]
    first = export(spark, tiered.settings, [TOPIC], output, extra_options=_options(tiered))
    expected = _tiered(tiered, *keys)
    assert _exported(output) == expected
    assert first.rows == len(expected)
    assert {d.name for d in (output / "topic=clicks").iterdir()} == {"partition=0", "partition=1"}
    assert len({p.name for p in output.rglob("date=*")}) > 1
    committed = read_committed_offsets(output)
    assert committed == {key: max(r[2] for r in expected if r[:2] == key) + 1 for key in keys}
    files = sorted(output.rglob("*.parquet"))

    again = export(spark, tiered.settings, [TOPIC], output, extra_options=_options(tiered))
    assert again.empty and again.rows == 0
    assert sorted(output.rglob("*.parquet")) == files
    assert read_committed_offsets(output) == committed

    tiered.produce(TOPIC, 1, 10)
    tiered.wait_tiered(TOPIC, 1)
    more = export(spark, tiered.settings, [TOPIC], output, extra_options=_options(tiered))
    expected_now = _tiered(tiered, *keys)
    assert set(more.ranges) == {(TOPIC, 1)}
    assert more.rows == len(expected_now) - len(expected)
    assert _exported(output) == expected_now
    assert not (output / STAGING_DIR).exists() or not any((output / STAGING_DIR).iterdir())


def test_a_run_that_fails_before_its_commit_leaves_nothing_behind(
    spark: Any, tiered: TieredCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "out"

    def crash(*_args: Any) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(export_module, "_finish", crash)
        real_write = export_module._write_atomically
        patch.setattr(
            export_module,
            "_write_atomically",
            lambda path, content: (
                crash() if path.name == "_commit.json" else real_write(path, content)
            ),
        )
        with pytest.raises(OSError, match="disk full"):
            export(spark, tiered.settings, [OTHER], output, extra_options=_options(tiered))
    assert any((output / STAGING_DIR).rglob("*.parquet")), "the run staged its files"
    assert not (output / OFFSETS_FILE).exists()

    export(spark, tiered.settings, [OTHER], output, extra_options=_options(tiered))
    assert _exported(output) == _tiered(tiered, (OTHER, 0))
    assert not any((output / STAGING_DIR).iterdir())


def test_a_run_that_fails_after_its_commit_is_finished_by_the_next(
    spark: Any, tiered: TieredCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "out"

    def crash(*_args: Any) -> None:
        raise OSError("killed")

    with monkeypatch.context() as patch:
        patch.setattr(export_module, "_finish", crash)
        with pytest.raises(OSError, match="killed"):
            export(spark, tiered.settings, [OTHER], output, extra_options=_options(tiered))
    assert not list(output.glob("topic=*"))

    result = export(spark, tiered.settings, [OTHER], output, extra_options=_options(tiered))
    assert result.empty, "the committed run is finished, not exported again"
    assert _exported(output) == _tiered(tiered, (OTHER, 0))


def test_the_cli_exports_with_a_config_file(tiered: TieredCluster, tmp_path: Path) -> None:
    config = tmp_path / "runtime.properties"
    config.write_text(
        "".join(f"{key}={value}\n" for key, value in tiered.settings.items())
        + f"log.dirs={tiered.log_dir}\n"
    )
    output = tmp_path / "out"
    args = ["export", "--config", str(config), "--topics", OTHER, "--output", str(output)]
    result = CliRunner().invoke(spark_group, [*args, "--master", "local[2]"])
    assert result.exit_code == 0, result.output
    assert "exported" in result.output
    assert _exported(output) == _tiered(tiered, (OTHER, 0))
    assert json.loads((output / OFFSETS_FILE).read_text())[OTHER]["0"] > 0
    again = CliRunner().invoke(spark_group, [*args, "--master", "local[2]"])
    assert "nothing new to export" in again.output, again.output
